"""Sequence-parallel FlashAttention over HCCL: ring attention, one thread per device.

``ring_attention(q, k, v, devices=[0, 1, ...])`` shards the sequence of host arrays over the
devices, runs the ring on them and returns the full output and LSE (float32 [B, N, S]).

Ring (Liu et al., Ring Attention): rank r keeps its query chunks; the key/value chunks travel
around the ring with HcclBatchSendRecv on a communication stream (send to r+1, receive from
r-1) while the compute stream runs acl-fa's FlashAttention op (with its LSE) on the chunks in
hand; after P steps every query chunk has met every key/value chunk. Causal uses the zigzag
split: the sequence is cut into 2P chunks and rank r holds chunks r and 2P-1-r, so every rank
does the same work per step: at step 0 its own chunks (the two diagonals plus chunk 2P-1-r
against chunk r), at a step with the chunks of rank s < r both query chunks against key chunk s,
and with s > r query chunk 2P-1-r against both key chunks -- the other pairs lie above the
diagonal and are never computed.

Merge: on the device, by the project's AttentionLseMerge op (acl_fa.lse_merge, docs/lse_merge.md):
each query chunk's partial outputs are merged by their LSE as they are computed, in call order,
out = sum_i exp(lse_i - lse) out_i with lse = logsumexp_i lse_i, into a float32 accumulator on
the rank's device; the last merge writes the chunk's result in the input dtype, and only that
result and its LSE are read back. The device memory per rank is its chunks, the two key/value
buffers of the ring, one call's output and per query chunk a copy of its first partial, the
float32 accumulator and the result -- O(S/P).

Ordering, on the device (aclrtStreamWaitEvent): the compute of step t waits for the event
recorded after the receive of step t - 1 (it reads those buffers); the send/receive of step t
waits for the event recorded after the last FlashAttention call of step t - 1 (it overwrites the
buffers that step read). The merges run on the compute stream after the call that produced their
partial. The host never waits for the comm stream inside the ring; it waits for the compute
stream only to read a chunk's merged result. The send/receive of step t overlaps the compute of
step t.
Sq must equal Skv (self-attention over one sequence); any S >= P (causal: >= 2P) splits.
"""
from __future__ import annotations

import dataclasses
import math
import threading
from typing import Optional, Sequence

import numpy as np

from . import attention, hccl
from .api import Session
from .errors import InvalidArgumentError, InvalidTypeError
from .layouts import from_bnsd, to_bnsd
from .loader import device_count, get_backend

__all__ = ["ring_attention", "RingReport", "zigzag_chunks", "ring_plan", "ulysses_attention", "UlyssesReport"]


def _bounds(total: int, parts: int) -> list:
    """(start, stop) of `parts` contiguous pieces of `total`, sizes differing by at most 1."""
    edges = [total * i // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]


def zigzag_chunks(seq: int, ranks: int, causal: bool) -> list:
    """Per rank, the (start, stop) sequence ranges it holds: one chunk of P (non-causal), or
    chunks r and 2P-1-r of 2P (causal)."""
    if not causal:
        return [[b] for b in _bounds(seq, ranks)]
    pieces = _bounds(seq, 2 * ranks)
    return [[pieces[r], pieces[2 * ranks - 1 - r]] for r in range(ranks)]


def ring_plan(rank: int, step: int, ranks: int, causal: bool) -> list:
    """The FlashAttention calls of `rank` at `step`: (query chunk index, key chunk index,
    causal) over its own query chunks and the key/value chunks of rank (rank - step) mod P."""
    source = (rank - step) % ranks
    if not causal:
        return [(0, 0, False)]
    if source == rank:
        return [(0, 0, True), (1, 0, False), (1, 1, True)]
    if source < rank:
        return [(0, 0, False), (1, 0, False)]
    return [(1, 0, False), (1, 1, False)]


def _check_devices(devices, backend) -> list:
    count = device_count(backend)
    if devices is None:
        return list(range(count))
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):
        raise InvalidTypeError(f"devices must be a sequence of device ids, got {devices!r}")
    out = []
    for i, d in enumerate(devices):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise InvalidTypeError(f"devices[{i}] must be an integer, got {d!r}")
        if not 0 <= d < count:
            raise InvalidArgumentError(f"devices[{i}]={d} is out of range: this host has {count} devices")
        if int(d) in out:
            raise InvalidArgumentError(f"devices[{i}]={d} repeats devices[{out.index(int(d))}]: each rank needs a device of its own")
        out.append(int(d))
    if not out:
        raise InvalidArgumentError("devices is empty")
    return out


@dataclasses.dataclass
class RingReport:
    """What one ring_attention run did, per rank. Times: host wall seconds of the simulator (not
    NPU time); modeled seconds: the link model's communication and the compute at the chip's fp16
    cube peak (a lower bound), both labeled modeled."""

    devices: list
    causal: bool
    steps: int
    link_bytes: list            # per rank: bytes sent to the next rank over the whole ring
    link_bytes_per_step: list   # per rank: list over steps
    flops: list                 # per rank: attention FLOPs computed (4 * pairs * D per head)
    modeled_comm_seconds: list  # per rank: per step
    modeled_compute_seconds: list
    wall_seconds: list          # per rank: host wall time of the rank's thread
    link: dict
    d2h_bytes: list = dataclasses.field(default_factory=list)  # per rank: bytes copied device -> host

    @property
    def balance(self) -> float:
        """max / mean of the ranks' FLOPs (1.0 = perfectly balanced)."""
        mean = sum(self.flops) / len(self.flops)
        return max(self.flops) / mean if mean else 1.0

    def overlap(self) -> dict:
        """Modeled per-step time with communication overlapped by compute, vs serialized."""
        steps_overlapped = [max(c, m) for r in range(len(self.devices))
                            for c, m in zip(self.modeled_comm_seconds[r], self.modeled_compute_seconds[r])]
        comm = sum(sum(x) for x in self.modeled_comm_seconds)
        compute = sum(sum(x) for x in self.modeled_compute_seconds)
        hidden = comm + compute - sum(steps_overlapped)
        return {"comm_seconds": comm, "compute_seconds": compute, "hidden_seconds": hidden,
                "hidden_fraction": hidden / comm if comm else 1.0}


class _Rank:
    """One rank's device work: its query chunks, the travelling key/value chunks, the steps."""

    def __init__(self, comm: hccl.Communicator, session: Session, q_chunks, kv_chunks_all, causal, scale, dtype,
                 peak_flops):
        self.comm, self.session = comm, session
        self.r, self.p = comm.rank, comm.size
        self.causal, self.scale, self.dtype = causal, scale, np.dtype(dtype)
        self.kv_all = kv_chunks_all  # per rank: [(k_chunk, v_chunk) host arrays] -- only shapes used off-rank
        self.q_host = q_chunks
        self.peak = peak_flops
        self.error: Optional[BaseException] = None
        self.results = None
        self.bytes_per_step: list = []
        self.flops = 0
        self.compute_model: list = []
        self.comm_model: list = []
        self.wall = 0.0

    def _chunk_sizes(self, source: int) -> list:
        return [k.size for k, _ in self.kv_all[source]]

    def _enqueue_exchange(self, step: int, buffers, comm_stream, computed, received):
        """Step `step`'s send/receive on the comm stream (none at the last step): send the chunks
        in hand (those of rank r - step) to r + 1, receive those of r - step - 1 from r - 1 into
        the other buffer set, once the compute of step - 1 (which read that set) has finished."""
        p, r = self.p, self.r
        if step >= p - 1:
            return
        source, incoming = (r - step) % p, (r - step - 1) % p
        cur, nxt = buffers[step % 2], buffers[(step + 1) % 2]
        if step > 0:
            comm_stream.wait(computed[step - 1])
        items = []
        for j, (kb, vb) in enumerate(cur):
            n = self._chunk_sizes(source)[j]
            items += [("send", kb, n, self.dtype, (r + 1) % p), ("send", vb, n, self.dtype, (r + 1) % p)]
        for j, (kb, vb) in enumerate(nxt):
            n = self._chunk_sizes(incoming)[j]
            items += [("recv", kb, n, self.dtype, (r - 1) % p), ("recv", vb, n, self.dtype, (r - 1) % p)]
        self.comm.send_recv(items, comm_stream)
        received[step].record(comm_stream)
        if self.session.backend.name == "sim":  # the link counter, read in stream order right after the exchange
            self._host_task(comm_stream, lambda: self.sent_after.append(self._sent()))

    def _sent(self) -> int:
        return self.comm.link_stats(self.r, (self.r + 1) % self.p)["bytes"]

    def _host_task(self, stream, fn):
        """Runs fn() on the stream's worker in stream order (simulator: aclfaSimStreamEnqueue)."""
        from ._ffi import ffi

        @ffi.callback("aclfaSimTaskFn")
        def task(user, err, size):
            try:
                fn()
                return 0
            except BaseException as exc:  # reported by the stream's next synchronize
                text = f"{type(exc).__name__}: {exc}".encode()[: size - 1]
                ffi.memmove(err, text + b"\0", len(text) + 1)
                return 500000  # ACL_ERROR_INTERNAL_ERROR
        self.callbacks.append(task)  # alive until the stream was synchronized
        self.session.call("aclfaSimStreamEnqueue", stream.handle, b"ring link counter", task, ffi.NULL, ffi.NULL)

    def run(self):
        import time

        start = time.perf_counter()
        self.d2h_bytes = 0
        before = self.session.copy_counters()["d2h"]["bytes"]
        try:
            self._run()
            self.d2h_bytes = self.session.copy_counters()["d2h"]["bytes"] - before
        except BaseException as exc:  # reported by the caller, which owns the threads
            self.error = exc
            self.failed_at = time.monotonic()  # the first failure is the cause; peers fail after it
        self.wall = time.perf_counter() - start

    def _run(self):
        s, p, r = self.session, self.p, self.r
        q_dev = [s.to_device(x) for x in self.q_host]
        # Two sets of key/value buffers of the largest chunk: the one computed on, the one received into.
        slots = len(self.kv_all[r])
        biggest = max(k.size for chunks in self.kv_all for k, _ in chunks)
        itemsize = self.dtype.itemsize
        buffers = [[(s.alloc(biggest * itemsize), s.alloc(biggest * itemsize)) for _ in range(slots)] for _ in range(2)]
        for (kb, vb), (k, v) in zip(buffers[0], self.kv_all[r]):
            kb.copy_from_host(k)
            vb.copy_from_host(v)
        comm_stream = s.stream()
        runner = attention.runner_for(s)
        from .device_array import DeviceArray

        views: dict = {}  # holds each viewed buffer, so no id is reused while its view is kept

        def view(buf, shape, dtype=self.dtype):
            key = (id(buf), shape, np.dtype(dtype))
            if key not in views:
                views[key] = DeviceArray(s, shape, dtype, _buffer=buf)
            return views[key]

        # Device-side order (aclrtStreamWaitEvent), the host never waits for the comm stream in the loop:
        #   received[t] on comm after step t's send/receive; compute step t+1 waits for it (it reads those buffers);
        #   computed[t] on compute after step t's calls; comm step t+1 waits for it (it receives into the
        #   buffers step t computed on). The host waits for the compute stream only to read a chunk's
        #   merged result.
        received = [s.event(timing=False) for _ in range(p)]
        computed = [s.event(timing=False) for _ in range(p)]
        calls = [sum(qi == c for step in range(p) for qi, _, _ in ring_plan(r, step, p, self.causal))
                 for c in range(len(self.q_host))]
        merges = [_ChunkMerge(s, x.shape, self.dtype, n) for x, n in zip(self.q_host, calls)]
        link = self.comm.link_stats(r, (r + 1) % p) if p > 1 else None
        sent_before = self._sent() if p > 1 else 0
        self.sent_after, self.callbacks = [], []
        with s.in_flight(), runner.lock:
            compute_stream = runner.stream
            self._enqueue_exchange(0, buffers, comm_stream, computed, received)
            for step in range(p):
                source = (r - step) % p
                cur = buffers[step % 2]
                if step > 0:
                    compute_stream.wait(received[step - 1])
                plan = ring_plan(r, step, p, self.causal)
                step_flops = 0
                for i, (qi, ki, causal) in enumerate(plan):
                    kshape = self.kv_all[source][ki][0].shape
                    q = q_dev[qi]
                    k, v = view(cur[ki][0], kshape), view(cur[ki][1], kshape)
                    problem, *_ = attention.make_problem(q, k, v, causal=causal, scale=self.scale, layout="BNSD")
                    prepared = runner.prepare(problem, runner.bound_inputs((q, k, v)))
                    runner.launch(prepared, compute_stream)
                    if i == len(plan) - 1:  # the step's last read of `cur` is queued: free it for the next exchange
                        computed[step].record(compute_stream)
                        self._enqueue_exchange(step + 1, buffers, comm_stream, computed, received)
                    # Merged now, in stream order: a later call may reuse this problem's output buffers,
                    # and its prepare() (which may evict them) first waits for the compute stream.
                    lse_shape = q.shape[:3]
                    merges[qi].add(compute_stream, view(prepared.buffers["out"], q.shape),
                                   view(prepared.buffers["lse"], lse_shape, np.float32))
                    b, n, sq, d = q.shape
                    step_flops += 4 * b * n * d * problem.visible_pairs()
                self.flops += step_flops
                self.compute_model.append(step_flops / self.peak if self.peak else 0.0)
        comm_stream.synchronize()
        self.callbacks.clear()
        # Bytes sent per step, from the link counter read after each exchange (the last step sends nothing).
        marks = [sent_before, *self.sent_after]
        self.bytes_per_step = [b - a for a, b in zip(marks, marks[1:])] + [0]
        bw = link["bandwidth_gbs"] * 1e9 if link else 0.0
        self.comm_model = [link["latency_us"] * 1e-6 * 2 * slots + n / bw if bw and n else 0.0
                           for n in self.bytes_per_step]
        for e in received + computed:
            e.close()
        self.results = [m.result for m in merges]
        comm_stream.close()
        for m in merges:
            m.close()
        for array in views.values():
            array.buffer = None  # the buffer is closed below or by the forward's cache, not through the view
        for pair in buffers:
            for kb, vb in pair:
                kb.close()
                vb.close()
        for x in q_dev:
            x.close()


class _ChunkMerge:
    """The running LSE merge of one query chunk's `total` partial results on its rank's device
    (acl_fa.lse_merge), fed in call order on the compute stream: partial 0 is copied aside (the
    forward reuses its output buffers on its next call of the same problem), partial 1 merges
    with it into a float32 accumulator, later ones into the accumulator in place, and the last
    into the result in the input dtype, which is then read back with its LSE (``result``). A
    chunk with one partial is read back as it is."""

    def __init__(self, session: Session, shape: tuple, dtype, total: int):
        from .device_array import DeviceArray

        self.session, self.total, self.seen, self.result = session, total, 0, None
        self.arrays: list = []

        def pair(out_dtype):
            made = (DeviceArray.empty(session, shape, out_dtype), DeviceArray.empty(session, shape[:-1], np.float32))
            self.arrays.extend(made)
            return made

        self.first = pair(dtype) if total >= 2 else None
        self.acc = pair(np.float32) if total >= 3 else None
        self.final = pair(dtype) if total >= 2 else None

    def add(self, stream, out, lse):
        """Takes the next partial, DeviceArrays `out` [B, N, S, D] and `lse` [B, N, S] that work
        already queued on `stream` writes."""
        from .lse_merge import enqueue_merge

        k, self.seen = self.seen, self.seen + 1
        if self.total == 1:
            stream.synchronize()
            self.result = (out.numpy(), lse.numpy())
        elif k == 0:
            stream.copy(self.first[0].buffer, out.buffer)
            stream.copy(self.first[1].buffer, lse.buffer)
        else:
            last = k == self.total - 1
            enqueue_merge(self.session, stream, *(self.first if k == 1 else self.acc), out, lse,
                          *(self.final if last else self.acc))
            if last:
                stream.synchronize()
                self.result = (self.final[0].numpy(), self.final[1].numpy())

    def close(self):
        for array in self.arrays:
            array.close()


def ring_attention(q, k, v, *, devices=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                   num_kv_heads=None, backend=None, report=False):
    """FlashAttention of host arrays sharded over `devices` (default: every device) by ring
    attention. Returns (out like q, lse float32 [B, N, S]), and a RingReport when `report`."""
    problem, q, k, v = attention.make_problem(q, k, v, causal=causal, scale=scale, layout=layout,
                                              num_heads=num_heads, num_kv_heads=num_kv_heads)
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"ring attention shards one sequence: Sq={problem.seq_q} must equal "
                                   f"Skv={problem.seq_kv}")
    be = hccl.use_hccl(get_backend(backend))
    devices = _check_devices(devices, be)
    p = len(devices)
    need = 2 * p if problem.causal else p
    if problem.seq_q < need:
        raise InvalidArgumentError(f"S={problem.seq_q} cannot be split over {p} devices: "
                                   f"{'the zigzag split needs S >= 2P' if problem.causal else 'needs S >= P'} = {need}")
    layout = problem.layout
    qb, kb, vb = (to_bnsd(q, layout, problem.num_heads), to_bnsd(k, layout, problem.num_kv_heads),
                  to_bnsd(v, layout, problem.num_kv_heads))
    ranges = zigzag_chunks(problem.seq_q, p, problem.causal)
    q_chunks = [[np.ascontiguousarray(qb[:, :, a:b]) for a, b in rr] for rr in ranges]
    kv_chunks = [[(np.ascontiguousarray(kb[:, :, a:b]), np.ascontiguousarray(vb[:, :, a:b])) for a, b in rr]
                 for rr in ranges]
    sessions = [Session(device=d, backend=be.name) for d in devices]
    comms = []
    try:
        comms = hccl.Communicator.init_all(sessions) if p > 1 else [None]
        peak = _peak_flops(be)
        ranks = [_Rank(c, s, q_chunks[i], kv_chunks, problem.causal, problem.scale, problem.dtype, peak)
                 if c is not None else _SingleRank(s, q_chunks[0], kv_chunks, problem, peak)
                 for i, (c, s) in enumerate(zip(comms, sessions))]
        threads = [threading.Thread(target=rk.run, name=f"ring-rank-{i}") for i, rk in enumerate(ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        failed = [rk for rk in ranks if rk.error is not None]
        if failed:
            raise min(failed, key=lambda rk: rk.failed_at).error
        out = np.empty(qb.shape, np.float64)
        lse = np.empty(qb.shape[:3], np.float64)
        for rr, rk in zip(ranges, ranks):
            for (a, b), (o, l) in zip(rr, rk.results):
                out[:, :, a:b] = o
                lse[:, :, a:b] = l
        result = (np.ascontiguousarray(from_bnsd(out.astype(problem.dtype), layout)), lse.astype(np.float32))
        if not report:
            return result
        link = hccl.link_model(devices[0], devices[1 % p], be) if p > 1 else {}
        return (*result, RingReport(devices, problem.causal, p, [sum(rk.bytes_per_step) for rk in ranks],
                                    [rk.bytes_per_step for rk in ranks], [rk.flops for rk in ranks],
                                    [rk.comm_model for rk in ranks], [rk.compute_model for rk in ranks],
                                    [rk.wall for rk in ranks], link, [rk.d2h_bytes for rk in ranks]))
    finally:
        for c in comms:
            if c is not None:
                c.close()
        for s in sessions:
            s.close()


class _SingleRank(_Rank):
    """P = 1: the whole problem on one device (no ring)."""

    def __init__(self, session, q_chunks, kv_chunks, problem, peak):
        self.session, self.q_host, self.kv_all, self.problem, self.peak = session, q_chunks, kv_chunks, problem, peak
        self.error, self.results, self.bytes_per_step, self.flops = None, None, [0], 0
        self.compute_model, self.comm_model, self.wall = [], [0.0], 0.0

    def _run(self):
        q = self.q_host[0]
        k, v = self.kv_all[0][0]
        out, lse = attention.flash_attention(q, k, v, causal=self.problem.causal, scale=self.problem.scale,
                                             return_lse=True, session=self.session)
        self.flops = 4 * q.shape[0] * q.shape[1] * q.shape[3] * self.problem.visible_pairs()
        self.compute_model = [self.flops / self.peak if self.peak else 0.0]
        self.results = [(out, lse)]


def _peak_flops(backend) -> float:
    """The chip's fp16 cube peak in FLOP/s (backend sim: the catalogue's), else 0 (unknown)."""
    if backend.name != "sim":
        return 0.0
    from ._ffi import ffi

    chip = backend.fn("aclfaSimGetChip")()
    return float(chip.cubeFp16Tflops) * 1e12 if chip != ffi.NULL else 0.0


from .ulysses import UlyssesReport, ulysses_attention  # noqa: E402  (ulysses uses the helpers above)
