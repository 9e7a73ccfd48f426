"""Ranks agreeing on a collective call before its device work.

Each rank describes its part of the call as a few integers; the descriptions are all-gathered over
the communicator (HcclAllGather) and compared on every rank, so every rank raises the same
InvalidArgumentError naming the ranks that differ -- no rank goes on to wait for a peer that
stopped. `all_gather_host` is the helper both this and the per-rank reports use.
"""
from __future__ import annotations

import collections

import numpy as np

from ..runtime.errors import InvalidArgumentError

__all__ = ["all_gather_host", "agree"]


def all_gather_host(comm, array) -> np.ndarray:
    """[P, *array.shape]: every rank's `array` (same shape and dtype on every rank), in rank order,
    through device buffers of the communicator's session and one HcclAllGather."""
    host = np.ascontiguousarray(array)
    s = comm.session
    send = s.alloc(max(host.nbytes, 1))
    try:
        recv = s.alloc(max(host.nbytes * comm.size, 1))
        try:
            stream = s.stream()
            try:
                send.copy_from_host(host)
                comm.all_gather(send, recv, host.size, host.dtype, stream)
                stream.synchronize()
            finally:
                stream.close()
            return recv.copy_to_host(np.empty((comm.size, *host.shape), host.dtype))
        finally:
            recv.close()
    finally:
        send.close()


def _encode(value) -> int:
    """An int, bool, float (its float64 bits) or str of <= 8 ASCII bytes as one int64."""
    if isinstance(value, str):
        raw = value.encode("ascii")
        if len(raw) > 8:
            raise InvalidArgumentError(f"{value!r}: at most 8 ASCII characters cross to the other ranks")
        return int(np.frombuffer(raw.ljust(8, b"\0"), np.int64)[0])
    if isinstance(value, float):
        return int(np.array([value], np.float64).view(np.int64)[0])
    return int(value)


def _decode(like, code: int):
    if isinstance(like, str):
        return np.array([code], np.int64).tobytes().rstrip(b"\0").decode("ascii", "replace")
    if isinstance(like, float):
        return float(np.array([code], np.int64).view(np.float64)[0])
    return type(like)(code)


def agree(comm, what: str, shared: dict, own: dict) -> list:
    """Every rank's `own` values (dicts of ints, in rank order) after checking that every rank passed
    the same `shared` values (name -> int, bool, float or short str). The error names each field that
    differs and, per value, the ranks holding it (most ranks first)."""
    row = [_encode(v) for v in shared.values()] + [_encode(v) for v in own.values()]
    table = all_gather_host(comm, np.array(row, np.int64))
    problems = []
    for i, (name, mine) in enumerate(shared.items()):
        column = [int(x) for x in table[:, i]]
        if len(set(column)) > 1:
            counts = collections.Counter(column)
            held = [f"rank{'s' if counts[v] > 1 else ''} {', '.join(str(r) for r, x in enumerate(column) if x == v)}: "
                    f"{_decode(mine, v)}" for v, _ in counts.most_common()]
            problems.append(f"{name} ({'; '.join(held)})")
    if problems:
        raise InvalidArgumentError(f"{what}: the ranks disagree on {', '.join(problems)}")
    return [{n: int(r[len(shared) + j]) for j, n in enumerate(own)} for r in table]
