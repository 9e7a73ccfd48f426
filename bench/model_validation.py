"""The timing model against public measurements of kernels whose data path is public
(docs/timing_model.md "Validation"). Every figure is MODELED on the simulated Ascend910B2.

Rows:
  - GEMM: the gemm_aic test kernel at 4096^3 against torch.matmul fp16 on an Ascend910B2,
    314.52 TFLOP/s (github.com/zzc0721/torch-performance-test-data, issues/109);
  - FlashAttention with the PTO-DSL kernel's data path: the fifo_attention test kernel (128-row
    query blocks, fp32 S and fp16 P through GM slots, fp32 P.V partials through GM, QK requested
    3 tiles ahead) against the PTO-DSL FlashAttention's measured times on an A3-class 24-cube-core
    chip (hw-native-sys/pto-isa kernels/python/flash_atten/README.md, "Expected Performance", commit
    3186c381: case6 S0=S1=32768, S1_TILE 512, KV_SPLIT 1: 3185 us; case5 S0=S1=16384, S1_TILE 256,
    KV_SPLIT 2: 1001 us, which includes a second, combine launch that is not modeled here);
  - a stream (the vec_scale_add test kernel, z = (x + y) * s over fp32 arrays on 48 AIVs) against
    the chip's HBM bandwidth (chip catalogue, 1500 GB/s): the memory bound, not a measurement.

Ranges: each modeled time at the nominal cost table, at the fast end of the chip's L2 rates
(acl_fa.plan.timing.l2_rate_scale: 5 x HBM), with all assumed cycle costs x0.5 / x1.5, and at both
fast ends together (L2 rates at 5 x HBM and assumed cycle costs x0.5: the model's fastest corner).
Then a calibration on the first FlashAttention row, validated on the second: an L2-rate scale in
[1, fast end] that matches the first measurement; where none does, the L2 rates at the fast end
and one scale in [0.5, 1] on all assumed cycle costs; or the statement that neither does. Needs ACL_FA_SIM_LIB_DIR (a build with the test kernels). About 5 minutes and 10 GB of
host memory at S = 32768.
Usage: python bench/model_validation.py [--fa-seqs 32768,16384] [--stream-mib 384]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from common import header, table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "kernels"))
import simlib  # noqa: E402
from gemm_model import PUBLISHED, launch_gemm  # noqa: E402

from acl_fa.plan import timing  # noqa: E402

PTO_DSL = {32768: (512, 1, 3185.0), 16384: (256, 2, 1001.0)}  # S: (S1_TILE, KV_SPLIT, measured us)
PTO_SOURCE = "pto-isa kernels/python/flash_atten/README.md (PTO-DSL, A3)"
QK_CUBE = np.array([128, 256, 64, 1, 1, 2, 2, 2, 2, 2, 2, 1], np.int32)  # baseM..dbL0C, as gemm_model's CUBE
PV_CUBE = np.array([128, 128, 128, 1, 1, 4, 4, 4, 4, 2, 2, 1], np.int32)
PRELOAD, HEAD_DIM = 3, 128
CHUNK_BYTES = 32 << 10  # S rows per UB pass: 16 of 512 keys, 32 of 256 (fp32)
STREAM_TILE, STREAM_AIVS = 4096, 48  # 3 queues x 2 x 16 KiB of UB


class Engine:
    """The engine's cost table and replays through the test library's cffi (simlib)."""

    def __init__(self, sim):
        self.sim = sim
        source = sim.ffi.new("const char **")
        self.fields = []
        while (name := sim.engine.aclfaSimPipeCostField(len(self.fields), source)) != sim.ffi.NULL:
            self.fields.append((sim.ffi.string(name).decode(), sim.ffi.string(source[0]).decode()))
        table_ = sim.ffi.new("aclfaSimPipeCosts *")
        assert sim.engine.aclfaSimGetPipeCosts(sim.ffi.NULL, table_) == 0
        self.costs = {name: float(getattr(table_, name)) for name, _ in self.fields}

    def stats(self, costs=None):
        """The last traced launch's model, replayed with `costs` when given."""
        s = self.sim.ffi.new("aclfaSimModelStats *")
        if costs is None:
            assert self.sim.engine.aclfaSimGetModelStats(s) == 0
        else:
            table_ = self.sim.ffi.new("aclfaSimPipeCosts *", [costs[name] for name, _ in self.fields])
            assert self.sim.engine.aclfaSimRemodel(table_, s) == 0
        return s

    def us(self, costs=None) -> float:
        s = self.stats(costs)
        return s.cycles / s.clockMHz

    def l2_scaled(self, scale: float) -> dict:
        return timing.with_l2_rates(self.costs, scale)

    def spread(self) -> dict:
        """Modeled us: nominal, at the fast end of the L2 rates, all assumed cycle costs x0.5 / x1.5,
        and both at their fast ends (the corner)."""
        fast = self.l2_scaled(timing.l2_rate_scale(self.costs))
        return {"nominal": self.us(), "fast": self.us(fast),
                "calibrated": self.us(timing.calibrated_costs(self.fields, self.costs)),
                "lat0.5": self.us(timing.joint_latency_costs(self.fields, self.costs, 0.5)),
                "lat1.5": self.us(timing.joint_latency_costs(self.fields, self.costs, 1.5)),
                "corner": self.us(timing.joint_latency_costs(self.fields, fast, 0.5))}


def launch_fifo_attention(sim, seq: int, tile: int, split: int, blocks: int = 24):
    rng = np.random.default_rng(seq)
    q, k, v = (rng.standard_normal((seq, HEAD_DIM), dtype=np.float32).astype(np.float16) for _ in range(3))
    dq, dk, dv = sim.device(q), sim.device(k), sim.device(v)
    out, lse = sim.device(split * seq * HEAD_DIM * 4), sim.device(split * seq * 4)
    group = (PRELOAD + 1) * 128 * tile * 4 + 2 * 128 * tile * 2 + 2 * 128 * HEAD_DIM * 4  # the group's slots
    ws = sim.device(simlib.SYS_WORKSPACE + blocks * group)
    e = sim.err()
    assert sim.engine.aclfaSimSetOpTrace(1) == 0
    try:
        rc = sim.k.aclfaSimTestFifoAttention(dq, dk, dv, out, lse, ws, seq, seq, HEAD_DIM, tile, PRELOAD, split,
                                             CHUNK_BYTES // (4 * tile),
                                             HEAD_DIM ** -0.5, blocks, sim.ffi.from_buffer("int32_t[]", QK_CUBE),
                                             sim.ffi.from_buffer("int32_t[]", PV_CUBE), e, 4096)
    finally:
        sim.engine.aclfaSimSetOpTrace(0)
    assert rc == 0, sim.ffi.string(e).decode()
    rows = sim.host(out, (split, seq, HEAD_DIM), np.float32)[0, :2]  # two rows against the reference
    s = q[:2].astype(np.float64) @ k.astype(np.float64)[: seq // split].T * HEAD_DIM ** -0.5
    p = np.exp(s - s.max(1, keepdims=True))
    ref = p / p.sum(1, keepdims=True) @ v.astype(np.float64)[: seq // split]
    assert np.abs(rows - ref).max() < 1e-3, "fifo_attention result wrong"


def launch_stream(sim, mib: int) -> int:
    """z = (x + y) * 0.5 over fp32 arrays of about `mib` MiB each; returns the bytes it moves."""
    tiles = max(1, (mib << 20) // (4 * STREAM_TILE * STREAM_AIVS))
    n = tiles * STREAM_TILE * STREAM_AIVS
    x = np.arange(n, dtype=np.float32)
    dx, dy, dz = sim.device(x), sim.device(x), sim.device(4 * n)
    e = sim.err()
    assert sim.engine.aclfaSimSetOpTrace(1) == 0
    try:
        rc = sim.k.aclfaSimTestVecScaleAdd(dx, dy, dz, STREAM_TILE, tiles, 0.5, STREAM_AIVS, e, 4096)
    finally:
        sim.engine.aclfaSimSetOpTrace(0)
    assert rc == 0, sim.ffi.string(e).decode()
    assert sim.host(dz, (n,), np.float32)[-1] == x[-1], "stream result wrong"
    return 3 * 4 * n


def span(r: dict) -> str:
    """The calibrated - nominal range, then the L2 fast end alone."""
    return f"{r['calibrated']:.1f} - {r['nominal']:.1f} (L2 alone: {r['fast']:.1f})"


def fa_rows(sim, engine, seqs):
    """The FlashAttention rows; the first one also calibrates (calibrate), the others validate the
    calibrated costs. Returns (rows, notes)."""
    rows, notes, calibrated = [], [], None
    for seq in seqs:
        tile, split, measured = PTO_DSL[seq]
        launch_fifo_attention(sim, seq, tile, split)
        r = engine.spread()
        rows.append([f"FlashAttention, PTO-DSL data path (fifo_attention)",
                     f"N1 S{seq} D128 fp16, tile {tile}, KV split {split}", f"{measured:.0f} us", PTO_SOURCE,
                     f"{r['nominal']:.1f}", span(r), f"{r['lat0.5']:.1f} / {r['lat1.5']:.1f}",
                     f"{r['corner']:.1f}", f"{r['nominal'] / measured:.2f}"])
        if calibrated is None:
            calibrated, line = calibrate(engine, measured)
            notes.append(f"calibration on S{seq}: {line}")
        elif calibrated:
            us = engine.us(calibrated)
            notes.append(f"validation on S{seq}: the calibrated costs model {us:.1f} us against {measured:.0f} us "
                         f"measured ({us / measured:.2f})")
        sim.free_all()
    return rows, notes


def bisect(model_us, lo: float, hi: float, measured: float) -> float:
    """The x in [lo, hi] at which model_us(x) (monotone in x, either way) equals measured."""
    rising = model_us(hi) > model_us(lo)
    for _ in range(10):
        mid = 0.5 * (lo + hi)
        if (model_us(mid) > measured) != rising:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def calibrate(engine, measured: float) -> tuple:
    """(costs, description) that make the last launch model `measured` us: first an L2-rate scale
    in [1, fast end]; where none does, the L2 rates at the fast end (production's 5 x HBM) and one
    scale in [0.5, 1] on all assumed cycle costs. (None, why) when neither does."""
    top = timing.l2_rate_scale(engine.costs)
    slow, fast = engine.us(engine.l2_scaled(1.0)), engine.us(engine.l2_scaled(top))
    if fast <= measured <= slow:
        k = bisect(lambda x: engine.us(engine.l2_scaled(x)), 1.0, top, measured)
        return engine.l2_scaled(k), f"L2-rate scale {k:.3f} models {engine.us(engine.l2_scaled(k)):.1f} us"
    why = (f"no L2-rate scale in [1, {top:.3f}] models {measured:.0f} us ({slow:.1f} us at 1, {fast:.1f} at "
           f"{top:.3f})")
    at = lambda x: timing.joint_latency_costs(engine.fields, engine.l2_scaled(top), x)  # noqa: E731
    corner = engine.us(at(0.5))
    if not corner <= measured <= fast:
        return None, f"{why}; nor with the assumed cycle costs x0.5 ({corner:.1f} us)"
    s = bisect(lambda x: engine.us(at(x)), 0.5, 1.0, measured)
    return at(s), (f"{why}; with the L2 rates at {top:.3f} (5 x HBM) the assumed cycle costs x{s:.3f} model "
                   f"{engine.us(at(s)):.1f} us")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fa-seqs", default="32768,16384", help="PTO-DSL rows (S = 32768, 16384)")
    parser.add_argument("--stream-mib", type=int, default=384, help="MiB per stream array")
    args = parser.parse_args()
    seqs = [int(x) for x in args.fa_seqs.split(",")]
    if any(s not in PTO_DSL for s in seqs):
        parser.error(f"--fa-seqs: the PTO-DSL measurements are at {sorted(PTO_DSL)}")
    print(header("Timing model validation (modeled, Ascend910B2)"))
    sim = simlib.SimKernels()
    engine = Engine(sim)

    m, n, k, _, _ = launch_gemm(sim, 4096)
    gemm = engine.spread()
    measured = 2.0 * m * n * k / (PUBLISHED[4096] * 1e12) * 1e6
    rows = [["GEMM (gemm_aic, Matmul API)", "4096^3 fp16, 24 AICs", f"{measured:.1f} us (314.52 TFLOP/s)",
             "github.com/zzc0721/torch-performance-test-data, issues/109", f"{gemm['nominal']:.1f}", span(gemm),
             f"{gemm['lat0.5']:.1f} / {gemm['lat1.5']:.1f}", f"{gemm['corner']:.1f}",
             f"{gemm['nominal'] / measured:.2f}"]]
    sim.free_all()

    fa, notes = fa_rows(sim, engine, seqs)
    rows += fa

    moved = launch_stream(sim, args.stream_mib)
    st = engine.stats()
    stream = engine.spread()
    hbm_us = st.compulsoryHbmBytes / (engine.costs["hbmBytesPerCycle"] * st.clockMHz)
    rows.append(["stream (vec_scale_add), HBM-bound", f"3 x {moved / 3 / 2**20:.0f} MiB fp32, 48 AIVs",
                 f"{hbm_us:.1f} us (compulsory bytes at 1500 GB/s)", "chip catalogue HBM bandwidth (third-party)",
                 f"{stream['nominal']:.1f}", span(stream), f"{stream['lat0.5']:.1f} / {stream['lat1.5']:.1f}",
                 f"{stream['corner']:.1f}", f"{stream['nominal'] / hbm_us:.2f}"])
    sim.free_all()

    print(table(["kernel", "shape", "measured", "source", "modeled us", "range: calibrated - nominal",
                 "assumed cycle costs x0.5 / x1.5", "both fast ends", "modeled / measured"], rows))
    print()
    print(f"stream: {moved / 2**20:.0f} MiB moved, {st.compulsoryHbmBytes / 2**20:.0f} MiB compulsory HBM bytes "
          f"(reads + writes beyond the 192 MiB L2); pipeline replay alone {st.pipelineCycles / st.clockMHz:.1f} us "
          f"(its GM traffic at the L2 rate: what the model said before the memory bound), effective "
          f"{moved / (stream['nominal'] * 1e-6) / 1e12:.2f} TB/s")
    for line in notes:
        print(line)
    print("range: calibrated (the L2 rates at 5 x HBM = 7.50 TB/s, per-core ports x "
          f"{timing.l2_rate_scale(engine.costs):.3f}, and all assumed cycle costs x{timing.CALIBRATED_CYCLE_SCALE}: "
          "acl_fa.plan.timing.calibrated_costs) - nominal (the cost table: L2 4.75 TB/s, the platform files' "
          "per-core rates); L2 alone: the L2 rates at 5 x HBM, the cycle costs nominal")
    sim.close()


if __name__ == "__main__":
    main()
