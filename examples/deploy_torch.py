#!/usr/bin/env python3
"""On a GPU host with PyTorch: tune an f16 matmul and a softmax with `tessel tune --target cuda`,
launch both best kernels through tessel.runtime on torch tensors (on torch's current stream),
check them against torch, and compare the launched kernel's median time with its tuned median
(the worker's method: CUDA events around each repeat, L2 flushed before each, the median).

    PYTHONPATH=build/python python3 examples/deploy_torch.py [TESSEL [WORKDIR]]

Prints one line per workload (for bench/RESULTS.md) and "ok" when both match torch.
Written for the GPU host; CI has neither a GPU nor torch and does not run it.
"""

import statistics
import subprocess
import sys
import tempfile

import torch

from tessel import runtime

WORKLOADS = [
    ("matmul(M=4096, N=4096, K=4096, dtype=f16)",
     lambda a, b: torch.matmul(a.float(), b.float()), 1e-2),
    ("softmax(rows=4096, cols=4096)", lambda x: torch.softmax(x.double(), dim=-1), 1e-4),
]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}


def median_ms(fn, repeats=50):
    """The worker's timing method: L2 flushed, CUDA events around each run, the median."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    tessel = sys.argv[1] if len(sys.argv) > 1 else "tessel"
    workdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="tessel_torch_")
    log = f"{workdir}/tuning.db"
    specs = [w for w, _, _ in WORKLOADS]
    subprocess.run([tessel, "tune", "--target", "cuda", "-n", "256", "--db", log, "--quiet"] +
                   [arg for w in specs for arg in ("-w", w)], check=True)
    db = runtime.Database(log)
    ok = True
    for spec, reference, tolerance in WORKLOADS:
        kernel = db.find(spec, "cuda")
        torch.manual_seed(0)
        inputs = [torch.randn(a["shape"], device="cuda").to(DTYPES[a["dtype"]])
                  for a in kernel.args if not a["output"]]
        outputs = [torch.full(a["shape"], float("nan"), device="cuda", dtype=DTYPES[a["dtype"]])
                   for a in kernel.args if a["output"]]
        kernel.launch(*inputs, *outputs)
        torch.cuda.synchronize()
        want = reference(*inputs)
        got = outputs[0].to(want.dtype)
        error = ((got - want).abs() / want.abs().clamp(min=1)).max().item()
        launched = median_ms(lambda: kernel.launch(*inputs, *outputs))
        ratio = launched / kernel.median_ms
        print(f"{spec}: {kernel.match_description}; cubin {'compiled here' if kernel.compiled_here else 'as stored'}; "
              f"max rel. error {error:.1e}; tuned {kernel.median_ms:.4f} ms, launched "
              f"{launched:.4f} ms ({ratio:.3f}x)")
        ok = ok and error <= tolerance
    print("ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
