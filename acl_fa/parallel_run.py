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

import ml_dtypes
import numpy as np

from . import parallel
from .accuracy import check_accuracy, naive_same_precision
from .errors import InvalidArgumentError
from .layouts import shape_of, to_bnsd
from .reference import attention_reference
from .units import format_bytes

__all__ = ["run_parallel_job", "format_parallel_report"]


@dataclasses.dataclass
class ParallelRun:
    mode: str
    sizes: dict
    report: object  # parallel.RingReport or parallel.UlyssesReport
    accuracy: object  # acl_fa.accuracy.Accuracy or None

    def to_dict(self) -> dict:
        rep = self.report
        if isinstance(rep, parallel.UlyssesReport):
            return {"mode": self.mode, **self.sizes, "devices": rep.devices, "balance": rep.balance, "link": rep.link,
                    "link_bytes": rep.link_bytes, "analytic_link_bytes": rep.analytic_link_bytes,
                    "kv_heads": rep.kv_heads, "flops": rep.flops, "wall_seconds": rep.wall_seconds,
                    "modeled": rep.modeled(),
                    "accuracy": None if self.accuracy is None else dataclasses.asdict(self.accuracy)}
        return {"mode": self.mode, **self.sizes, "devices": rep.devices, "balance": rep.balance,
                "link": rep.link, "link_bytes": rep.link_bytes, "link_bytes_per_step": rep.link_bytes_per_step,
                "flops": rep.flops, "wall_seconds": rep.wall_seconds, "modeled": rep.overlap(),
                "accuracy": None if self.accuracy is None else dataclasses.asdict(self.accuracy)}


def run_parallel_job(*, mode="ring", devices=2, seq, batch=1, heads=8, kv_heads=None, head_dim=128,
                     dtype="float16", layout="BNSD", causal=False, scale=None, check=True, seed=0,
                     backend=None) -> ParallelRun:
    run = {"ring": parallel.ring_attention, "ulysses": parallel.ulysses_attention}.get(mode)
    if run is None:
        raise InvalidArgumentError(f"--parallel {mode!r}: must be ring or ulysses")
    kv_heads = kv_heads or heads
    dt = np.dtype(ml_dtypes.bfloat16) if dtype in ("bfloat16", "bf16") else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(shape_of(layout, batch, heads, seq, head_dim), dtype=np.float32).astype(dt)
    k = rng.standard_normal(shape_of(layout, batch, kv_heads, seq, head_dim), dtype=np.float32).astype(dt)
    v = rng.standard_normal(shape_of(layout, batch, kv_heads, seq, head_dim), dtype=np.float32).astype(dt)
    names = dict(num_heads=heads, num_kv_heads=kv_heads) if layout == "BSH" else {}
    out, lse, report = run(q, k, v, devices=list(range(devices)), causal=causal, scale=scale, layout=layout,
                           backend=backend, report=True, **names)
    accuracy = None
    if check:
        sample = [0]
        scale_value = scale if scale is not None else 1.0 / np.sqrt(head_dim)
        ref_out, ref_lse = attention_reference(q, k, v, causal=causal, scale=scale_value, layout=layout, heads=sample,
                                               **names)
        naive = naive_same_precision(q, k, v, dt, causal=causal, scale=scale_value, layout=layout, heads=sample,
                                     **names)
        got = to_bnsd(out, layout, heads)[:, sample]
        accuracy = check_accuracy(got, lse[:, sample], to_bnsd(ref_out, layout, 1), ref_lse, naive,
                                  "bfloat16" if dt != np.float16 else "float16", sample)
    sizes = dict(seq=seq, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=str(dt),
                 layout=layout, causal=causal)
    return ParallelRun(mode, sizes, report, accuracy)


def format_parallel_report(run: ParallelRun) -> str:
    rep, s = run.report, run.sizes
    if isinstance(rep, parallel.UlyssesReport):
        return _format_ulysses(run)
    lines = [f"acl-fa run --parallel {run.mode}: B={s['batch']} N={s['heads']} Nkv={s['kv_heads']} S={s['seq']} "
             f"D={s['head_dim']} {s['dtype']} {s['layout']} causal={s['causal']} on devices {rep.devices}"
             f"{' (zigzag split)' if s['causal'] else ''}"]
    lines += _link_line(rep)
    lines.append("device  wall s (host)  sent to next  per step (bytes)            FLOPs")
    for i, d in enumerate(rep.devices):
        per_step = ",".join(str(b) for b in rep.link_bytes_per_step[i])
        lines.append(f"{d:6d}  {rep.wall_seconds[i]:13.3f}  {format_bytes(rep.link_bytes[i]):>12}  "
                     f"{per_step[:26]:26}  {rep.flops[i]:.3e}")
    lines.append(f"balance (max/mean FLOPs): {rep.balance:.4f}")
    o = rep.overlap()
    lines.append(f"modeled: communication {o['comm_seconds'] * 1e3:.4f} ms, compute at cube peak "
                 f"{o['compute_seconds'] * 1e3:.4f} ms (sums over devices and steps); hidden by overlap "
                 f"{o['hidden_seconds'] * 1e3:.4f} ms = {100 * o['hidden_fraction']:.1f}% of the communication")
    lines += _check_line(run)
    return "\n".join(lines)


def _link_line(rep) -> list:
    if not rep.link:
        return []
    return [f"link model (modeled): {rep.link['kind']} {rep.link['bandwidth_gbs']:g} GB/s per direction, "
            f"{rep.link['latency_us']:g} us per message"]


def _check_line(run) -> list:
    if run.accuracy is None:
        return []
    a = run.accuracy
    return [f"check (head 0 vs float64 reference, 2x-naive rule): max error {a.max_error:.3e}, "
            f"tolerance {a.tolerance:.3e} (naive {a.naive_error:.3e}), lse error {a.lse_max_error:.3e}: "
            f"{'OK' if a.ok else 'FAILED'}"]


def _format_ulysses(run: ParallelRun) -> str:
    rep, s = run.report, run.sizes
    p = len(rep.devices)
    lines = [f"acl-fa run --parallel ulysses: B={s['batch']} N={s['heads']} Nkv={s['kv_heads']} S={s['seq']} "
             f"D={s['head_dim']} {s['dtype']} {s['layout']} causal={s['causal']} on devices {rep.devices} "
             f"({s['heads'] // p} query heads per device; key/value heads per device {rep.kv_heads})"]
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
    return "\n".join(lines)
