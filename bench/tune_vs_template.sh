#!/usr/bin/env bash
# Does a cold `tessel tune` find kernels as fast as the hand-written templates? For each workload:
# tune it with N trials into a fresh log (no earlier records, no transferred cost model), then
# measure the tuned best and the template's kernel in the same run, alternating three times each
# (`tessel measure`: verified, L2 flushed, the median of its repeats), and print
# template_ms / best_ms (>= 1: the tuned kernel is at least as fast).
#
# Usage (on a GPU host, from the repository root, with the bundle of bench/run_gpu.sh in .gpu/):
#   bench/tune_vs_template.sh [-n TRIALS] [SPEC...]
# The table goes to stdout; the tuning logs (SQLite) and the tune output of every workload stay in
# $WORK (default: a fresh temporary folder), and the tune outputs are appended to $OUT/tune.log.
set -uo pipefail
trials=64
if [[ ${1:-} == -n ]]; then trials=$2; shift 2; fi
specs=("$@")
if [[ ${#specs[@]} -eq 0 ]]; then
  specs=("softmax(rows=4096, cols=65536, dtype=f32)" "layernorm(rows=16, cols=4194304, dtype=f32)"
         "softmax(rows=16384, cols=4096, dtype=f16)" "layernorm(rows=8192, cols=4096, dtype=bf16)")
fi
out=${WORK:-$(mktemp -d)}
mkdir -p "$out" "${OUT:-gpu-out}"
tessel() { .gpu/run tessel "$@"; }
median_ms() { sed -n 's/^median_ms: //p' "$1"; }

printf '%-48s %8s %10s %10s %8s\n' workload trials template_ms tuned_ms ratio
for spec in "${specs[@]}"; do
  tag=$(printf '%s' "$spec" | tr -c 'A-Za-z0-9' '_' | sed 's/__*/_/g; s/_$//')
  db="$out/$tag.db"
  rm -f "$db"
  tessel tune -q -n "$trials" --seed 1 --db "$db" -w "$spec" > "$out/$tag.tune.log" 2>&1
  cat "$out/$tag.tune.log" >> "${OUT:-gpu-out}/tune.log"
  tessel lower -w "$spec" -t cuda --template --emit json > "$out/$tag.template.json"
  tessel best --db "$db" -w "$spec" --target cuda --emit json > "$out/$tag.best.json"
  t=() b=()
  for i in 1 2 3; do
    tessel measure --candidate "$out/$tag.template.json" > "$out/$tag.m.txt" 2>&1
    t+=("$(median_ms "$out/$tag.m.txt")")
    tessel measure --candidate "$out/$tag.best.json" > "$out/$tag.m.txt" 2>&1
    b+=("$(median_ms "$out/$tag.m.txt")")
  done
  tm=$(printf '%s\n' "${t[@]}" | sort -g | sed -n 2p)
  bm=$(printf '%s\n' "${b[@]}" | sort -g | sed -n 2p)
  ratio=$(awk -v t="$tm" -v b="$bm" 'BEGIN { if (t > 0 && b > 0) printf "%.3f", t / b; else print "n/a" }')
  printf '%-48s %8s %10s %10s %8s\n' "$spec" "$trials" "$tm" "$bm" "$ratio"
done
