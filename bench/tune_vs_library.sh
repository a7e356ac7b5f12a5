#!/usr/bin/env bash
# Does `tessel tune` reach the vendor libraries? For each workload: tune it cold with N trials into
# a fresh log, take the best record, and measure it (`tessel measure`: verified, L2 flushed, the
# median of its repeats) alternately with PyTorch eager (bench/torch_baselines.py: cuBLAS, cuDNN),
# three times each in the same run; print library_ms / tessel_ms (>= 1: Tessel is at least as
# fast), the best of the three medians of each.
#
# Usage (on a GPU host, from the repository root, with the tessel bundle in .gpu/):
#   bench/tune_vs_library.sh [-n TRIALS] [--warm TRIALS] SPEC...
# With --warm W the specs share one tuning log, $WORK/shared.db: the first is tuned cold with
# TRIALS, each later one with W trials and a cost model trained on the records of those before it
# (the server trains a family's model from the log; issue 23 allows 128 trials so, against 512
# cold). A shared.db already in WORK (an earlier call's, copied back) is continued: every spec
# then takes W trials.
# Logs and tune outputs stay in $WORK (default: a fresh temporary folder); the table also goes to
# $OUT/library.tsv when OUT is set. Each best kernel's CUDA source is kept as $WORK/TAG.best.cu.
# ARCH picks the CUDA architecture tuned for (default sm_90; sm_90a adds the wgmma sketch).
set -uo pipefail
arch=${ARCH:-sm_90}
trials=256 warm=0
while [[ ${1:-} == -n || ${1:-} == --warm ]]; do
  if [[ $1 == -n ]]; then trials=$2; else warm=$2; fi
  shift 2
done
specs=("$@")
out=${WORK:-$(mktemp -d)}
mkdir -p "$out"
shared="$out/shared.db"
tessel() { .gpu/run tessel "$@"; }
median_ms() { sed -n 's/^median_ms: //p' "$1"; }
min() { printf '%s\n' "$@" | grep -v '^$' | sort -g | head -1; }

printf '%-64s %6s %10s %10s %8s\n' workload trials library_ms tessel_ms ratio
for spec in "${specs[@]}"; do
  tag=$(printf '%s' "$spec" | tr -c 'A-Za-z0-9' '_' | sed 's/__*/_/g; s/_$//')
  n=$trials db="$out/$tag.db"
  if [[ $warm -gt 0 ]]; then
    db=$shared
    [[ -e $db ]] && n=$warm
  else
    rm -f "$db"
  fi
  start=$(date +%s)
  tessel tune -q -n "$n" --seed 1 --arch "$arch" --db "$db" -w "$spec" > "$out/$tag.tune.log" 2>&1
  secs=$(( $(date +%s) - start ))
  tessel best --db "$db" -w "$spec" --target cuda --arch "$arch" --emit json > "$out/$tag.best.json"
  tessel best --db "$db" -w "$spec" --target cuda --arch "$arch" --emit cuda > "$out/$tag.best.cu"
  l=() b=()
  for i in 1 2 3; do
    l+=("$(python3 bench/torch_baselines.py "$spec" | cut -f2)")
    tessel measure --candidate "$out/$tag.best.json" > "$out/$tag.m.txt" 2>&1
    b+=("$(median_ms "$out/$tag.m.txt")")
  done
  lm=$(min "${l[@]}") bm=$(min "${b[@]}")
  ratio=$(awk -v l="$lm" -v b="$bm" 'BEGIN { if (b > 0) printf "%.3f", l / b; else print "n/a" }')
  line=$(printf '%-64s %6s %10s %10s %8s  (%ss)' "$spec" "$n" "$lm" "$bm" "$ratio" "$secs")
  echo "$line"
  [[ -n ${OUT:-} ]] && echo "$line" >> "$OUT/library.tsv"
done
