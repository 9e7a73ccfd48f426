"""Simulator Matmul throughput next to numpy's float32 matmul, in one run.

Each case launches the `matmul_only` test kernel (MIX AIC:AIV 1:2, fp16 A . B^T -> fp32 C
through the Matmul API) on 1 block (2 AIVs: per-core figure) and on `cores` blocks, and
times numpy float32 A @ B.T on the same shapes. GFLOP/s = 2*m*n*k / wall seconds of the
launch (simulator host time, not NPU time). Needs ACL_FA_SIM_LIB_DIR (a build's lib/).
Usage: python bench/sim_matmul.py [--repeat 5]
"""
import argparse
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "kernels"))
import simlib  # noqa: E402

CUBE = np.array([64, 128, 64, 1, 1, 2, 2, 2, 2, 2, 2, 1], np.int32)  # baseM..dbL0C, fits 910B L0/L1


def run_sim(sim, m, n, k, blocks, repeat):
    rows = -(-m // (2 * blocks))
    a = np.random.default_rng(0).normal(0, 1, (m, k)).astype(np.float16)
    b = np.random.default_rng(1).normal(0, 1, (n, k)).astype(np.float16)
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 4)
    ws = sim.device(simlib.SYS_WORKSPACE)
    e = sim.err()
    best = float("inf")
    for _ in range(repeat):
        rc = sim.k.aclfaSimTestMatmul(da, db, dc, ws, m, n, k, rows, blocks,
                                      sim.ffi.from_buffer("int32_t[]", CUBE), e, 4096)
        assert rc == 0, sim.ffi.string(e)
        best = min(best, sim.stats().wallSeconds)
    c = sim.host(dc, (m, n), np.float32)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    assert np.allclose(c, ref, rtol=1e-4, atol=1e-3)
    sim.free_all()
    return 2.0 * m * n * k / best / 1e9


def run_numpy(m, n, k, repeat):
    a = np.random.default_rng(0).normal(0, 1, (m, k)).astype(np.float32)
    b = np.random.default_rng(1).normal(0, 1, (n, k)).astype(np.float32)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        a @ b.T
        best = min(best, time.perf_counter() - t)
    return 2.0 * m * n * k / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    sim = simlib.SimKernels()
    print(f"host cores: {cores}; times are best of {args.repeat}")
    print(f"{'m x n x k':>20} {'sim 1 block':>12} {'sim %d blocks' % cores:>14} {'numpy f32':>10}   (GFLOP/s)")
    for m, n, k in [(128, 128, 128), (256, 256, 256), (1024, 1024, 128), (2048, 2048, 512)]:
        one = run_sim(sim, m, n, k, 1, args.repeat)
        many = run_sim(sim, m, n, k, cores, args.repeat)
        ref = run_numpy(m, n, k, args.repeat)
        print(f"{f'{m} x {n} x {k}':>20} {one:12.1f} {many:14.1f} {ref:10.1f}")


if __name__ == "__main__":
    main()
