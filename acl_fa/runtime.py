"""Runtime objects over the ACL runtime: DeviceSession, Stream, DeviceBuffer, HostBuffer, Event.

Lifetimes: every object has close() (idempotent) and ``with``; a ``weakref.finalize`` is the
safety net, capturing only the session's state, the raw handle and the free function (never
the object itself; no ``__del__``); finalizers do not run at interpreter exit, and nothing
is freed while the interpreter shuts down (the process's exit releases the device).

Session.close() tears down in the order CANN requires: tensors -> events -> streams
(synchronized, then destroyed) -> host and device buffers -> aclrtResetDevice (once per
aclrtSetDevice this session made) -> aclFinalize when the last Session of the process closes.

Threads: ACL binds a device to the calling OS thread. A Session calls aclrtSetDevice on a
thread the first time that thread uses it (remembered in threading.local) and before any
other ACL call there, so one Session may be shared by several threads.
"""
from __future__ import annotations

import itertools
import sys
import threading
import weakref
from typing import Callable, Optional

import numpy as np

from . import dtypes
from ._ffi import ffi
from .errors import (
    ACL_ERROR_REPEAT_INITIALIZE,
    AclError,
    AclFaError,
    ClosedObjectError,
    InvalidArgumentError,
    InvalidTypeError,
)
from .loader import Backend, check_device_id, get_backend

# aclrtMemcpyKind
ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
# aclrtMemMallocPolicy
ACL_MEM_MALLOC_HUGE_FIRST = 0
# aclrtMemAttr
ACL_HBM_MEM = 1
# aclrtCreateEventWithFlag flags (acl_rt.h)
ACL_EVENT_SYNC = 0x1
ACL_EVENT_TIME_LINE = 0x8

# Teardown order of a session's children (CANN: events -> streams -> memory). Executors refer
# to tensors and tensors to buffers: each is destroyed before what it points into.
_KINDS = ("executor", "tensor", "event", "stream", "host_buffer", "device_buffer")
# Copy counters by aclrtMemcpyKind (host-to-host copies are not counted).
_COPY_KINDS = {ACL_MEMCPY_HOST_TO_DEVICE: "h2d", ACL_MEMCPY_DEVICE_TO_HOST: "d2h",
               ACL_MEMCPY_DEVICE_TO_DEVICE: "d2d"}


class _AclProcess:
    """aclInit once per process, shared by every Session (refcounted)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sessions = 0
        self._owned = False  # True when our aclInit succeeded (we then finalize)

    def acquire(self, backend: Backend):
        with self._lock:
            if self._sessions == 0:
                try:
                    backend.call("aclInit", ffi.NULL)
                    self._owned = True
                except AclError as exc:
                    # Already initialized: by someone else in the process (then not ours to
                    # finalize), or by us when our last aclFinalize failed (then still ours).
                    if exc.code != ACL_ERROR_REPEAT_INITIALIZE:
                        raise
            self._sessions += 1

    def release(self, backend: Backend):
        with self._lock:
            self._sessions -= 1
            if self._sessions == 0 and self._owned:
                backend.call("aclFinalize")
                self._owned = False


_process = _AclProcess()
_thread = threading.local()  # .token: the Session state last bound on this thread
_tokens = itertools.count(1)


class _SessionState:
    """What a Session's children and finalizers need; holds no reference to the Session."""

    def __init__(self, backend: Backend, device: int):
        self.backend = backend
        self.device = device
        self.token = next(_tokens)
        self.lock = threading.RLock()
        self.closed = False
        self.set_device_calls = 0
        self.children: dict = {kind: {} for kind in _KINDS}
        self._keys = itertools.count()
        # Copies this session made: kind ("h2d", "d2h", "d2d") -> [calls, bytes].
        self.copies: dict = {kind: [0, 0] for kind in _COPY_KINDS.values()}

    def count_copy(self, kind: int, nbytes: int):
        with self.lock:
            entry = self.copies[_COPY_KINDS[kind]]
            entry[0] += 1
            entry[1] += int(nbytes)

    def bind(self, closing: bool = False):
        """aclrtSetDevice on the calling thread unless this thread is bound already.
        `closing`: also while the session tears down (releasing children needs the device)."""
        if getattr(_thread, "token", None) == self.token:
            return
        with self.lock:
            if not closing:
                self.check_open()
            self.backend.call("aclrtSetDevice", self.device)
            self.set_device_calls += 1
        _thread.token = self.token

    def check_open(self):
        if self.closed:
            raise ClosedObjectError("the Session is closed")

    def call(self, api: str, *args):
        """Checked ACL call on the calling thread, with this session's device bound."""
        self.bind()
        return self.backend.call(api, *args)

    def adopt(self, obj, kind: str, release: Callable, handle) -> weakref.finalize:
        """Registers a child; returns the finalizer that releases `handle` exactly once."""
        with self.lock:
            self.check_open()
            key = next(self._keys)
            finalizer = weakref.finalize(obj, _release_child, self, kind, key, release, handle)
            finalizer.atexit = False
            self.children[kind][key] = finalizer
        return finalizer

    def forget(self, kind: str, key: int):
        with self.lock:
            self.children[kind].pop(key, None)


def _release_child(state: _SessionState, kind: str, key: int, release: Callable, handle):
    state.forget(kind, key)
    if sys.is_finalizing():
        return
    state.bind(closing=True)
    release(state.backend, handle)


def _teardown_session(state: _SessionState):
    """Releases every live child in CANN's order, resets the device, finalizes ACL once.

    Every step runs even when an earlier one fails; the first failure is raised at the end.
    """
    if sys.is_finalizing():
        return
    with state.lock:
        state.closed = True
        pending = [list(state.children[kind].values()) for kind in _KINDS]
    errors: list = []
    for finalizers in pending:
        for finalizer in reversed(finalizers):  # newest first
            try:
                finalizer()
            except AclFaError as exc:
                errors.append(exc)
    with state.lock:
        resets, state.set_device_calls = state.set_device_calls, 0
    for _ in range(resets):
        try:
            state.backend.call("aclrtResetDevice", state.device)
        except AclFaError as exc:
            errors.append(exc)
    if getattr(_thread, "token", None) == state.token:
        _thread.token = None
    try:
        _process.release(state.backend)
    except AclFaError as exc:
        errors.append(exc)
    if errors:
        raise errors[0]


class DeviceSession:
    """One device of one backend, used from any number of threads; knows no op (the public
    ``acl_fa.Session`` of acl_fa/api.py adds the op methods).

    ``DeviceSession(device=0, backend=None)``; backend None = ACL_FA_BACKEND (default auto).
    """

    def __init__(self, device: int = 0, backend: Optional[str] = None):
        if not isinstance(device, (int, np.integer)) or isinstance(device, bool) or device < 0:
            raise InvalidArgumentError(f"device must be an integer >= 0, got {device!r}")
        self.backend = get_backend(backend)
        self.device = int(device)
        _process.acquire(self.backend)
        self._state = _SessionState(self.backend, self.device)
        self._finalizer = weakref.finalize(self, _teardown_session, self._state)
        self._finalizer.atexit = False
        try:
            check_device_id(self.backend, self.device)  # after aclInit, before aclrtSetDevice
            self._state.bind()
        except BaseException:
            self.close()
            raise

    # ---- lifetime -------------------------------------------------------------------
    def close(self):
        """Releases every object of this session, then the device. Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __enter__(self) -> "DeviceSession":
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Session backend={self.backend.name} device={self.device} {state}>"

    def call(self, api: str, *args):
        """The checked call (AclError family on failure) with the device bound on this thread.
        For ACL/aclnn APIs that have no wrapper object here (e.g. the op's aclnn entries)."""
        return self._state.call(api, *args)

    # ---- factories ------------------------------------------------------------------
    def stream(self) -> "Stream":
        return Stream(self)

    def event(self, timing: bool = True) -> "Event":
        return Event(self, timing=timing)

    def alloc(self, nbytes: int) -> "DeviceBuffer":
        return DeviceBuffer(self, nbytes)

    def alloc_host(self, nbytes: int) -> "HostBuffer":
        return HostBuffer(self, nbytes)

    def upload(self, array) -> "DeviceBuffer":
        """A new DeviceBuffer holding `array` (any layout; copied C-contiguous once)."""
        host = _as_c_contiguous(array)
        buffer = DeviceBuffer(self, max(host.nbytes, 1), shape=host.shape, dtype=host.dtype)
        try:
            buffer.copy_from_host(host)
        except BaseException:
            buffer.close()
            raise
        return buffer

    # ---- queries --------------------------------------------------------------------
    def synchronize(self):
        self._state.call("aclrtSynchronizeDevice")

    def mem_info(self) -> tuple:
        """(free, total) bytes of device HBM."""
        free, total = ffi.new("size_t *"), ffi.new("size_t *")
        self._state.call("aclrtGetMemInfo", ACL_HBM_MEM, free, total)
        return int(free[0]), int(total[0])

    def soc_name(self) -> str:
        self._state.bind()
        name = self.backend.fn("aclrtGetSocName")()
        return "" if name == ffi.NULL else ffi.string(name).decode()

    def copy_counters(self) -> dict:
        """Copies this session has made through its buffers and streams, by direction:
        {"h2d" | "d2h" | "d2d": {"calls": n, "bytes": n}} (host-to-device, device-to-host,
        device-to-device), counted when the copy is issued."""
        with self._state.lock:
            return {kind: {"calls": c, "bytes": b} for kind, (c, b) in self._state.copies.items()}

    def to_device(self, array) -> "DeviceArray":
        """A device array holding a copy of `array` (see acl_fa.device_array)."""
        from .device_array import DeviceArray

        return DeviceArray.from_host(self, array)

    def empty(self, shape, dtype) -> "DeviceArray":
        """An uninitialized device array of `shape` and `dtype`."""
        from .device_array import DeviceArray

        return DeviceArray.empty(self, shape, dtype)

    def live_counts(self) -> dict:
        """Live objects of the simulator's libraries (backend "sim" only), for tests."""
        if self.backend.name != "sim":
            raise InvalidArgumentError("live_counts() needs backend sim (a simulator extension)")
        return live_counts(self.backend)

    # ---- for objects of this module and tensor.py -----------------------------------
    def _adopt(self, obj, kind: str, release: Callable, handle) -> weakref.finalize:
        return self._state.adopt(obj, kind, release, handle)


def live_counts(backend: Backend) -> dict:
    """aclfaSimGetLiveCounts as a dict (field name -> int)."""
    counts = ffi.new("aclfaSimLiveCounts *")
    backend.call("aclfaSimGetLiveCounts", counts)
    return {name: int(getattr(counts, name)) for name, _ in ffi.typeof(counts[0]).fields}


def _as_c_contiguous(array) -> np.ndarray:
    host = np.asarray(array)
    dtypes.as_dtype(host.dtype)  # only types with an aclDataType cross to the device
    return np.ascontiguousarray(host)


def _byte_view(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 array (works for ml_dtypes too)."""
    return array.reshape(-1).view(np.uint8)


class _Child:
    """Common lifetime of the objects a Session owns."""

    _kind = ""

    def _attach(self, session: DeviceSession, release: Callable, handle):
        self.session = session
        self._state = session._state
        self._handle = handle
        self._finalizer = session._adopt(self, self._kind, release, handle)

    def close(self):
        """Releases the object now. Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def _live_handle(self):
        if not self._finalizer.alive:
            raise ClosedObjectError(f"{type(self).__name__} is closed")
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _free_device(backend: Backend, ptr):
    backend.call("aclrtFree", ptr)


def _free_host(backend: Backend, ptr):
    backend.call("aclrtFreeHost", ptr)


def _destroy_stream(backend: Backend, stream):
    try:
        backend.call("aclrtSynchronizeStream", stream)
    finally:
        backend.call("aclrtDestroyStream", stream)


def _destroy_event(backend: Backend, event):
    backend.call("aclrtDestroyEvent", event)


class DeviceBuffer(_Child):
    """``nbytes`` of device memory (aclrtMalloc). ``shape``/``dtype`` describe the array it
    holds when made by Session.upload (else None)."""

    _kind = "device_buffer"

    def __init__(self, session: DeviceSession, nbytes: int, shape=None, dtype=None):
        nbytes = _positive_size(nbytes, "nbytes")
        session._state.check_open()
        ptr = ffi.new("void **")
        session._state.call("aclrtMalloc", ptr, nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        self._attach(session, _free_device, ptr[0])
        self.nbytes = nbytes
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = np.dtype(dtype) if dtype is not None else None

    @property
    def ptr(self):
        """The device address (cffi ``void *``)."""
        return self._live_handle()

    def copy_from_host(self, array, offset: int = 0):
        """Synchronous H2D copy of `array` (any layout) to byte `offset` of this buffer."""
        host = _as_c_contiguous(array)
        self._check_range(host.nbytes, offset, "copy_from_host")
        if host.nbytes == 0:
            return
        dst = ffi.cast("char *", self._live_handle()) + offset
        self._state.call("aclrtMemcpy", dst, self.nbytes - offset, ffi.from_buffer(_byte_view(host)),
                         host.nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
        self._state.count_copy(ACL_MEMCPY_HOST_TO_DEVICE, host.nbytes)

    def copy_from_device(self, src: "DeviceBuffer", nbytes: int, offset: int = 0, src_offset: int = 0):
        """Synchronous D2D copy of `nbytes` from byte `src_offset` of `src` to byte `offset`."""
        if not isinstance(src, DeviceBuffer):
            raise InvalidTypeError(f"copy_from_device needs a DeviceBuffer, got {type(src).__name__}")
        self._check_range(nbytes, offset, "copy_from_device")
        src._check_range(nbytes, src_offset, "copy_from_device (source)")
        if nbytes == 0:
            return
        dst = ffi.cast("char *", self._live_handle()) + offset
        self._state.call("aclrtMemcpy", dst, self.nbytes - offset, ffi.cast("char *", src.ptr) + src_offset,
                         nbytes, ACL_MEMCPY_DEVICE_TO_DEVICE)
        self._state.count_copy(ACL_MEMCPY_DEVICE_TO_DEVICE, nbytes)

    def copy_to_host(self, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Synchronous D2H copy into the C-contiguous writable array `out`; returns it."""
        if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidArgumentError("out must be a writable C-contiguous numpy array")
        self._check_range(out.nbytes, offset, "copy_to_host")
        if out.nbytes == 0:
            return out
        src = ffi.cast("char *", self._live_handle()) + offset
        self._state.call("aclrtMemcpy", ffi.from_buffer(_byte_view(out), require_writable=True),
                         out.nbytes, src, out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
        self._state.count_copy(ACL_MEMCPY_DEVICE_TO_HOST, out.nbytes)
        return out

    def to_numpy(self, shape=None, dtype=None) -> np.ndarray:
        """A new host array read from this buffer (default: the uploaded shape/dtype)."""
        dtype = dtypes.as_dtype(dtype if dtype is not None else (self.dtype or np.uint8))
        if shape is None:
            shape = self.shape if self.shape is not None else (self.nbytes // dtype.itemsize,)
        return self.copy_to_host(np.empty(shape, dtype))

    def _check_range(self, nbytes: int, offset: int, what: str):
        if offset < 0 or offset + nbytes > self.nbytes:
            raise InvalidArgumentError(
                f"{what}: {nbytes} bytes at offset {offset} do not fit the buffer of {self.nbytes} bytes")

    def __repr__(self) -> str:
        return f"<DeviceBuffer {self.nbytes} B shape={self.shape} dtype={self.dtype}>"


class HostBuffer(_Child):
    """``nbytes`` of page-locked host memory (aclrtMallocHost): the host side of async copies."""

    _kind = "host_buffer"

    def __init__(self, session: DeviceSession, nbytes: int):
        nbytes = _positive_size(nbytes, "nbytes")
        session._state.check_open()
        ptr = ffi.new("void **")
        session._state.call("aclrtMallocHost", ptr, nbytes)
        self._attach(session, _free_host, ptr[0])
        self.nbytes = nbytes

    @property
    def ptr(self):
        return self._live_handle()

    def numpy(self, dtype=np.uint8, shape=None) -> np.ndarray:
        """A numpy view of this memory (no copy). Valid until close(); the view keeps this
        object alive but not the memory after an explicit close()."""
        dtype = dtypes.as_dtype(dtype)
        count = self.nbytes // dtype.itemsize if shape is None else int(np.prod(shape))
        if count * dtype.itemsize > self.nbytes:
            raise InvalidArgumentError(
                f"shape {shape} of {dtype} needs {count * dtype.itemsize} bytes; buffer has {self.nbytes}")
        raw = np.frombuffer(ffi.buffer(self._live_handle(), count * dtype.itemsize), dtype=np.uint8)
        view = raw.view(dtype)
        return view.reshape(shape) if shape is not None else view


class Stream(_Child):
    """An explicit stream (aclrtCreateStream). Objects used by enqueued work are kept alive
    until the next synchronize()."""

    _kind = "stream"

    def __init__(self, session: DeviceSession):
        session._state.check_open()
        stream = ffi.new("aclrtStream *")
        session._state.call("aclrtCreateStream", stream)
        self._attach(session, _destroy_stream, stream[0])
        self._lock = threading.Lock()
        self._in_flight: list = []

    @property
    def handle(self):
        return self._live_handle()

    def copy(self, dst, src, nbytes: Optional[int] = None):
        """Async copy between DeviceBuffer/HostBuffer objects (kind from their types)."""
        kinds = {
            (DeviceBuffer, HostBuffer): ACL_MEMCPY_HOST_TO_DEVICE,
            (HostBuffer, DeviceBuffer): ACL_MEMCPY_DEVICE_TO_HOST,
            (DeviceBuffer, DeviceBuffer): ACL_MEMCPY_DEVICE_TO_DEVICE,
            (HostBuffer, HostBuffer): ACL_MEMCPY_HOST_TO_HOST,
        }
        kind = kinds.get((type(dst), type(src)))
        if kind is None:
            raise InvalidTypeError(
                f"Stream.copy needs DeviceBuffer/HostBuffer objects, got {type(dst).__name__} "
                f"and {type(src).__name__}")
        count = min(dst.nbytes, src.nbytes) if nbytes is None else int(nbytes)
        if count <= 0 or count > dst.nbytes or count > src.nbytes:
            raise InvalidArgumentError(
                f"copy of {count} bytes: must be > 0 and fit both dst ({dst.nbytes} B) and src ({src.nbytes} B)")
        self._state.call("aclrtMemcpyAsync", dst.ptr, dst.nbytes, src.ptr, count, kind,
                         self._live_handle())
        if kind in _COPY_KINDS:
            self._state.count_copy(kind, count)
        self.keep_alive(dst, src)

    def keep_alive(self, *objects):
        """Holds `objects` until the next synchronize() (work in flight uses them)."""
        with self._lock:
            self._in_flight.extend(objects)

    def synchronize(self):
        self._state.call("aclrtSynchronizeStream", self._live_handle())
        with self._lock:
            self._in_flight.clear()


class Event(_Child):
    """An event; with timing=True it records timestamps for elapsed_ms()."""

    _kind = "event"

    def __init__(self, session: DeviceSession, timing: bool = True):
        session._state.check_open()
        event = ffi.new("aclrtEvent *")
        if timing:
            session._state.call("aclrtCreateEventWithFlag", event,
                                ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC)
        else:
            session._state.call("aclrtCreateEvent", event)
        self._attach(session, _destroy_event, event[0])
        self.timing = timing

    @property
    def handle(self):
        return self._live_handle()

    def record(self, stream: Optional[Stream] = None):
        """Records on `stream` (None = the device's default stream)."""
        handle = stream.handle if stream is not None else ffi.NULL
        self._state.call("aclrtRecordEvent", self._live_handle(), handle)

    def synchronize(self):
        self._state.call("aclrtSynchronizeEvent", self._live_handle())

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to `end` (both recorded and completed)."""
        if not (self.timing and end.timing):
            raise InvalidArgumentError("elapsed_ms needs two events created with timing=True")
        ms = ffi.new("float *")
        self._state.call("aclrtEventElapsedTime", ms, self._live_handle(), end.handle)
        return float(ms[0])


def _positive_size(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidTypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value <= 0:
        raise InvalidArgumentError(f"{name} must be > 0, got {value}")
    return int(value)
