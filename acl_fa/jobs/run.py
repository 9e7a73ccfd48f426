"""The main job: run FlashAttention on random inputs, time it, check it, account for it.

Library code for ``acl-fa run`` (the CLI only parses and prints). Times come from two events
around each launch on the op's stream: device time on an NPU; on the simulator the same events
measure the kernel's host wall time, and are labeled so.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional

import numpy as np

from ..plan import forward as plan_module
from ..plan import routing, timing
from ..reference.accuracy import Accuracy, check_accuracy, naive_same_precision
from ..spec.problem import Problem
from ..runtime.hostmem import check_host_memory
from ..spec.layouts import to_bnsd
from .decode_run import measure_routed
from .measure import measure
from .settings import JobSettings, time_label
from ..reference.attention import attention_reference
from ..plan.roofline import chip_peaks
from ..runtime.session import DeviceSession
from ..plan.standard import compulsory_bytes, standard_gm_traffic_bytes, standard_intermediate_bytes
from ..runtime.units import format_bytes

__all__ = ["RunReport", "run_job", "random_inputs", "format_report", "format_flop", "check_line"]

# Problems whose every head is checked; larger ones are checked on a sample of heads.
FULL_CHECK_PAIRS = 1 << 24   # B * N * Sq * Skv
SAMPLE_HEADS = 2


@dataclasses.dataclass
class RunReport:
    backend: str
    soc: str
    problem: Problem
    block_m: int
    block_n: int
    cores: int
    balance: float                 # max/mean work per core, from the plan
    times_ms: list                 # one per timed iteration
    time_label: str                # what the times measure
    device_bytes: dict             # inputs, outputs, workspace
    standard_intermediate_bytes: int
    accuracy: Optional[Accuracy]
    sim: Optional[dict]            # simulator counters of the last launch (None on an NPU)
    standard_gm_bytes: int
    compulsory_gm_bytes: int
    model: Optional[dict] = None   # timing.summary of the modeled NPU time (sim with the L2 model)
    route: Optional[routing.Route] = None  # the op that ran and why (acl_fa.plan.routing)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def tflops(self) -> float:
        return self.problem.flops() / (self.median_ms * 1e-3) / 1e12

    def to_dict(self) -> dict:
        p = self.problem
        data = {
            "backend": self.backend, "soc": self.soc,
            "problem": {"batch": p.batch, "heads": p.num_heads, "kv_heads": p.num_kv_heads, "seq": p.seq_q,
                        "seq_kv": p.seq_kv, "head_dim": p.head_dim, "dtype": p.dtype_name, "layout": p.layout,
                        "causal": p.causal, "scale": p.scale},
            "tiling": {"block_m": self.block_m, "block_n": self.block_n, "cores": self.cores,
                       "balance_max_over_mean": self.balance},
            "time": {"label": self.time_label, "median_ms": self.median_ms, "all_ms": self.times_ms,
                     "tflops": self.tflops},
            "modeled_time": self.model,
            "route": None if self.route is None else self.route.to_dict(),
            "device_bytes": dict(self.device_bytes),
            "standard_attention_intermediate_bytes": self.standard_intermediate_bytes,
            "gm_traffic": {"standard_attention_bytes": self.standard_gm_bytes,
                           "compulsory_bytes": self.compulsory_gm_bytes},
        }
        if self.sim is not None:
            data["gm_traffic"]["flash_attention_bytes"] = self.sim["gm_bytes"]
            data["simulator"] = self.sim
        if self.accuracy is not None:
            data["check"] = dataclasses.asdict(self.accuracy) | {"ok": self.accuracy.ok}
        return data


def host_bytes(problem: Problem) -> int:
    """Host bytes of a job's arrays: q, k, v, out (the problem's dtype), lse (float32) and the
    float32 array each input is drawn into before its cast."""
    q = int(np.prod(problem.q_shape, dtype=np.int64))
    kv = int(np.prod(problem.kv_shape, dtype=np.int64))
    lse = problem.batch * problem.num_heads * problem.seq_q
    return (2 * q + 2 * kv) * problem.dtype.itemsize + 4 * lse + 4 * max(q, kv)


def random_inputs(problem: Problem, seed: int = 0):
    """q, k, v ~ N(0, 1) in the problem's dtype and layout. InsufficientMemoryError first when
    the host cannot hold them with the outputs (host_bytes)."""
    p = problem
    check_host_memory(host_bytes(p), f"the random inputs and outputs of B={p.batch} N={p.num_heads} "
                                     f"Nkv={p.num_kv_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} {p.dtype_name}")
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(problem.q_shape, dtype=np.float32).astype(problem.dtype)
    k = rng.standard_normal(problem.kv_shape, dtype=np.float32).astype(problem.dtype)
    v = rng.standard_normal(problem.kv_shape, dtype=np.float32).astype(problem.dtype)
    return q, k, v


def _check(problem: Problem, q, k, v, out, lse) -> Accuracy:
    pairs = problem.batch * problem.num_heads * problem.seq_q * problem.seq_kv
    if pairs <= FULL_CHECK_PAIRS:
        heads = list(range(problem.num_heads))
    else:
        heads = sorted({0, problem.num_heads - 1})[:SAMPLE_HEADS]
    kwargs = dict(causal=problem.causal, scale=problem.scale, layout=problem.layout,
                  num_heads=problem.num_heads, num_kv_heads=problem.num_kv_heads, heads=heads)
    ref_out, ref_lse = attention_reference(q, k, v, **kwargs)
    naive = naive_same_precision(q, k, v, problem.dtype, **kwargs)
    got = to_bnsd(np.asarray(out), problem.layout, problem.num_heads)[:, heads].astype(np.float64)
    ref_bnsd = to_bnsd(ref_out, problem.layout, len(heads))
    return check_accuracy(got, np.asarray(lse)[:, heads], ref_bnsd, ref_lse, naive, problem.dtype_name, heads)


def run_job(problem: Problem, settings: JobSettings = JobSettings(), *, return_arrays: bool = False):
    """Runs the job; `settings.progress(stage, steps)` is called as work completes (for a progress
    bar). Returns the RunReport, or with return_arrays (report, (q, k, v, out, lse))."""
    tick = settings.tick
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        q, k, v = random_inputs(problem, settings.seed)
        tick("inputs", 1)
        route = routing.route(problem, session.soc_name())  # as acl_fa.flash_attention routes the call
        m = (measure_routed if route.decode else measure)(session, problem, q, k, v, warmup=settings.warmup,
                                                          iters=settings.iters, l2=settings.l2, tick=tick)
        backend_name = session.backend.name
    out, lse, soc, plan, times, device_bytes, stats = m.out, m.lse, m.soc, m.plan, m.times_ms, m.device_bytes, m.stats
    model = None
    if m.l2_modeled is not None:
        stats = dict(stats, modeled_hbm_bytes=m.l2_modeled.hbm_bytes, l2_access_bytes=m.l2_modeled.access_bytes,
                     l2_line_hit_rate=m.l2_modeled.hit_rate, gm_trace_by_tensor=m.traffic)
        model = timing.summary(m.model, problem.flops(), m.l2_modeled.hbm_bytes, chip_peaks(soc),
                               rates_of=session.backend)
    accuracy = _check(problem, q, k, v, out, lse) if settings.check else None
    tick("check", 1)
    p = problem
    if route.decode:  # the decode op's tiling in the tiling fields: rows, key chunk, its AIC balance
        decode = routing.decode_plan_of(p, soc)
        tiling = (decode.rows, decode.block_n, decode.used_core_num, decode.aic_balance)
    else:
        tiling = (plan.block_m, plan.block_n, plan.used_core_num, plan.imbalance)
    report = RunReport(
        backend=backend_name, soc=soc, problem=p, block_m=tiling[0], block_n=tiling[1],
        cores=tiling[2], balance=tiling[3], times_ms=times,
        time_label=time_label(backend_name),
        device_bytes=device_bytes,
        standard_intermediate_bytes=standard_intermediate_bytes(p),
        accuracy=accuracy, sim=stats,
        standard_gm_bytes=standard_gm_traffic_bytes(p),
        compulsory_gm_bytes=compulsory_bytes(p),
        model=model, route=route)
    return (report, (q, k, v, out, lse)) if return_arrays else report


def _traffic_lines(r: RunReport) -> list:
    """Where the GM accesses go, by tensor (from the GM trace), and why. Every chip streams a kv
    head's K and V once per query block (on A2/A3 one QK and one P.V per K/V block serve both
    AIVs of the group); on A2/A3 S, P and P.V pass between the cube and the vector cores through
    the group's workspace, on a coupled-core chip (910A, 310P) they stay in the AI Core."""
    t = r.sim["gm_trace_by_tensor"]
    p = r.problem
    total = lambda *names: sum(t[n]["read"] + t[n]["write"] for n in names)  # noqa: E731
    kv, q, out = total("k", "v"), total("q"), total("out", "lse")
    kv_once = 2 * p.batch * p.num_heads * p.seq_kv * p.head_dim * p.dtype.itemsize
    blocks = -(-p.seq_q // r.block_m)
    lines = [f"            by tensor (GM trace): K+V {format_bytes(kv)} = {kv / max(1, kv_once):.1f} passes over "
             f"each query head's K/V ({blocks} query blocks of {r.block_m} rows"
             f"{', fewer above the diagonal' if p.causal else ''}); Q {format_bytes(q)}; O+LSE {format_bytes(out)}"]
    if plan_module.chip(r.soc).coupled:
        return lines + ["            workspace 0 B: the coupled AI Core keeps S, P and P.V in its own buffers"]
    return lines + [f"            workspace traffic {format_bytes(total('workspace'))} (GM accesses, not memory): S, P "
                    f"and P.V handed between cube and "
                    f"vector cores per {r.block_m}x{r.block_n} tile (each AIV its half of the rows), a few MiB per "
                    "core that stay in L2"]


def format_flop(count: float) -> str:
    """A FLOP count with the unit that shows it with three or four significant digits (a small run
    is "4.19 MFLOP", not "0.0 GFLOP")."""
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if count >= scale:
            return f"{count / scale:.4g} {unit}"
    return f"{count:.0f} FLOP"


def _route_lines(r: RunReport) -> list:
    """The op that ran, why (acl_fa.plan.routing), and its tiling."""
    lines = [] if r.route is None else [f"op          {r.route.op}: {r.route.reason}"]
    if r.route is not None and r.route.decode:
        return lines + [f"tiling      decode op: {r.block_m} query rows per (sequence, kv head), {r.block_n}-key "
                        f"chunks split over {r.cores} AIC cores (x2 AIV), chunks max/mean {r.balance:.3f}"]
    return lines + [f"tiling      BLOCK_M={r.block_m} BLOCK_N={r.block_n} on {r.cores} "
                    f"{'AI Cores (cube and vector coupled)' if plan_module.chip(r.soc).coupled else 'AIC cores (x2 AIV)'}"
                    f", work max/mean {r.balance:.3f}"]


def format_report(r: RunReport) -> str:
    p = r.problem
    lines = [
        f"backend     {r.backend}   SoC {r.soc}",
        f"problem     B={p.batch} N={p.num_heads} Nkv={p.num_kv_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} "
        f"{p.dtype_name} {p.layout}{' causal' if p.causal else ''} scale={p.scale:.6g}",
        *_route_lines(r),
        f"time        {r.median_ms:.3f} ms per iteration (median of {len(r.times_ms)}; {r.time_label})",
        f"throughput  {r.tflops:.3f} TFLOP/s ({format_flop(p.flops())} useful per call)",
        *(timing.format_summary(r.model) if r.model is not None else []),
        f"memory      inputs {format_bytes(r.device_bytes['inputs'])}, outputs {format_bytes(r.device_bytes['outputs'])}, "
        f"workspace {format_bytes(r.device_bytes['workspace'])} "
        f"(intermediates {format_bytes(r.device_bytes['intermediate'])} + the library's system workspace)",
        f"            standard attention would hold {format_bytes(r.standard_intermediate_bytes)} of S and P: "
        # a kernel with no scratch of its own (the coupled path) has no ratio against it
        + (f"{r.standard_intermediate_bytes / r.device_bytes['intermediate']:.1f}x these intermediates, "
           if r.device_bytes['intermediate'] else "")
        + f"{r.standard_intermediate_bytes / max(1, r.device_bytes['workspace']):.1f}x the whole workspace",
    ]
    if r.sim is not None:
        gm = r.sim["gm_bytes"]
        lines.append(f"GM traffic  {format_bytes(gm)} of GM accesses (simulator counters) vs standard attention's "
                     f"{format_bytes(r.standard_gm_bytes)}; compulsory (Q, K, V, O once) {format_bytes(r.compulsory_gm_bytes)}")
        if "modeled_hbm_bytes" in r.sim:
            hbm = r.sim["modeled_hbm_bytes"]
            lines.append(f"            modeled HBM traffic through the {r.soc} L2: {format_bytes(hbm)} "
                         f"({hbm / max(1, r.compulsory_gm_bytes):.2f}x compulsory, "
                         f"{100 * r.sim['l2_line_hit_rate']:.1f}% L2 line hits; modeled, not measured)")
        if r.sim.get("gm_trace_by_tensor") and not (r.route is not None and r.route.decode):
            lines += _traffic_lines(r)
        lines.append(f"work        cube MACs {r.sim['cube_macs'] / 1e9:.2f} G, vector elements "
                     f"{r.sim['vector_elems'] / 1e9:.2f} G, scalar accesses {r.sim['scalar_accesses']}, "
                     f"UB peak {format_bytes(r.sim['ub_high_water'])}")
    if r.accuracy is not None:
        lines.append(check_line(r.accuracy, p))
    return "\n".join(lines)


def check_line(a: Accuracy, p: Problem) -> str:
    """The report's 'check' line of a forward's accuracy against the float64 reference."""
    heads = "all heads" if len(a.checked_heads) == p.num_heads else f"heads {list(a.checked_heads)}"
    return (f"check       max |out - ref| = {a.max_error:.3g} <= {a.tolerance:.3g} "
            f"(2 x naive {p.dtype_name} error {a.naive_error:.3g}); {heads}; "
            f"LSE error {a.lse_max_error:.3g}: {'OK' if a.ok else 'FAILED'}")
