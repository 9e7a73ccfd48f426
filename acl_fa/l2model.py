"""The L2 traffic model: GM accesses are not HBM traffic on a chip with a large L2.

The simulator records every GM range a launch reads or writes (aclfaSimSetGmTrace), in launch
order; ``aclfaSimModelL2`` replays that trace through a fully associative, write-back,
write-allocate LRU cache of the chip's L2 size and line size and counts the bytes such a
cache would move to and from HBM. A model (sim only), never a measurement of a chip.

The trace holds every DataCopy range and, per Matmul call, the span of its A, B and C operands
once; the launch counters also count the operand re-reads between the Matmul's tile passes
(served by L1/L2 on the chip). So the trace's access bytes and the counters' GM bytes differ;
"raw GM access bytes" in reports are the counters'.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from ._ffi import ffi
from .loader import Backend

__all__ = ["L2Stats", "gm_trace", "model_trace", "model_records", "TRACE_DTYPE"]

# One aclfaSimGmAccess record, for hand-made traces (field order and widths of the C struct).
TRACE_DTYPE = np.dtype([("addr", "<u8"), ("bytes", "<u4"), ("core", "<u2"), ("is_write", "<u2")])


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


def model_trace(backend: Backend, l2_bytes: int, line_bytes: int) -> L2Stats:
    """The model over the trace recorded so far (inside ``gm_trace``)."""
    records = ffi.new("const aclfaSimGmAccess **")
    count = ffi.new("uint64_t *")
    _engine(backend).call("aclfaSimGetGmTrace", records, count)
    return _model(backend, records[0], int(count[0]), l2_bytes, line_bytes)


def model_records(backend: Backend, records: np.ndarray, l2_bytes: int, line_bytes: int,
                  ) -> L2Stats:
    """The model over a hand-made trace: a TRACE_DTYPE array (or anything convertible)."""
    array = np.ascontiguousarray(np.asarray(records, dtype=TRACE_DTYPE))
    if ffi.sizeof("aclfaSimGmAccess") != TRACE_DTYPE.itemsize:
        raise RuntimeError("TRACE_DTYPE does not match aclfaSimGmAccess")
    pointer = ffi.cast("const aclfaSimGmAccess *", ffi.from_buffer(array)) if len(array) else ffi.NULL
    return _model(backend, pointer, len(array), l2_bytes, line_bytes)
