#!/usr/bin/env python3
"""The device's copy bandwidth for a given size, the baseline of memory-bound kernels' ratios.

For each byte count: a device-to-device copy of that many bytes (torch `copy_`), timed between
CUDA events with the L2 cache flushed first (a 256 MiB write); prints the median of 15 repeats and
2 x bytes / time (read plus write). A matrix-vector product reading B matrix bytes in t seconds
reaches (B / t) / that bandwidth of the copy bandwidth.

Usage (on a GPU host): python3 bench/copy_bandwidth.py BYTES...
"""
import statistics
import sys

import torch


def main():
    if len(sys.argv) < 2:
        raise SystemExit("copy_bandwidth: give one or more byte counts, e.g. 134217728")
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for nbytes in (int(x) for x in sys.argv[1:]):
        x = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        times = []
        for _ in range(15):
            flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            y.copy_(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        ms = statistics.median(times)
        print(f"copy {nbytes} bytes: {ms:.4f} ms, {2 * nbytes / ms / 1e9:.3f} TB/s (read+write)")


if __name__ == "__main__":
    main()
