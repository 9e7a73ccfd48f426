"""``acl-fa bench --backward``: standard attention's backward against FlashAttentionGrad by
sequence length -- time, intermediate device memory, GM traffic, work efficiency.

What is measured where (labels travel with the numbers):
- FlashAttentionGrad time: events around each launch (device time on an NPU; the kernel's host
  wall time on the simulator, not NPU time).
- Standard backward time: numpy fp32 on the CPU with P, dP and dS materialized per group of heads
  (from the forward's P recomputed untimed); and, when torch is installed, torch's CPU autograd
  through scaled_dot_product_attention in the input dtype (backward only timed).
- Memory and GM traffic of the standard backward: from its algorithm (acl_fa.plan.standard).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Optional

import numpy as np

from ..ops import backward
from ..runtime import sim_stats
from ..ops.forward import flash_attention
from ..spec.problem import Problem, with_lengths
from ..spec.layouts import to_bnsd
from .measure import measure
from .run import format_bytes, random_inputs
from .run_backward import random_dout, useful_backward_macs
from .settings import JobSettings, time_label
from ..runtime.session import DeviceSession
from ..plan.standard import standard_backward_gm_traffic_bytes, standard_backward_intermediate_bytes

__all__ = ["BackwardBenchRow", "run_backward_bench", "format_backward_bench", "torch_sdpa_backward_ms"]

NUMPY_SCORE_BYTES = 256 << 20  # fp32 [Sq, Skv] matrices held at once by the numpy backward
STANDARD_LABEL = "numpy fp32 on the CPU (P, dP and dS materialized, a few heads at a time)"
TORCH_LABEL = "torch CPU autograd through scaled_dot_product_attention, input dtype (backward only)"


@dataclasses.dataclass
class BackwardBenchRow:
    seq: int
    flash_times_ms: list
    standard_times_ms: Optional[list]
    torch_times_ms: Optional[list]
    flash_intermediate_bytes: int
    standard_intermediate_bytes: int
    flash_gm_bytes: Optional[int]
    standard_gm_bytes: int
    useful_macs: int
    executed_macs: Optional[int]
    core_max_over_mean: Optional[float]

    def to_dict(self) -> dict:
        med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
        return {"seq": self.seq, "flash_ms": med(self.flash_times_ms), "standard_ms": med(self.standard_times_ms),
                "torch_ms": med(self.torch_times_ms), "flash_intermediate_bytes": self.flash_intermediate_bytes,
                "standard_intermediate_bytes": self.standard_intermediate_bytes,
                "flash_gm_bytes": self.flash_gm_bytes, "standard_gm_bytes": self.standard_gm_bytes,
                "useful_macs": self.useful_macs, "executed_macs": self.executed_macs,
                "executed_over_useful_macs": self.executed_macs / self.useful_macs if self.executed_macs else None,
                "core_max_over_mean_macs": self.core_max_over_mean}


def _standard_backward_numpy(problem, q, k, v, dout) -> None:
    """Standard backward in numpy fp32 with P, dP, dS materialized per group of heads."""
    qb, kb, vb, db = (to_bnsd(x, problem.layout, n).astype(np.float32) for x, n in
                      ((q, problem.num_heads), (k, problem.num_kv_heads), (v, problem.num_kv_heads),
                       (dout, problem.num_heads)))
    b, n, sq, _ = qb.shape
    skv, group = kb.shape[2], n // kb.shape[1]
    at_once = max(1, NUMPY_SCORE_BYTES // (3 * sq * skv * 4))
    masked = (np.arange(skv)[None, :] > np.arange(sq)[:, None] + (skv - sq)) if problem.causal else None
    for bi in range(b):
        for h0 in range(0, n, at_once):
            kv = [h // group for h in range(h0, min(n, h0 + at_once))]
            qh, dh = qb[bi, h0:h0 + len(kv)], db[bi, h0:h0 + len(kv)]
            s = np.matmul(qh, kb[bi, kv].transpose(0, 2, 1)) * np.float32(problem.scale)
            if masked is not None:
                s[:, masked] = -np.inf
            m = s.max(axis=-1, keepdims=True)
            m[~np.isfinite(m)] = 0
            p = np.exp(s - m, out=s)
            p /= np.maximum(p.sum(axis=-1, keepdims=True), np.float32(1e-30))
            o = p @ vb[bi, kv]
            dv = p.transpose(0, 2, 1) @ dh                     # noqa: F841 (the timed work)
            dp = dh @ vb[bi, kv].transpose(0, 2, 1)
            ds = p * (dp - (dh * o).sum(axis=-1, keepdims=True))
            dq = (ds @ kb[bi, kv]) * np.float32(problem.scale)  # noqa: F841
            dk = (ds.transpose(0, 2, 1) @ qh) * np.float32(problem.scale)  # noqa: F841


def torch_sdpa_backward_ms(problem, q, k, v, dout, iters: int) -> Optional[list]:
    """Times of torch's CPU autograd backward through SDPA on the same inputs (None without torch)."""
    try:
        import torch
    except ImportError:
        return None
    to_t = lambda x, n: torch.from_numpy(np.ascontiguousarray(  # noqa: E731
        to_bnsd(x, problem.layout, n).astype(np.float32))).to(torch.float16 if problem.dtype_name == "float16"
                                                              else torch.bfloat16)
    if problem.causal and problem.seq_q != problem.seq_kv:
        return None  # torch's is_causal is top-left aligned: not the same mask
    group = problem.num_heads // problem.num_kv_heads
    times = []
    for _ in range(iters):
        qt = to_t(q, problem.num_heads).requires_grad_()
        kt = to_t(k, problem.num_kv_heads).repeat_interleave(group, 1).detach().requires_grad_()
        vt = to_t(v, problem.num_kv_heads).repeat_interleave(group, 1).detach().requires_grad_()
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=problem.causal,
                                                               scale=problem.scale)
        grad = to_t(dout, problem.num_heads)
        t0 = time.perf_counter()
        out.backward(grad)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _backward_row(session, p: Problem, settings: JobSettings, deterministic: bool, torch: bool) -> BackwardBenchRow:
    """One length: the forward for its outputs, then the backward timed, against the numpy (and
    torch) standard backward."""
    warmup, iters = settings.warmup, settings.iters
    blocks = dict(block_m=p.block_m or None, block_n=p.block_n or None)
    q, k, v = random_inputs(p, settings.seed)
    dout = random_dout(p, settings.seed)
    out, lse = flash_attention(q, k, v, causal=p.causal, layout=p.layout, num_heads=p.num_heads,
                               num_kv_heads=p.num_kv_heads, return_lse=True, session=session, **blocks)
    gp, *inputs = backward.make_backward_problem(p, dout, q, k, v, out, lse, deterministic)
    m = measure(session, gp, *inputs, warmup=warmup, iters=iters, download=False, per_core=True,
                runner=backward.runner_for(session), check=backward.check_backward_plan)
    standard_ms = None
    if session.backend.name == "sim":
        standard_ms = []
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            _standard_backward_numpy(p, q, k, v, dout)
            if i >= warmup:
                standard_ms.append((time.perf_counter() - t0) * 1e3)
    stats = m.stats
    balance = None
    if stats is not None:
        core_max, core_mean = sim_stats.core_loads(stats)
        balance = core_max / core_mean if core_mean else None
    seq = p.seq_q
    return BackwardBenchRow(
        seq=seq, flash_times_ms=m.times_ms, standard_times_ms=standard_ms,
        torch_times_ms=torch_sdpa_backward_ms(p, q, k, v, dout, iters) if torch else None,
        flash_intermediate_bytes=m.plan.user_workspace_bytes,
        standard_intermediate_bytes=standard_backward_intermediate_bytes(p),
        flash_gm_bytes=stats["gm_bytes"] if stats else None,
        standard_gm_bytes=standard_backward_gm_traffic_bytes(p),
        useful_macs=useful_backward_macs(p), executed_macs=stats["cube_macs"] if stats else None,
        core_max_over_mean=balance)


def run_backward_bench(problem: Problem, seqs, settings: JobSettings = JobSettings(), *, deterministic: bool = True,
                       torch: bool = True) -> dict:
    """One row per length in `seqs` (Skv = Sq), every other size of `problem`; `settings.progress(seq)`
    is called after each row."""
    p, rows = problem, []
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        for seq in seqs:
            rows.append(_backward_row(session, with_lengths(problem, seq), settings, deterministic, torch))
            if settings.progress:
                settings.progress(seq)
        backend_name, soc = session.backend.name, session.soc_name()
    return {"backend": backend_name, "soc": soc,
            "problem": {"batch": p.batch, "heads": p.num_heads, "kv_heads": p.num_kv_heads, "head_dim": p.head_dim,
                        "dtype": p.dtype_name, "layout": p.layout, "causal": p.causal,
                        "deterministic": deterministic, "iters": settings.iters},
            "time_labels": {"flash": time_label(backend_name), "standard": STANDARD_LABEL, "torch": TORCH_LABEL},
            "rows": [r.to_dict() for r in rows]}


def format_backward_bench(report: dict) -> str:
    p = report["problem"]
    ms = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    ratio = lambda a, b: "-" if a is None or not b else f"{a / b:.2f}x"  # noqa: E731
    out = [f"backend {report['backend']}   SoC {report['soc']}   backward B={p['batch']} N={p['heads']} "
           f"Nkv={p['kv_heads']} D={p['head_dim']} {p['dtype']} {p['layout']}{' causal' if p['causal'] else ''} "
           f"{'deterministic' if p['deterministic'] else 'atomic dQ'}   median of {p['iters']}",
           f"time: flash = {report['time_labels']['flash']}; standard = {report['time_labels']['standard']}; "
           f"torch = {report['time_labels']['torch']}",
           "memory: intermediate device bytes (standard: S, P, dS; flash: its user workspace); GM traffic: flash "
           "from the simulator's counters, standard from its algorithm", ""]
    header = ["S", "flash ms", "standard ms", "torch ms", "torch/flash", "standard mem", "flash mem", "mem ratio",
              "standard GM", "flash GM", "MACs exec/useful", "core max/mean"]
    rows = [[r["seq"], ms(r["flash_ms"]), ms(r["standard_ms"]), ms(r["torch_ms"]),
             ratio(r["torch_ms"], r["flash_ms"]), format_bytes(r["standard_intermediate_bytes"]),
             format_bytes(r["flash_intermediate_bytes"]),
             ratio(r["standard_intermediate_bytes"], r["flash_intermediate_bytes"]),
             format_bytes(r["standard_gm_bytes"]),
             "-" if r["flash_gm_bytes"] is None else format_bytes(r["flash_gm_bytes"]),
             "-" if r["executed_over_useful_macs"] is None else f"{r['executed_over_useful_macs']:.3f}",
             "-" if r["core_max_over_mean_macs"] is None else f"{r['core_max_over_mean_macs']:.3f}"]
            for r in report["rows"]]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join(out + [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
