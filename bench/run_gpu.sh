#!/usr/bin/env bash
# Runs on a GPU host from the repository root, with the bundle made by
#   ../shared/tools/bundle .gpu build/cli/tessel build/tests/tessel_gpu_tests \
#       build/bench/tessel_bench_kernels build/bench/tessel_bench_worker
# in .gpu/: the GPU test suite, the kernel-quality benchmark (generated kernels against cuBLAS and
# the copy bandwidth, every trace in tests/data and its variants) and `tessel tune`. Logs go to
# $OUT (or ./gpu-out when OUT is unset).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv \
  | tee "$out/gpu.txt"
echo "== GPU tests"
# The worker's GPU tests start the tessel binary: the bundle's, not the build tree's.
TESSEL_BINARY=$PWD/.gpu/bin/tessel .gpu/run tessel_gpu_tests --gtest_brief=1 2>&1 | tee "$out/gpu_tests.log" | tail -30
echo "== kernel quality"
.gpu/run tessel_bench_kernels --trace-dir=tests/data --csv="$out/bench.csv" ${BENCH_ARGS:-} 2>&1 \
  | tee "$out/bench.log" | tail -25
echo "== design space: best of 256 samples"
.gpu/run tessel_bench_kernels --space=256 --gemm-n=2048 --only=space 2>&1 \
  | tee "$out/space_bench.log" | grep -v "best trace" | tail -16
echo "== worker daemon: throughput, fidelity, robustness"
for mode in throughput fidelity robustness; do
  .gpu/run tessel_bench_worker --mode=$mode --binary=$PWD/.gpu/bin/tessel 2>&1 \
    | tee "$out/worker_$mode.log" | tail -20
done
echo "== tessel tune: 256 trials of random search per workload (issue 5), and its baselines"
.gpu/run tessel_bench_kernels --gemm-n=1024 --only=baselines-only 2>&1 | tee "$out/baselines.log" \
  | tail -6
.gpu/run tessel tune -q -n 256 --seed 1 --db "$out/tune.db" -w "matmul(M=1024, N=1024, K=1024, dtype=f32)" \
  -w "softmax(rows=4096, cols=65536, dtype=f32)" 2>&1 | tee "$out/tune.log" | tail -8
