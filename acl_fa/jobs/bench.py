"""``acl-fa bench``: standard attention against FlashAttention by sequence length.

For each length: time, intermediate device memory and GM traffic of both, and their ratios, in
the shape of the seeds' comparison table; on the simulator also the L2 model's HBM bytes, the
compulsory bytes, a roofline bound and the work efficiency (executed / useful cube MACs, core
balance) from the counters.

What is measured where (labels travel with the numbers):
- FlashAttention time: device time between two events on an NPU; on the simulator the same
  events measure the kernel's host wall time on the CPU (not NPU time).
- Standard attention time: on the simulator, numpy on the CPU (fp32 matmuls, S and P
  materialized, a few heads at a time, same inputs). On an NPU it would be aclnn
  BatchMatMul/Softmax, which this package does not drive: omitted there, and said so.
- Memory and traffic of standard attention: from its algorithm (acl_fa.plan.standard).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from typing import Optional

import numpy as np

from ..plan import l2model, timing
from ..runtime import sim_stats
from ..ops.problem import check_plan
from ..spec.problem import Problem, with_lengths
from .measure import measure
from ..spec.layouts import to_bnsd
from ..plan.roofline import LABEL as ROOFLINE_LABEL
from ..plan.roofline import chip_peaks, roofline
from .run import format_bytes, random_inputs
from .settings import JobSettings, time_label
from ..runtime.session import DeviceSession
from ..plan.standard import compulsory_bytes, standard_gm_traffic_bytes, standard_intermediate_bytes

__all__ = ["BenchRow", "BenchReport", "run_bench", "standard_attention_numpy", "format_bench", "plot_bench"]

# numpy standard attention keeps at most this many bytes of fp32 scores at once (heads per group).
NUMPY_SCORE_BYTES = 256 << 20
STANDARD_NUMPY_LABEL = "numpy fp32 on the CPU (S and P materialized, a few heads at a time)"
STANDARD_NPU_NOTE = ("standard attention on the NPU would be aclnn BatchMatMul + Softmax + BatchMatMul, "
                     "which acl-fa does not drive: its time is omitted")


@dataclasses.dataclass
class BenchRow:
    seq: int
    seq_kv: int
    flash_times_ms: list
    standard_times_ms: Optional[list]       # None where standard attention is not timed (npu)
    flash_intermediate_bytes: int           # the operator's user workspace (per-core scratch)
    flash_workspace_bytes: int              # the whole workspace it asks for: scratch + the library's system workspace
    standard_intermediate_bytes: int        # S and P, [B, N, Sq, Skv] each
    flash_gm_bytes: Optional[int]           # simulator counters (None on an NPU)
    standard_gm_bytes: int                  # from its algorithm
    compulsory_bytes: int                   # Q, K, V read once and O written once
    useful_macs: int                        # over visible (query, key) pairs, both matmuls
    executed_macs: Optional[int]            # cube MACs counted by the simulator (padded tiles)
    core_max_macs: Optional[int]            # per AIC
    core_mean_macs: Optional[float]
    l2: Optional[l2model.L2Stats]           # L2 model over the trace in launch order
    l2_concurrent: Optional[l2model.L2Stats]  # ... with the cores interleaved as on the chip
    roofline: Optional[dict]
    model: Optional[dict] = None            # timing.summary: modeled NPU time of the kernel (sim)

    @property
    def flash_ms(self) -> float:
        return statistics.median(self.flash_times_ms)

    @property
    def standard_ms(self) -> Optional[float]:
        return statistics.median(self.standard_times_ms) if self.standard_times_ms else None

    def ratios(self) -> dict:
        """standard / flash for time, intermediate memory and GM traffic (None when unknown)."""
        return {
            "time": self.standard_ms / self.flash_ms if self.standard_ms is not None else None,
            # None when FlashAttention has no scratch at all (the coupled-core path): no finite ratio
            "intermediate_memory": (self.standard_intermediate_bytes / self.flash_intermediate_bytes)
            if self.flash_intermediate_bytes else None,
            "intermediate_memory_whole_workspace": self.standard_intermediate_bytes / max(1, self.flash_workspace_bytes),
            "gm_traffic": (self.standard_gm_bytes / self.flash_gm_bytes) if self.flash_gm_bytes else None,
            "modeled_hbm_over_compulsory": (self.l2.hbm_bytes / self.compulsory_bytes) if self.l2 else None,
            "modeled_hbm_concurrent_over_compulsory": (self.l2_concurrent.hbm_bytes / self.compulsory_bytes)
            if self.l2_concurrent else None,
            "executed_over_useful_macs": (self.executed_macs / self.useful_macs)
            if self.executed_macs is not None and self.useful_macs else None,
            "core_max_over_mean_macs": (self.core_max_macs / self.core_mean_macs)
            if self.core_mean_macs else None,
        }

    def to_dict(self) -> dict:
        return {
            "seq": self.seq, "seq_kv": self.seq_kv,
            "flash": {"median_ms": self.flash_ms, "all_ms": self.flash_times_ms,
                      "intermediate_bytes": self.flash_intermediate_bytes,
                      "workspace_bytes": self.flash_workspace_bytes, "gm_bytes": self.flash_gm_bytes,
                      "executed_macs": self.executed_macs, "useful_macs": self.useful_macs,
                      "core_max_macs": self.core_max_macs, "core_mean_macs": self.core_mean_macs},
            "standard": {"median_ms": self.standard_ms, "all_ms": self.standard_times_ms,
                         "intermediate_bytes": self.standard_intermediate_bytes,
                         "gm_bytes": self.standard_gm_bytes},
            "compulsory_bytes": self.compulsory_bytes,
            "l2_model": self.l2.to_dict() if self.l2 else None,
            "l2_model_concurrent": self.l2_concurrent.to_dict() if self.l2_concurrent else None,
            "roofline": self.roofline,
            "modeled_time": self.model,
            "ratios": self.ratios(),
        }


@dataclasses.dataclass
class BenchReport:
    backend: str
    soc: str
    problem: dict                  # the shape options shared by every row
    flash_time_label: str
    standard_time_label: str
    rows: list

    def to_dict(self) -> dict:
        return {"backend": self.backend, "soc": self.soc, "problem": self.problem,
                "time_labels": {"flash": self.flash_time_label, "standard": self.standard_time_label},
                "roofline_label": ROOFLINE_LABEL, "rows": [r.to_dict() for r in self.rows]}


def _fp32_bnsd(problem: Problem, q, k, v) -> tuple:
    return (to_bnsd(q, problem.layout, problem.num_heads).astype(np.float32),
            to_bnsd(k, problem.layout, problem.num_kv_heads).astype(np.float32),
            to_bnsd(v, problem.layout, problem.num_kv_heads).astype(np.float32))


def standard_attention_numpy(problem: Problem, q, k, v) -> np.ndarray:
    """Standard attention in numpy, fp32: S = scale Q K^T and P = softmax(S) materialized per
    group of heads, O = P V. Returns O [B, N, Sq, D] fp32 (the timed work)."""
    return _standard_bnsd(problem, *_fp32_bnsd(problem, q, k, v))


def _standard_bnsd(problem: Problem, qb, kb, vb) -> np.ndarray:
    b, n, sq, d = qb.shape
    skv = kb.shape[2]
    group = n // kb.shape[1]
    heads_at_once = max(1, NUMPY_SCORE_BYTES // (sq * skv * 4))
    masked = None
    if problem.causal:
        masked = np.arange(skv)[None, :] > np.arange(sq)[:, None] + (skv - sq)
    out = np.empty((b, n, sq, d), np.float32)
    for bi in range(b):
        for h0 in range(0, n, heads_at_once):
            heads = range(h0, min(n, h0 + heads_at_once))
            kv = [h // group for h in heads]
            s = np.matmul(qb[bi, h0:h0 + len(heads)], kb[bi, kv].transpose(0, 2, 1))
            s *= problem.scale
            if masked is not None:
                s[:, masked] = -np.inf
            m = s.max(axis=-1, keepdims=True)
            m[~np.isfinite(m)] = 0.0           # rows with no visible key give 0
            p = np.exp(s - m, out=s)
            total = p.sum(axis=-1, keepdims=True)
            total[total == 0] = 1.0
            p /= total
            np.matmul(p, vb[bi, kv], out=out[bi, h0:h0 + len(heads)])
    return out


def _time_standard(problem: Problem, q, k, v, warmup: int, iters: int) -> list:
    qb, kb, vb = _fp32_bnsd(problem, q, k, v)  # the input conversion is not timed
    times = []
    for i in range(warmup + iters):
        t0 = time.perf_counter()
        _standard_bnsd(problem, qb, kb, vb)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _bench_one(session: DeviceSession, problem: Problem, *, warmup: int, iters: int, l2: bool, seed: int) -> BenchRow:
    q, k, v = random_inputs(problem, seed)
    m = measure(session, problem, q, k, v, warmup=warmup, iters=iters, download=False, per_core=True, l2=l2,
                host_orders=True)
    soc, plan, times, stats = m.soc, m.plan, m.times_ms, m.stats
    sim = stats is not None
    l2_stats, l2_concurrent = m.l2, m.l2_interleaved
    p = problem
    core_max = core_mean = None
    bound = model = None
    if m.model is not None and m.l2_modeled is not None:
        model = timing.summary(m.model, p.flops(), m.l2_modeled.hbm_bytes, chip_peaks(soc))
    if stats is not None:
        core_max, core_mean = sim_stats.core_loads(stats)
        hbm = l2_concurrent.hbm_bytes if l2_concurrent is not None else stats["gm_bytes"]
        bound = roofline(chip_peaks(soc), stats["cube_macs"], stats["vector_elems"], hbm).to_dict()
        bound["hbm_bytes_source"] = ("L2 model, cores interleaved" if l2_concurrent is not None
                                     else "raw GM bytes (no L2 model)")
    return BenchRow(
        seq=p.seq_q, seq_kv=p.seq_kv, flash_times_ms=times,
        standard_times_ms=_time_standard(p, q, k, v, warmup, iters) if sim else None,
        flash_intermediate_bytes=plan.user_workspace_bytes, flash_workspace_bytes=plan.workspace_bytes,
        standard_intermediate_bytes=standard_intermediate_bytes(p),
        flash_gm_bytes=stats["gm_bytes"] if stats else None,
        standard_gm_bytes=standard_gm_traffic_bytes(p),
        compulsory_bytes=compulsory_bytes(p),
        useful_macs=p.flops() // 2, executed_macs=stats["cube_macs"] if stats else None,
        core_max_macs=core_max, core_mean_macs=core_mean, l2=l2_stats, l2_concurrent=l2_concurrent, roofline=bound,
        model=model)


def run_bench(problem: Problem, seqs, settings: JobSettings = JobSettings(), *,
              seq_kv: Optional[int] = None) -> BenchReport:
    """One row per length in `seqs` (Skv = seq_kv when given, else the row's length), every other
    size of `problem`; `settings.progress(seq)` is called after each row."""
    if not seqs:
        raise ValueError("bench needs at least one sequence length")
    problems = [with_lengths(problem, s, seq_kv or s) for s in seqs]  # every shape validated before device work
    warmup, iters, l2, seed = settings.warmup, settings.iters, settings.l2, settings.seed
    rows = []
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        soc = session.soc_name()
        for row in problems:
            check_plan(row, soc)
        for row in problems:
            rows.append(_bench_one(session, row, warmup=warmup, iters=iters, l2=l2, seed=seed))
            if settings.progress:
                settings.progress(row.seq_q)
        backend_name = session.backend.name
    sim = backend_name == "sim"
    p = problems[0]
    return BenchReport(
        backend=backend_name, soc=soc,
        problem={"batch": p.batch, "heads": p.num_heads, "kv_heads": p.num_kv_heads, "seq_kv": seq_kv,
                 "head_dim": p.head_dim, "dtype": p.dtype_name, "layout": p.layout, "causal": p.causal,
                 "warmup": warmup, "iters": iters},
        flash_time_label=time_label(backend_name),
        standard_time_label=STANDARD_NUMPY_LABEL if sim else STANDARD_NPU_NOTE,
        rows=rows)


def _b(n: Optional[float]) -> str:
    return "-" if n is None else format_bytes(n)


def _x(r: Optional[float]) -> str:
    return "-" if r is None else f"{r:.2f}x"


def _table(header: list, rows: list) -> list:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def format_bench(report: BenchReport) -> str:
    p = report.problem
    out = [f"backend {report.backend}   SoC {report.soc}   B={p['batch']} N={p['heads']} Nkv={p['kv_heads']} "
           f"D={p['head_dim']} {p['dtype']} {p['layout']}{' causal' if p['causal'] else ''}   "
           f"median of {p['iters']} (after {p['warmup']} warm-up)",
           f"time: FlashAttention = {report.flash_time_label}; standard = {report.standard_time_label}",
           "memory: intermediate device bytes (standard: S and P; FlashAttention: its workspace scratch, and the "
           "whole workspace with the library's system workspace)",
           "GM traffic: FlashAttention from the simulator's counters, standard attention from its algorithm",
           ""]
    out += _table(
        ["S", "standard ms", "flash ms", "speed-up", "standard mem", "flash mem", "mem ratio", "flash ws",
         "ws ratio", "standard GM", "flash GM", "GM ratio"],
        [[r.seq, "-" if r.standard_ms is None else f"{r.standard_ms:.1f}", f"{r.flash_ms:.1f}",
          _x(r.ratios()["time"]), _b(r.standard_intermediate_bytes), _b(r.flash_intermediate_bytes),
          _x(r.ratios()["intermediate_memory"]), _b(r.flash_workspace_bytes),
          _x(r.ratios()["intermediate_memory_whole_workspace"]), _b(r.standard_gm_bytes), _b(r.flash_gm_bytes),
          _x(r.ratios()["gm_traffic"])] for r in report.rows])
    if any(r.roofline for r in report.rows):
        out += ["", "modeled (not measured): HBM = LRU of the chip's L2 over the GM trace, in launch order and "
                "with the cores interleaved;", ROOFLINE_LABEL + " (HBM term: interleaved);",
                "modeled us, TFLOP/s, cube peak: " + timing.LABEL, ""]
        out += _table(
            ["S", "raw GM access", "modeled HBM", "(interleaved)", "compulsory", "HBM/comp", "(interleaved)",
             "bound us", "bound", "modeled us", "TFLOP/s", "cube peak", "MACs exec/useful", "core max/mean"],
            [[r.seq, _b(r.flash_gm_bytes), _b(r.l2.hbm_bytes if r.l2 else None),
              _b(r.l2_concurrent.hbm_bytes if r.l2_concurrent else None),
              _b(r.compulsory_bytes), _x(r.ratios()["modeled_hbm_over_compulsory"]),
              _x(r.ratios()["modeled_hbm_concurrent_over_compulsory"]),
              f"{r.roofline['time_s'] * 1e6:.1f}", r.roofline["bound"],
              "-" if r.model is None else f"{r.model['time_s'] * 1e6:.1f}",
              "-" if r.model is None else f"{r.model['tflops']:.1f}",
              "-" if r.model is None else f"{100 * r.model['cube_peak_fraction']:.1f}%",
              f"{r.ratios()['executed_over_useful_macs']:.3f}", f"{r.ratios()['core_max_over_mean_macs']:.3f}"]
             for r in report.rows if r.roofline])
    return "\n".join(out)


def plot_bench(report: BenchReport, path: str) -> None:
    """Three panels (time, intermediate memory, GM traffic) against S, log axes. Needs
    matplotlib (the `plot` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"--plot needs matplotlib: {sys.executable} -m pip install matplotlib") from exc
    seqs = [r.seq for r in report.rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = [
        ("time per call (ms)", [r.standard_ms for r in report.rows], [r.flash_ms for r in report.rows],
         "standard attention", "FlashAttention"),
        ("intermediate device memory (bytes)", [r.standard_intermediate_bytes for r in report.rows],
         [r.flash_intermediate_bytes for r in report.rows], "standard (S and P)", "FlashAttention (workspace)"),
        ("GM traffic (bytes)", [r.standard_gm_bytes for r in report.rows], [r.flash_gm_bytes for r in report.rows],
         "standard (from its algorithm)", "FlashAttention (simulator counters)"),
    ]
    for ax, (ylabel, standard, flash, std_label, fa_label) in zip(axes, panels):
        if all(v is not None for v in standard):
            ax.plot(seqs, standard, "o-", label=std_label)
        if all(v is not None for v in flash):
            ax.plot(seqs, flash, "s-", label=fa_label)
        if ylabel.startswith("GM") and all(r.l2_concurrent for r in report.rows):
            ax.plot(seqs, [r.l2_concurrent.hbm_bytes for r in report.rows], "^--",
                    label="FlashAttention modeled HBM (L2 model, cores interleaved)")
            ax.plot(seqs, [r.compulsory_bytes for r in report.rows], ":", color="gray", label="compulsory (Q, K, V, O)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length S (tokens)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    p = report.problem
    fig.suptitle(f"acl-fa bench on {report.backend} ({report.soc}): B={p['batch']} N={p['heads']} D={p['head_dim']} "
                 f"{p['dtype']}{' causal' if p['causal'] else ''}", fontsize=10)
    fig.text(0.01, 0.01, f"time: FlashAttention = {report.flash_time_label}; standard = {report.standard_time_label}",
             fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
