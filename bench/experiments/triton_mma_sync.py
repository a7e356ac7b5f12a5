"""What a mature compiler reaches with mma.sync on this GPU (issue 17's bars are mma.sync's).

Triton's matmul with the Hopper wgmma path switched off (DISABLE_MMA_V3=1, its mma.sync / "MMA v2"
lowering) and on, against torch.matmul (cuBLAS), over a sweep of tile configurations: each
configuration timed as the median of 50 L2-flushed repeats (CUDA events), the best kept. Prints
which instructions the best kernel's PTX uses. Run once per mode (the variable is read at compile):

  DISABLE_MMA_V3=1 python3 bench/experiments/triton_mma_sync.py
  python3 bench/experiments/triton_mma_sync.py

With --profile N BM BN BK WARPS STAGES it only runs that configuration at N^3 a few times (for
ncu) and writes its PTX and cubin to the current folder (triton_N.ptx, triton_N.cubin).
"""
import itertools
import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    width = GROUP * grid_n
    group = pid // width
    first_m = group * GROUP
    size_m = min(grid_m - first_m, GROUP)
    pm = first_m + (pid % width) % size_m
    pn = (pid % width) // size_m
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * K + rk[None, :]
    pb = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(pa), tl.load(pb))
        pa += BK
        pb += BK * N
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def timed(fn, flush, reps=50):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def profile(n, bm, bn, bk, warps, stages):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    grid = (triton.cdiv(n, bm) * triton.cdiv(n, bn),)
    for _ in range(3):
        k = matmul_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, GROUP=8, num_warps=warps,
                                num_stages=stages)
    torch.cuda.synchronize()
    open(f"triton_{n}.ptx", "w").write(k.asm["ptx"])
    open(f"triton_{n}.cubin", "wb").write(k.asm["cubin"])


def main():
    if len(sys.argv) == 8 and sys.argv[1] == "--profile":
        return profile(*(int(x) for x in sys.argv[2:]))
    mode = "mma.sync (DISABLE_MMA_V3=1)" if os.environ.get("DISABLE_MMA_V3") == "1" else "default"
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        ref_ms = timed(lambda: torch.matmul(a, b), flush)
        best = None
        for bm, bn, bk, warps, stages in itertools.product((128, 256), (128, 256), (32, 64),
                                                           (4, 8), (3, 4, 5)):
            if bm * bn > 128 * 256 or (bm == 256 and bn == 256):
                continue
            grid = (triton.cdiv(n, bm) * triton.cdiv(n, bn),)
            try:
                k = matmul_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, GROUP=8,
                                        num_warps=warps, num_stages=stages)
                ms = timed(lambda: matmul_kernel[grid](a, b, c, n, n, n, BM=bm, BN=bn, BK=bk,
                                                       GROUP=8, num_warps=warps,
                                                       num_stages=stages), flush)
            except Exception as e:  # out of shared memory, registers
                continue
            if best is None or ms < best[0]:
                best = (ms, (bm, bn, bk, warps, stages), k)
        ms, cfg, k = best
        ptx = k.asm["ptx"]
        ok = torch.allclose(c.float(), (a.float() @ b.float()), rtol=2e-2, atol=1.0)
        tf = 2 * n ** 3 / ms / 1e9
        print(f"{mode} {n}^3 f16: torch {ref_ms:.4f} ms, triton best {ms:.4f} ms ({tf:.0f} TF/s) "
              f"= {ref_ms / ms:.3f} of torch; tiles BMxBNxBK, warps, stages {cfg}; "
              f"wgmma in PTX: {'wgmma' in ptx}, mma.sync in PTX: {'mma.sync' in ptx}; "
              f"correct: {ok}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
