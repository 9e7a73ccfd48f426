"""The L2 traffic model: GM accesses are not HBM traffic on a chip with a large L2.

The simulator records every GM range a launch reads or writes (aclfaSimSetGmTrace), in launch
order; ``aclfaSimModelL2`` replays that trace through a fully associative, write-back,
write-allocate LRU cache of the chip's L2 size and line size and counts the bytes such a
cache would move to and from HBM. A model (sim only), never a measurement of a chip.

The trace holds every DataCopy range and, per Matmul call, the rows of its A, B and C operands
once (a strided operand -- one head's rows of a BSND or BSH tensor -- as the rows it touches,
not the span that includes the other heads' rows between them); the launch counters also count
the operand re-reads between the Matmul's tile passes (served by L1/L2 on the chip). So the
trace's access bytes are at most the counters' GM bytes; "raw GM access bytes" in reports are
the counters'.

Order: the simulator runs the simulated cores on a few host threads, each core to its end, so
the recorded order has few cores in flight; on the chip all cores run at once and their
accesses interleave. ``order="concurrent"`` replays the records with the AI Core groups (an AIC
and its AIVs, which hand data to each other through GM and so keep their recorded order)
progressing at equal rates, each record placed at its fraction of its group's records: a closer
picture of the chip's L2 working set. ``order="launch"`` keeps the recorded order.
``order="modeled"`` replays the GM accesses of a launch made inside ``acl_fa.plan.timing.op_trace`` in
the order the pipeline model says they happen on the chip: deterministic, unlike the other two
(which follow host-thread scheduling).
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from ..runtime.ffi import ffi
from ..runtime.loader import Backend
from .timing import modeled_gm_trace

__all__ = ["L2Stats", "gm_trace", "model_trace", "model_records", "interleave_by_core", "traffic_by_region",
           "TRACE_DTYPE", "ORDERS"]

# One aclfaSimGmAccess record, for hand-made traces (field order and widths of the C struct).
TRACE_DTYPE = np.dtype([("addr", "<u8"), ("bytes", "<u4"), ("core", "<u2"), ("is_write", "<u2")])
ORDERS = ("launch", "concurrent", "modeled")


@dataclasses.dataclass(frozen=True)
class L2Stats:
    l2_bytes: int
    line_bytes: int
    records: int
    access_bytes: int      # bytes of the trace's records (reads + writes)
    line_accesses: int
    line_hits: int
    line_misses: int
    distinct_lines: int    # compulsory misses
    hbm_read_bytes: int    # line fills
    hbm_write_bytes: int   # dirty write-backs, end-of-trace flush included
    hbm_flush_bytes: int

    @property
    def hbm_bytes(self) -> int:
        """Modeled HBM traffic: fills + write-backs."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    @property
    def hit_rate(self) -> float:
        return self.line_hits / self.line_accesses if self.line_accesses else 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"hbm_bytes": self.hbm_bytes, "hit_rate": self.hit_rate,
                                           "label": "modeled (LRU L2 over the simulator's GM trace)"}


def _engine(backend: Backend) -> Backend:
    """The backend with the engine's extension functions reachable: they live in
    libascendc_sim, a dependency of the op library, which is loaded on first use."""
    backend.load_op_library()
    return backend


@contextlib.contextmanager
def gm_trace(backend: Backend):
    """Records the GM accesses of the launches inside the block; the trace is cleared on entry
    and on exit (it can hold millions of records)."""
    _engine(backend).call("aclfaSimSetGmTrace", 1)
    try:
        yield
    finally:
        backend.call("aclfaSimSetGmTrace", 0)


def _model(backend: Backend, records, count: int, l2_bytes: int, line_bytes: int) -> L2Stats:
    if line_bytes <= 0 or l2_bytes < line_bytes:
        raise ValueError(f"L2 model: need line_bytes > 0 and l2_bytes >= line_bytes, got "
                         f"l2_bytes={l2_bytes}, line_bytes={line_bytes}")
    out = ffi.new("aclfaSimL2Stats *")
    _engine(backend).call("aclfaSimModelL2", l2_bytes, line_bytes, records, count, out)
    return L2Stats(l2_bytes, line_bytes, count, int(out.accessBytes), int(out.lineAccesses), int(out.lineHits),
                   int(out.lineMisses), int(out.distinctLines), int(out.hbmReadBytes), int(out.hbmWriteBytes),
                   int(out.hbmFlushBytes))


def _trace_records(backend: Backend) -> np.ndarray:
    """The trace recorded so far (inside ``gm_trace``) as a TRACE_DTYPE view (valid until the
    trace is cleared)."""
    records = ffi.new("const aclfaSimGmAccess **")
    count = ffi.new("uint64_t *")
    _engine(backend).call("aclfaSimGetGmTrace", records, count)
    n = int(count[0])
    if n == 0:
        return np.empty(0, TRACE_DTYPE)
    return np.frombuffer(ffi.buffer(records[0], n * TRACE_DTYPE.itemsize), TRACE_DTYPE)


_SLICE = 1 << 20  # trace records per slice in traffic_by_region


def traffic_by_region(backend: Backend, regions: dict) -> dict:
    """Bytes the recorded trace reads and writes inside each region, {name: (start, nbytes)}
    with start a host address; records outside every region count under "other". Returns
    {name: {"read": bytes, "write": bytes}}."""
    records = _trace_records(backend)
    names = list(regions)
    starts = np.array([int(regions[n][0]) for n in names], dtype=np.uint64)
    ends = starts + np.array([int(regions[n][1]) for n in names], dtype=np.uint64)
    order = np.argsort(starts)
    # bytes[region or "other", is_write]; the trace in slices, so the temporaries stay a few MiB
    # whatever its length (tens of millions of records at S = 32768).
    totals = np.zeros((len(names) + 1, 2), np.int64)
    for lo in range(0, len(records), _SLICE):
        part = records[lo:lo + _SLICE]
        slot = np.searchsorted(starts[order], part["addr"], side="right").astype(np.int64) - 1
        inside = (slot >= 0) & (part["addr"] < ends[order][np.maximum(slot, 0)])
        index = np.where(inside, order[np.maximum(slot, 0)], len(names))
        np.add.at(totals, (index, (part["is_write"] != 0).astype(np.int64)), part["bytes"].astype(np.int64))
    return {name: {"read": int(totals[i, 0]), "write": int(totals[i, 1])} for i, name in enumerate(names + ["other"])}


def interleave_by_core(records: np.ndarray, aiv_per_aic: int = 2) -> np.ndarray:
    """The records reordered as if every AI Core group progressed at the same rate: record i
    of a group with n records goes to position (i + 1/2) / n on a common axis (stable for ties).
    A record's group is its AIC (core id 1000 + AIC index) or the AIC of its AIV (AIV index //
    aiv_per_aic); within a group the recorded order is kept."""
    if len(records) == 0:
        return records
    core = records["core"].astype(np.int64)
    groups = np.where(core >= 1000, core - 1000, core // max(1, aiv_per_aic))
    _, group, counts = np.unique(groups, return_inverse=True, return_counts=True)
    by_group = np.argsort(group, kind="stable")
    first = np.cumsum(counts) - counts
    ordinal = np.empty(len(records), np.int64)
    ordinal[by_group] = np.arange(len(records)) - first[group[by_group]]
    progress = (ordinal + 0.5) / counts[group]
    return records[np.argsort(progress, kind="stable")]


def model_trace(backend: Backend, l2_bytes: int, line_bytes: int, order: str = "launch") -> L2Stats:
    """The model over the trace recorded so far (inside ``gm_trace``), in `order` (ORDERS;
    "modeled" needs the last launch traced by ``acl_fa.plan.timing.op_trace``)."""
    if order not in ORDERS:
        raise ValueError(f"L2 model: order must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "modeled":
        pointer, count = modeled_gm_trace(backend)
        return _model(backend, pointer, count, l2_bytes, line_bytes)
    if order == "launch":
        records = ffi.new("const aclfaSimGmAccess **")
        count = ffi.new("uint64_t *")
        _engine(backend).call("aclfaSimGetGmTrace", records, count)
        return _model(backend, records[0], int(count[0]), l2_bytes, line_bytes)
    trace = _trace_records(backend)
    stats = ffi.new("aclfaSimLaunchStats *")
    backend.call("aclfaSimGetLastLaunchStats", stats)
    aiv_per_aic = max(1, stats.aivUsed // stats.aicUsed) if stats.aicUsed else 1
    return model_records(backend, interleave_by_core(trace, aiv_per_aic), l2_bytes, line_bytes)


def model_records(backend: Backend, records: np.ndarray, l2_bytes: int, line_bytes: int,
                  ) -> L2Stats:
    """The model over a hand-made trace: a TRACE_DTYPE array (or anything convertible)."""
    array = np.ascontiguousarray(np.asarray(records, dtype=TRACE_DTYPE))
    if ffi.sizeof("aclfaSimGmAccess") != TRACE_DTYPE.itemsize:
        raise RuntimeError("TRACE_DTYPE does not match aclfaSimGmAccess")
    pointer = ffi.cast("const aclfaSimGmAccess *", ffi.from_buffer(array)) if len(array) else ffi.NULL
    return _model(backend, pointer, len(array), l2_bytes, line_bytes)
