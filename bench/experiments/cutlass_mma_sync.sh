#!/usr/bin/env bash
# Builds bench/experiments/cutlass_mma_sync.cu for a few CUTLASS 2.x sm80 tile shapes (in
# parallel) and runs each at 4096^3 and 8192^3, f16 and bf16: the mma.sync ceiling issue 17's
# GEMM bar is measured against. Needs nvcc, cuBLAS and CUTLASS's headers (its include/ folder,
# or a tarball of it: `git archive HEAD include | gzip`).
# Usage (GPU host): bench/experiments/cutlass_mma_sync.sh CUTLASS_INCLUDE_DIR_OR_TGZ [OUT_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)/cutlass_mma_sync.cu
out=${2:-$(mktemp -d)}
mkdir -p "$out"
inc=$1
if [[ -f $inc ]]; then
  mkdir -p "$out/cutlass" && tar xzf "$inc" -C "$out/cutlass" && inc=$out/cutlass/include
fi
# block m n k, warp m n k, stages, raster group (GemmIdentityThreadblockSwizzle)
cfgs=("128 256 64 64 64 64 3 8" "256 128 64 64 64 64 3 8" "128 128 64 64 64 64 4 8"
      "128 128 64 64 64 64 3 8" "128 256 32 64 64 32 4 8" "256 128 32 64 64 32 4 8"
      "128 128 32 64 64 32 5 8" "128 256 64 64 64 64 4 8")
i=0
for c in "${cfgs[@]}"; do
  read -r bm bn bk wm wn wk st sw <<< "$c"
  for dt in f16 bf16; do
    d=(); [[ $dt == bf16 ]] && d=(-DDT_BF16)
    nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -I"$inc" -DTB_M=$bm -DTB_N=$bn \
      -DTB_K=$bk -DW_M=$wm -DW_N=$wn -DW_K=$wk -DSTAGES=$st -DSWZ=$sw "${d[@]}" "$src" -lcublas \
      -o "$out/k${i}_$dt" > "$out/k${i}_$dt.log" 2>&1 &
  done
  i=$((i + 1))
done
wait
for b in $(ls "$out" | grep -E '^k[0-9]+_(f16|bf16)$' | sort -V); do
  for n in 4096 8192; do echo "$b $("$out/$b" "$n" | tail -1)"; done
done
