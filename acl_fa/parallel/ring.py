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

Sub-blocks: the ring computes and exchanges in units of at most BLOCK_ROWS rows (sub_blocks):
each query chunk is cut into sub-chunks, each key/value chunk into sub-blocks with the same
bounds, one FlashAttention call per (query sub-chunk, key sub-block) pair the plan leaves
(ring_calls), and one HcclBatchSendRecv per key/value sub-block. A rank holds one slot per
sub-block of the K/V set in hand plus one spare that receives; the slot just sent becomes the
spare. Its device memory is its Q, K, V, O rows (plus the LSE; with accumulate="int16" the row
bounds, one float32 per row and head; with "float32" the accumulator's extra O/P) and a constant --
one workspace shared by every call, the spare sub-block, one partial of BLOCK_ROWS rows (MemoryBound).

Merge: on the device, by the project's AttentionLseMerge op (acl_fa.ops.lse_merge, docs/lse_merge.md):
each call's partial is merged by its LSE into its query sub-chunk's accumulator right after the
call, out = sum_i exp(lse_i - lse) out_i with lse = logsumexp_i lse_i: into a float32 accumulator
whose last merge writes the result in the input dtype into a BLOCK_ROWS buffer that is read back at
once ("float32", the default: every element keeps float32's relative precision); in the output's
own 2 bytes an element as int16 in units of a per-row bound, the last merge writing the result in
the input dtype over it ("int16", AttentionLseMergeInt16, Atlas A2/A3: O/P less device memory, but
an element far below its row's largest keeps only an absolute precision of that bound / 65534 per
merge -- docs/lse_merge.md); or the output itself in the input dtype ("output").

Ordering, on the device (aclrtStreamWaitEvent), per step t and key/value sub-block u: the calls on
u at step t wait for the event recorded after u's receive at step t - 1; u's send/receive at step
t waits for the event recorded after the calls on u at step t (the send reads that slot; the
receive writes the spare). The merges run on the compute stream after the call that produced their
partial. The host never waits for the comm stream inside the ring; it waits for the compute
stream before each call's prepare (the op runner's rule) and to read a result. The exchange of
sub-block u overlaps the compute on sub-block u + 1.
Sq must equal Skv (self-attention over one sequence); any S >= P (causal: >= 2P) splits.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import types
from typing import Optional, Sequence

import numpy as np

from ..api import Session
from ..ops import forward as attention
from ..ops.backward import flash_attention_backward, make_backward_problem
from ..ops.lse_merge import (
    ATTENTION_LSE_MERGE, ATTENTION_LSE_MERGE_INT16, enqueue_merge, enqueue_merge_int16, int16_unsupported)
from ..ops.lse_merge import runner_for as merge_runner_for
from ..spec.problem import make_problem, problem_from_sizes
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..runtime.loader import get_backend
from ..spec.layouts import from_bnsd, to_bnsd
from . import hccl
from .clique import (
    ENV_DEVICE, ENV_RANK, ENV_ROOT, ENV_SIZE, StepGate, check_devices, chip_peak_flops, close_on_exit, device_clique,
    enter_step, host_task, ring_plan, run_rank_threads, settle_stream, split_bounds, zigzag_chunks)
from . import launchers, tcp_store
from .rank_agree import agree
from .rank_table import check_against, read_rank_table
from .ring_backward import run_rank_backward
from .ring_fused import check_fused, rank_ring_attention_fused
from ..ops.ring_attention import fused_ring_unsupported
from ..runtime.session import MALLOC_SLACK
from .ulysses import rank_ulysses_attention
from .ulysses_backward import rank_ulysses_attention_backward

__all__ = ["ring_attention", "ring_attention_backward", "RingReport", "MemoryBound", "sub_blocks", "ring_units",
           "ring_calls", "BLOCK_ROWS", "RankContext", "RankReport", "ring_report", "zigzag_chunks", "ring_plan"]


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
    device_bytes: list = dataclasses.field(default_factory=list)  # per rank: peak device memory the ring held
    ring_buffer_bytes: list = dataclasses.field(default_factory=list)  # per rank: of which the ring's own buffers
    memory_bounds: list = dataclasses.field(default_factory=list)  # per rank: its MemoryBound
    int16_unsupported: str = ""  # why the chip has no AttentionLseMergeInt16 ("" on Atlas A2/A3)

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


@dataclasses.dataclass
class RankReport:
    """One rank's part of a RingReport (RankContext.ring_attention(report=True))."""

    rank: int
    device: int
    link_bytes_per_step: list
    flops: int
    modeled_comm_seconds: list
    modeled_compute_seconds: list
    wall_seconds: float
    device_bytes: int
    link: dict
    ring_buffer_bytes: int = 0
    d2h_bytes: int = 0
    memory_bound: Optional["MemoryBound"] = None
    int16_unsupported: str = ""  # lse_merge.int16_unsupported of the rank's chip


def ring_report(ranks: Sequence[RankReport], causal: bool) -> RingReport:
    """The RingReport of every rank's RankReport (rank order)."""
    return RingReport([rk.device for rk in ranks], causal, len(ranks), [sum(rk.link_bytes_per_step) for rk in ranks],
                      [rk.link_bytes_per_step for rk in ranks], [rk.flops for rk in ranks],
                      [rk.modeled_comm_seconds for rk in ranks], [rk.modeled_compute_seconds for rk in ranks],
                      [rk.wall_seconds for rk in ranks], ranks[0].link, [rk.d2h_bytes for rk in ranks],
                      [rk.device_bytes for rk in ranks], [rk.ring_buffer_bytes for rk in ranks],
                      [rk.memory_bound for rk in ranks], ranks[0].int16_unsupported)


@dataclasses.dataclass(frozen=True)
class MemoryBound:
    """What a rank's ring may hold on its device (bytes), against which its measured peak is checked.

    shards: its rows of Q, K, V and of the output O with its LSE (the op's two outputs), in the
    input dtype -- the part that falls as 1/P. row_bounds: the int16 running result's bounds, one
    float32 per row and head like the LSE (accumulate="int16"), also 1/P. accumulator: what a
    float32 accumulator of the rank's output holds beyond O in the input dtype
    (accumulate="float32"; 0 otherwise), also 1/P. constant: one workspace serving every call (the largest a call of at most
    BLOCK_ROWS query and key rows asks for), the spare K/V sub-block of BLOCK_ROWS rows the
    exchange receives into, and BLOCK_ROWS query rows of one call's partial output and LSE (and
    with "float32" of the result read back and of the zero / -inf pair that starts an
    accumulator) -- independent of S. rounding: the sub-block slots are sized for the largest
    sub-block of any rank (at most 2 rows more than the rank's own, per sub-block) and each device
    buffer takes at most runtime.MALLOC_SLACK bytes more than it holds (its 512-B alignment room and
    aclrtMalloc's rounding): 2 / BLOCK_ROWS of K, V / P and half a KiB per allocation."""

    shards: int
    constant: int
    rounding: int
    accumulator: int = 0
    row_bounds: int = 0

    @property
    def bound(self) -> int:
        return self.shards + self.row_bounds + self.accumulator + self.constant + self.rounding

    @property
    def shards_bound(self) -> int:
        """(Q + K + V + O + LSE (+ row bounds)) / P + constant + rounding: the bound without a
        float32 accumulator's extra."""
        return self.shards + self.row_bounds + self.constant + self.rounding


ACCUMULATE = ("int16", "float32", "output")
# float32 by default: int16 fixed point in units of a per-row bound loses the channels that are
# small next to the row's largest (outlier channels; docs/lse_merge.md, "Outlier channels").
DEFAULT_ACCUMULATE = "float32"


class _Rank:
    """One rank's ring: its query chunks, its key/value chunks (which travel), the steps.

    q_chunks / kv_chunks: this rank's BNSD host arrays, one per zigzag chunk it holds; `rows[s]`:
    the row counts of rank s's chunks (zigzag_chunks), which size what arrives from rank s."""

    def __init__(self, comm: hccl.Communicator, session: Session, q_chunks, kv_chunks, rows, causal, scale, dtype,
                 peak_flops, accumulate: str = DEFAULT_ACCUMULATE, gate: Optional[StepGate] = None):
        self.comm, self.session = comm, session
        self.gate = gate  # Ctrl-C of a ring on threads of one process (StepGate): asked before every step
        self.r, self.p = comm.rank, comm.size
        self.causal, self.scale, self.dtype = causal, scale, np.dtype(dtype)
        self.q_host, self.kv_host, self.rows = q_chunks, kv_chunks, rows
        b, nkv, _, d = kv_chunks[0][0].shape
        self.kv_row_elems = b * nkv * d  # elements of one K (or V) row over batch and kv heads
        self.peak = peak_flops
        self.error: Optional[BaseException] = None
        self.results = None
        self.bytes_per_step: list = []
        self.flops = 0
        self.compute_model: list = []
        self.comm_model: list = []
        self.wall = 0.0
        self.device_bytes = 0
        self.ring_buffer_bytes = 0
        self.memory: Optional[MemoryBound] = None
        self.accumulate = accumulate

    def _used(self) -> int:
        free, total = self.session.mem_info()
        return total - free

    def _sent(self) -> int:
        return self.comm.link_stats(self.r, (self.r + 1) % self.p)["bytes"]

    def _host_task(self, stream, fn):
        host_task(self.session, stream, fn, self.callbacks)

    def run(self):
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
        with contextlib.ExitStack() as held:  # every device object closed on success and on failure
            self._ring(held)

    def _ring(self, held: contextlib.ExitStack):
        st = self._ring_layout()
        self._upload_shards(held, st)
        self._prepare_calls(held, st)
        self._track_views(held, st)
        self._open_streams(held, st)
        with self.session.in_flight(), st.runner.lock:
            st.compute_stream = st.runner.stream
            for step in range(self.p):
                enter_step(self.gate, self.r, step)
                self._ring_step(st, step)
        st.comm_stream.synchronize()
        st.compute_stream.synchronize()
        self._collect(st)

    def _ring_layout(self) -> types.SimpleNamespace:
        """The state of one ring run: the rank's sub-blocks and sizes, its accumulation mode, and
        the HBM in use before the ring allocates anything."""
        st = types.SimpleNamespace()
        st.pieces = sub_blocks(self.rows, BLOCK_ROWS)
        st.units = ring_units(st.pieces, self.r)
        st.b, st.n, _, st.d = self.q_host[0].shape
        st.nkv = self.kv_host[0][0].shape[1]
        st.dtype, st.itemsize = self.dtype, self.dtype.itemsize
        # Peak device memory of the ring: HBM in use (aclrtGetMemInfo) above what it was at the start,
        # sampled after every allocation point (the uploads and buffers, each call's prepare).
        st.base = self._used()
        st.exact = self.accumulate == "float32"
        st.fixed = self.accumulate == "int16"
        return st

    def _upload_shards(self, held: contextlib.ExitStack, st):
        """Q/P: the rank's query rows as sub-chunks. O/P (+ its LSE): per query sub-chunk its accumulator,
        into which each call's partial is merged -- the output's memory as int16 units of per-row bounds
        (+ the bounds; the last merge writes the result in the input dtype over it), float32 (the result
        rounded to the input dtype once, read back through `final`), or the output itself in the input
        dtype ("output": one rounding per merged partial). Then the K/V slots and the per-call buffers."""
        s = self.session
        acc_dtype = np.dtype(np.float32) if st.exact else st.dtype
        st.q_dev = [[close_on_exit(held, s.to_device(np.ascontiguousarray(x[:, :, a0:a1])))
                     for a0, a1 in st.pieces[self.r][j]] for j, x in enumerate(self.q_host)]

        # int16: an empty running result is bound 0 with LSE -inf (the op's first merge takes the partial).
        def row_values(shape, fill):
            if st.fixed:
                return s.to_device(np.full(shape, fill, np.float32))
            return DeviceArray.empty(s, shape, np.float32)

        st.out_dev = [[(close_on_exit(held, DeviceArray.empty(s, q.shape, acc_dtype)),
                        close_on_exit(held, row_values(q.shape[:3], -np.inf))) for q in row] for row in st.q_dev]
        st.bounds = ([[close_on_exit(held, row_values(q.shape[:3], 0.0)) for q in row] for row in st.q_dev]
                     if st.fixed else [])
        self._upload_kv_slots(held, st)
        # Constant: one call's partial output and LSE (a query sub-chunk) and one workspace for every call.
        q_rows = max(a1 - a0 for chunk in st.pieces[self.r] for a0, a1 in chunk)

        def sub_chunk_pair():  # a buffer for q_rows rows of an output in the input dtype and one for their LSE
            return (close_on_exit(held, s.alloc(q_rows * st.b * st.n * st.d * st.itemsize)),
                    close_on_exit(held, s.alloc(q_rows * st.b * st.n * 4)))

        st.partial = sub_chunk_pair()
        st.final = st.start = None
        if st.exact:  # the result of a sub-chunk's last merge; zeros with LSE -inf: merged with a first partial
            st.final, st.start = sub_chunk_pair(), sub_chunk_pair()
            st.start[0].copy_from_host(np.zeros(q_rows * st.b * st.n * st.d, st.dtype))
            st.start[1].copy_from_host(np.full(q_rows * st.b * st.n, -np.inf, np.float32))

    def _upload_kv_slots(self, held: contextlib.ExitStack, st):
        """(K + V)/P plus one sub-block: a slot per sub-block of the rank's K/V set and a spare one that
        receives; a slot whose sub-block was sent becomes the spare (slot_rows <= BLOCK_ROWS)."""
        s = self.session
        slot_rows = max(a1 - a0 for per_rank in st.pieces for chunk in per_rank for a0, a1 in chunk)
        slot_bytes = slot_rows * self.kv_row_elems * st.itemsize
        st.slots = [(close_on_exit(held, s.alloc(slot_bytes)), close_on_exit(held, s.alloc(slot_bytes)))
                    for _ in range(len(st.units) + 1)]
        st.hold = list(range(len(st.units)))  # unit -> slot holding it; slot len(units) is the spare
        st.spare = len(st.units)
        for u, (j, i) in enumerate(st.units):
            a0, a1 = st.pieces[self.r][j][i]
            k, v = self.kv_host[j]
            st.slots[u][0].copy_from_host(np.ascontiguousarray(k[:, :, a0:a1]))
            st.slots[u][1].copy_from_host(np.ascontiguousarray(v[:, :, a0:a1]))

    def _prepare_calls(self, held: contextlib.ExitStack, st):
        """The number of partials each query sub-chunk gets over the ring, the one workspace every call
        uses, and the memory bound the rank's peak is checked against."""
        r, p = self.r, self.p
        st.calls = {}  # (query chunk, sub-chunk) -> the number of partials it gets over the ring
        for t in range(p):
            for unit in st.units:
                for qi, a, _ in ring_calls(r, t, p, self.causal, unit, st.pieces):
                    st.calls[qi, a] = st.calls.get((qi, a), 0) + 1
        st.runner = attention.runner_for(self.session)
        length = lambda rank, chunk, sub: st.pieces[rank][chunk][sub][1] - st.pieces[rank][chunk][sub][0]  # noqa: E731
        shapes = {(length(r, qi, a), length((r - t) % p, j, i), diag) for t in range(p) for u, (j, i) in enumerate(st.units)
                  for qi, a, diag in ring_calls(r, t, p, self.causal, st.units[u], st.pieces)}
        ws_bytes = max(st.runner.workspace_bytes(problem_from_sizes(
            seq_q=sq, seq_kv=skv, batch=st.b, num_heads=st.n, num_kv_heads=st.nkv, head_dim=st.d, dtype=st.dtype.name,
            causal=diag, scale=self.scale)) for sq, skv, diag in shapes)
        st.workspace = close_on_exit(held, DeviceArray.empty(self.session, (ws_bytes,), np.uint8)) if ws_bytes else None
        self.ring_buffer_bytes = self._used() - st.base
        self.memory = self._memory_bound(st, ws_bytes)

    def _memory_bound(self, st, ws_bytes: int) -> MemoryBound:
        kv_row = self.kv_row_elems * st.itemsize  # bytes of one row of K (or V) over batch and kv heads
        q_row = st.b * st.n * st.d * st.itemsize  # one row of Q (or O) over batch and heads
        block_ws = max(st.runner.workspace_bytes(problem_from_sizes(
            seq_q=BLOCK_ROWS, batch=st.b, num_heads=st.n, num_kv_heads=st.nkv, head_dim=st.d, dtype=st.dtype.name, causal=c,
            scale=self.scale)) for c in (False, True))
        # q, out, lse (bound); K, V; partial (final, start); workspace
        allocations = ((4 if st.fixed else 3) * sum(len(row) for row in st.q_dev) + 2 * len(st.slots)
                       + (6 if st.exact else 2) + 1)
        rows, lse_row = sum(self.rows[self.r]), st.b * st.n * 4
        return MemoryBound(
            shards=rows * (2 * q_row + 2 * kv_row + lse_row),
            accumulator=rows * st.b * st.n * st.d * (4 - st.itemsize) if st.exact else 0,
            row_bounds=rows * lse_row if st.fixed else 0,
            constant=(max(block_ws, ws_bytes) + 2 * BLOCK_ROWS * kv_row
                      + (3 if st.exact else 1) * BLOCK_ROWS * (q_row + lse_row)),
            rounding=2 * len(st.units) * 2 * kv_row + MALLOC_SLACK * allocations)

    def _track_views(self, held: contextlib.ExitStack, st):
        """st.view(buf, shape, dtype): a cached DeviceArray over `buf`; every cached call bound to the
        ring's memory is discarded before that memory goes."""
        views: dict = {}  # holds each viewed buffer, so no id is reused while its view is kept

        def view(buf, shape, dt=st.dtype):
            key = (id(buf), shape, np.dtype(dt))
            if key not in views:
                views[key] = DeviceArray(self.session, shape, dt, _buffer=buf)
            return views[key]

        @held.callback
        def _forget():  # after the streams settled: the cached calls bound to this memory go before it
            arrays = [*views.values(), *(q for row in st.q_dev for q in row),
                      *(x for row in st.out_dev for o in row for x in o), *(x for row in st.bounds for x in row)]
            arrays += [st.workspace] if st.workspace is not None else []
            for rn in (st.runner, _merge_runner(self.session, st.fixed)):
                with rn.lock:
                    rn.discard(arrays)
            for array in views.values():
                array.buffer = None  # closed on its own, not through the view

        st.view = view

    def _open_streams(self, held: contextlib.ExitStack, st):
        """Device-side order (aclrtStreamWaitEvent), per ring step t and K/V sub-block u; the host never
        waits for the comm stream in the loop:
          received[t][u] on comm after u's send/receive of step t; compute of u at step t+1 waits for it;
          computed[t][u] on compute after the calls on u at step t; the send of u (and the receive into
          the spare slot, freed by the previous sub-block's send) waits for it.
        So the exchange of sub-block u overlaps the compute on sub-block u + 1."""
        s, p, r = self.session, self.p, self.r
        st.received = [[close_on_exit(held, s.event(timing=False)) for _ in st.units] for _ in range(p)]
        st.computed = [[close_on_exit(held, s.event(timing=False)) for _ in st.units] for _ in range(p)]
        self.sent_after, self.callbacks = [], []
        held.callback(self.callbacks.clear)  # runs after the streams settled (the stack unwinds last-in first)
        held.callback(settle_stream, st.runner.stream)  # the compute stream (the runner's) reads the buffers above
        st.comm_stream = close_on_exit(held, s.stream(), settle=True)
        st.link = self.comm.link_stats(r, (r + 1) % p) if p > 1 else None
        st.sent_before = self._sent() if p > 1 else 0
        st.seen = {key: 0 for key in st.calls}  # partials of each query sub-chunk so far
        st.results = {}

    def _ring_step(self, st, step: int):
        """Step `step`: the calls on each K/V sub-block held, each followed by the exchange of that
        sub-block with the neighbours (but at the last step)."""
        p, r = self.p, self.r
        source, incoming = (r - step) % p, (r - step - 1) % p
        step_flops = 0
        for u, (j, i) in enumerate(st.units):
            if step > 0:
                st.compute_stream.wait(st.received[step - 1][u])
            k0, k1 = st.pieces[source][j][i]
            kshape = (st.b, st.nkv, k1 - k0, st.d)
            k, v = st.view(st.slots[st.hold[u]][0], kshape), st.view(st.slots[st.hold[u]][1], kshape)
            for qi, a, diag in ring_calls(r, step, p, self.causal, st.units[u], st.pieces):
                step_flops += self._ring_call(st, qi, a, diag, k, v)
            st.computed[step][u].record(st.compute_stream)
            if step < p - 1:
                i0, i1 = st.pieces[incoming][j][i]
                self._pass_on(st, step, u, (k1 - k0) * self.kv_row_elems, (i1 - i0) * self.kv_row_elems)
        if step < p - 1 and self.session.backend.name == "sim":  # the link counter, in stream order after the step
            self._host_task(st.comm_stream, lambda: self.sent_after.append(self._sent()))
        self.flops += step_flops
        self.compute_model.append(step_flops / self.peak if self.peak else 0.0)

    def _ring_call(self, st, qi: int, a: int, diag: bool, k, v) -> int:
        """One FlashAttention call of query sub-chunk (qi, a) on the K/V sub-block (k, v), and the
        merge of its partial into the sub-chunk's accumulator; returns its FLOPs."""
        q = st.q_dev[qi][a]
        lse_shape = q.shape[:3]
        acc = st.out_dev[qi][a]
        k_th, st.seen[qi, a] = st.seen[qi, a], st.seen[qi, a] + 1
        last = st.seen[qi, a] == st.calls[qi, a]
        # "output": the first partial is written into the output itself, later ones merged in.
        out, lse = (acc if self.accumulate == "output" and k_th == 0 else
                    (st.view(st.partial[0], q.shape), st.view(st.partial[1], lse_shape, np.float32)))
        problem, *_ = make_problem(q, k, v, causal=diag, scale=self.scale, layout="BNSD")
        prepared = st.runner.prepare(problem, st.runner.bound_inputs((q, k, v)) | {"out": out, "lse": lse},
                                     workspace=st.workspace)
        self.device_bytes = max(self.device_bytes, self._used() - st.base)
        st.runner.launch(prepared, st.compute_stream)
        self._merge_partial(st, qi, a, out, lse, k_th, last)
        return 4 * st.b * st.n * st.d * problem.visible_pairs()

    def _merge_partial(self, st, qi: int, a: int, out, lse, k_th: int, last: bool):
        """In stream order after the call (the next call reuses `partial`): the partial (out, lse),
        the k_th of query sub-chunk (qi, a), merged into its accumulator as the mode says."""
        s, stream = self.session, st.compute_stream
        q_shape = st.q_dev[qi][a].shape
        lse_shape = q_shape[:3]
        acc = st.out_dev[qi][a]
        if st.exact and last and k_th == 0:  # its only partial is the result
            st.results[qi, a] = (out, lse)
        elif st.exact and last:
            st.results[qi, a] = (st.view(st.final[0], q_shape), st.view(st.final[1], lse_shape, np.float32))
            enqueue_merge(s, stream, *acc, out, lse, *st.results[qi, a])
        elif st.exact and k_th == 0:  # acc = the partial in float32 (merged with weight-0 zeros)
            enqueue_merge(s, stream, st.view(st.start[0], q_shape), st.view(st.start[1], lse_shape, np.float32),
                          out, lse, *acc)
        elif st.fixed:  # into the int16 running result; the last merge writes T over it
            running = st.view(acc[0].buffer, q_shape, np.int16)
            bound = st.bounds[qi][a]
            enqueue_merge_int16(s, stream, running, bound, acc[1], out, lse, acc[0] if last else running, bound, acc[1])
        elif k_th > 0:
            enqueue_merge(s, stream, *acc, out, lse, *acc)
        if st.exact and last:  # read back now: `final` (or `partial`) serves the next sub-chunk
            stream.synchronize()
            st.results[qi, a] = tuple(x.numpy() for x in st.results[qi, a])

    def _pass_on(self, st, step: int, u: int, sent: int, got: int):
        """Sends K/V sub-block u to the next rank and receives the previous rank's into the spare
        slot, on the comm stream after the calls on u; the slots then swap roles."""
        p, r, dtype = self.p, self.r, st.dtype
        st.comm_stream.wait(st.computed[step][u])
        to, frm = (r + 1) % p, (r - 1) % p
        held_slot, spare_slot = st.slots[st.hold[u]], st.slots[st.spare]
        self.comm.send_recv([("send", held_slot[0], sent, dtype, to), ("send", held_slot[1], sent, dtype, to),
                             ("recv", spare_slot[0], got, dtype, frm), ("recv", spare_slot[1], got, dtype, frm)],
                            st.comm_stream)
        st.received[step][u].record(st.comm_stream)
        st.hold[u], st.spare = st.spare, st.hold[u]

    def _collect(self, st):
        """The rank's results per query chunk, and the bytes sent per step with their modeled time."""
        results = st.results
        if not st.exact:
            results = {(qi, a): (o.numpy(), lse.numpy()) for qi, row in enumerate(st.out_dev)
                       for a, (o, lse) in enumerate(row)}
        self.results = [tuple(np.concatenate([results[qi, a][x] for a in range(len(row))], axis=2) for x in (0, 1))
                        for qi, row in enumerate(st.out_dev)]
        # Bytes sent per step, from the link counter read after each step's exchanges (the last sends nothing).
        marks = [st.sent_before, *self.sent_after]
        self.bytes_per_step = [b1 - b0 for b0, b1 in zip(marks, marks[1:])] + [0]
        # Per step: one K and one V message per sub-block.
        self.comm_model = [modeled_link_seconds(st.link, nb, 2 * len(st.units)) for nb in self.bytes_per_step]


def modeled_link_seconds(link: Optional[dict], nbytes: int, messages: int) -> float:
    """Modeled seconds of `messages` messages carrying `nbytes` bytes in all over `link` (the
    simulated HCCL's link_stats: bandwidth_gbs per direction, latency_us per message;
    docs/hccl.md); 0 when nothing is sent or the link is unknown (a real backend)."""
    if not link or not nbytes or not link.get("bandwidth_gbs"):
        return 0.0
    return link["latency_us"] * 1e-6 * messages + nbytes / (link["bandwidth_gbs"] * 1e9)


def link_figures(comm, rank: int, size: int) -> dict:
    """The link model of rank -> rank + 1 (kind, bandwidth_gbs, latency_us, devices_per_server),
    without its counters; {} for a one-device clique."""
    if size < 2:
        return {}
    link = comm.link_stats(rank, (rank + 1) % size)
    return {key: link[key] for key in ("kind", "bandwidth_gbs", "latency_us", "devices_per_server")}


def _merge_runner(session, int16: bool = False):
    return merge_runner_for(session, ATTENTION_LSE_MERGE_INT16 if int16 else ATTENTION_LSE_MERGE)


# Rows of a query sub-chunk and of a key/value sub-block: the ring computes and exchanges in these
# units, so what a rank holds beyond its shards is a constant number of them (_Rank._ring).
BLOCK_ROWS = 2048


def sub_blocks(rows: list, block: int) -> list:
    """[rank][chunk] -> (start, stop) row ranges (within the chunk) of its sub-blocks, each at most
    `block` rows. Every chunk of every rank is cut into the same count m = ceil(max chunk rows /
    block) of near-equal pieces, so every rank's set travels as the same number of exchanges, the
    pieces of any two chunks (whose rows differ by at most 1: zigzag_chunks) differ by at most 2
    rows, and on the rank itself its query and key sub-blocks share bounds (the causal diagonal
    splits into square diagonal blocks). block >= 2 keeps every piece non-empty."""
    if block < 2:
        raise InvalidArgumentError(f"block={block}: a sub-block needs at least 2 rows")
    count = -(-max(n for rr in rows for n in rr) // block)
    return [[split_bounds(n, count) for n in rr] for rr in rows]


def ring_units(pieces: list, rank: int) -> list:
    """The (chunk, sub-block) units of a rank's key/value set, in the order the ring computes on and
    exchanges them (the same count on every rank)."""
    return [(j, i) for j in range(len(pieces[rank])) for i in range(len(pieces[rank][j]))]


def ring_calls(rank: int, step: int, ranks: int, causal: bool, unit: tuple, pieces: list) -> list:
    """The FlashAttention calls of `rank` at `step` on key/value sub-block `unit` = (chunk j, i):
    (query chunk, query sub-block, causal) of ring_plan's pairs (pieces: sub_blocks) with key chunk j. On a causal pair
    (the diagonal chunk, whose query and key sub-blocks share bounds) sub-block a meets key
    sub-block i only if a >= i, causally when a == i; otherwise every query sub-block meets it."""
    j, i = unit
    calls = []
    for qi, ki, diag in ring_plan(rank, step, ranks, causal):
        if ki != j:
            continue
        count = len(pieces[rank][qi])
        calls += [(qi, a, diag and a == i) for a in range(count) if not diag or a >= i]
    return calls


ROOT_WAIT_SECONDS = 60.0  # how long a rank waits for rank 0 to publish the root info file


class RankContext:
    """One rank of a clique in this process, for SPMD code (one process per device, or one thread
    per device): its Session on its device and its Communicator.

    ``RankContext.join(rank, size, root, device=...)`` joins with root info from
    ``hccl.root_info()`` passed out of band; ``RankContext.from_env()`` does it from what
    ``acl-fa launch`` hands every rank (README, "More than one device"). ``close()`` (or
    ``with``) destroys the communicator, then the session if the context opened it.
    """

    def __init__(self, session: Session, comm: hccl.Communicator, *, owns: bool = False):
        self.session, self.comm, self._owns = session, comm, owns
        self.peak = chip_peak_flops(session.backend)
        # Set when the ranks are threads of one process (ring_attention): how Ctrl-C stops them.
        self.step_gate: Optional[StepGate] = None

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    @property
    def device(self) -> int:
        return self.session.device

    @classmethod
    def join(cls, rank: int, size: int, root: bytes, *, device: Optional[int] = None, backend=None) -> "RankContext":
        """Opens a Session on `device` (default: `rank`) and joins the clique of `size` ranks as
        `rank` (HcclCommInitRootInfo; blocks until every rank joined, HCCL_CONNECT_TIMEOUT)."""
        for name, value in (("rank", rank), ("size", size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
        if size < 1 or not 0 <= rank < size:
            raise InvalidArgumentError(f"rank={rank} must lie in [0, size={size})")
        be = hccl.use_hccl(get_backend(backend))
        device = rank if device is None else device
        check_devices([device], be)
        session = Session(device=int(device), backend=be.name)
        try:
            comm = hccl.Communicator.join(session, int(size), int(rank), root)
        except BaseException:
            session.close()
            raise
        return cls(session, comm, owns=True)

    @classmethod
    def from_env(cls, backend=None, environ=None) -> "RankContext":
        """Joins the job's clique as the rank its launcher set (launchers.detect: acl-fa launch,
        torchrun-style RANK/WORLD_SIZE, Open MPI, MPICH's PMI, Slurm). The ranks meet through a
        rank table (RANK_TABLE_FILE: HcclCommInitClusterInfo), or through root info that rank 0
        makes with HcclGetRootInfo and hands over in a file (ACL_FA_ROOT_INFO, or one named after
        the launcher's job id; written by rename, waited for up to ROOT_WAIT_SECONDS) or from a
        TCP store at MASTER_ADDR:MASTER_PORT. Everything the environment gets wrong (a partial or
        unknown launcher's environment, a rank outside the world, a device this host lacks, a rank
        table that disagrees with the launcher) is refused before any device work."""
        import os

        env = os.environ if environ is None else environ
        found = launchers.detect(env)
        if found is None:
            raise InvalidArgumentError(f"{ENV_RANK}, {ENV_SIZE}, {ENV_ROOT} not set, nor the rank variables of "
                                       "another launcher: run under 'acl-fa launch -n N -- ...', mpirun, srun or a "
                                       "torchrun-style launcher (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")
        rank, size, meet = found.rank, found.size, found.rendezvous
        be = hccl.use_hccl(get_backend(backend))
        if meet.kind == "rank_table":
            entry = check_against(read_rank_table(meet.path), meet.path, rank, size, found.variables, found.host,
                                  found.device)
            check_devices([entry.device], be)
            return cls.from_rank_table(meet.path, rank, device=entry.device, backend=be.name)
        device = found.device if found.device is not None else (
            found.local_rank if found.local_rank is not None else rank)
        check_devices([device], be)  # before the wait: a device this host lacks is named at once
        if size == 1 and not meet.path and meet.kind == "file":
            return cls.join(0, 1, hccl.root_info(be), device=device, backend=be.name)
        if meet.kind == "tcp":
            if rank == 0:
                root = hccl.root_info(be)
                tcp_store.serve_root(meet.host, meet.port, root, size - 1, ROOT_WAIT_SECONDS)
            else:
                root = tcp_store.fetch_root(meet.host, meet.port, rank, ROOT_WAIT_SECONDS)
            return cls.join(rank, size, root, device=device, backend=be.name)
        root = _publish_root(meet.path, be) if rank == 0 else _wait_root(meet.path, rank)
        try:
            return cls.join(rank, size, root, device=device, backend=be.name)
        finally:
            if meet.cleanup and rank == 0:  # every rank has read it once the clique formed (or failed)
                with contextlib.suppress(OSError):
                    os.remove(meet.path)

    @classmethod
    def from_rank_table(cls, path: str, rank: int, *, device: Optional[int] = None, backend=None) -> "RankContext":
        """Opens a Session on `device` (default: the table's device_id of `rank`) and joins the
        clique of the rank table at `path` as `rank` (HcclCommInitClusterInfo; blocks until
        every rank of the table joined, HCCL_CONNECT_TIMEOUT)."""
        table = read_rank_table(path)
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < len(table):
            raise InvalidArgumentError(f"rank={rank!r} must lie in [0, {len(table)}): the ranks of rank table {path}")
        be = hccl.use_hccl(get_backend(backend))
        device = table[rank].device if device is None else device
        check_devices([device], be)
        session = Session(device=int(device), backend=be.name)
        try:
            comm = hccl.Communicator.from_rank_table(session, path, int(rank))
        except BaseException:
            session.close()
            raise
        return cls(session, comm, owns=True)

    def close(self):
        try:
            self.comm.close()
        finally:
            if self._owns:
                self.session.close()

    def __enter__(self) -> "RankContext":
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self) -> str:
        return f"<RankContext rank {self.rank} of {self.size} on device {self.device}>"

    def ulysses_attention(self, q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                          num_kv_heads=None):
        """This rank's part of Ulysses over the clique: q, k, v its rows of the contiguous split
        (split_bounds(S, P)[rank]), every head. Returns (out rows like q, lse float32 [B, N/P, S]:
        this rank's heads, every row). acl_fa.parallel.ulysses.rank_ulysses_attention."""

        return rank_ulysses_attention(self, q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                      num_kv_heads=num_kv_heads)

    def ulysses_attention_backward(self, dout, q, k, v, out, lse, *, causal=False, scale=None, layout="BNSD",
                                   num_heads=None, num_kv_heads=None):
        """This rank's part of the Ulysses backward: its rows of dout, q, k, v, out (the
        contiguous split) and the lse its ulysses_attention returned ([B, N/P, S]); returns its
        rows of (dq, dk, dv). acl_fa.parallel.ulysses_backward.rank_ulysses_attention_backward."""

        return rank_ulysses_attention_backward(self, dout, q, k, v, out, lse, causal=causal, scale=scale,
                                               layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads)

    def ring_attention(self, q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None, num_kv_heads=None,
                       report=False, accumulate=None, fused=False):
        """This rank's part of ring attention over the clique. q, k, v: the rank's shard in
        `layout` -- its zigzag_chunks rows of the sequence, concatenated in that order (non-causal:
        rows [S r / P, S (r + 1) / P); causal: chunks r and 2P-1-r of 2P). Every rank calls it
        together; shapes, dtype, layout, causal and scale are checked to agree among the ranks
        (the ranks that differ are named) and the shard sizes against the split of the total S,
        before any device work of the ring. Returns (out shard like q, lse float32 [B, N, rows])
        and a RankReport when `report`.

        accumulate: where each query row's partial results are merged (docs/lse_merge.md) --
        "float32" (the default): a float32 accumulator per row, rounded to the input dtype once;
        the device holds (Q + K + V + 2 O) / P for a 16-bit dtype. "int16" (Atlas A2/A3 only: 310P
        and 910A have no int16 Cast): in the output's memory as int16 units of a per-row bound (the
        largest |partial| of the row so far), the last merge writing the result in the input dtype
        over it; (Q + K + V + O) / P plus one float32 per row and head beside the LSE, but a
        channel far below the row's largest keeps only the absolute precision bound / 65534 per
        merge (outlier channels: docs/lse_merge.md). "output": in place in the output,
        in the input dtype, the running result rounded at every merge (and each partial by the
        op); (Q + K + V + O) / P, but over the 2x-naive tolerance when one early partial dominates
        a row (q = k = v: docs/lse_merge.md). Both plus the constant of MemoryBound.

        fused: the exchange inside the kernel (acl_fa.parallel.ring_fused: one RingAttention launch
        per step, Atlas A3 only); the shards are then the contiguous split, causal or not (rows
        [S r / P, S (r + 1) / P), S a multiple of P), and accumulate must be None or "float32"."""
        if fused:
            why = fused_ring_unsupported(self.session.soc_name())
            if why:
                raise InvalidArgumentError(why)
            if accumulate not in (None, "float32"):
                raise InvalidArgumentError(f"accumulate={accumulate!r}: the fused ring accumulates in float32")
        accumulate = resolve_accumulate(accumulate, self.session)
        problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout,
                                                  num_heads=num_heads, num_kv_heads=num_kv_heads)
        if problem.seq_q != problem.seq_kv:
            raise InvalidArgumentError(f"rank {self.rank}: the q shard has {problem.seq_q} rows and the k/v shard "
                                       f"{problem.seq_kv}; a rank holds the same rows of q, k and v")
        p, r = self.size, self.rank
        shared = dict(batch=problem.batch, heads=problem.num_heads, kv_heads=problem.num_kv_heads,
                      head_dim=problem.head_dim, dtype=problem.dtype_name, layout=problem.layout,
                      causal=bool(problem.causal), scale=float(problem.scale))
        rows = [x["rows"] for x in agree(self.comm, "ring_attention", shared, {"rows": problem.seq_q})]
        ranges = _check_split(rows, problem.causal and not fused)
        chunk_rows = [[b - a for a, b in rr] for rr in ranges]
        qb, kb, vb = (to_bnsd(q, problem.layout, problem.num_heads), to_bnsd(k, problem.layout, problem.num_kv_heads),
                      to_bnsd(v, problem.layout, problem.num_kv_heads))
        if fused:
            return self._ring_attention_fused(problem, rows, qb, kb, vb, report)
        cuts = np.cumsum([0, *chunk_rows[r]])
        pieces = [slice(int(a), int(b)) for a, b in zip(cuts, cuts[1:])]
        q_chunks = [np.ascontiguousarray(qb[:, :, c]) for c in pieces]
        kv_chunks = [(np.ascontiguousarray(kb[:, :, c]), np.ascontiguousarray(vb[:, :, c])) for c in pieces]
        rk = _Rank(self.comm, self.session, q_chunks, kv_chunks, chunk_rows, problem.causal, problem.scale,
                   problem.dtype, self.peak, accumulate, self.step_gate)
        rk.run()
        if rk.error is not None:
            raise rk.error
        out = np.concatenate([o for o, _ in rk.results], axis=2)
        lse = np.concatenate([lse for _, lse in rk.results], axis=2).astype(np.float32)
        out = np.ascontiguousarray(from_bnsd(out.astype(problem.dtype), problem.layout))
        if not report:
            return out, lse
        return out, lse, RankReport(r, self.device, rk.bytes_per_step, rk.flops, rk.comm_model, rk.compute_model,
                                    rk.wall, rk.device_bytes, link_figures(self.comm, r, p), rk.ring_buffer_bytes,
                                    rk.d2h_bytes, rk.memory, _int16_unsupported(self.session))


    def _ring_attention_fused(self, problem, rows, qb, kb, vb, report):
        """ring_attention(fused=True) of the rank's BNSD shards (acl_fa.parallel.ring_fused)."""
        check_fused(self.session, rows, problem.causal)
        res = rank_ring_attention_fused(self.session, self.comm, qb, kb, vb, causal=bool(problem.causal),
                                        scale=float(problem.scale), gate=self.step_gate, per_step_bytes=report)
        out = np.ascontiguousarray(from_bnsd(res.out, problem.layout))
        if not report:
            return out, res.lse
        p, r = self.size, self.rank
        link = link_figures(self.comm, r, p)
        comm_model = [modeled_link_seconds(link, nb, 2) for nb in res.bytes_per_step]  # K and V: one message each
        compute_model = [f / self.peak if self.peak else 0.0 for f in res.flops_per_step]
        return out, res.lse, RankReport(r, self.device, res.bytes_per_step, sum(res.flops_per_step), comm_model,
                                        compute_model, res.wall_seconds, res.device_bytes, link,
                                        int16_unsupported=_int16_unsupported(self.session))

    def ring_attention_backward(self, dout, q, k, v, out, lse, *, causal=False, scale=None, layout="BNSD",
                                num_heads=None, num_kv_heads=None, report=False):
        """This rank's part of the ring backward: (dq, dk, dv) of its shard, shaped like q, k, v.
        dout, q, k, v, out: the rank's rows as for ring_attention (out and lse: ring_attention's
        output on this rank -- the whole sequence's O and LSE at these rows). Checked among the ranks
        as ring_attention is, before device work (acl_fa/parallel/ring_backward.py). With `report`, a
        RankReport follows the gradients: per exchange t = 0 .. P the bytes sent to the next rank
        and the modeled link time, per step t the op's FLOPs at the cube peak (exchange t runs
        beside step t; exchange P, the accumulators' way home, beside nothing)."""
        forward, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                        num_kv_heads=num_kv_heads)
        grad, dout, q, k, v, out, lse = make_backward_problem(forward, dout, q, k, v, out, lse)
        problem = grad.forward
        if problem.seq_q != problem.seq_kv:
            raise InvalidArgumentError(f"rank {self.rank}: the q shard has {problem.seq_q} rows and the k/v shard "
                                       f"{problem.seq_kv}; a rank holds the same rows of q, k and v")
        shared = dict(batch=problem.batch, heads=problem.num_heads, kv_heads=problem.num_kv_heads,
                      head_dim=problem.head_dim, dtype=problem.dtype_name, layout=problem.layout,
                      causal=bool(problem.causal), scale=float(problem.scale))
        rows = [x["rows"] for x in agree(self.comm, "ring_attention_backward", shared, {"rows": problem.seq_q})]
        ranges = _check_split(rows, problem.causal)
        chunk_rows = [[b - a for a, b in rr] for rr in ranges]
        cuts = np.cumsum([0, *chunk_rows[self.rank]])
        pieces = [slice(int(a), int(b)) for a, b in zip(cuts, cuts[1:])]
        heads = {"q": problem.num_heads, "dout": problem.num_heads, "out": problem.num_heads,
                 "k": problem.num_kv_heads, "v": problem.num_kv_heads}
        arrays = {"q": q, "dout": dout, "out": out, "k": k, "v": v}
        chunks = {name: [np.ascontiguousarray(to_bnsd(x, problem.layout, heads[name])[:, :, c]) for c in pieces]
                  for name, x in arrays.items()}
        chunks["lse"] = [np.ascontiguousarray(lse[:, :, c]) for c in pieces]
        got = run_rank_backward(self.comm, self.session, chunks, chunk_rows, problem.causal, problem.scale,
                                problem.dtype, self.step_gate)
        self.last_backward = {key: got[key] for key in ("bytes_per_step", "flops", "d2h_bytes", "wall")}
        grads = tuple(np.ascontiguousarray(from_bnsd(np.concatenate(got[name], axis=2).astype(problem.dtype),
                                                     problem.layout)) for name in ("dq", "dk", "dv"))
        if not report:
            return grads
        link = link_figures(self.comm, self.rank, self.size)
        comm = [modeled_link_seconds(link, nb, n) for nb, n in zip(got["bytes_per_step"], got["sends_per_step"])]
        compute = [f / self.peak if self.peak else 0.0 for f in got["flops_per_step"]]
        return (*grads, RankReport(self.rank, self.device, got["bytes_per_step"], got["flops"], comm, compute,
                                   got["wall"], 0, link, d2h_bytes=got["d2h_bytes"]))


def _int16_unsupported(session) -> str:
    return int16_unsupported(session.soc_name())


def resolve_accumulate(accumulate, session) -> str:
    """The ring's accumulate mode: `accumulate` checked, or DEFAULT_ACCUMULATE ("float32") for
    None on every chip; "int16" only where AttentionLseMergeInt16 runs (Atlas A2/A3)."""
    if accumulate is None:
        return DEFAULT_ACCUMULATE
    why = _int16_unsupported(session)
    _check_accumulate(accumulate)
    if accumulate == "int16" and why:
        raise InvalidArgumentError(f"accumulate='int16' needs Atlas A2/A3: {why}; use 'float32'")
    return accumulate


def _check_accumulate(accumulate):
    if not isinstance(accumulate, str):
        raise InvalidTypeError(f"accumulate must be a string, got {accumulate!r}")
    if accumulate not in ACCUMULATE:
        raise InvalidArgumentError(f"accumulate={accumulate!r}: must be one of {', '.join(ACCUMULATE)}")


def _publish_root(path: str, backend) -> bytes:
    import os

    root = hccl.root_info(backend)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(root)
    os.replace(tmp, path)
    return root


def _wait_root(path: str, rank: int) -> bytes:
    import os

    deadline = time.monotonic() + ROOT_WAIT_SECONDS
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: rank 0 did not publish the root info at {path} within "
                               f"{ROOT_WAIT_SECONDS:g} s")
        time.sleep(0.02)
    with open(path, "rb") as f:
        return f.read()


def _check_split(rows: list, causal: bool) -> list:
    """The zigzag ranges of S = sum(rows) over len(rows) ranks, after checking that rank r holds
    exactly its share; the error names the ranks that do not."""
    p, seq = len(rows), sum(rows)
    need = 2 * p if causal else p
    if seq < need:
        raise InvalidArgumentError(f"S={seq} (the ranks' rows {rows}) cannot be split over {p} ranks: "
                                   f"{'the zigzag split needs S >= 2P' if causal else 'needs S >= P'} = {need}")
    ranges = zigzag_chunks(seq, p, causal)
    want = [sum(b - a for a, b in rr) for rr in ranges]
    wrong = [f"rank {i} holds {got}, its share is {w}" for i, (got, w) in enumerate(zip(rows, want)) if got != w]
    if wrong:
        raise InvalidArgumentError(f"the shards do not follow the {'zigzag ' if causal else ''}split of S={seq} over "
                                   f"{p} ranks (acl_fa.parallel.zigzag_chunks): {'; '.join(wrong)}")
    return ranges


def shard_rows(x, ranges):
    """The rows `ranges` ([(a, b), ...], one rank's chunks of zigzag_chunks) of x [B, N, S, ...],
    concatenated along S: the rank's shard."""
    return np.concatenate([x[:, :, a:b] for a, b in ranges], axis=2)


def place_rows(whole, part, ranges):
    """The inverse of shard_rows: part's rows written back at `ranges` of whole (along S)."""
    cuts = np.cumsum([0, *[b - a for a, b in ranges]])
    for (a, b), c0, c1 in zip(ranges, cuts, cuts[1:]):
        whole[:, :, a:b] = part[:, :, c0:c1]


def _run_threads(contexts: list, work) -> list:
    """work(context) on one thread per context, under one StepGate (Ctrl-C stops them at an agreed
    step); their results in order, or the first failure in time raised (run_rank_threads)."""
    gate = StepGate(len(contexts))
    for ctx in contexts:
        ctx.step_gate = gate
    return run_rank_threads([functools.partial(work, ctx) for ctx in contexts], "ring-rank", gate)


def _ring_devices(problem, devices, backend) -> tuple:
    """(backend, device list) of a ring over `devices` for `problem`, checked before device work:
    one sequence (Sq = Skv) that splits over the devices (S >= P; S >= 2P for the zigzag)."""
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"ring attention shards one sequence: Sq={problem.seq_q} must equal "
                                   f"Skv={problem.seq_kv}")
    be = hccl.use_hccl(get_backend(backend))
    devices = check_devices(devices, be)
    p = len(devices)
    need = 2 * p if problem.causal else p
    if problem.seq_q < need:
        raise InvalidArgumentError(f"S={problem.seq_q} cannot be split over {p} devices: "
                                   f"{'the zigzag split needs S >= 2P' if problem.causal else 'needs S >= P'} = {need}")
    return be, devices


def ring_attention(q, k, v, *, devices=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                   num_kv_heads=None, backend=None, report=False, accumulate=None, fused=False):
    """FlashAttention of host arrays sharded over `devices` (default: every device) by ring
    attention: P RankContexts of this process, one thread each. Returns (out like q, lse float32
    [B, N, S]), and a RingReport when `report`. accumulate, fused: as RankContext.ring_attention
    (fused: the exchange inside the kernel, contiguous split, S a multiple of P, Atlas A3)."""
    if accumulate is not None:
        _check_accumulate(accumulate)
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout,
                                              num_heads=num_heads, num_kv_heads=num_kv_heads)
    be, devices = _ring_devices(problem, devices, backend)
    p = len(devices)
    layout = problem.layout
    qb, kb, vb = (to_bnsd(q, layout, problem.num_heads), to_bnsd(k, layout, problem.num_kv_heads),
                  to_bnsd(v, layout, problem.num_kv_heads))
    if fused and p > 1 and problem.seq_q % p:
        raise InvalidArgumentError(f"the fused ring needs every rank to hold as many rows: S={problem.seq_q} is not a "
                                   f"multiple of the {p} devices")
    ranges = zigzag_chunks(problem.seq_q, p, problem.causal and not fused)
    if p == 1:
        with Session(device=devices[0], backend=be.name) as session:
            rk = _SingleRank(session, [qb], [[(kb, vb)]], problem, chip_peak_flops(be))
            rk.run()
        if rk.error is not None:
            raise rk.error
        outs = [(rk.results[0][0], rk.results[0][1], RankReport(0, devices[0], [0], rk.flops, [0.0],
                                                                rk.compute_model, rk.wall, 0, {}))]
    else:
        with device_clique(devices, be.name) as (sessions, comms):
            contexts = [RankContext(s, c) for s, c in zip(sessions, comms)]
            outs = _run_threads(contexts, lambda ctx: ctx.ring_attention(
                shard_rows(qb, ranges[ctx.rank]), shard_rows(kb, ranges[ctx.rank]), shard_rows(vb, ranges[ctx.rank]),
                causal=problem.causal, scale=problem.scale, layout="BNSD", report=True, accumulate=accumulate,
                fused=fused))
    out = np.empty(qb.shape, problem.dtype)
    lse = np.empty(qb.shape[:3], np.float32)
    for rr, (o, l, _) in zip(ranges, outs):
        place_rows(out, o, rr)
        place_rows(lse, l, rr)
    result = (np.ascontiguousarray(from_bnsd(out, layout)), lse)
    if not report:
        return result
    return (*result, ring_report([rep for _, _, rep in outs], problem.causal))


def ring_attention_backward(dout, q, k, v, out, lse, *, devices=None, causal=False, scale=None, layout="BNSD",
                            num_heads=None, num_kv_heads=None, backend=None, report=False):
    """The ring backward of host arrays over `devices` (P RankContexts on threads): (dq, dk, dv)
    for the upstream gradient dout of out, lse = ring_attention(q, k, v, ...) (or the single-device
    flash_attention with return_lse=True) with the same options, and with `report` (P >= 2) a
    RingReport of its exchanges (RankContext.ring_attention_backward)."""
    forward, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                    num_kv_heads=num_kv_heads)
    grad, dout, q, k, v, out, lse = make_backward_problem(forward, dout, q, k, v, out, lse)
    problem = grad.forward
    be, devices = _ring_devices(problem, devices, backend)
    p = len(devices)
    if p == 1:
        with Session(device=devices[0], backend=be.name) as session:
            start = time.perf_counter()
            grads = flash_attention_backward(dout, q, k, v, out, lse, causal=problem.causal, scale=problem.scale,
                                             layout=problem.layout, num_heads=num_heads, num_kv_heads=num_kv_heads,
                                             session=session)
        if not report:
            return grads
        flops, peak = grad.flops(), chip_peak_flops(be)
        one = RankReport(0, devices[0], [0], flops, [0.0], [flops / peak if peak else 0.0],
                         time.perf_counter() - start, 0, {})
        return (*grads, ring_report([one], problem.causal))
    heads = {"q": problem.num_heads, "dout": problem.num_heads, "out": problem.num_heads,
             "k": problem.num_kv_heads, "v": problem.num_kv_heads}
    bnsd = {name: to_bnsd(x, problem.layout, heads[name]) for name, x in
            (("q", q), ("k", k), ("v", v), ("dout", dout), ("out", out))}
    bnsd["lse"] = lse
    ranges = zigzag_chunks(problem.seq_q, p, problem.causal)
    with device_clique(devices, be.name) as (sessions, comms):
        contexts = [RankContext(s, c) for s, c in zip(sessions, comms)]
        grads = _run_threads(contexts, lambda ctx: ctx.ring_attention_backward(
            *(shard_rows(bnsd[n], ranges[ctx.rank]) for n in ("dout", "q", "k", "v", "out", "lse")),
            causal=problem.causal, scale=problem.scale, layout="BNSD", report=report))
    whole = [np.empty(bnsd[n].shape, problem.dtype) for n in ("q", "k", "v")]
    for rr, parts in zip(ranges, grads):
        for w, part in zip(whole, parts[:3]):
            place_rows(w, part, rr)
    result = tuple(np.ascontiguousarray(from_bnsd(w, problem.layout)) for w in whole)
    if not report:
        return result
    return (*result, ring_report([parts[3] for parts in grads], problem.causal))

class _SingleRank(_Rank):
    """P = 1: the whole problem on one device (no ring)."""

    def __init__(self, session, q_chunks, kv_chunks, problem, peak):
        self.session, self.q_host, self.kv_all, self.problem, self.peak = session, q_chunks, kv_chunks, problem, peak
        self.error, self.results, self.bytes_per_step, self.flops = None, None, [0], 0
        self.compute_model, self.comm_model, self.wall, self.device_bytes = [], [0.0], 0.0, 0

    def _run(self):
        q = self.q_host[0]
        k, v = self.kv_all[0][0]
        out, lse = attention.flash_attention(q, k, v, causal=self.problem.causal, scale=self.problem.scale,
                                             return_lse=True, session=self.session)
        self.flops = 4 * q.shape[0] * q.shape[1] * q.shape[3] * self.problem.visible_pairs()
        self.compute_model = [self.flops / self.peak if self.peak else 0.0]
        self.results = [(out, lse)]


