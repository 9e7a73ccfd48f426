"""``acl-fa run --backward``: the forward then the backward on random inputs -- time, memory,
traffic, counters and the gradient check of each.

Library code (the CLI only parses and prints). Times come from events around each launch, as
for the forward (acl_fa.jobs.measure): device time on an NPU, the kernel's host wall time on the
simulator, labeled so. On the simulator the backward is also modeled (acl_fa.plan.timing: the
pipeline model over its instruction trace, with the HBM time of its L2-replayed traffic when
longer) -- MODELED, never measured.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional

import numpy as np

from ..ops import backward
from ..runtime import sim_stats
from ..reference.accuracy import GradientAccuracy, check_gradients
from ..spec.problem import Problem
from ..ops.backward import BackwardProblem
from .measure import measure
from .settings import JobSettings, time_label
from .run import RunReport, format_bytes, format_flop, format_report
from .run import run_job as run_forward_job
from ..runtime.session import DeviceSession
from ..plan import timing
from ..plan.roofline import chip_peaks
from ..plan.standard import (
    backward_compulsory_bytes, standard_backward_gm_traffic_bytes, standard_backward_intermediate_bytes)

__all__ = ["BackwardReport", "run_backward_job", "format_backward_report", "useful_backward_macs"]

# Problems whose every kv head is checked; larger ones on kv head 0 (and its query heads).
FULL_CHECK_PAIRS = 1 << 24   # B * N * Sq * Skv


def useful_backward_macs(problem: Problem) -> int:
    """Multiply-accumulates of the backward's 5 matmuls (S, dP, dV, dK, dQ) over visible pairs."""
    return 5 * problem.batch * problem.num_heads * problem.head_dim * problem.visible_pairs()


@dataclasses.dataclass
class BackwardReport:
    forward: RunReport
    problem: BackwardProblem
    block_m: int
    block_n: int
    aivs: int
    balance: float                 # max/mean planned work per AIV
    times_ms: list
    time_label: str
    device_bytes: dict             # inputs, outputs, workspace, intermediate (user workspace)
    standard_intermediate_bytes: int
    standard_gm_bytes: int
    compulsory_gm_bytes: int
    sim: Optional[dict]            # simulator counters of the last backward launch
    checks: Optional[list]         # [GradientAccuracy] for dq, dk, dv
    model: Optional[dict] = None   # timing.summary of the backward's modeled NPU time (simulator)

    @property
    def gm_bytes_per_visible_pair(self) -> Optional[float]:
        """GM bytes the backward moved (simulator counters) per visible (query, key) pair of all heads."""
        p = self.problem.forward
        return None if self.sim is None else self.sim["gm_bytes"] / (p.batch * p.num_heads * p.visible_pairs())

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def forward_time_ratio(self) -> Optional[float]:
        """Modeled backward time over the forward's (both modeled on the simulator), else None."""
        fwd = self.forward.model
        if self.model is None or fwd is None or not fwd["time_s"]:
            return None
        return self.model["time_s"] / fwd["time_s"]

    @property
    def ok(self) -> bool:
        return self.checks is None or all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        p = self.problem.forward
        data = {
            "forward": self.forward.to_dict(),
            "backward": {
                "deterministic": self.problem.deterministic,
                "tiling": {"block_m": self.block_m, "block_n": self.block_n, "aivs": self.aivs,
                           "balance_max_over_mean": self.balance},
                "time": {"label": self.time_label, "median_ms": self.median_ms, "all_ms": self.times_ms,
                         "tflops": self.problem.flops() / (self.median_ms * 1e-3) / 1e12},
                "device_bytes": dict(self.device_bytes),
                "standard_backward_intermediate_bytes": self.standard_intermediate_bytes,
                "gm_traffic": {"standard_backward_bytes": self.standard_gm_bytes,
                               "compulsory_bytes": self.compulsory_gm_bytes},
                "useful_macs": useful_backward_macs(p),
            },
        }
        if self.sim is not None:
            data["backward"]["simulator"] = {k: v for k, v in self.sim.items() if k not in ("aic", "aiv")}
            data["backward"]["gm_traffic"]["flash_backward_bytes"] = self.sim["gm_bytes"]
            data["backward"]["gm_traffic"]["bytes_per_visible_pair"] = self.gm_bytes_per_visible_pair
        if self.model is not None:
            data["backward"]["modeled_time"] = self.model | {"forward_time_ratio": self.forward_time_ratio}
        if self.checks is not None:
            data["backward"]["check"] = [dataclasses.asdict(c) | {"ok": c.ok} for c in self.checks]
        return data


def random_dout(problem: Problem, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal(problem.q_shape, dtype=np.float32).astype(problem.dtype)


def run_backward_job(problem: Problem, settings: JobSettings = JobSettings(l2=False), *,
                     deterministic: bool = True) -> BackwardReport:
    """The forward job (acl_fa.jobs.run.run_job, whose outputs feed the backward), then the backward
    measured the same way and its gradients checked. The problem's blocks apply to both ops."""
    tick = settings.tick
    # The forward modeled too (simulator only; l2 is ignored elsewhere): the backward / forward ratio.
    forward_report, (q, k, v, out, lse) = run_forward_job(problem, dataclasses.replace(settings, l2=True),
                                                          return_arrays=True)
    dout = random_dout(problem, settings.seed)
    backward_problem, *inputs = backward.make_backward_problem(problem, dout, q, k, v, out, lse, deterministic)
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        backend_name = session.backend.name
        m = measure(session, backward_problem, *inputs, warmup=settings.warmup, iters=settings.iters, per_core=True,
                    tick=tick, runner=backward.runner_for(session), check=backward.check_backward_plan,
                    l2=backend_name == "sim")
    grads = (m.outputs["dq"], m.outputs["dk"], m.outputs["dv"])
    checks = None
    if settings.check:
        pairs = problem.batch * problem.num_heads * problem.seq_q * problem.seq_kv
        checks = check_gradients(grads, (q, k, v, dout), causal=problem.causal, scale=problem.scale,
                                 layout=problem.layout,
                                 num_heads=problem.num_heads, num_kv_heads=problem.num_kv_heads,
                                 dtype_name=problem.dtype_name, kv_heads=None if pairs <= FULL_CHECK_PAIRS else [0])
    tick("check", 1)
    stats = m.stats
    if stats is not None:
        core_max, core_mean = sim_stats.core_loads(stats)
        stats = dict(stats, executed_over_useful_macs=stats["cube_macs"] / max(1, useful_backward_macs(problem)),
                     core_max_over_mean_macs=core_max / core_mean if core_mean else None)
    model = None
    if m.model is not None and m.l2_modeled is not None:
        model = timing.summary(m.model, backward_problem.flops(), m.l2_modeled.hbm_bytes, chip_peaks(m.soc))
    p = problem
    return BackwardReport(
        forward=forward_report, problem=backward_problem, block_m=m.plan.block_m, block_n=m.plan.block_n,
        aivs=m.plan.aiv_num, balance=m.plan.imbalance, times_ms=m.times_ms,
        time_label=time_label(backend_name),
        device_bytes=m.device_bytes,
        standard_intermediate_bytes=standard_backward_intermediate_bytes(p),
        standard_gm_bytes=standard_backward_gm_traffic_bytes(p),
        compulsory_gm_bytes=backward_compulsory_bytes(p),
        sim=stats, checks=checks, model=model)


def _check_line(c: GradientAccuracy) -> str:
    return (f"{c.name} max error {c.max_error:.3g} <= {c.tolerance:.3g} (2 x naive {c.naive_error:.3g} + floor): "
            f"{'OK' if c.ok else 'FAILED'}")


def _model_lines(r: BackwardReport) -> list:
    """The backward's modeled time (timing.format_summary), its ratio to the forward's modeled time
    and its GM bytes per visible pair (simulator counters); nothing off the simulator."""
    if r.model is None:
        return []
    lines = timing.format_summary(r.model)
    ratio = r.forward_time_ratio
    pair = r.gm_bytes_per_visible_pair
    lines.append(f"            backward / forward modeled time "
                 f"{'-' if ratio is None else f'{ratio:.2f}x'} (the forward above modeled the same way); "
                 f"GM {'-' if pair is None else f'{pair:.1f}'} B per visible (query, key) pair (simulator counters)")
    return lines


def format_backward_report(r: BackwardReport) -> str:
    p = r.problem.forward
    mode = "deterministic (dQ summed in int32 fixed point)" if r.problem.deterministic else "atomic dQ adds"
    lines = ["forward", *("  " + line for line in format_report(r.forward).splitlines()), "backward",
             f"  tiling      BLOCK_M={r.block_m} BLOCK_N={r.block_n} on {r.aivs} AIVs, planned work max/mean "
             f"{r.balance:.3f}; {mode}",
             f"  time        {r.median_ms:.3f} ms per iteration (median of {len(r.times_ms)}; {r.time_label})",
             *("  " + line for line in _model_lines(r)),
             f"  throughput  {r.problem.flops() / (r.median_ms * 1e-3) / 1e12:.3f} TFLOP/s "
             f"({format_flop(r.problem.flops())} useful per call)",
             f"  memory      inputs {format_bytes(r.device_bytes['inputs'])}, outputs "
             f"{format_bytes(r.device_bytes['outputs'])}, workspace {format_bytes(r.device_bytes['workspace'])} "
             f"(intermediates {format_bytes(r.device_bytes['intermediate'])} + the library's system workspace)",
             f"              standard attention's backward would hold {format_bytes(r.standard_intermediate_bytes)} "
             f"of S, P and dS ({r.standard_intermediate_bytes / max(1, r.device_bytes['intermediate']):.1f}x these "
             f"intermediates)"]
    if r.sim is not None:
        s = r.sim
        lines += [
            f"  GM traffic  {format_bytes(s['gm_bytes'])} of GM accesses (simulator counters) vs standard "
            f"backward's {format_bytes(r.standard_gm_bytes)}; compulsory {format_bytes(r.compulsory_gm_bytes)}",
            f"  work        cube MACs {s['cube_macs'] / 1e9:.2f} G = {s['executed_over_useful_macs']:.3f}x useful, "
            f"AIC max/mean {s['core_max_over_mean_macs']:.3f}; vector elements {s['vector_elems'] / 1e9:.2f} G, "
            f"scalar accesses {s['scalar_accesses']}, UB peak {format_bytes(s['ub_high_water'])}",
            f"  cross-core  {s['sync_all_calls']} SyncAll passes, {s['inter_block_flag_calls']} IBSet/IBWait calls, "
            f"{format_bytes(s['atomic_add_bytes'])} added atomically to GM"]
    if r.checks is not None:
        heads = "all heads" if p.batch * p.num_heads * p.seq_q * p.seq_kv <= FULL_CHECK_PAIRS else \
            "kv head 0 and its query heads"
        lines.append(f"  check       {heads}:")
        lines += [f"              {_check_line(c)}" for c in r.checks]
    return "\n".join(lines)
