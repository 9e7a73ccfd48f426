"""One rank's ring backward (RankContext.ring_attention_backward, parallel.ring_attention_backward).

Rank r keeps its query-side chunks (q, dout, and the forward's global out and LSE, so that the
FlashAttentionGrad op's recomputed probabilities are the whole sequence's); the key/value chunks
travel around the ring as in the forward, and with them float32 accumulators of their dK and dV
(`acc`). At step t rank r holds the chunks of rank s = (r - t) mod P and runs the op on the pairs
parallel.ring_plan names (zigzag causal: the same pairs as the forward); dQ's partials add up on
rank r, dK/dV's into acc_s. Each step ends with one HcclBatchSendRecv to r + 1 / from r - 1 of K, V
(not after the last step) and acc; after P steps acc_s is back on rank s, which returns it.

Accumulation: **host-side** (a first step; the forward merges on the device): each call's dq/dk/dv are read
back, acc is read after its receive, added to in float64 and written back before it is sent. The
host therefore waits for every exchange before the next step's compute: the backward's ring does
not overlap communication with compute yet.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np

from . import attention, backward

__all__ = ["run_rank_backward"]


def run_rank_backward(comm, session, chunks: dict, rows: list, causal: bool, scale: float, dtype) -> dict:
    """chunks: this rank's BNSD host arrays per zigzag chunk -- q, dout, out ([B, N, n, D]), lse
    (float32 [B, N, n]), k, v ([B, Nkv, n, D]); rows[s]: the row counts of rank s's chunks.
    Returns {"dq", "dk", "dv": per chunk float64 arrays, "bytes_per_step", "flops", "wall"}."""
    with contextlib.ExitStack() as held:
        return _Ring(comm, session, chunks, rows, causal, scale, np.dtype(dtype)).run(held)


class _Ring:
    def __init__(self, comm, session, chunks, rows, causal, scale, dtype):
        self.comm, self.s, self.chunks, self.rows = comm, session, chunks, rows
        self.causal, self.scale, self.dtype = causal, scale, dtype
        self.r, self.p = comm.rank, comm.size
        b, nkv, _, d = chunks["k"][0].shape
        self.kv_head_shape = (b, nkv, d)

    def _kv_shape(self, source: int, j: int) -> tuple:
        b, nkv, d = self.kv_head_shape
        return (b, nkv, self.rows[source][j], d)

    def run(self, held: contextlib.ExitStack) -> dict:
        from .device_array import DeviceArray
        from .parallel import _held, _settle, ring_plan

        start = time.perf_counter()
        s, p, r, c = self.s, self.p, self.r, self.chunks
        slots = len(c["k"])
        on_device = {name: [_held(held, s.to_device(x)) for x in c[name]] for name in ("q", "dout", "out", "lse")}
        b, nkv, d = self.kv_head_shape
        row_elems = b * nkv * d
        biggest = max(n for rr in self.rows for n in rr) * row_elems
        # Two sets (computed on / received into) of, per slot: K, V (dtype) and acc dK, dV (float32).
        sets = [[tuple(_held(held, s.alloc(biggest * size)) for size in (self.dtype.itemsize,) * 2 + (4, 4))
                 for _ in range(slots)] for _ in range(2)]
        for j, (kb, vb, dkb, dvb) in enumerate(sets[0]):
            kb.copy_from_host(c["k"][j])
            vb.copy_from_host(c["v"][j])
        views: dict = {}

        def view(buf, shape, dtype):
            key = (id(buf), shape)
            if key not in views:
                views[key] = DeviceArray(s, shape, dtype, _buffer=buf)
            return views[key]

        @held.callback
        def _drop_views():
            for array in views.values():
                array.buffer = None  # closed on its own, not through the view

        runner = backward.runner_for(s)
        held.callback(_settle, runner.stream)
        comm_stream = _held(held, s.stream(), settle=True)
        dq = [np.zeros(x.shape, np.float64) for x in c["q"]]
        sent = []
        flops = 0
        for step in range(p):
            source = (r - step) % p
            cur, nxt = sets[step % 2], sets[(step + 1) % 2]
            shapes = [self._kv_shape(source, j) for j in range(slots)]
            acc = [(np.zeros(sh, np.float64), np.zeros(sh, np.float64)) for sh in shapes]
            if step > 0:  # what arrived: the accumulators of rank `source`'s chunks so far
                for j, (_, _, dkb, dvb) in enumerate(cur):
                    acc[j][0][...] = dkb.copy_to_host(np.empty(shapes[j], np.float32))
                    acc[j][1][...] = dvb.copy_to_host(np.empty(shapes[j], np.float32))
            with s.in_flight(), runner.lock:
                for qi, ki, causal in ring_plan(r, step, p, self.causal):
                    k = view(cur[ki][0], shapes[ki], self.dtype)
                    v = view(cur[ki][1], shapes[ki], self.dtype)
                    q, dout, out, lse = (on_device[n][qi] for n in ("q", "dout", "out", "lse"))
                    forward, *_ = attention.make_problem(q, k, v, causal=causal, scale=self.scale, layout="BNSD")
                    problem = backward.GradProblem(forward, True)
                    prepared = runner.prepare(problem, runner.bound_inputs((dout, q, k, v, out, lse)))
                    runner.launch(prepared, runner.stream)
                    runner.stream.synchronize()
                    dq[qi] += prepared.read("dq")
                    acc[ki][0][...] += prepared.read("dk")
                    acc[ki][1][...] += prepared.read("dv")
                    flops += problem.flops()
            for j, (_, _, dkb, dvb) in enumerate(cur):
                dkb.copy_from_host(acc[j][0].astype(np.float32))
                dvb.copy_from_host(acc[j][1].astype(np.float32))
            before = self._sent()
            self._exchange(step, source, cur, nxt, comm_stream, row_elems)
            comm_stream.synchronize()
            sent.append(self._sent() - before)
        # After P exchanges the accumulators of this rank's own chunks are back (in the set of step P).
        home = sets[p % 2]
        own = [self._kv_shape(r, j) for j in range(slots)]
        dk = [home[j][2].copy_to_host(np.empty(own[j], np.float32)).astype(np.float64) for j in range(slots)]
        dv = [home[j][3].copy_to_host(np.empty(own[j], np.float32)).astype(np.float64) for j in range(slots)]
        return {"dq": dq, "dk": dk, "dv": dv, "bytes_per_step": sent, "flops": flops,
                "wall": time.perf_counter() - start}

    def _sent(self) -> int:
        if self.s.backend.name != "sim":
            return 0
        return self.comm.link_stats(self.r, (self.r + 1) % self.p)["bytes"]

    def _exchange(self, step, source, cur, nxt, stream, row_elems):
        """Sends what this rank holds (rank `source`'s K, V -- not after the last step -- and acc)
        to r + 1; receives rank source - 1's into the other set from r - 1."""
        p, r = self.p, self.r
        incoming = (source - 1) % p
        items = []
        for kind, peer, chunks, owner in (("send", (r + 1) % p, cur, source), ("recv", (r - 1) % p, nxt, incoming)):
            for j, (kb, vb, dkb, dvb) in enumerate(chunks):
                n = self.rows[owner][j] * row_elems
                if step < p - 1:
                    items += [(kind, kb, n, self.dtype, peer), (kind, vb, n, self.dtype, peer)]
                items += [(kind, dkb, n, np.float32, peer), (kind, dvb, n, np.float32, peer)]
        self.comm.send_recv(items, stream)
