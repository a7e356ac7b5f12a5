#!/usr/bin/env python3
"""The C example's cycle from Python: tune a matmul on the host with `tessel tune`, pack the winner
with `tessel pack`, load the best kernel through tessel.runtime from the log and from the pack,
launch it on this script's own buffers and check against a plain Python reference.

    PYTHONPATH=build/python python3 examples/deploy_matmul.py [TESSEL [WORKDIR]]

Prints "ok" and exits 0 when both launches match the reference.
"""

import ctypes
import random
import subprocess
import sys
import tempfile

from tessel import Error, runtime

M, N, K = 64, 48, 32
SPEC = f"matmul(M={M}, N={N}, K={K})"


def main():
    tessel = sys.argv[1] if len(sys.argv) > 1 else "tessel"
    workdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="tessel_deploy_py_")
    log, pack = f"{workdir}/tuning.db", f"{workdir}/kernels.pack"
    subprocess.run([tessel, "tune", "-w", SPEC, "-n", "8", "--target", "host", "--quiet",
                    "--db", log], check=True)
    subprocess.run([tessel, "pack", "--db", log, "-w", SPEC, "--out", pack], check=True)

    rng = random.Random(7)
    a = (ctypes.c_float * (M * K))(*[rng.uniform(-0.5, 0.5) for _ in range(M * K)])
    b = (ctypes.c_float * (K * N))(*[rng.uniform(-0.5, 0.5) for _ in range(K * N)])
    for path in (log, pack):
        c = (ctypes.c_float * (M * N))(*([float("nan")] * (M * N)))
        try:
            kernel = runtime.Database(path, cache_dir=f"{workdir}/cache").find(SPEC, "host")
            kernel.launch((ctypes.addressof(a), "f32", (M, K)),
                          (ctypes.addressof(b), "f32", (K, N)),
                          (ctypes.addressof(c), "f32", (M, N)))
        except Error as e:
            print(f"deploy_matmul.py: {e}", file=sys.stderr)
            return 1
        print(f"{path}: record {kernel.record_uid} ({kernel.median_ms:.4f} ms when tuned), "
              f"match: {kernel.match_description}")
        worst = max(abs(c[i * N + j] - sum(a[i * K + k] * b[k * N + j] for k in range(K)))
                    for i in range(M) for j in range(N))
        print(f"{path}: max error {worst:.2e} against the reference")
        if not worst < 1e-4:  # NaN fails too
            print(f"deploy_matmul.py: the kernel from {path} does not match", file=sys.stderr)
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
