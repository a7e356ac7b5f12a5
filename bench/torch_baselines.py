#!/usr/bin/env python3
"""PyTorch eager baselines for Tessel workload specs, on the GPU, in the method of kernel_quality.cc.

For each spec (the built-in families' text: matmul, matmul_bias_gelu, conv2d, softmax, layernorm),
builds random inputs of the workload's shapes and dtype and times PyTorch's eager implementation:
matmul -> torch.matmul (cuBLAS, tensor cores in the default math mode), matmul_bias_gelu ->
linear + GELU (exact, erf-based, as Tessel's gelu), conv2d -> torch.nn.functional.conv2d (cuDNN).
Each repeat runs between CUDA events with the L2 cache flushed first (a 256 MiB write); the median
of the repeats is printed, one line a spec: `SPEC<TAB>median_ms<TAB>repeats`.
Saved to a file, the lines give a job its baselines (`tessel tune|submit --baselines FILE`): the
dashboard and `tessel report` draw each as a line on its task's tuning curves.

Usage: python3 bench/torch_baselines.py [--repeats N] SPEC...
"""
import argparse
import re
import statistics
import sys

import torch
import torch.nn.functional as F

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def parse(spec):
    m = re.fullmatch(r"\s*(\w+)\((.*)\)\s*", spec)
    if not m:
        raise SystemExit(f"torch_baselines: cannot read spec '{spec}'; write it as family(k=v, ...)")
    args = {}
    for part in filter(None, (p.strip() for p in m.group(2).split(","))):
        k, v = (x.strip() for x in part.split("="))
        args[k] = v
    return m.group(1), args


def make(spec):
    family, a = parse(spec)
    dt = DTYPES[a.get("dtype", "f32")]
    dev = "cuda"
    rnd = lambda *s: torch.randn(*s, device=dev, dtype=dt)
    if family == "matmul":
        M, N, K, b = int(a["M"]), int(a["N"]), int(a["K"]), int(a.get("batch", 1))
        ta = a.get("transpose_a", "false") == "true"
        tb = a.get("transpose_b", "false") == "true"
        lead = (b,) if b > 1 else ()
        A = rnd(*lead, K, M) if ta else rnd(*lead, M, K)
        B = rnd(*lead, N, K) if tb else rnd(*lead, K, N)
        At = A.transpose(-1, -2) if ta else A
        Bt = B.transpose(-1, -2) if tb else B
        return lambda: torch.matmul(At, Bt)
    if family == "matmul_bias_gelu":
        M, N, K = int(a["M"]), int(a["N"]), int(a["K"])
        A, W, bias = rnd(M, K), rnd(N, K), rnd(N)
        return lambda: F.gelu(F.linear(A, W, bias))
    if family in ("conv2d", "conv2d_bias_relu"):
        n, c, h, w, k = (int(a[x]) for x in ("N", "C", "H", "W", "K"))
        r, s = int(a.get("R", 3)), int(a.get("S", 3))
        stride, pad, dil = int(a.get("stride", 1)), int(a.get("padding", 0)), int(a.get("dilation", 1))
        nhwc = a.get("layout", "nchw") == "nhwc"
        x = rnd(n, c, h, w)
        wt = rnd(k, c, r, s)
        if nhwc:
            x = x.to(memory_format=torch.channels_last)
            wt = wt.to(memory_format=torch.channels_last)
        bias = rnd(k) if family == "conv2d_bias_relu" else None
        f = lambda: F.conv2d(x, wt, bias, stride, pad, dil)
        return (lambda: F.relu(f())) if bias is not None else f
    if family == "softmax":
        X = rnd(int(a["rows"]), int(a["cols"]))
        return lambda: torch.softmax(X, dim=-1)
    if family == "layernorm":
        cols = int(a["cols"])
        X, wt, b = rnd(int(a["rows"]), cols), rnd(cols), rnd(cols)
        return lambda: F.layer_norm(X, (cols,), wt, b)
    raise SystemExit(f"torch_baselines: no PyTorch baseline for family '{family}'")


def median_ms(fn, repeats):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=100)
    p.add_argument("specs", nargs="+")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_baselines: no CUDA device", file=sys.stderr)
        return 1
    for spec in args.specs:
        print(f"{spec}\t{median_ms(make(spec), args.repeats):.5f}\t{args.repeats}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
