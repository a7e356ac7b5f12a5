#!/usr/bin/env bash
# A/B of code generation: the same candidates (same traces) generated two ways, measured in
# alternation on this GPU with `tessel measure` (verified, L2 flushed, median of its repeats).
# For each NAME.json present in both folders, prints the best of ROUNDS medians of each side and
# their ratio (old / new: > 1 means the new code is faster), then the geometric mean.
#
# Usage (GPU host, repository root, tessel bundle in .gpu/):
#   bench/ab_candidates.sh OLD_DIR NEW_DIR [ROUNDS]
set -uo pipefail
old=$1 new=$2 rounds=${3:-2}
median() { .gpu/run tessel measure --candidate "$1" 2>&1 | sed -n 's/^median_ms: //p'; }
min() { printf '%s\n' "$@" | grep -v '^$' | sort -g | head -1; }
printf '%-24s %10s %10s %8s\n' candidate old_ms new_ms old/new
logsum=0 n=0
for f in "$old"/*.json; do
  name=$(basename "$f")
  [[ -f $new/$name ]] || continue
  a=() b=()
  for ((r = 0; r < rounds; ++r)); do
    a+=("$(median "$f")")
    b+=("$(median "$new/$name")")
  done
  am=$(min "${a[@]}") bm=$(min "${b[@]}")
  if [[ -z $am || -z $bm ]]; then
    printf '%-24s %10s %10s %8s\n' "$name" "${am:-fail}" "${bm:-fail}" n/a
    continue
  fi
  ratio=$(awk -v a="$am" -v b="$bm" 'BEGIN { printf "%.3f", a / b }')
  printf '%-24s %10s %10s %8s\n' "$name" "$am" "$bm" "$ratio"
  logsum=$(awk -v s="$logsum" -v r="$ratio" 'BEGIN { print s + log(r) }')
  n=$((n + 1))
done
[[ $n -gt 0 ]] && awk -v s="$logsum" -v n="$n" 'BEGIN { printf "geomean old/new over %d: %.3f\n", n, exp(s / n) }'
