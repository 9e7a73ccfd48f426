"""Ring attention with the K/V exchange inside the kernel (``ring_attention(..., fused=True)``).

One launch of the RingAttention op per ring step (acl_fa.ops.ring_attention; docs/hccl.md,
"Communication fused into the kernel"): the kernel commits the exchange of the K/V chunk it
holds -- to rank r + 1, rank r - 1's arriving in the other of two K/V buffers -- computes the
chunk's attention for the rank's query rows while the kernel-side HCCL server moves the bytes, and
waits for the exchange before it ends. No comm stream, no events, no sub-block calls: the step's
hand-off is the end of its launch. The step's partial (out, LSE) is merged into a float32
accumulator by AttentionLseMerge on the same stream (docs/lse_merge.md), as the stream ring's
default ("float32") accumulation does, and rounded to the input dtype once at the end.

Split: contiguous rows, S / P per rank (every rank holds as many rows: the kernel's receive
buffer is shaped like its own chunk). Causal: the step whose chunk is the rank's own is the
causal diagonal, chunks of earlier ranks are full, later ones lie above the diagonal and the
launch only exchanges. That split leaves causal work unbalanced (rank P - 1 computes a full block
every step, rank 0 one diagonal); the zigzag split of the stream ring needs two chunk pairs per
step, which one FlashAttention call over a BNSD chunk cannot express -- not built.

Atlas A3 only: the kernel's exchange is the kernel-side AlltoAllV (asc-devkit AlltoAllV.md), so
on other chips the call is refused before any device work (fused_ring_unsupported).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Optional

import numpy as np

from ..api import Session
from ..ops import ring_attention as ring_op
from ..ops.lse_merge import enqueue_merge
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError
from . import hccl
from .clique import StepGate, close_on_exit, enter_step

__all__ = ["FusedRankResult", "rank_ring_attention_fused", "check_fused", "fused_step_plan"]


@dataclasses.dataclass
class FusedRankResult:
    """One rank's fused ring: its output rows (input dtype) and LSE (float32 [B, N, rows]), the
    bytes it sent to rank + 1 per step (from the link counters), its attention FLOPs per step, the
    host wall seconds of its ring and the peak device memory it added."""

    out: np.ndarray
    lse: np.ndarray
    bytes_per_step: list
    flops_per_step: list
    wall_seconds: float
    device_bytes: int


def check_fused(session: Session, rows: list, causal: bool) -> None:
    """Refuses, before any device work, a fused ring the op cannot run: a chip without the
    kernel-side AlltoAllV, or ranks holding different row counts (the kernel receives the
    neighbour's chunk into a buffer shaped like its own)."""
    why = ring_op.fused_ring_unsupported(session.soc_name())
    if why:
        raise InvalidArgumentError(why)
    if len(set(rows)) != 1:
        total = sum(rows)
        raise InvalidArgumentError(f"the fused ring needs every rank to hold as many rows (S a multiple of P): "
                                   f"S={total} over {len(rows)} ranks gives {rows}")


def fused_step_plan(rank: int, step: int, ranks: int, causal: bool) -> tuple:
    """(compute, diagonal, exchange) of `rank`'s launch at ring step `step`: the chunk of rank
    (rank - step) mod P, contiguous split."""
    src = (rank - step) % ranks
    compute = not causal or src <= rank
    return compute, causal and src == rank, step < ranks - 1


def rank_ring_attention_fused(session: Session, comm: hccl.Communicator, q: np.ndarray, k: np.ndarray,
                              v: np.ndarray, *, causal: bool, scale: float, gate: Optional[StepGate] = None,
                              per_step_bytes: bool = False,
                              step_hook: Optional[Callable[[int], None]] = None) -> FusedRankResult:
    """This rank's fused ring over `comm`: q, k, v its contiguous rows, BNSD (the caller checked
    the ranks agree and check_fused). per_step_bytes: read the link counter after every step
    (the stream is waited for at each step). step_hook(step): called once the step's RingAttention
    launch has completed, before its merge is enqueued (bench/ring_fused_kernel.py reads the launch's
    modeled time there)."""
    p, r = comm.size, comm.rank
    b, n, rows, d = q.shape
    nkv = k.shape[1]
    dtype = q.dtype
    group = comm.name
    start = time.monotonic()
    used0 = _used(session)
    peak = 0
    flops = []
    sent = [_sent(comm, r, p)]
    runner = ring_op.runner_for(session)
    with contextlib.ExitStack() as held:
        qd = close_on_exit(held, session.to_device(np.ascontiguousarray(q)))
        kv = [(close_on_exit(held, session.to_device(np.ascontiguousarray(k))),
               close_on_exit(held, session.to_device(np.ascontiguousarray(v)))),
              (close_on_exit(held, DeviceArray.empty(session, k.shape, dtype)),
               close_on_exit(held, DeviceArray.empty(session, k.shape, dtype)))]
        # The float32 accumulator starts as zeros with LSE -inf: weight 0 in the first merge.
        acc = (close_on_exit(held, session.to_device(np.zeros(q.shape, np.float32))),
               close_on_exit(held, session.to_device(np.full(q.shape[:3], -np.inf, np.float32))))
        part = (close_on_exit(held, DeviceArray.empty(session, q.shape, dtype)),
                close_on_exit(held, DeviceArray.empty(session, q.shape[:3], np.float32)))
        with session.in_flight(), runner.lock:
            stream = runner.stream
            try:
                for step in range(p):
                    enter_step(gate, r, step)
                    compute, diagonal, exchange = fused_step_plan(r, step, p, causal)
                    flops.append(0)
                    if compute or exchange:
                        forward = ring_op.step_forward_problem(b, n, nkv, rows, d, _dtype_name(dtype), scale,
                                                               diagonal)
                        problem = ring_op.make_step_problem(forward, group, compute=compute, exchange=exchange)
                        cur, nxt = kv[step % 2], kv[(step + 1) % 2]
                        prepared = runner.prepare(problem, runner.bound_inputs((qd, *cur)) | {
                            "out": part[0], "lse": part[1], "k_next": nxt[0], "v_next": nxt[1]})
                        peak = max(peak, _used(session) - used0)
                        runner.launch(prepared, stream)
                        if step_hook is not None:
                            stream.synchronize()
                            step_hook(step)
                        if compute:
                            enqueue_merge(session, stream, *acc, *part, *acc)
                            flops[-1] = 4 * b * n * d * forward.visible_pairs()
                    if per_step_bytes:
                        stream.synchronize()
                        sent.append(_sent(comm, r, p))
                stream.synchronize()
            except BaseException:
                with contextlib.suppress(Exception):
                    stream.synchronize()  # nothing is freed under a running kernel or exchange
                raise
        out = acc[0].numpy().astype(dtype)
        lse = acc[1].numpy()
    if not per_step_bytes:
        sent.append(_sent(comm, r, p))
    steps = [b1 - b0 for b0, b1 in zip(sent, sent[1:])]
    return FusedRankResult(out, lse, steps, flops, time.monotonic() - start, peak)


def _dtype_name(dtype: np.dtype) -> str:
    return "bfloat16" if dtype.name == "bfloat16" else str(dtype)


def _used(session: Session) -> int:
    free, total = session.mem_info()
    return total - free


def _sent(comm: hccl.Communicator, rank: int, size: int) -> int:
    """Bytes this rank sent to rank + 1 so far (the simulated link counter; 0 elsewhere)."""
    if size < 2 or comm.backend.name != "sim":
        return 0
    return int(comm.link_stats(rank, (rank + 1) % size)["bytes"])
