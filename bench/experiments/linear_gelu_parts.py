#!/usr/bin/env python3
"""Where eager linear + GELU's time goes, on the GPU: the chain, the linear alone, the bare product
x @ W^T and the GELU alone, each timed as bench/torch_baselines.py times a baseline (CUDA events,
the L2 flushed by a 256 MiB write first, the median of the repeats).

Usage: python3 bench/experiments/linear_gelu_parts.py [--repeats N] M,N,K...
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_baselines import median_ms  # noqa: E402  (the baselines' timing, L2 flushed)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("shapes", nargs="+", help="M,N,K (f16)")
    a = p.parse_args()
    print("M,N,K\tlinear+gelu_ms\tlinear_ms\tmatmul_ms\tgelu_ms")
    for shape in a.shapes:
        m, n, k = (int(x) for x in shape.split(","))
        x = torch.randn(m, k, device="cuda", dtype=torch.half)
        w = torch.randn(n, k, device="cuda", dtype=torch.half)
        bias = torch.randn(n, device="cuda", dtype=torch.half)
        y = F.linear(x, w, bias)
        r = a.repeats
        print(f"{shape}\t{median_ms(lambda: F.gelu(F.linear(x, w, bias)), r):.4f}"
              f"\t{median_ms(lambda: F.linear(x, w, bias), r):.4f}"
              f"\t{median_ms(lambda: x @ w.t(), r):.4f}\t{median_ms(lambda: F.gelu(y), r):.4f}")


if __name__ == "__main__":
    main()
