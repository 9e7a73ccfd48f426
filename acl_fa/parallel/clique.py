"""What the sequence-parallel schemes (ring, Ulysses, USP) share: the split of a sequence over ranks
(contiguous or zigzag) and the ring's call plan, the device list and the HCCL clique of one
process, the rank threads of one process (start, Ctrl-C, the earliest failure: run_rank_threads),
host tasks and stream clean-up on a rank's streams (settle_and_close), the chip's peak, and the
environment of a launched rank (acl-fa launch)."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Optional, Sequence

import numpy as np

from . import hccl
from ..api import Session
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..runtime.ffi import ffi
from ..runtime.interrupts import deferred
from ..runtime.loader import device_count

__all__ = ["split_bounds", "zigzag_chunks", "ring_plan", "check_devices", "host_task", "settle_stream", "close_on_exit",
           "device_clique", "chip_peak_flops", "StepGate", "RingInterrupted", "enter_step", "run_ranks",
           "run_rank_threads", "settle_and_close", "TimedRank", "ENV_RANK",
           "ENV_SIZE", "ENV_DEVICE", "ENV_ROOT"]

# The environment of a rank started by `acl-fa launch` (read by ring.RankContext.from_env).
ENV_RANK, ENV_SIZE, ENV_DEVICE, ENV_ROOT = "ACL_FA_RANK", "ACL_FA_WORLD_SIZE", "ACL_FA_DEVICE", "ACL_FA_ROOT_INFO"



class RingInterrupted(KeyboardInterrupt):
    """A rank thread stopped at a ring step because Ctrl-C asked the ring to stop (StepGate)."""


class StepGate:
    """Ctrl-C for the rank threads of one process's ring. Python delivers SIGINT to the main thread
    only; the ranks run on, each with HCCL exchanges that its neighbours must match. So a stop is
    agreed at a step: request_stop() fixes stop_step = (the highest step any rank has begun) + 1,
    and each rank asks enter(rank, step) before it begins a step, which raises RingInterrupted from
    stop_step on. Every rank then runs the steps before stop_step -- whose exchanges all its peers
    also make, so its streams drain -- and none after: the ring ends within about one step, and its
    clean-up never runs under a kernel or an exchange still queued."""

    def __init__(self, ranks: int):
        self._lock = threading.Lock()
        self._begun = [-1] * ranks  # per rank, the last step it began (-1: none yet)
        self.stop_step: Optional[int] = None

    def request_stop(self):
        with self._lock:
            if self.stop_step is None:
                self.stop_step = max(self._begun) + 1

    def enter(self, rank: int, step: int):
        with self._lock:
            if self.stop_step is not None and step >= self.stop_step:
                raise RingInterrupted(f"rank {rank} stopped before step {step} (Ctrl-C)")
            self._begun[rank] = step


_JOIN_SLICE_S = 0.02  # how long the main thread waits for a rank between two chances for Ctrl-C


def run_ranks(threads: list, gate: Optional[StepGate] = None) -> Optional[KeyboardInterrupt]:
    """Starts every rank thread and joins them all. The starts hold Ctrl-C back until the last one
    (a rank never started would leave its peers waiting in their first collective). A Ctrl-C
    (KeyboardInterrupt, which only this thread receives) asks the ranks to stop at an agreed step
    (with a `gate`; without one they run to their end) and keeps waiting for them, so that nothing
    is closed under them; returns the first KeyboardInterrupt, for the caller to raise once they
    have ended. The joins wait in slices: SIGINT may be delivered to a rank's OS thread, which
    leaves this thread blocked in an untimed join (no EINTR) until that rank ends; Python runs its
    handler here only when this thread wakes."""
    interrupt = None
    try:
        with deferred():
            for t in threads:
                t.start()
    except KeyboardInterrupt as exc:  # delivered as the deferral ends, every rank started
        interrupt = exc
        if gate is not None:
            gate.request_stop()
    while any(t.is_alive() for t in threads):
        try:
            for t in threads:
                while t.is_alive():
                    t.join(_JOIN_SLICE_S)
        except KeyboardInterrupt as exc:
            interrupt = interrupt or exc
            if gate is not None:
                gate.request_stop()
    return interrupt


def run_rank_threads(work: Sequence[Callable], name: str, gate: Optional[StepGate] = None) -> list:
    """work[i]() on thread i (named f"{name}-{i}"), started and joined by run_ranks; their results in
    order. Once every thread ended: a Ctrl-C is raised first, then the earliest failure in time --
    the other ranks' errors follow from it (a peer stopped, a collective it left)."""
    results: list = [None] * len(work)
    errors: list = [None] * len(work)

    def target(i):
        try:
            results[i] = work[i]()
        except BaseException as exc:  # reported below, by the caller's thread
            errors[i] = (time.monotonic(), exc)

    threads = [threading.Thread(target=target, args=(i,), name=f"{name}-{i}") for i in range(len(work))]
    interrupt = run_ranks(threads, gate)
    if interrupt is not None:
        raise interrupt
    failed = [e for e in errors if e is not None]
    if failed:
        raise min(failed, key=lambda e: e[0])[1]
    return results


def settle_and_close(streams: Sequence, objects: Sequence):
    """The clean-up of a rank's device work on success and on failure: waits for every stream (None:
    not opened) dropping its error (settle_stream: work still queued after a failure here or on a
    peer may use the buffers, and its errors follow from the failure being raised), then closes
    `objects` in order."""
    for stream in streams:
        if stream is not None:
            settle_stream(stream)
    for x in objects:
        x.close()


class TimedRank:
    """A rank whose run() runs its _run() and keeps the host wall seconds it took in `wall`, on
    success and on failure (whose exception goes on to the caller: run_rank_threads)."""

    wall = 0.0

    def _run(self):
        raise NotImplementedError

    def run(self):
        start = time.perf_counter()
        try:
            self._run()
        finally:
            self.wall = time.perf_counter() - start


def enter_step(gate: Optional[StepGate], rank: int, step: int):
    """gate.enter(rank, step) when the ring runs under a StepGate (threads of one process)."""
    if gate is not None:
        gate.enter(rank, step)


def split_bounds(total: int, parts: int) -> list:
    """(start, stop) of `parts` contiguous pieces of `total`, sizes differing by at most 1."""
    edges = [total * i // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]


def zigzag_chunks(seq: int, ranks: int, causal: bool) -> list:
    """Per rank, the (start, stop) sequence ranges it holds: one chunk of P (non-causal), or
    chunks r and 2P-1-r of 2P (causal)."""
    if not causal:
        return [[b] for b in split_bounds(seq, ranks)]
    pieces = split_bounds(seq, 2 * ranks)
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


def check_devices(devices, backend) -> list:
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


def host_task(session: Session, stream, fn, callbacks: list):
    """Runs fn() on the stream's worker in stream order (simulator: aclfaSimStreamEnqueue); the
    callback is kept in `callbacks`, which the caller keeps until the stream was synchronized."""
    @ffi.callback("aclfaSimTaskFn")
    def task(user, err, size):
        try:
            fn()
            return 0
        except BaseException as exc:  # reported by the stream's next synchronize
            text = f"{type(exc).__name__}: {exc}".encode()[: size - 1]
            ffi.memmove(err, text + b"\0", len(text) + 1)
            return 500000  # ACL_ERROR_INTERNAL_ERROR
    callbacks.append(task)
    session.call("aclfaSimStreamEnqueue", stream.handle, b"ring link counter", task, ffi.NULL, ffi.NULL)


def settle_stream(stream):
    """Waits for `stream`, dropping its error: on a failure path the error that matters is already
    propagating, and on success the stream was waited for already."""
    try:
        stream.synchronize()
    except Exception:  # noqa: BLE001 -- follows from the failure being raised
        pass


def close_on_exit(stack: contextlib.ExitStack, obj, settle: bool = False):
    """Registers obj.close() on `stack` (a stream: after settle_stream)."""
    if settle:
        stack.callback(obj.close)
        stack.callback(settle_stream, obj)
    else:
        stack.callback(obj.close)
    return obj


@contextlib.contextmanager
def device_clique(devices, backend_name: str):
    """One Session per device of this process and a new HCCL clique over them
    (Communicator.init_all: its link counters start at zero); yields (sessions, comms) and
    closes every comm, then every session, on success and on failure."""
    sessions = [Session(device=d, backend=backend_name) for d in devices]
    comms = []
    try:
        comms = hccl.Communicator.init_all(sessions)
        yield sessions, comms
    finally:
        for c in comms:
            c.close()
        for s in sessions:
            s.close()


def chip_peak_flops(backend) -> float:
    """The chip's fp16 cube peak in FLOP/s (backend sim: the catalogue's), else 0 (unknown)."""
    if backend.name != "sim":
        return 0.0
    chip = backend.fn("aclfaSimGetChip")()
    return float(chip.cubeFp16Tflops) * 1e12 if chip != ffi.NULL else 0.0
