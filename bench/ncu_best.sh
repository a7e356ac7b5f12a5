#!/usr/bin/env bash
# Profile one tuned kernel with Nsight Compute: `tessel measure` of a candidate file (from
# `tessel best --emit json` or `tessel sample --out`) under ncu, skipping the reference kernel that
# verification launches first, plus the kernel's SASS and resource usage from nvcc.
#
# Usage (on a GPU host, repository root, tessel bundle in .gpu/):
#   bench/ncu_best.sh CANDIDATE.json KERNEL_REGEX OUTDIR
# Writes OUTDIR/ncu.txt (every section of --set full), OUTDIR/sass.txt and OUTDIR/resources.txt
# (when the candidate's .cu sits beside the .json).
set -uo pipefail
cand=$1 kernel=$2 dir=$3
mkdir -p "$dir"
export PATH=$PATH:/usr/local/cuda/bin
ncu --target-processes all -k "regex:$kernel" --launch-skip 1 -c 1 --set full \
  .gpu/run tessel measure --candidate "$cand" > "$dir/ncu.txt" 2>&1
src=${cand%.json}.cu
if [[ -f $src ]]; then
  nvcc -arch=sm_90 -cubin -O3 --resource-usage -o "$dir/k.cubin" "$src" > "$dir/resources.txt" 2>&1
  cuobjdump -sass "$dir/k.cubin" > "$dir/sass.txt" 2>&1
fi
