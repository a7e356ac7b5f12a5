#!/usr/bin/env bash
# Prints one checksum line per generated artifact of the compiler core, so that a refactoring of
# schedules/ can show it changed no generated kernel:
#   - every trace in tests/data, lowered for CUDA (sm_90): the IR and the CUDA source;
#   - every built-in family's template and reference lowering, CUDA and host (IR and source);
#   - `tessel sample -n 16 --seed 1` of every built-in family, CUDA and host (every file written).
# Usage: tests/codegen_checksums.sh [BUILD_DIR] > sums.txt; then diff two such files.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tessel="$build/cli/tessel"
[[ -x "$tessel" ]] || { echo "codegen_checksums: no $tessel; build first (make build)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sum() { sha256sum | cut -c1-16; }

# Spec of each trace file's workload, by file-name stem.
declare -A trace_spec=(
  [matmul_4096_f32]="matmul(M=4096, N=4096, K=4096, dtype=f32)"
  [softmax_4096x65536_f32]="softmax(rows=4096, cols=65536, dtype=f32)"
  [layernorm_16x4194304_f32]="layernorm(rows=16, cols=4194304, dtype=f32)"
)
for f in tests/data/*.cuda.trace.json; do
  base=$(basename "$f")
  stem=${base%%.*}
  spec=${trace_spec[$stem]:-}
  [[ -n "$spec" ]] || { echo "codegen_checksums: no workload for $base; add it here" >&2; exit 1; }
  for emit in ir cuda; do
    printf '%s %s\n' "$("$tessel" lower -w "$spec" -t cuda --arch sm_90 --trace "$f" --emit $emit | sum)" \
      "trace/$base/$emit"
  done
done

families=(
  "matmul(M=256, N=192, K=128)"
  "matmul(M=64, N=96, K=80, batch=3, transpose_a=true, dtype=f16)"
  "matmul_bias_gelu(M=128, N=256, K=64, dtype=bf16)"
  "conv2d(N=2, C=16, H=14, W=14, K=32, R=3, S=3, padding=1)"
  "conv2d_bias_relu(N=1, C=8, H=16, W=16, K=16, R=3, S=3, stride=2, layout=nhwc)"
  "softmax(rows=64, cols=1024)"
  "softmax(rows=4096, cols=65536)"
  "layernorm(rows=32, cols=768, dtype=f16)"
  "layernorm(rows=16, cols=4194304)"
  "reduce(rows=128, cols=4096, op=max)"
  "reduce(rows=16, cols=1000, op=mean)"
)
for spec in "${families[@]}"; do
  for target in cuda host; do
    arch=()
    [[ $target == cuda ]] && arch=(--arch sm_90)
    src=cpp
    [[ $target == cuda ]] && src=cuda
    for mode in reference template; do
      flag=()
      [[ $mode == template ]] && flag=(--template)
      for emit in ir $src; do
        out=$("$tessel" lower -w "$spec" -t $target "${arch[@]}" "${flag[@]}" --emit $emit 2>&1 || true)
        printf '%s %s\n' "$(printf '%s' "$out" | sum)" "$mode/$target/$spec/$emit"
      done
    done
    dir="$tmp/$target-$(printf '%s' "$spec" | sum)"
    log=$("$tessel" sample -w "$spec" -t $target "${arch[@]}" -n 16 --seed 1 --out "$dir" 2>&1 || true)
    log=$(printf '%s' "${log//$tmp/TMP}" | sed -E 's/ \([0-9.]+ ms per sample\)//')
    printf '%s %s\n' "$(printf '%s' "$log" | sum)" "sample/$target/$spec/log"
    if [[ -d "$dir" ]]; then
      for f in $(ls "$dir" | sort); do
        printf '%s %s\n' "$(sum < "$dir/$f")" "sample/$target/$spec/$f"
      done
    fi
  done
done
