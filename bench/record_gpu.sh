#!/usr/bin/env bash
# Records the replay logs of issue 6 on a GPU host (run from the repository root with the bundle
# in .gpu/, as bench/run_gpu.sh): TRIALS (default 2000) random trials of each workload below into
# $OUT/gpu_random.jsonl.gz (exported from a tuning log) through a real `tessel serve` and `tessel worker`, with 20 ms of timed
# repeats per candidate (instead of 200) so that the recording fits a device session; then a
# live `tessel tune` with the default (evolutionary) strategy for the search's overhead on a
# 16-core GPU node. Replay them with tessel_bench_search (bench/RESULTS.md).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
trials=${TRIALS:-2000}
db="$out/gpu_random.db"
tessel() { .gpu/run tessel "$@"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
tessel serve --db "$db" --listen 127.0.0.1:7171 --min-total-ms 20 --batch-size 32 -q &
serve=$!
sleep 2
tessel worker --server 127.0.0.1:7171 --target cuda --max-batches 4 --cache "$out/cache" \
  >"$out/worker.log" 2>&1 &
worker=$!
start=$(date +%s)
# RECORD_S (default 480) caps the recording; what is recorded by then is exported.
timeout "${RECORD_S:-480}" .gpu/run tessel submit --server 127.0.0.1:7171 --target cuda --strategy random --seed 1 \
  --trials-per-task "$trials" --batch-size 32 --wait \
  -w "matmul(M=1024, N=1024, K=1024, dtype=f32)" \
  -w "matmul_bias_gelu(M=1024, N=1024, K=1024, dtype=f32)" \
  -w "softmax(rows=4096, cols=65536, dtype=f32)" 2>/dev/null | tee "$out/record.log"
echo "recorded in $(( $(date +%s) - start )) s" | tee -a "$out/record.log"
kill "$worker" "$serve" 2>/dev/null
wait 2>/dev/null
rm -rf "$out/cache"
tessel export --db "$db" | gzip -9 > "$out/gpu_random.jsonl.gz" && rm -f "$db" "$db"-wal "$db"-shm
ls -la "$out"
if [[ -n "${TUNE_TRIALS:-}" ]]; then
  echo "== tessel tune, default strategy, ${TUNE_TRIALS} trials: the search's share of the time"
  tessel tune -q -v -n "$TUNE_TRIALS" --seed 2 --db "$out/tune.db" \
    -w "matmul(M=1024, N=1024, K=1024, dtype=f32)" 2>&1 | grep -E "search|done|best|trials/s" \
    | tail -8 | tee "$out/tune.log"
fi
