"""HCCL from Python: communicators between device sessions, through HCCL's real C API.

Every call goes through the backend's one checked-call path: a non-zero ``HcclResult`` raises
the ``HcclError`` family (code, HCCL_E_* name, API, HcclGetErrorString text and the runtime's
message). Calls are asynchronous as in C: they enqueue work on a ``Stream`` of the rank's
device and return; errors found while the work runs (ranks disagreeing, a rank that never
makes its call) surface at that stream's ``synchronize()``.

- ``root_info()`` makes the bytes that every process of a multi-process clique passes to
  ``Communicator.join``; ``Communicator.init_all(sessions)`` makes one comm per session of
  this process (HcclCommInitAll).
- A buffer argument is a ``DeviceBuffer`` or ``(DeviceBuffer, byte_offset)``; counts are in
  elements of ``dtype``.
"""
from __future__ import annotations

import weakref
from typing import Optional, Sequence

import ml_dtypes
import numpy as np

from ..runtime.ffi import ffi
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..runtime.loader import Backend, get_backend
from ..runtime.session import DeviceBuffer, DeviceSession, Stream
from ..runtime.errors import ClosedObjectError

ROOT_INFO_BYTES = 4108  # HCCL_ROOT_INFO_BYTES

# numpy dtype -> HcclDataType (hccl/hccl_types.h)
_HCCL_TYPES = {
    np.dtype(np.int8): 0, np.dtype(np.int16): 1, np.dtype(np.int32): 2, np.dtype(np.float16): 3,
    np.dtype(np.float32): 4, np.dtype(np.int64): 5, np.dtype(np.uint64): 6, np.dtype(np.uint8): 7,
    np.dtype(np.uint16): 8, np.dtype(np.uint32): 9, np.dtype(np.float64): 10,
    np.dtype(ml_dtypes.bfloat16): 11,
}
_REDUCE_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}  # HcclReduceOp


def hccl_dtype(dtype) -> int:
    try:
        return _HCCL_TYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise InvalidTypeError(f"dtype {dtype!r} has no HcclDataType; supported: "
                               f"{', '.join(str(d) for d in _HCCL_TYPES)}") from None


def root_info(backend: Optional[Backend] = None) -> bytes:
    """HcclGetRootInfo: the bytes to hand to every rank (out of band) for Communicator.join."""
    backend = backend or get_backend()
    info = ffi.new("HcclRootInfo *")
    backend.call("HcclGetRootInfo", info)
    return bytes(ffi.buffer(info))


def _destroy(backend: Backend, handle):
    backend.call("HcclCommDestroy", handle)


def _pointer(buf, nbytes: int, what: str):
    """The device address of `buf` (DeviceBuffer or (DeviceBuffer, offset)) after checking that
    `nbytes` fit from there."""
    offset = 0
    if isinstance(buf, tuple):
        buf, offset = buf
    if not isinstance(buf, DeviceBuffer):
        raise InvalidTypeError(f"{what} must be a DeviceBuffer or (DeviceBuffer, offset), got {type(buf).__name__}")
    if offset < 0 or offset + nbytes > buf.nbytes:
        raise InvalidArgumentError(
            f"{what}: {nbytes} bytes at offset {offset} do not fit its buffer of {buf.nbytes} bytes")
    return ffi.cast("char *", buf.ptr) + offset, buf


class Communicator:
    """One rank of a clique, bound to the device of ``session``. ``close()`` (or ``with``)
    destroys it; a finalizer does when it is dropped."""

    def __init__(self, session: DeviceSession, handle):
        self.session = session
        self.backend = session.backend
        self._handle = handle
        self._finalizer = weakref.finalize(self, _destroy, self.backend, handle)
        self._finalizer.atexit = False
        size, rank = ffi.new("uint32_t *"), ffi.new("uint32_t *")
        self.backend.call("HcclGetRankSize", handle, size)
        self.backend.call("HcclGetRankId", handle, rank)
        self.size, self.rank = int(size[0]), int(rank[0])

    @classmethod
    def join(cls, session: DeviceSession, n_ranks: int, rank: int, root: bytes) -> "Communicator":
        """HcclCommInitRootInfo: rank `rank` of `n_ranks`; blocks until every rank joined."""
        if not isinstance(root, (bytes, bytearray)) or len(root) != ROOT_INFO_BYTES:
            raise InvalidArgumentError(f"root must be the {ROOT_INFO_BYTES} bytes of root_info()")
        if not 0 <= rank < n_ranks:
            raise InvalidArgumentError(f"rank={rank} is out of range [0, {n_ranks})")
        info = ffi.new("HcclRootInfo *")
        ffi.memmove(info, bytes(root), ROOT_INFO_BYTES)
        comm = ffi.new("HcclComm *")
        session.call("HcclCommInitRootInfo", n_ranks, info, rank, comm)
        return cls(session, comm[0])

    @classmethod
    def from_rank_table(cls, session: DeviceSession, path: str, rank: int) -> "Communicator":
        """HcclCommInitClusterInfo: rank `rank` of the rank table file at `path` (docs/hccl.md,
        "Clusters"); the session's device must be the table's device_id of that rank. Blocks until
        every rank of the table joined (HCCL_CONNECT_TIMEOUT)."""
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
            raise InvalidArgumentError(f"rank={rank!r} must be an integer >= 0")
        comm = ffi.new("HcclComm *")
        session.call("HcclCommInitClusterInfo", str(path).encode(), int(rank), comm)
        return cls(session, comm[0])

    @classmethod
    def init_all(cls, sessions: Sequence[DeviceSession]) -> list:
        """HcclCommInitAll over the sessions' devices: rank i is sessions[i]."""
        devices = [s.device for s in sessions]
        if len(set(devices)) != len(devices):
            raise InvalidArgumentError(f"the sessions' devices {devices} repeat a device")
        comms = ffi.new("HcclComm[]", len(sessions))
        sessions[0].backend.call("HcclCommInitAll", len(sessions), ffi.new("int32_t[]", devices), comms)
        return [cls(s, comms[i]) for i, s in enumerate(sessions)]

    # ---- lifetime ---------------------------------------------------------------------
    def close(self):
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self) -> str:
        return f"<Communicator rank {self.rank} of {self.size} on device {self.session.device}>"

    @property
    def handle(self):
        if self.closed:
            raise ClosedObjectError("the Communicator is closed")
        return self._handle

    @property
    def name(self) -> str:
        """HcclGetCommName: the comm's name, the same on every rank of the clique -- what an MC2
        op's group attr takes (acl_fa.ops.ring_attention)."""
        buf = ffi.new("char[128]")  # ROOTINFO_INDENTIFIER_MAX_LENGTH
        self.backend.call("HcclGetCommName", self.handle, buf)
        return ffi.string(buf).decode()

    # ---- calls --------------------------------------------------------------------------
    def _call(self, api: str, stream: Stream, keep: list, *args):
        self.session.call(api, *args, self.handle, stream.handle)
        stream.keep_alive(self, *keep)

    def send(self, buf, count: int, dtype, peer: int, stream: Stream):
        ptr, owner = _pointer(buf, count * np.dtype(dtype).itemsize, "send buffer")
        self._call("HcclSend", stream, [owner], ptr, count, hccl_dtype(dtype), peer)

    def recv(self, buf, count: int, dtype, peer: int, stream: Stream):
        ptr, owner = _pointer(buf, count * np.dtype(dtype).itemsize, "receive buffer")
        self._call("HcclRecv", stream, [owner], ptr, count, hccl_dtype(dtype), peer)

    def send_recv(self, items: Sequence[tuple], stream: Stream):
        """HcclBatchSendRecv: items ("send"|"recv", buf, count, dtype, peer) run together (no
        order among them, so a ring's send and receive cannot deadlock)."""
        c_items = ffi.new("HcclSendRecvItem[]", len(items))
        owners = []
        for i, (kind, buf, count, dtype, peer) in enumerate(items):
            if kind not in ("send", "recv"):
                raise InvalidArgumentError(f"items[{i}]: kind {kind!r} must be 'send' or 'recv'")
            ptr, owner = _pointer(buf, count * np.dtype(dtype).itemsize, f"items[{i}] buffer")
            c_items[i].sendRecvType = 0 if kind == "send" else 1
            c_items[i].buf = ptr
            c_items[i].count = count
            c_items[i].dataType = hccl_dtype(dtype)
            c_items[i].remoteRank = peer
            owners.append(owner)
        self._call("HcclBatchSendRecv", stream, owners, c_items, len(items))

    def all_gather(self, send, recv, count: int, dtype, stream: Stream):
        """recv holds size * count elements, rank i's block at i * count."""
        size = count * np.dtype(dtype).itemsize
        sptr, sown = _pointer(send, size, "send buffer")
        rptr, rown = _pointer(recv, size * self.size, "receive buffer")
        self._call("HcclAllGather", stream, [sown, rown], sptr, rptr, count, hccl_dtype(dtype))

    def all_to_all(self, send, recv, count: int, dtype, stream: Stream):
        """Block j (count elements) of send goes to rank j; block i of recv comes from rank i."""
        size = count * np.dtype(dtype).itemsize * self.size
        sptr, sown = _pointer(send, size, "send buffer")
        rptr, rown = _pointer(recv, size, "receive buffer")
        t = hccl_dtype(dtype)
        self._call("HcclAlltoAll", stream, [sown, rown], sptr, count, t, rptr, count, t)

    def all_to_all_v(self, send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype, stream: Stream):
        """HcclAlltoAllV: send_counts[j] elements of `dtype` at element offset send_displs[j] of
        send go to rank j; recv_counts[i] elements from rank i land at recv_displs[i] of recv.
        Every list has one entry per rank; each block must lie inside its buffer."""
        itemsize = np.dtype(dtype).itemsize
        arrays = []
        for name, values in (("send_counts", send_counts), ("send_displs", send_displs),
                             ("recv_counts", recv_counts), ("recv_displs", recv_displs)):
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != self.size:
                raise InvalidArgumentError(f"{name} must list one element count per rank ({self.size}), got {values!r}")
            for i, x in enumerate(values):
                if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0:
                    raise InvalidArgumentError(f"{name}[{i}] must be an integer >= 0, got {x!r}")
            arrays.append([int(x) for x in values])
        sc, sd, rc, rd = arrays
        sptr, sown = _pointer(send, max(c + d for c, d in zip(sc, sd)) * itemsize, "send buffer")
        rptr, rown = _pointer(recv, max(c + d for c, d in zip(rc, rd)) * itemsize, "receive buffer")
        c_arrays = [ffi.new("uint64_t[]", a) for a in arrays]
        t = hccl_dtype(dtype)
        self._call("HcclAlltoAllV", stream, [sown, rown, *c_arrays], sptr, c_arrays[0], c_arrays[1], t, rptr,
                   c_arrays[2], c_arrays[3], t)

    def all_reduce(self, send, recv, count: int, dtype, stream: Stream, op: str = "sum"):
        if op not in _REDUCE_OPS:
            raise InvalidArgumentError(f"op={op!r} must be one of {', '.join(_REDUCE_OPS)}")
        size = count * np.dtype(dtype).itemsize
        sptr, sown = _pointer(send, size, "send buffer")
        rptr, rown = _pointer(recv, size, "receive buffer")
        self._call("HcclAllReduce", stream, [sown, rown], sptr, rptr, count, hccl_dtype(dtype), _REDUCE_OPS[op])

    def broadcast(self, buf, count: int, dtype, root: int, stream: Stream):
        """HcclBroadcast: `count` elements of buf on rank `root` into buf on every other rank."""
        ptr, owner = _pointer(buf, count * np.dtype(dtype).itemsize, "broadcast buffer")
        self._call("HcclBroadcast", stream, [owner], ptr, count, hccl_dtype(dtype), root)

    def barrier(self, stream: Stream):
        self._call("HcclBarrier", stream, [])

    # ---- simulator counters ----------------------------------------------------------------
    def link_stats(self, src: int, dst: int) -> dict:
        """Traffic src -> dst since the last reset (backend sim): bytes, messages, modeled
        seconds and the link model (kind, GB/s, latency)."""
        stats = ffi.new("aclfaSimHcclLinkStats *")
        self.backend.call("aclfaSimHcclGetLinkStats", self.handle, src, dst, stats)
        return {"bytes": int(stats.bytes), "messages": int(stats.messages),
                "modeled_seconds": float(stats.modeledSeconds), **_link_dict(stats.link)}

    def reset_link_stats(self):
        self.backend.call("aclfaSimHcclResetLinkStats", self.handle)


def _link_dict(link) -> dict:
    return {"kind": ffi.string(link.kind).decode(), "bandwidth_gbs": float(link.bandwidthGBs),
            "latency_us": float(link.latencyUs), "devices_per_server": int(link.devicesPerServer)}


def link_model(src_device: int, dst_device: int, backend: Optional[Backend] = None) -> dict:
    """The simulator's modeled link between two devices of the current chip (backend sim)."""
    backend = backend or get_backend()
    link = ffi.new("aclfaSimHcclLink *")
    backend.call("aclfaSimHcclGetLinkModel", src_device, dst_device, link)
    return _link_dict(link)


def use_hccl(backend: Optional[Backend] = None) -> Backend:
    """Loads HCCL now (on the simulator this also makes 8 devices the default count, so call it
    before opening sessions on devices > 0)."""
    backend = backend or get_backend()
    backend.load_hccl()
    return backend
