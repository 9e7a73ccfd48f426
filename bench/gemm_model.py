"""The timing model on a plain cube-only GEMM, next to a published 910B2 measurement.

Launches the `gemm_aic` test kernel (KERNEL_TYPE_AIC_ONLY; each of the 24 AICs computes one
2-D block of C = A . B^T through the Matmul API, fp16 in and out) with the instruction trace
on, and prints the MODELED time and TFLOP/s on the simulated chip (ACL_FA_SIM_SOC, default
Ascend910B2), the busy fraction of each cube-side pipe, and the published figure:
torch.matmul fp16 4096^3 on an Ascend910B2, 314.52 TFLOP/s
(github.com/zzc0721/torch-performance-test-data issue #109). Needs ACL_FA_SIM_LIB_DIR.
Usage: python bench/gemm_model.py [--size 4096]
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "kernels"))
import simlib  # noqa: E402

PUBLISHED = {4096: 314.52, 2048: 251.01, 8192: 305.46}  # TFLOP/s, fp16, issue #109
PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
# baseM, baseN, baseK, stepM, stepN, stepKa, stepKb, depthA1, depthB1, dbL0A, dbL0B, dbL0C:
# L0A 32 KiB, L0B 64 KiB, L0C 128 KiB, L1 256 KiB of the 910B's 64/64/128/512 KiB.
CUBE = np.array([128, 256, 64, 2, 1, 4, 4, 8, 4, 2, 2, 1], np.int32)
GRID_M, GRID_N = 4, 6  # 24 blocks of C, one per AIC


def launch_gemm(sim, size):
    """Runs gemm_aic on size^3 fp16 with the instruction trace on and checks three rows of C;
    returns (m, n, k, tile_m, tile_n). The launch's model is the engine's last."""
    m = n = k = size
    tile_m = (-(-m // GRID_M) + 15) // 16 * 16
    tile_n = (-(-n // GRID_N) + 15) // 16 * 16
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((n, k), dtype=np.float32).astype(np.float16)
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 2)
    e = sim.err()
    assert sim.engine.aclfaSimSetOpTrace(1) == 0
    try:
        rc = sim.k.aclfaSimTestGemm(da, db, dc, m, n, k, GRID_N, tile_m, tile_n, GRID_M * GRID_N,
                                    sim.ffi.from_buffer("int32_t[]", CUBE), e, 4096)
    finally:
        sim.engine.aclfaSimSetOpTrace(0)
    assert rc == 0, sim.ffi.string(e).decode()
    c = sim.host(dc, (m, n), np.float16)
    rows = [0, m // 2, m - 1]
    ref = a[rows].astype(np.float32) @ b.astype(np.float32).T
    assert np.allclose(c[rows].astype(np.float32), ref, rtol=2e-2, atol=0.5), "GEMM result wrong"
    return m, n, k, tile_m, tile_n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    size = parser.parse_args().size
    sim = simlib.SimKernels()
    m, n, k, tile_m, tile_n = launch_gemm(sim, size)
    s = sim.ffi.new("aclfaSimModelStats *")
    assert sim.engine.aclfaSimGetModelStats(s) == 0
    seconds = s.cycles / (s.clockMHz * 1e6)
    tflops = 2.0 * m * n * k / seconds / 1e12
    busy = {p: max(s.aicBusy[i][j] for i in range(s.aicUsed)) / s.cycles for j, p in enumerate(PIPES)}
    print(f"GEMM {m}x{n}x{k} fp16 on {GRID_M * GRID_N} AICs ({tile_m}x{tile_n} blocks), modeled: "
          f"{seconds * 1e6:.1f} us, {tflops:.1f} TFLOP/s; GM rate per core {s.coreGmBytesPerCycle:.1f} B/cycle")
    print("busiest AIC busy: " + "  ".join(f"{p} {100 * v:.0f}%" for p, v in busy.items() if v))
    if size in PUBLISHED:
        print(f"published torch.matmul on Ascend910B2: {PUBLISHED[size]} TFLOP/s; modeled / published = "
              f"{tflops / PUBLISHED[size]:.2f}")
    sim.free_all()


if __name__ == "__main__":
    main()
