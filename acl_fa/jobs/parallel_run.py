"""`acl-fa run --parallel ring|ulysses --devices P`: ring or Ulysses (all-to-all) attention on
random inputs over P simulated (or real) devices, with the check against the float64 reference and
the run's report.

The check compares head 0 of every batch with the float64 reference by the 2x-naive rule (all of
it: the sharded result has no sampling of rows). The report shows, per device, the host wall time
of its thread (the simulator's, not NPU time), the bytes it sent to the next rank in total and per
step, its attention FLOPs (balance = max / mean), and per step the modeled communication time
(link model of the simulated HCCL, docs/hccl.md) against the modeled compute time at the chip's
fp16 cube peak (a lower bound), with how much of the communication the compute hides. Ulysses:
bytes per link of its two all-to-all rounds against the analytic shard sizes, and the modeled
communication (slowest outgoing link) next to the modeled compute; the two do not overlap.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from .. import parallel
from ..reference.accuracy import check_accuracy, naive_same_precision
from ..runtime.errors import InvalidArgumentError
from ..spec.layouts import from_bnsd, to_bnsd
from ..spec.problem import Problem, make_problem
from .settings import JobSettings
from ..parallel.rank_agree import all_gather_host
from ..reference.attention import attention_reference
from ..runtime.units import format_bytes
from ..reference.accuracy import check_gradients
from ..parallel import launchers
from ..parallel import usp
from ..parallel.usp import default_ulysses_size, usp_attention, usp_attention_backward

__all__ = ["ParallelSettings", "run_parallel_job", "run_parallel_rank_job", "under_launch", "format_parallel_report"]


@dataclasses.dataclass
class ParallelRun:
    mode: str
    sizes: dict
    report: object  # parallel.RingReport or parallel.UlyssesReport
    accuracy: object  # acl_fa.reference.accuracy.Accuracy or None
    gradients: list = dataclasses.field(default_factory=list)  # [GradientAccuracy] of the ring backward
    backward: dict = dataclasses.field(default_factory=dict)    # the ring backward's wall seconds
    backward_report: object = None  # parallel.RingReport of the ring backward's exchanges (P >= 2)

    def to_dict(self) -> dict:
        rep = self.report
        if isinstance(rep, UspReport):
            return {"mode": self.mode, **self.sizes, "devices": rep.devices, "ulysses": rep.ulysses, "rings": rep.rings,
                    "accuracy": None if self.accuracy is None else dataclasses.asdict(self.accuracy),
                    "backward": self._backward_dict()}
        if isinstance(rep, parallel.UlyssesReport):
            return {"mode": self.mode, **self.sizes, "devices": rep.devices, "balance": rep.balance, "link": rep.link,
                    "link_bytes": rep.link_bytes, "analytic_link_bytes": rep.analytic_link_bytes,
                    "kv_heads": rep.kv_heads, "flops": rep.flops, "wall_seconds": rep.wall_seconds,
                    "modeled": rep.modeled(), "backward": self._backward_dict(),
                    "accuracy": None if self.accuracy is None else dataclasses.asdict(self.accuracy)}
        return {"mode": self.mode, **self.sizes, "devices": rep.devices, "balance": rep.balance,
                "link": rep.link, "link_bytes": rep.link_bytes, "link_bytes_per_step": rep.link_bytes_per_step,
                "flops": rep.flops, "wall_seconds": rep.wall_seconds, "modeled": rep.overlap(),
                "device_bytes": rep.device_bytes, "ring_buffer_bytes": rep.ring_buffer_bytes,
                "memory_bounds": [None if m is None else dataclasses.asdict(m) | {"bound": m.bound}
                                  for m in rep.memory_bounds],
                "memory_bound_met": memory_bound_met(rep), "checked_rows": sampled_rows(self.sizes["seq"]),
                "backward": dict(self.backward, gradients=[dataclasses.asdict(g) | {"ok": g.ok}
                                                           for g in self.gradients],
                                 **_backward_figures(self.backward_report)) if self.backward else None,
                "accuracy": None if self.accuracy is None else dataclasses.asdict(self.accuracy)}


    def _backward_dict(self):
        """The Ulysses / USP backward for to_dict: wall seconds, link bytes, the gradient checks."""
        if not self.backward:
            return None
        return dict(self.backward, gradients=[dataclasses.asdict(g) | {"ok": g.ok} for g in self.gradients])


def _backward_figures(rep) -> dict:
    """The ring backward's exchanges for to_dict: bytes to the next rank per exchange t = 0 .. P,
    FLOPs and the modeled overlap, per device."""
    if rep is None:
        return {}
    return {"link_bytes": rep.link_bytes, "link_bytes_per_step": rep.link_bytes_per_step, "flops": rep.flops,
            "balance": rep.balance, "modeled": rep.overlap()}


@dataclasses.dataclass(frozen=True)
class ParallelSettings:
    """How a parallel run shards: ring or ulysses over `devices` devices (the clique's size under
    acl-fa launch), the ring backward too with `backward`, and how the ring merges its partial
    outputs (`accumulate`: float32, int16, output or None for the default, float32)."""

    mode: str = "ring"
    devices: int = 2
    backward: bool = False
    accumulate: Optional[str] = None
    fused: bool = False  # ring: the exchange inside the kernel (RingAttention, Atlas A3; forward only)


def _inputs(problem: Problem, seed: int) -> tuple:
    """(q, k, v): the run's random inputs, the same on every rank for one seed."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape, dtype=np.float32).astype(problem.dtype)
                 for shape in (problem.q_shape, problem.kv_shape, problem.kv_shape))


def _head_names(problem: Problem) -> dict:
    """num_heads / num_kv_heads for the parallel faces where the layout cannot tell them (BSH)."""
    return dict(num_heads=problem.num_heads, num_kv_heads=problem.num_kv_heads) if problem.layout == "BSH" else {}


def _sizes(problem: Problem, fused: bool = False) -> dict:
    p = problem
    sizes = dict(seq=p.seq_q, batch=p.batch, heads=p.num_heads, kv_heads=p.num_kv_heads, head_dim=p.head_dim,
                 dtype=str(p.dtype), layout=p.layout, causal=p.causal)
    return {**sizes, "fused": True} if fused else sizes


def _dtype_name(problem: Problem) -> str:
    return "bfloat16" if problem.dtype != np.float16 else "float16"


def under_launch() -> bool:
    """True in a rank process of a launcher (acl-fa launch, or mpirun / srun / a torchrun-style
    launcher starting more than one rank: acl_fa.parallel.launchers); a launcher's environment
    acl-fa cannot use raises InvalidArgumentError instead of being ignored."""

    found = launchers.detect()
    return found is not None and (found.launcher == "acl-fa launch" or found.size > 1)


def run_parallel_job(problem: Problem, how: ParallelSettings = ParallelSettings(),
                     settings: JobSettings = JobSettings()) -> ParallelRun:
    """The run of one process over `how.devices` devices (threads of this process)."""
    run = {"ring": parallel.ring_attention, "ulysses": parallel.ulysses_attention, "ulysses,ring": _usp}.get(how.mode)
    if run is None:
        raise InvalidArgumentError(f"--parallel {how.mode!r}: must be ring, ulysses or ulysses,ring")
    p = problem
    q, k, v = _inputs(p, settings.seed)
    extra = dict(accumulate=how.accumulate, fused=how.fused) if how.mode == "ring" else {}
    out, lse, report = run(q, k, v, devices=list(range(how.devices)), causal=p.causal, scale=p.scale, layout=p.layout,
                           backend=settings.backend, report=True, **_head_names(p), **extra)
    accuracy = check_sharded(p, q, k, v, out, lse) if settings.check else None
    run_ = ParallelRun(how.mode, _sizes(p, how.fused), report, accuracy)
    if how.backward and how.mode == "ulysses":
        _ulysses_backward(run_, p, (q, k, v, out, lse), how, settings)
    elif how.backward and how.mode == "ulysses,ring":
        _usp_backward(run_, p, (q, k, v, out, lse), how, settings)
    elif how.backward:
        _ring_backward(run_, p, (q, k, v, out, lse), how, settings)
    return run_


def _ring_backward(run_, problem: Problem, arrays: tuple, how: ParallelSettings, settings: JobSettings):
    """parallel.ring_attention_backward on a random dout, checked (kv head 0 and its query heads)
    against the float64 backward by the 2x-naive rule when S <= CHECK_ALL_ROWS."""
    import time

    if run_.mode != "ring":
        raise InvalidArgumentError("--backward with --parallel: ring only")
    p, (q, k, v, out, lse) = problem, arrays
    dout = _dout(q, p.dtype, settings.seed)
    start = time.perf_counter()
    *grads, run_.backward_report = parallel.ring_attention_backward(
        dout, q, k, v, out, lse, devices=list(range(how.devices)), causal=p.causal, scale=p.scale, layout=p.layout,
        backend=settings.backend, report=True, **_head_names(p))
    run_.backward = {"wall_seconds": time.perf_counter() - start, "checked": False}
    if settings.check and run_.sizes["seq"] <= CHECK_ALL_ROWS:
        _check_backward(run_, p, grads, q, k, v, dout)


@dataclasses.dataclass
class UspReport:
    """What `--parallel ulysses,ring` ran: Ulysses groups of `ulysses` devices, a ring across the
    `rings` groups (parallel.usp_attention)."""

    devices: list
    ulysses: int
    rings: int
    link: dict = dataclasses.field(default_factory=dict)


def _usp(q, k, v, *, devices, backend, report, **kwargs):

    problem, *_ = make_problem(q, k, v, causal=kwargs["causal"], scale=kwargs["scale"], layout=kwargs["layout"],
                               num_heads=kwargs.get("num_heads"), num_kv_heads=kwargs.get("num_kv_heads"))
    u = default_ulysses_size(len(devices), problem.num_heads, problem.num_kv_heads)
    out, lse = usp_attention(q, k, v, devices=devices, ulysses=u, backend=backend, **kwargs)
    return out, lse, UspReport(list(devices), u, len(devices) // u)


def _ulysses_backward(run_, problem: Problem, arrays: tuple, how: ParallelSettings, settings: JobSettings):
    """parallel.ulysses_attention_backward on a random dout, checked like the ring's backward."""
    _all_to_all_backward(run_, problem, arrays, settings, parallel.ulysses_attention_backward,
                         devices=list(range(how.devices)))


def _usp_backward(run_, problem: Problem, arrays: tuple, how: ParallelSettings, settings: JobSettings):
    """usp_attention_backward (the forward's groups) on a random dout, checked like the ring's backward."""
    _all_to_all_backward(run_, problem, arrays, settings, usp_attention_backward, devices=list(range(how.devices)),
                         ulysses=run_.report.ulysses)


def _all_to_all_backward(run_, problem: Problem, arrays: tuple, settings: JobSettings, backward, **where):
    """backward(dout, q, k, v, out, lse, ..., report=True) on the run's dout: its wall time, the
    all-to-alls' bytes per link (measured and by the formula) and, when S <= CHECK_ALL_ROWS, the
    gradient check."""
    import time

    p, (q, k, v, out, lse) = problem, arrays
    dout = _dout(q, p.dtype, settings.seed)
    start = time.perf_counter()
    *grads, rep = backward(dout, q, k, v, out, lse, causal=p.causal, scale=p.scale, layout=p.layout,
                           backend=settings.backend, report=True, **where, **_head_names(p))
    run_.backward = {"wall_seconds": time.perf_counter() - start, "checked": False, "link_bytes": rep.link_bytes,
                     "analytic_link_bytes": rep.analytic_link_bytes}
    if settings.check and run_.sizes["seq"] <= CHECK_ALL_ROWS:
        _check_backward(run_, p, grads, q, k, v, dout)


def _dout(q, dt, seed):
    """The backward's upstream gradient: random, shaped like q, the same on every rank for one seed."""
    return np.random.default_rng(seed + 1).standard_normal(q.shape, dtype=np.float32).astype(dt)


def _check_backward(run_, problem: Problem, grads, q, k, v, dout):
    """kv head 0 and its query heads of (dq, dk, dv) against the float64 backward (2x-naive rule)."""
    p = problem
    run_.gradients = check_gradients(grads, (q, k, v, dout), causal=p.causal, scale=p.scale, layout=p.layout,
                                     num_heads=p.num_heads, num_kv_heads=p.num_kv_heads,
                                     dtype_name=_dtype_name(p), kv_heads=[0])
    run_.backward["checked"] = True


def _rank_backward(ctx, problem: Problem, q, shard, out, lse, ranges, seed: int, gather: bool) -> tuple:
    """This rank's part of the ring backward (RankContext.ring_attention_backward) on its rows of
    the run's dout. Returns (dout, the slowest rank's wall seconds, the RingReport of every rank's
    exchanges, and -- when `gather` -- the whole dq of kv head 0's query heads and dk, dv of kv head
    0, in the layout, other heads zero)."""
    import time

    p = problem
    dout = _dout(q, p.dtype, seed)
    mine = parallel.shard_rows(to_bnsd(dout, p.layout, p.num_heads), ranges[ctx.rank])
    start = time.perf_counter()
    *grads, rank_report = ctx.ring_attention_backward(mine, *shard, out, lse, causal=p.causal, scale=p.scale,
                                                      layout="BNSD", report=True)
    wall = float(all_gather_host(ctx.comm, np.array([time.perf_counter() - start], np.float64)).max())
    report = parallel.ring_report(_gather_reports(ctx, rank_report), p.causal)
    return dout, wall, report, _gather_checked_grads(ctx, p, grads, ranges) if gather else None


def _gather_checked_grads(ctx, problem: Problem, grads, ranges) -> list:
    """The whole dq of kv head 0's query heads and dk, dv of kv head 0 on every rank, in the
    layout, the other heads zero (what _check_backward reads), from each rank's BNSD rows of (dq,
    dk, dv); ranges[r]: rank r's sequence rows."""
    p = problem
    group = p.num_heads // p.num_kv_heads
    full = []
    for g, n, total in zip(grads, (group, 1, 1), (p.num_heads, p.num_kv_heads, p.num_kv_heads)):
        whole = np.zeros((g.shape[0], total, p.seq_q, g.shape[3]), g.dtype)
        whole[:, :n] = _gather_rows(ctx, g[:, :n], ranges, p.seq_q)
        full.append(from_bnsd(whole, p.layout))
    return full


def run_parallel_rank_job(problem: Problem, how: ParallelSettings = ParallelSettings(),
                          settings: JobSettings = JobSettings()):
    """This process's rank of `acl-fa launch -n P -- acl-fa run --parallel ring ...`: joins the
    clique (RankContext.from_env), runs the ring on its shard of the same random inputs every rank
    makes from the seed, then gathers over HCCL to every rank the per-rank reports and head 0 of
    the outputs; with `how.backward`, then the ring backward and (checked) the gradients of kv head
    0. `how.devices` is not used: the clique's size is. Returns (rank, ParallelRun with the whole
    run's report and checks)."""
    if how.mode == "ulysses":
        return _ulysses_rank_job(problem, settings, how.backward)
    if how.mode == "ulysses,ring":
        return _usp_rank_job(problem, settings, how.backward)
    if how.mode != "ring":
        raise InvalidArgumentError(f"--parallel {how.mode!r}: must be ring, ulysses or ulysses,ring")
    p, seq, check = problem, problem.seq_q, settings.check
    q, k, v = _inputs(p, settings.seed)
    with parallel.RankContext.from_env(backend=settings.backend) as ctx:
        ranges = _rank_ranges(seq, ctx.size, p.causal and not how.fused)
        shard = [to_bnsd(x, p.layout, n) for x, n in ((q, p.num_heads), (k, p.num_kv_heads), (v, p.num_kv_heads))]
        shard = [parallel.shard_rows(x, ranges[ctx.rank]) for x in shard]
        out, lse, mine = ctx.ring_attention(*shard, causal=p.causal, scale=p.scale, layout="BNSD", report=True,
                                            accumulate=how.accumulate, fused=how.fused)
        reports = _gather_reports(ctx, mine)
        full_out, full_lse = _gather_head0(ctx, out, lse, ranges, seq)
        if how.backward:
            dout, backward_wall, backward_report, grads = _rank_backward(
                ctx, p, q, shard, out, lse, ranges, settings.seed, gather=check and seq <= CHECK_ALL_ROWS)
        rank = ctx.rank
    report = parallel.ring_report(reports, p.causal)
    accuracy = None
    if check:
        full = from_bnsd(_pad_heads(full_out, p.num_heads), p.layout)
        accuracy = check_sharded(p, q, k, v, full, _pad_heads(full_lse, p.num_heads))
    run_ = ParallelRun(how.mode, _sizes(p, how.fused), report, accuracy)
    if how.backward:
        run_.backward = {"wall_seconds": backward_wall, "checked": False}
        run_.backward_report = backward_report
        if grads is not None:
            _check_backward(run_, p, grads, q, k, v, dout)
    return rank, run_


def _ulysses_rank_job(problem: Problem, settings: JobSettings, backward: bool = False):
    """This process's rank of Ulysses under a launcher: its contiguous rows of the seeded inputs,
    RankContext.ulysses_attention, then head 0 of the output (and rank 0's head-0 LSE, by
    HcclBroadcast) on every rank for the check; the per-link bytes from the link counters. With
    `backward`, then RankContext.ulysses_attention_backward on its rows of the run's dout
    (_rank_all_to_all_backward)."""
    import time

    p = problem
    q, k, v = _inputs(p, settings.seed)
    with parallel.RankContext.from_env(backend=settings.backend) as ctx:
        size, rank = ctx.size, ctx.rank
        if p.seq_q < size:
            raise InvalidArgumentError(f"S={p.seq_q} cannot be split over {size} ranks: needs S >= P = {size}")
        bounds = parallel.ulysses.split_bounds(p.seq_q, size)
        ranges = [[b] for b in bounds]
        shard = [parallel.shard_rows(to_bnsd(x, p.layout, n), ranges[rank])
                 for x, n in ((q, p.num_heads), (k, p.num_kv_heads), (v, p.num_kv_heads))]
        start = time.perf_counter()
        out, lse_heads = ctx.ulysses_attention(*shard, causal=p.causal, scale=p.scale, layout="BNSD")
        wall = time.perf_counter() - start
        sim = ctx.session.backend.name == "sim"
        # This rank's links now (its all-to-alls are done; the exchanges below would add to them).
        mine = [ctx.comm.link_stats(rank, j) if sim and j != rank else None for j in range(size)]
        row = [x["bytes"] if x else 0 for x in mine] + [max([x["modeled_seconds"] for x in mine if x] or [0.0]), wall]
        peer = next((x for x in mine if x), None)
        link = {key: peer[key] for key in ("kind", "bandwidth_gbs", "latency_us")} if peer else {}
        lse0 = _broadcast_head0_lse(ctx, lse_heads)  # [B, S]: head 0 lives on rank 0
        a, b = bounds[rank]
        full_out, full_lse = _gather_head0(ctx, out, lse0[:, None, a:b], ranges, p.seq_q)
        table = all_gather_host(ctx.comm, np.array(row, np.float64))  # byte counts < 2**53: exact
        link_bytes = [[int(x) for x in r[:size]] for r in table]
        modeled, walls = [float(r[size]) for r in table], [float(r[size + 1]) for r in table]
        peak = ctx.peak
        if backward:
            kv_rank = parallel.ulysses.kv_heads_of_rank(p.num_heads, p.num_kv_heads, size)

            def grad(dout_rows):
                grads = ctx.ulysses_attention_backward(dout_rows, *shard, out, lse_heads, causal=p.causal,
                                                       scale=p.scale, layout="BNSD")
                return grads, _own_link_bytes(ctx)

            analytic = parallel.ulysses_backward.ulysses_backward_link_bytes(
                p.seq_q, size, p.batch, p.num_heads, len(kv_rank[0]), p.head_dim, p.dtype.itemsize)
            back = _rank_all_to_all_backward(ctx, p, q, ranges, settings, grad, analytic)
    kv = parallel.ulysses.kv_heads_of_rank(p.num_heads, p.num_kv_heads, size)
    analytic = parallel.ulysses.ulysses_link_bytes(p.seq_q, size, p.batch, p.num_heads, len(kv[0]), p.head_dim,
                                                   p.dtype.itemsize)
    flops = [4 * p.batch * (p.num_heads // size) * p.head_dim * p.visible_pairs()] * size
    report = parallel.UlyssesReport(list(range(size)), p.causal, link_bytes, analytic, flops, modeled,
                                    [f / peak if peak else 0.0 for f in flops], walls,
                                    link, kv)
    accuracy = None
    if settings.check:
        full = from_bnsd(_pad_heads(full_out, p.num_heads), p.layout)
        accuracy = check_sharded(p, q, k, v, full, _pad_heads(full_lse, p.num_heads))
    run_ = ParallelRun("ulysses", _sizes(p), report, accuracy)
    if backward:
        _finish_rank_backward(run_, p, q, k, v, back)
    return rank, run_


def _own_link_bytes(ctx) -> list:
    """The bytes this rank sent each rank of its communicator since the last reset (simulator; else 0)."""
    sim = ctx.session.backend.name == "sim"
    return [ctx.comm.link_stats(ctx.rank, j)["bytes"] if sim and j != ctx.rank else 0 for j in range(ctx.size)]


def _rank_all_to_all_backward(ctx, problem: Problem, q, ranges, settings: JobSettings, grad, analytic) -> dict:
    """The Ulysses / USP backward of one launched rank: grad(its rows of the run's dout, BNSD) ->
    (its rows of dq, dk, dv, BNSD; the bytes it sent each peer); the slowest rank's wall seconds,
    every rank's link bytes (all-gathered) against `analytic`, and -- when checked -- kv head 0
    and its query heads of the whole gradients on every rank (ranges[r]: rank r's sequence rows)."""
    import time

    p = problem
    dout = _dout(q, p.dtype, settings.seed)
    start = time.perf_counter()
    grads, sent = grad(parallel.shard_rows(to_bnsd(dout, p.layout, p.num_heads), ranges[ctx.rank]))
    wall = float(all_gather_host(ctx.comm, np.array([time.perf_counter() - start], np.float64)).max())
    mine = np.zeros(ctx.size, np.float64)
    mine[:len(sent)] = sent
    link_bytes = [[int(x) for x in row[:len(sent)]] for row in all_gather_host(ctx.comm, mine)]
    back = {"dout": dout, "wall_seconds": wall, "link_bytes": link_bytes, "analytic_link_bytes": analytic,
            "grads": None}
    if settings.check and p.seq_q <= CHECK_ALL_ROWS:
        back["grads"] = _gather_checked_grads(ctx, p, grads, ranges)
    return back


def _finish_rank_backward(run_, problem: Problem, q, k, v, back: dict):
    run_.backward = {"wall_seconds": back["wall_seconds"], "checked": False, "link_bytes": back["link_bytes"],
                     "analytic_link_bytes": back["analytic_link_bytes"]}
    if back["grads"] is not None:
        _check_backward(run_, problem, back["grads"], q, k, v, back["dout"])


def _usp_rank_job(problem: Problem, settings: JobSettings, backward: bool):
    """This process's rank of the 2-D plan under a launcher (usp.rank_usp_attention: its group and
    ring cliques made from the launcher's clique): its rows (UspPlan.rows_of) of the seeded inputs,
    then head 0 of the output and of the LSE on every rank for the check; with `backward`, the USP
    backward on its rows of the run's dout, its all-to-alls' bytes against the formula."""
    p = problem
    q, k, v = _inputs(p, settings.seed)
    with parallel.RankContext.from_env(backend=settings.backend) as ctx:
        size, rank = ctx.size, ctx.rank
        u_size = default_ulysses_size(size, p.num_heads, p.num_kv_heads)
        plan = usp.usp_plan(p.seq_q, size, p.num_heads, p.num_kv_heads, u_size, p.causal)
        ranges = [plan.ranges(r) for r in range(size)]
        shard = [plan.rows_of(to_bnsd(x, p.layout, n), rank)
                 for x, n in ((q, p.num_heads), (k, p.num_kv_heads), (v, p.num_kv_heads))]
        out, lse_heads = usp.rank_usp_attention(ctx, *shard, ulysses=u_size, causal=p.causal, scale=p.scale,
                                                layout="BNSD")
        full_lse = _gather_usp_lse(ctx, plan, lse_heads, p.seq_q)
        full_out = _gather_rows(ctx, out[:, :1], ranges, p.seq_q)
        if backward:
            def grad(dout_rows):
                *grads, sent = usp.rank_usp_attention_backward(
                    ctx, dout_rows, *shard, out, lse_heads, ulysses=u_size, causal=p.causal, scale=p.scale,
                    layout="BNSD", report=True)
                return grads, sent

            back = _rank_all_to_all_backward(ctx, p, q, ranges, settings, grad,
                                             usp.usp_link_bytes(plan, p, True))
    accuracy = None
    if settings.check:
        full = from_bnsd(_pad_heads(full_out, p.num_heads), p.layout)
        accuracy = check_sharded(p, q, k, v, full, _pad_heads(full_lse, p.num_heads))
    run_ = ParallelRun("ulysses,ring", _sizes(p), UspReport(list(range(size)), u_size, size // u_size), accuracy)
    if backward:
        _finish_rank_backward(run_, p, q, k, v, back)
    return rank, run_


def _gather_usp_lse(ctx, plan, lse_heads, seq: int) -> np.ndarray:
    """Head 0's LSE [B, 1, S] on every rank: the first member of each group holds it over the
    group's rows ([B, N/U, L_g]); one all-gather of every rank's first head, padded to the longest L_g."""
    longest = max(plan.lengths)
    mine = np.zeros((lse_heads.shape[0], longest), np.float32)
    mine[:, :lse_heads.shape[2]] = lse_heads[:, 0]
    table = all_gather_host(ctx.comm, mine)
    whole = np.empty((lse_heads.shape[0], 1, seq), np.float32)
    for g in range(plan.rings):
        at = 0
        for a, b in plan.chunks[g]:
            whole[:, 0, a:b] = table[g * plan.ulysses][:, at:at + b - a]
            at += b - a
    return whole


def _broadcast_head0_lse(ctx, lse_heads) -> np.ndarray:
    """Rank 0's LSE of head 0 ([B, S] float32) on every rank (HcclBroadcast from rank 0)."""
    s = ctx.session
    head0 = np.ascontiguousarray(lse_heads[:, 0], np.float32)
    buf = s.upload(head0)
    stream = s.stream()
    try:
        ctx.comm.broadcast(buf, head0.size, np.float32, 0, stream)
        stream.synchronize()
        return buf.to_numpy(head0.shape, np.float32)
    finally:
        stream.close()
        buf.close()


def _rank_ranges(seq: int, ranks: int, causal: bool) -> list:
    """The rows of each rank (the zigzag split when causal); every rank refuses the same way,
    before joining the ring, when S cannot be split."""
    p = ranks
    if seq < (2 * p if causal else p):
        raise InvalidArgumentError(f"S={seq} cannot be split over {p} ranks: "
                                   f"{'the zigzag split needs S >= 2P' if causal else 'needs S >= P'} = "
                                   f"{2 * p if causal else p}")
    return parallel.zigzag_chunks(seq, p, causal)


def _pad_heads(x, heads: int):
    """Head 0 (axis 1) of x placed in an array of `heads` heads (the others zero: the check reads head 0 only)."""
    full = np.zeros((x.shape[0], heads, *x.shape[2:]), x.dtype)
    full[:, :1] = x
    return full


def _gather_reports(ctx, mine) -> list:
    """Every rank's RankReport, through one HcclAllGather of fixed-size float64 records (every
    rank's lists have the same length: P steps of the forward, P + 1 exchanges of the backward)."""
    n = len(mine.link_bytes_per_step)
    m = mine.memory_bound
    bound_fields = ([1, m.shards, m.constant, m.rounding, m.accumulator, m.row_bounds] if m is not None
                    else [0] * 6)
    record = np.array([mine.rank, mine.device, mine.flops, mine.wall_seconds, mine.device_bytes, mine.ring_buffer_bytes,
                       mine.d2h_bytes, *bound_fields,
                       *mine.link_bytes_per_step, *mine.modeled_comm_seconds, *mine.modeled_compute_seconds],
                      np.float64)  # byte counts < 2**53: exact in float64
    table = all_gather_host(ctx.comm, record)
    reports = []
    head = 13
    for row in table:
        steps = [row[head + i * n: head + (i + 1) * n] for i in range(3)]
        bound = parallel.MemoryBound(*(int(x) for x in row[8:13])) if row[7] else None
        reports.append(parallel.RankReport(int(row[0]), int(row[1]), [int(x) for x in steps[0]], int(row[2]),
                                           list(map(float, steps[1])), list(map(float, steps[2])), float(row[3]),
                                           int(row[4]), mine.link, int(row[5]), int(row[6]), memory_bound=bound,
                                           int16_unsupported=mine.int16_unsupported))  # one chip per clique
    return reports


def _gather_head0(ctx, out, lse, ranges, seq) -> tuple:
    """Head 0 of the whole output [B, 1, S, D] and LSE [B, 1, S] on every rank, in one gather."""
    d = out.shape[3]
    packed = np.concatenate([out[:, :1].astype(np.float32), lse[:, :1, :, None]], axis=3)  # D columns, then the LSE
    whole = _gather_rows(ctx, packed, ranges, seq)
    return whole[..., :d].astype(out.dtype), whole[..., d]


def _gather_rows(ctx, x, ranges, seq) -> np.ndarray:
    """The whole [B, H, S, C] on every rank from each rank's BNSD shard x [B, H, its zigzag rows, C]:
    as float32, padded to the longest shard, all-gathered, put back in sequence order, cast back."""
    longest = max(sum(b - a for a, b in rr) for rr in ranges)
    packed = np.zeros((*x.shape[:2], longest, x.shape[3]), np.float32)
    packed[:, :, :x.shape[2]] = x.astype(np.float32)
    table = all_gather_host(ctx.comm, packed)
    whole = np.empty((*x.shape[:2], seq, x.shape[3]), x.dtype)
    for rr, piece in zip(ranges, table):
        at = 0
        for a, b in rr:
            whole[:, :, a:b] = piece[:, :, at:at + b - a].astype(x.dtype)
            at += b - a
    return whole


# Above this many rows the check takes sampled blocks of query rows (the float64 reference of all
# S rows of a head costs S^2 D multiply-adds: ~2e12 at S = 131072, D = 64).
CHECK_ALL_ROWS = 8192
SAMPLE_BLOCKS, SAMPLE_ROWS = 4, 64


def sampled_rows(seq: int) -> list:
    """(start, stop) blocks of query rows the check compares: all rows up to CHECK_ALL_ROWS, else
    SAMPLE_BLOCKS blocks of SAMPLE_ROWS spread over the sequence, the last one ending at S (its rows
    see every key)."""
    if seq <= CHECK_ALL_ROWS:
        return [(0, seq)]
    starts = [(seq - SAMPLE_ROWS) * i // (SAMPLE_BLOCKS - 1) for i in range(SAMPLE_BLOCKS)]
    return [(a, a + SAMPLE_ROWS) for a in starts]


def check_sharded(problem: Problem, q, k, v, out, lse):
    """Head 0 of every batch against the float64 reference by the 2x-naive rule, on sampled_rows.
    A block [a, b) of query rows is exact against keys [0, b) when causal (the reference aligns the
    causal mask bottom-right, so local row i sees keys <= a + i) and all keys otherwise."""
    causal, scale_value, layout, heads, kv_heads = (problem.causal, problem.scale, problem.layout, problem.num_heads,
                                                    problem.num_kv_heads)
    dt = problem.dtype
    qb, kb, vb = to_bnsd(q, layout, heads)[:, :1], to_bnsd(k, layout, kv_heads)[:, :1], to_bnsd(v, layout, kv_heads)[:, :1]
    got, got_lse = to_bnsd(out, layout, heads)[:, :1], lse[:, :1]
    seq = qb.shape[2]
    parts = {"ref": [], "ref_lse": [], "naive": [], "got": [], "got_lse": []}
    for a, b in sampled_rows(seq):
        keys = slice(0, b) if causal else slice(0, seq)
        args = (qb[:, :, a:b], kb[:, :, keys], vb[:, :, keys])
        ref_out, ref_lse = attention_reference(*args, causal=causal, scale=scale_value, layout="BNSD")
        parts["ref"].append(ref_out)
        parts["ref_lse"].append(ref_lse)
        parts["naive"].append(naive_same_precision(*args, dt, causal=causal, scale=scale_value, layout="BNSD",
                                                   heads=[0]))
        parts["got"].append(got[:, :, a:b])
        parts["got_lse"].append(got_lse[:, :, a:b])
    joined = {key: np.concatenate(value, axis=2) for key, value in parts.items()}
    return check_accuracy(joined["got"], joined["got_lse"], joined["ref"], joined["ref_lse"], joined["naive"],
                          _dtype_name(problem), [0])


def format_parallel_report(run: ParallelRun) -> str:
    rep, s = run.report, run.sizes
    if isinstance(rep, UspReport):
        return "\n".join([f"{_headline(run)}: Ulysses groups of {rep.ulysses} devices "
                          f"({s['heads'] // rep.ulysses} query heads per device), a ring across {rep.rings} groups",
                          *_check_line(run),
                          *_all_to_all_backward_lines(run, "USP: Ulysses in, the ring backward across the groups, "
                                                           "Ulysses out")])
    if isinstance(rep, parallel.UlyssesReport):
        return _format_ulysses(run)
    lines = [f"{_headline(run)}{' (zigzag split)' if s['causal'] and not s.get('fused') else ''}"
             f"{'; fused: one RingAttention launch per step, the exchange in its kernel' if s.get('fused') else ''}"]
    lines += _link_line(rep)
    lines.append("device  wall s (host)  sent to next  per step (bytes)            FLOPs      device memory")
    for i, d in enumerate(rep.devices):
        per_step = ",".join(str(b) for b in rep.link_bytes_per_step[i])
        lines.append(f"{d:6d}  {rep.wall_seconds[i]:13.3f}  {format_bytes(rep.link_bytes[i]):>12}  "
                     f"{per_step[:26]:26}  {rep.flops[i]:.3e}  {format_bytes(rep.device_bytes[i]):>12}")
    lines += _memory_lines(rep)
    lines.append(f"balance (max/mean FLOPs): {rep.balance:.4f}")
    o = rep.overlap()
    lines.append(f"modeled: communication {o['comm_seconds'] * 1e3:.4f} ms, compute at cube peak "
                 f"{o['compute_seconds'] * 1e3:.4f} ms (sums over devices and steps); hidden by overlap "
                 f"{o['hidden_seconds'] * 1e3:.4f} ms = {100 * o['hidden_fraction']:.1f}% of the communication")
    lines += _check_line(run)
    if run.backward:
        lines.append(f"backward (ring, float32 dK/dV accumulators around the ring, summed on the device with "
                     f"aclnnInplaceAdd, their exchange overlapped with the next step's calls): "
                     f"{run.backward['wall_seconds']:.3f} s wall (host)")
        lines += _backward_exchange_lines(run.backward_report)
        lines += _gradient_lines(run)
    return "\n".join(lines)


def _headline(run: ParallelRun) -> str:
    """The report's first line up to the device list: the mode, the sizes, the devices."""
    s = run.sizes
    return (f"acl-fa run --parallel {run.mode}: B={s['batch']} N={s['heads']} Nkv={s['kv_heads']} S={s['seq']} "
            f"D={s['head_dim']} {s['dtype']} {s['layout']} causal={s['causal']} on devices {run.report.devices}")


def memory_bound_met(rep) -> Optional[bool]:
    """Whether every rank's peak device memory is within its MemoryBound (None: no bound, P = 1)."""
    if not rep.memory_bounds or any(m is None for m in rep.memory_bounds):
        return None
    return all(peak <= m.bound for peak, m in zip(rep.device_bytes, rep.memory_bounds))


def _backward_exchange_lines(rep) -> list:
    """The ring backward's exchanges: exchange t (t = 0 .. P) carries the K/V of step t + 1 and the
    float32 dK/dV accumulators step t - 1 completed, beside step t's calls."""
    if rep is None or len(rep.devices) < 2:
        return []
    lines = ["backward exchanges (t = 0 .. P: K/V for step t + 1 and the dK/dV accumulators of step t - 1)",
             "device  sent to next  per exchange (bytes)                  FLOPs"]
    for i, d in enumerate(rep.devices):
        per_step = ",".join(str(b) for b in rep.link_bytes_per_step[i])
        lines.append(f"{d:6d}  {format_bytes(rep.link_bytes[i]):>12}  {per_step[:36]:36}  {rep.flops[i]:.3e}")
    o = rep.overlap()
    lines.append(f"backward balance (max/mean FLOPs): {rep.balance:.4f}; modeled: communication "
                 f"{o['comm_seconds'] * 1e3:.4f} ms, compute at cube peak {o['compute_seconds'] * 1e3:.4f} ms "
                 f"(sums over devices and exchanges); hidden by overlap {o['hidden_seconds'] * 1e3:.4f} ms = "
                 f"{100 * o['hidden_fraction']:.1f}% of the communication")
    return lines


def _memory_lines(rep) -> list:
    worst = max(range(len(rep.devices)), key=lambda i: rep.device_bytes[i])
    peak = rep.device_bytes[worst]
    ring = rep.ring_buffer_bytes[worst] if rep.ring_buffer_bytes else 0
    lines = [f"device memory (peak, the ring's HBM above its start, aclrtGetMemInfo): {format_bytes(peak)} on device "
             f"{rep.devices[worst]} = the ring's buffers {format_bytes(ring)} + the ops' cached calls "
             f"{format_bytes(peak - ring)}"]
    met = memory_bound_met(rep)
    if met is None:
        return lines
    m = rep.memory_bounds[worst]
    over = [str(d) for d, pk, mb in zip(rep.devices, rep.device_bytes, rep.memory_bounds) if pk > mb.bound]
    acc = (f" + the float32 accumulator beyond O {format_bytes(m.accumulator)}" if m.accumulator else
           f" + the int16 running result's row bounds {format_bytes(m.row_bounds)} (the output holds the running "
           f"result)" if m.row_bounds else " (the output is the accumulator)")
    lines.append(f"memory bound per device: Q, K, V, O (+ its LSE) / P {format_bytes(m.shards)}{acc} + constant "
                 f"{format_bytes(m.constant)} (one workspace for every call, a spare K/V sub-block and the merge's "
                 f"buffers of {parallel.BLOCK_ROWS} rows) + rounding {format_bytes(m.rounding)} = "
                 f"{format_bytes(m.bound)}: {'met' if met else 'NOT met'} on every device"
                 f"{'' if met else ' (devices ' + ', '.join(over) + ' over)'}")
    within = all(pk <= mb.shards_bound for pk, mb in zip(rep.device_bytes, rep.memory_bounds))
    # What meeting it costs: the running result in the output's dtype, rounded at every merge
    # (docs/lse_merge.md, "Why no running result in T is precise enough").
    rounded = "rounding the running result to the dtype at every merge: docs/lse_merge.md"
    if m.row_bounds:
        note = " (the running result in int16 units of per-row bounds: docs/lse_merge.md)"
    else:
        meets = (f"accumulate=output meets it, by {rounded}; no int16 merge here: {rep.int16_unsupported}"
                 if rep.int16_unsupported else
                 f"accumulate=int16 or output meets it; int16 at outlier channels' precision, output by {rounded}")
        note = f" ({rounded})" if not m.accumulator else "" if within else f" ({meets})"
    with_bounds = " with O's LSE and row bounds" if m.row_bounds else ""
    lines.append(f"(Q + K + V + O) / P{with_bounds} + the constant (no room for a float32 accumulator): "
                 f"{format_bytes(m.shards_bound)}: {'met' if within else 'NOT met'}{note}")
    return lines


def _link_line(rep) -> list:
    if not rep.link:
        return []
    return [f"link model (modeled): {rep.link['kind']} {rep.link['bandwidth_gbs']:g} GB/s per direction, "
            f"{rep.link['latency_us']:g} us per message"]


def _check_line(run) -> list:
    if run.accuracy is None:
        return []
    a = run.accuracy
    blocks = sampled_rows(run.sizes["seq"])
    rows = "all rows" if blocks == [(0, run.sizes["seq"])] else \
        f"rows {', '.join(f'{a0}..{b0 - 1}' for a0, b0 in blocks)}"
    return [f"check (head 0, {rows}, vs float64 reference, 2x-naive rule): max error {a.max_error:.3e}, "
            f"tolerance {a.tolerance:.3e} (naive {a.naive_error:.3e}), lse error {a.lse_max_error:.3e}: "
            f"{'OK' if a.ok else 'FAILED'}"]


def _format_ulysses(run: ParallelRun) -> str:
    rep, s = run.report, run.sizes
    p = len(rep.devices)
    lines = [f"{_headline(run)} ({s['heads'] // p} query heads per device; key/value heads per device "
             f"{rep.kv_heads})"]
    lines += _link_line(rep)
    lines.append("device  wall s (host)  sent per peer (both all-to-alls)   analytic       FLOPs")
    for r, d in enumerate(rep.devices):
        sent = [b for j, b in enumerate(rep.link_bytes[r]) if j != r]
        want = [b for j, b in enumerate(rep.analytic_link_bytes[r]) if j != r]
        shown = f"{format_bytes(min(sent))}..{format_bytes(max(sent))}" if sent else "-"
        lines.append(f"{d:6d}  {rep.wall_seconds[r]:13.3f}  {shown:>32}   {'equal' if sent == want else 'DIFFERS'}"
                     f"  {rep.flops[r]:.3e}")
    lines.append(f"balance (max/mean FLOPs): {rep.balance:.4f}")
    m = rep.modeled()
    lines.append(f"modeled (slowest device): communication {m['comm_seconds'] * 1e3:.4g} ms (two all-to-all rounds, "
                 f"links in parallel), compute at cube peak {m['compute_seconds'] * 1e3:.4g} ms, not overlapped: "
                 f"{m['step_seconds'] * 1e3:.4g} ms, communication {100 * m['comm_fraction']:.1f}%")
    lines += _check_line(run)
    lines += _all_to_all_backward_lines(run, "Ulysses: Q, K, V, O, dO to head shards, FlashAttentionGrad, dQ, dK, "
                                             "dV home")
    return "\n".join(lines)


def _all_to_all_backward_lines(run: ParallelRun, what: str) -> list:
    """The Ulysses / USP backward's lines: wall time, its all-to-alls' bytes per link against the
    formula (docs/hccl.md), the gradient checks."""
    if not run.backward:
        return []
    b = run.backward
    lines = [f"backward ({what}): {b['wall_seconds']:.3f} s wall (host); all-to-all bytes per link "
             f"{'equal to' if b['link_bytes'] == b['analytic_link_bytes'] else 'DIFFER from'} the formula",
             "device  backward all-to-alls: sent per peer   analytic"]
    for r, (d, sent, want) in enumerate(zip(run.report.devices, b["link_bytes"], b["analytic_link_bytes"])):
        own = r % len(sent)  # Ulysses: [r][j] over all ranks; USP: [r][u] over r's group, r = g U + u
        peers = [x for j, x in enumerate(sent) if j != own]
        shown = f"{format_bytes(min(peers))}..{format_bytes(max(peers))}" if peers else "-"
        lines.append(f"{d:6d}  {shown:>31}   {'equal' if sent == want else 'DIFFERS'}")
    return lines + _gradient_lines(run)


def _gradient_lines(run: ParallelRun) -> list:
    """One line per checked gradient, or why none was checked."""
    lines = [f"backward check {g.name} (kv head 0 and its query heads vs float64 backward, 2x-naive rule): "
             f"max error {g.max_error:.3e}, tolerance {g.tolerance:.3e}: {'OK' if g.ok else 'FAILED'}"
             for g in run.gradients]
    if not run.backward["checked"]:
        lines.append(f"backward check: skipped (S > {CHECK_ALL_ROWS}, or --no-check)")
    return lines
