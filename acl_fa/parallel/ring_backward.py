"""One rank's ring backward (RankContext.ring_attention_backward, parallel.ring_attention_backward).

Rank r keeps its query-side chunks (q, dout, and the forward's global out and LSE, so that the
FlashAttentionGrad op's recomputed probabilities are the whole sequence's); the key/value chunks
travel around the ring as in the forward, and behind them float32 accumulators of their dK and dV
(`acc`). At step t rank r holds the K/V chunks of rank s = (r - t) mod P and runs the op on the
pairs parallel.ring_plan names (zigzag causal: the same pairs as the forward).

Everything is summed on the device with CANN's aclnnInplaceAdd (acl_fa/ops/device_add.py), in float32:
each call's dq into dQ's accumulator of its query chunk, its dk/dv (in the input dtype: the add
promotes float16/bfloat16 with float32 to float32) into the step's partial sums `part` of its K/V
chunk; at the end of the step `part` is added into acc_s. The host reads back only the final
float32 dQ, dK and dV of its own chunks.

Exchange t (t = 0 .. P, on the comm stream, one HcclBatchSendRecv to r + 1 / from r - 1) carries the
K/V of rank r - t for step t + 1 (t < P - 1) and the accumulators of rank r - t + 1 that step t - 1
completed (t >= 1); after exchange P the accumulators of rank r's own chunks are back. Order, on the
device only (aclrtRecordEvent / aclrtStreamWaitEvent):
  exchange t waits computed[t - 1] (it receives into the K/V set and sends the accumulators step
  t - 1 used); step t's calls wait received[t - 1] (its K/V); step t's add into acc waits
  received[t] (acc_s arrives with exchange t).
So exchange t -- the accumulators of step t - 1 and the K/V of step t + 1 -- runs while step t's
FlashAttentionGrad calls compute. The host waits for the compute stream where the op-call path
does (a prepare() first settles the runner's stream, so a cached call's outputs are never
evicted under a queued add) and for the comm stream once, at the end.
"""
from __future__ import annotations

import contextlib
import time
from typing import Optional

import numpy as np

from ..ops import backward
from ..spec.problem import make_problem
from ..ops.device_add import DeviceAdds
from ..runtime.device_array import DeviceArray
from .clique import StepGate, close_on_exit, enter_step, settle_stream, host_task, ring_plan

__all__ = ["run_rank_backward"]

FLOAT32 = np.dtype(np.float32)


def run_rank_backward(comm, session, chunks: dict, rows: list, causal: bool, scale: float, dtype,
                      gate: Optional[StepGate] = None) -> dict:
    """chunks: this rank's BNSD host arrays per zigzag chunk -- q, dout, out ([B, N, n, D]), lse
    (float32 [B, N, n]), k, v ([B, Nkv, n, D]); rows[s]: the row counts of rank s's chunks.
    Returns {"dq", "dk", "dv": per chunk float32 arrays, "bytes_per_step" (bytes sent to r + 1 by
    exchange t = 0 .. P; simulator only), "sends_per_step" (messages to r + 1 by exchange t),
    "flops_per_step" (the op's FLOPs of step t = 0 .. P - 1, then 0 for exchange P), "flops",
    "d2h_bytes", "wall"}. gate: the StepGate of a ring on threads of one process (Ctrl-C), asked
    before every exchange (exchange t pairs with the neighbours' exchange t)."""
    with contextlib.ExitStack() as held:
        return _Ring(comm, session, chunks, rows, causal, scale, np.dtype(dtype), gate).run(held)


class _Ring:
    def __init__(self, comm, session, chunks, rows, causal, scale, dtype, gate=None):
        self.comm, self.s, self.chunks, self.rows = comm, session, chunks, rows
        self.gate = gate
        self.causal, self.scale, self.dtype = causal, scale, dtype
        self.r, self.p = comm.rank, comm.size
        b, nkv, _, d = chunks["k"][0].shape
        self.kv_head_shape = (b, nkv, d)
        self.row_elems = b * nkv * d  # elements of one K (or V) row over batch and kv heads
        self.sim = session.backend.name == "sim"

    def _kv_shape(self, source: int, j: int) -> tuple:
        b, nkv, d = self.kv_head_shape
        return (b, nkv, self.rows[source][j], d)

    def run(self, held: contextlib.ExitStack) -> dict:
        start = time.perf_counter()
        s, p = self.s, self.p
        d2h_before = s.copy_counters()["d2h"]["bytes"]
        self._allocate(held)
        self._track_views(held)
        self._open_streams(held)
        self.flops = [0] * (p + 1)  # per step; exchange P runs after the last step, with no calls beside it
        with s.in_flight(), self.runner.lock:
            self.compute = self.runner.stream
            for x in self.dq:
                self._zero(self.compute, x.buffer, x.buffer.nbytes)
            for step in range(p):
                enter_step(self.gate, self.r, step)
                self._exchange(step, self.kv, self.acc, self.comm_stream, self.computed, self.received, host_task)
                self._step(step)
            enter_step(self.gate, self.r, p)
            self._exchange(p, self.kv, self.acc, self.comm_stream, self.computed, self.received, host_task)
        self.comm_stream.synchronize()
        self.compute.synchronize()
        return {**self._gradients(), **self._counters(),
                "d2h_bytes": s.copy_counters()["d2h"]["bytes"] - d2h_before, "wall": time.perf_counter() - start}

    def _allocate(self, held: contextlib.ExitStack):
        """The rank's q, dout, out, lse on the device; per slot (one per chunk it holds) two K/V
        buffer pairs (computed on / received into), two float32 accumulator pairs (added into and
        sent / received into) and the step's dK/dV sums; dq in float32. Uploads its K/V."""
        s, c = self.s, self.chunks
        self.slots = len(c["k"])
        self.on_device = {name: [close_on_exit(held, s.to_device(x)) for x in c[name]]
                          for name in ("q", "dout", "out", "lse")}
        biggest = max(n for rr in self.rows for n in rr) * self.row_elems

        def buffers(itemsize):  # per slot: (K or dK, V or dV) of the largest chunk
            return [tuple(close_on_exit(held, s.alloc(biggest * itemsize)) for _ in range(2))
                    for _ in range(self.slots)]

        self.kv = [buffers(self.dtype.itemsize) for _ in range(2)]  # computed on / received into
        self.acc = [buffers(4) for _ in range(2)]                     # added into and sent / received into
        self.part = buffers(4)                                        # the step's dK/dV sums
        self.dq = [close_on_exit(held, DeviceArray.empty(s, x.shape, FLOAT32)) for x in c["q"]]
        for (kb, vb), k, v in zip(self.kv[0], c["k"], c["v"]):
            kb.copy_from_host(k)
            vb.copy_from_host(v)

    def _track_views(self, held: contextlib.ExitStack):
        views: dict = {}  # holds each viewed buffer, so no id is reused while its view is kept

        def view(buf, shape, dtype):
            key = (id(buf), shape, np.dtype(dtype))
            if key not in views:
                views[key] = DeviceArray(self.s, shape, dtype, _buffer=buf)
            return views[key]

        @held.callback
        def _drop_views():
            for array in views.values():
                array.buffer = None  # closed on its own or by the backward's cache, not through the view

        self.view = view

    def _open_streams(self, held: contextlib.ExitStack):
        s, p = self.s, self.p
        self.received = [close_on_exit(held, s.event(timing=False)) for _ in range(p + 1)]
        self.computed = [close_on_exit(held, s.event(timing=False)) for _ in range(p)]
        self.callbacks, self.sent_after, self.sends = [], [], []
        held.callback(self.callbacks.clear)  # after the streams settled (the stack unwinds last-in first)
        self.adds = DeviceAdds(s)
        held.callback(self.adds.close)
        self.runner = backward.runner_for(s)
        held.callback(settle_stream, self.runner.stream)
        self.comm_stream = close_on_exit(held, s.stream(), settle=True)
        self.sent_before = self._sent()

    def _zero(self, stream, buf, nbytes):
        self.s.call("aclrtMemsetAsync", buf.ptr, buf.nbytes, 0, nbytes, stream.handle)

    def _step(self, step: int):
        """Step `step` on the compute stream: the backward calls of ring_plan on the K/V of rank
        r - step, their dQ added into dq and their dK/dV into the step's sums, then the sums added
        into that rank's accumulators (received by exchange `step`, zero at step 0)."""
        p, r, compute = self.p, self.r, self.compute
        source = (r - step) % p
        shapes = [self._kv_shape(source, j) for j in range(self.slots)]
        sizes = [int(np.prod(sh)) * 4 for sh in shapes]
        if step > 0:
            compute.wait(self.received[step - 1])  # this step's K/V
        for (pk, pv), n in zip(self.part, sizes):
            self._zero(compute, pk, n)
            self._zero(compute, pv, n)
        for qi, ki, causal in ring_plan(r, step, p, self.causal):
            self.flops[step] += self._call(self.kv[step % 2][ki], qi, ki, causal, shapes[ki])
        here = self.acc[step % 2]  # rank `source`'s sums so far: from exchange `step`, none at step 0
        if step == 0:
            for (ak, av), n in zip(here, sizes):
                self._zero(compute, ak, n)
                self._zero(compute, av, n)
        else:
            compute.wait(self.received[step])
        for j in range(self.slots):
            for half in (0, 1):
                self.adds.enqueue(compute, self.view(here[j][half], shapes[j], FLOAT32),
                                  self.view(self.part[j][half], shapes[j], FLOAT32))
        self.computed[step].record(compute)

    def _call(self, kv_slot, qi: int, ki: int, causal: bool, kv_shape: tuple) -> int:
        """One backward call of query chunk qi on K/V slot `kv_slot`; returns its FLOPs."""
        k = self.view(kv_slot[0], kv_shape, self.dtype)
        v = self.view(kv_slot[1], kv_shape, self.dtype)
        q, dout, out, lse = (self.on_device[n][qi] for n in ("q", "dout", "out", "lse"))
        forward, *_ = make_problem(q, k, v, causal=causal, scale=self.scale, layout="BNSD")
        problem = backward.BackwardProblem(forward, True)
        prepared = self.runner.prepare(problem, self.runner.bound_inputs((dout, q, k, v, out, lse)))
        self.runner.launch(prepared, self.compute)
        outs = prepared.buffers
        self.adds.enqueue(self.compute, self.dq[qi], self.view(outs["dq"], q.shape, self.dtype))
        for half, name in ((0, "dk"), (1, "dv")):
            self.adds.enqueue(self.compute, self.view(self.part[ki][half], kv_shape, FLOAT32),
                              self.view(outs[name], kv_shape, self.dtype))
        return problem.flops()

    def _gradients(self) -> dict:
        home = self.acc[self.p % 2]  # this rank's own chunks' accumulators, back after exchange P
        own = [self._kv_shape(self.r, j) for j in range(self.slots)]
        return {"dq": [x.numpy() for x in self.dq],
                "dk": [home[j][0].copy_to_host(np.empty(own[j], FLOAT32)) for j in range(self.slots)],
                "dv": [home[j][1].copy_to_host(np.empty(own[j], FLOAT32)) for j in range(self.slots)]}

    def _counters(self) -> dict:
        marks = [self.sent_before, *self.sent_after]
        return {"bytes_per_step": [b - a for a, b in zip(marks, marks[1:])], "sends_per_step": self.sends,
                "flops_per_step": self.flops, "flops": sum(self.flops)}

    def _sent(self) -> int:
        return self.comm.link_stats(self.r, (self.r + 1) % self.p)["bytes"] if self.sim else 0

    def _exchange(self, t, kv, acc, stream, computed, received, host_task):
        """Exchange t (module docstring): to r + 1 the K/V of rank r - t (t < P - 1) and the
        accumulators of rank r - t + 1 (t >= 1); from r - 1 those of ranks r - t - 1 and r - t."""
        p, r = self.p, self.r
        if t > 0:
            stream.wait(computed[t - 1])
        items = []
        moves = []  # (buffer sets, owner rank, dtype, kind, peer)
        if t < p - 1:
            moves += [(kv[t % 2], r - t, self.dtype, "send", r + 1), (kv[(t + 1) % 2], r - t - 1, self.dtype, "recv",
                                                                      r - 1)]
        if t > 0:
            moves += [(acc[(t - 1) % 2], r - t + 1, FLOAT32, "send", r + 1), (acc[t % 2], r - t, FLOAT32, "recv",
                                                                              r - 1)]
        for sets, owner, dtype, kind, peer in moves:
            for j, pair in enumerate(sets):
                n = self.rows[owner % p][j] * self.row_elems
                items += [(kind, buf, n, dtype, peer % p) for buf in pair]
        self.sends.append(sum(1 for item in items if item[0] == "send"))
        self.comm.send_recv(items, stream)
        received[t].record(stream)
        if self.sim:  # the link counter, read in stream order right after the exchange
            host_task(self.s, stream, lambda: self.sent_after.append(self._sent()), self.callbacks)
