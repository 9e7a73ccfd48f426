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
other ACL call there, so one Session may be shared by several threads. Every call is "in
flight" on its Session while it runs (see _InFlight): close() refuses new calls, waits for
those in flight, and only then releases anything, so no call ever sees a freed handle.

Processes: a Session belongs to the process that opened it (docs/cann-facts.md#acl-runtime-calls,
"Processes"). In a forked child it raises ForkedSessionError, and closing it (or its objects
being collected) there makes no ACL call: the handles are the parent's. A new Session in the
child works.

Ctrl-C: waits on a stream go in slices (SYNC_SLICE_MS) of aclrtSynchronizeStreamWithTimeout
(docs/cann-facts.md#acl-runtime-calls), so KeyboardInterrupt stops them within a slice; the
work stays queued and owned, and close() waits for it. The steps that create or release a
handle hold Ctrl-C back until the handle is owned or freed (interrupts.deferred), so an
interrupt never leaks one.
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import weakref
from typing import Callable, Optional

import numpy as np

from . import dtypes
from .ffi import ffi
from .errors import (
    ACL_ERROR_REPEAT_INITIALIZE, AclError, AclFaError, ClosedObjectError, ForkedSessionError, InvalidArgumentError,
    InvalidTypeError)
from .interrupts import deferred
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
# What aclrtSynchronizeStreamWithTimeout returns when its time is up (rt_error_codes.h)
ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507046

# A stream wait lasts at most this long between two chances for Ctrl-C to stop it.
SYNC_SLICE_MS = 100
# Device buffers start on a 512-B boundary: aclrtMalloc guarantees 64 B, and on Atlas A2 GM
# transfers from 512-B aligned addresses reach full MTE bandwidth (32-B aligned ones as little as
# 70%); whole 512-B L2 lines also spare partial-line fills (docs/cann-facts.md, "ACL runtime calls").
GM_ALIGN = 512
MALLOC_ALIGN = 64  # aclrtMalloc's guaranteed start alignment
# The most bytes one buffer may ask for: sizes cross the ABI as size_t (and numpy's as int64), and
# a buffer's request adds GM_ALIGN - MALLOC_ALIGN to its size (malloc_request), so that must fit int64.
MAX_ALLOC_BYTES = 2**63 - 1 - GM_ALIGN
# close() looks this often (seconds) whether the calls in flight on other threads have ended.
_DRAIN_POLL_S = 0.005

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

    def forget_after_fork(self):
        """In a forked child: the parent's Sessions are not this process's (their lock may be
        held by a thread the child does not have), and its next Session calls aclInit anew."""
        self._lock = threading.Lock()
        self._sessions = 0
        self._owned = False


_process = _AclProcess()
os.register_at_fork(after_in_child=_process.forget_after_fork)
# This process's id, renewed in a forked child (os.fork runs the after_in_child hooks before it
# returns there), so checking a Session's process costs a comparison and no getpid() per call.
_pid = os.getpid()


def _renew_pid():
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_renew_pid)
_thread = threading.local()  # .token: the Session state last bound on this thread
_tokens = itertools.count(1)


class _InFlight:
    """A call in flight on a session, from ``with state.in_flight():`` to the end of the block.

    Registered as a weak reference under the calling thread, it lives exactly as long as the
    ``with`` statement holds it (on the interpreter's stack, never in a variable or a
    traceback), so the registration ends with the block however the block ends -- even when a
    KeyboardInterrupt lands inside __enter__ or __exit__. close() sets ``closing``, then waits
    until no other thread has a live registration; a call registers, then checks ``closing``
    (and withdraws), so a call either is waited for or refused.
    """

    __slots__ = ("__weakref__", "_state", "_releasing")

    def __init__(self, state: "_SessionState", releasing: bool):
        self._state = state
        self._releasing = releasing  # releasing an object: allowed while the session closes

    def __enter__(self):
        state = self._state
        if state.closing and not self._releasing:
            raise ClosedObjectError("the Session is closed")
        ident = threading.get_ident()
        ref = weakref.ref(self)
        state.calls[ident] = ref
        if state.closing and not self._releasing:
            del state.calls[ident]
            raise ClosedObjectError("the Session is closed")

    def __exit__(self, *exc_info):
        calls = self._state.calls
        ident = threading.get_ident()
        if calls.get(ident) is not None and calls[ident]() is self:
            del calls[ident]
        return False


class _Nested:
    """in_flight() of a thread that is already in flight on the session: nothing to do."""

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        return False


_NESTED = _Nested()


class _SessionState:
    """What a Session's children and finalizers need; holds no reference to the Session."""

    def __init__(self, backend: Backend, device: int):
        self.backend = backend
        self.device = device
        self.pid = os.getpid()  # the process that opened the session and owns its handles
        self.token = next(_tokens)
        self.lock = threading.RLock()
        self.closing = False  # close() began: new calls are refused
        self.closed = False   # close() released the children
        self.calls: dict = {}  # thread ident -> weakref to that thread's outermost _InFlight
        self.set_device_calls = 0
        self.children: dict = {kind: {} for kind in _KINDS}
        self._keys = itertools.count()
        # Copies this session made: kind ("h2d", "d2h", "d2d") -> [calls, bytes].
        self.copies: dict = {kind: [0, 0] for kind in _COPY_KINDS.values()}

    def count_copy(self, kind: int, nbytes: int, calls: int = 1):
        with self.lock:
            entry = self.copies[_COPY_KINDS[kind]]
            entry[0] += calls
            entry[1] += int(nbytes)

    def check_process(self):
        if self.pid != _pid:
            raise ForkedSessionError(
                f"the Session was opened in process {self.pid}, and this is process {os.getpid()}, "
                f"forked from it: device contexts do not cross fork; open a new Session in this process")

    def in_flight(self, releasing: bool = False):
        """Context manager marking a call in flight (see _InFlight); ForkedSessionError in a
        forked child, ClosedObjectError once close() began (unless `releasing` an object).
        A thread already in flight here passed both checks when its outermost call began."""
        self.check_process()
        ref = self.calls.get(threading.get_ident())
        if ref is not None and ref() is not None:
            return _NESTED
        return _InFlight(self, releasing)

    def wait_for_other_calls(self):
        """Returns when no thread but this one has a call in flight (Ctrl-C stops the wait)."""
        me = threading.get_ident()
        while any(ident != me and ref() is not None for ident, ref in list(self.calls.items())):
            time.sleep(_DRAIN_POLL_S)

    def wait_for_running_calls(self):
        """Returns when every call that other threads have in flight now has ended (calls that
        begin later are not waited for, so a busy session cannot starve the wait; Ctrl-C stops it).
        Returns at once on a thread that is itself in flight here: a call releasing its own
        temporaries may hold a lock (an op runner's) that those other calls wait for."""
        if self.in_flight_here():
            return
        me = threading.get_ident()
        running = [(ident, ref) for ident, ref in list(self.calls.items()) if ident != me and ref() is not None]
        while any(ref() is not None and self.calls.get(ident) is ref for ident, ref in running):
            time.sleep(_DRAIN_POLL_S)

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
        """ForkedSessionError in a forked child; ClosedObjectError once close() began, except
        for a thread whose call close() is waiting for."""
        self.check_process()
        if self.closed or (self.closing and not self.in_flight_here()):
            raise ClosedObjectError("the Session is closed")

    def in_flight_here(self) -> bool:
        ref = self.calls.get(threading.get_ident())
        return ref is not None and ref() is not None

    def bound_call(self) -> Callable:
        """For a thread already in flight here (its outermost call did the registration and the
        process check): binds the device once and returns the plain checked call, which its ACL
        calls then make without call()'s per-call checks."""
        self.bind()
        return self.backend.call

    def call(self, api: str, *args):
        """Checked ACL call on the calling thread, with this session's device bound. Inside a
        call already in flight and bound on this thread (an op call: OpRunner.run), the
        registration, process check and aclrtSetDevice of its start stand for every ACL call
        it makes: close() waits for it as a whole, and a fork starts no thread of it."""
        ref = self.calls.get(threading.get_ident())
        if ref is not None and ref() is not None and getattr(_thread, "token", None) == self.token \
                and self.pid == _pid:
            return self.backend.call(api, *args)
        with self.in_flight():
            self.bind()
            return self.backend.call(api, *args)

    def adopt(self, obj, kind: str, release: Callable, handle) -> weakref.finalize:
        """Registers a child; returns the finalizer that releases `handle` exactly once.
        Called in flight (see Child._create): close() has not released anything yet."""
        with self.lock:
            self.check_process()
            if self.closed:
                raise ClosedObjectError("the Session is closed")
            key = next(self._keys)
            finalizer = weakref.finalize(obj, _release_child, self, kind, key, release, handle)
            finalizer.atexit = False
            self.children[kind][key] = finalizer
        return finalizer

    def forget(self, kind: str, key: int):
        with self.lock:
            self.children[kind].pop(key, None)


def _release_child(state: _SessionState, kind: str, key: int, release: Callable, handle):
    if state.pid != os.getpid():
        return  # a forked child: the handle is the parent's
    with deferred():
        state.forget(kind, key)
        if sys.is_finalizing():
            return
        state.bind(closing=True)
        release(state.backend, handle)


def _abandon_in_forked_child(state: _SessionState):
    """close() of a Session inherited through fork: its handles are the parent's, so nothing
    is released; the finalizers are dropped so that collecting the objects frees nothing."""
    state.closing = state.closed = True
    for kind in _KINDS:
        for finalizer in list(state.children[kind].values()):
            finalizer.detach()
        state.children[kind] = {}


def _live_handles(state: _SessionState, kind: str) -> list:
    """Handles of the live children of `kind` (from their finalizers' arguments)."""
    handles = []
    for finalizer in list(state.children[kind].values()):
        info = finalizer.peek()
        if info is not None:
            handles.append(info[2][-1])
    return handles


def _teardown_session(state: _SessionState):
    """Waits for the calls in flight and for the work queued on the session's streams, then
    releases every live child in CANN's order, resets the device, finalizes ACL once.

    The waits can be stopped with Ctrl-C: the session then stays open and usable. What follows
    them runs with Ctrl-C held back, and every step runs even when an earlier one fails; the
    first failure is raised at the end.
    """
    if sys.is_finalizing():
        return
    if state.pid != os.getpid():
        _abandon_in_forked_child(state)
        return
    if state.closed:
        return
    errors: list = []
    state.closing = True
    try:
        state.wait_for_other_calls()
        if state.set_device_calls:  # a session that never set its device has no work queued
            state.bind(closing=True)
            for stream in [ffi.NULL] + _live_handles(state, "stream"):
                try:
                    _wait_stream(state.backend.call, stream)
                except AclFaError as exc:
                    errors.append(exc)
        with deferred():
            _release_all(state, errors)
    except BaseException:
        if not state.closed:  # stopped during the waits: nothing was released
            state.closing = False
        raise
    if errors:
        raise errors[0]


def _release_all(state: _SessionState, errors: list):
    with state.lock:
        state.closed = True
        pending = [list(state.children[kind].values()) for kind in _KINDS]
    for finalizers in pending:
        for finalizer in reversed(finalizers):  # newest first
            try:
                finalizer()
            except AclFaError as exc:
                errors.append(exc)
    state.wait_for_other_calls()  # objects other threads are releasing meanwhile
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
        with deferred():  # aclInit's reference is owned by the finalizer before Ctrl-C can land
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
        """Refuses new calls, waits for the calls in flight on other threads and for the work
        queued on the session's streams, then releases every object of this session and the
        device. Idempotent. Ctrl-C during the waits leaves the session open and usable. In a
        process forked from the one that opened it, releases nothing (the handles are the
        parent's)."""
        try:
            _teardown_session(self._state)
        finally:
            if self._state.closed:
                self._finalizer.detach()

    @property
    def closed(self) -> bool:
        return self._state.closed

    @property
    def in_this_process(self) -> bool:
        """False in a process forked from the one that opened the session."""
        return self._state.pid == os.getpid()

    def in_flight(self):
        """Context manager: marks a call in flight on this session (close() waits for it, and
        refuses new ones with ClosedObjectError once it began)."""
        return self._state.in_flight()

    def wait_for_running_calls(self):
        """Returns when the calls other threads have in flight on this session now have ended
        (what a DeviceArray's close() waits for before it frees memory such a call may read); at
        once inside a call on this session (see _SessionState.wait_for_running_calls)."""
        self._state.wait_for_running_calls()

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
        host = as_c_contiguous(array)
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


def as_c_contiguous(array) -> np.ndarray:
    host = np.asarray(array)
    dtypes.as_dtype(host.dtype)  # only types with an aclDataType cross to the device
    return np.ascontiguousarray(host)


def _byte_view(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 array (works for ml_dtypes too)."""
    return array.reshape(-1).view(np.uint8)


class Child:
    """Common lifetime of the objects a Session owns."""

    _kind = ""

    def _attach(self, session: DeviceSession, release: Callable, handle):
        self.session = session
        self._state = session._state
        self._handle = handle
        self._finalizer = session._adopt(self, self._kind, release, handle)

    def _create(self, session: DeviceSession, release: Callable, create: Callable):
        """Runs `create()` -- the C call that makes this object's handle, returning it -- and
        owns the handle before anything can raise: in flight (close() waits), with Ctrl-C held
        back; if owning it fails all the same, the handle is released at once."""
        state = session._state
        with deferred(), state.in_flight():
            handle = create()
            try:
                self._attach(session, release, handle)
            except BaseException:
                state.bind(closing=True)
                release(state.backend, handle)
                raise

    def close(self):
        """Releases the object now. Idempotent. In a process forked from the session's, only
        forgets the handle (it is the parent's)."""
        state = self._state
        if state.pid != os.getpid():
            self._finalizer.detach()
            return
        with deferred(), state.in_flight(releasing=True):
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


def malloc_request(nbytes: int) -> int:
    """The size DeviceBuffer asks aclrtMalloc for, to hold `nbytes` from a GM_ALIGN boundary."""
    return nbytes + GM_ALIGN - MALLOC_ALIGN


def malloc_bytes(nbytes: int) -> int:
    """Device bytes a DeviceBuffer of `nbytes` takes: its aclrtMalloc request rounded up to 32 B
    plus 32 B (acl_rt.h)."""
    return (malloc_request(nbytes) + 31) // 32 * 32 + 32


# The most device bytes a DeviceBuffer takes beyond its nbytes (at nbytes = 1 mod 32).
MALLOC_SLACK = malloc_bytes(1) - 1


def _free_device(backend: Backend, ptr):
    backend.call("aclrtFree", ptr)


def _free_host(backend: Backend, ptr):
    backend.call("aclrtFreeHost", ptr)


def _destroy_stream(backend: Backend, stream):
    try:
        backend.call("aclrtSynchronizeStream", stream)
    finally:
        backend.call("aclrtDestroyStream", stream)


def _wait_stream(call: Callable, stream):
    """Waits for the work queued on `stream` in slices of SYNC_SLICE_MS
    (aclrtSynchronizeStreamWithTimeout), so that between two slices Python can deliver Ctrl-C;
    the queued work stays where it is. `call` is a checked call (Backend.call or a session's)."""
    while True:
        try:
            call("aclrtSynchronizeStreamWithTimeout", stream, SYNC_SLICE_MS)
            return
        except AclError as exc:
            if exc.code != ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                raise


def _destroy_event(backend: Backend, event):
    backend.call("aclrtDestroyEvent", event)


class DeviceBuffer(Child):
    """``nbytes`` of device memory (aclrtMalloc). ``shape``/``dtype`` describe the array it
    holds when made by Session.upload (else None)."""

    _kind = "device_buffer"

    def __init__(self, session: DeviceSession, nbytes: int, shape=None, dtype=None):
        nbytes = _positive_size(nbytes, "nbytes")
        session._state.check_open()
        ptr = ffi.new("void **")

        def malloc():
            session._state.call("aclrtMalloc", ptr, malloc_request(nbytes), ACL_MEM_MALLOC_HUGE_FIRST)
            return ptr[0]

        self._create(session, _free_device, malloc)
        # The handle is what aclrtMalloc returned (aclrtFree takes it back); the buffer's bytes
        # start at the next GM_ALIGN boundary inside it.
        self._offset = -int(ffi.cast("uintptr_t", self._handle)) % GM_ALIGN
        self.nbytes = nbytes
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = np.dtype(dtype) if dtype is not None else None

    @property
    def ptr(self):
        """The device address of the buffer's first byte (cffi ``void *``, GM_ALIGN-aligned)."""
        return ffi.cast("void *", self._address())

    def _address(self):
        return ffi.cast("char *", self._live_handle()) + self._offset

    def copy_from_host(self, array, offset: int = 0):
        """Synchronous H2D copy of `array` (any layout) to byte `offset` of this buffer."""
        host = as_c_contiguous(array)
        self._check_range(host.nbytes, offset, "copy_from_host")
        if host.nbytes == 0:
            return
        dst = self._address() + offset
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
        dst = self._address() + offset
        self._state.call("aclrtMemcpy", dst, self.nbytes - offset, src._address() + src_offset,
                         nbytes, ACL_MEMCPY_DEVICE_TO_DEVICE)
        self._state.count_copy(ACL_MEMCPY_DEVICE_TO_DEVICE, nbytes)

    def copy_to_host(self, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Synchronous D2H copy into the C-contiguous writable array `out`; returns it."""
        if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or not out.flags.writeable:
            raise InvalidArgumentError("out must be a writable C-contiguous numpy array")
        self._check_range(out.nbytes, offset, "copy_to_host")
        if out.nbytes == 0:
            return out
        src = self._address() + offset
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


class HostBuffer(Child):
    """``nbytes`` of page-locked host memory (aclrtMallocHost): the host side of async copies."""

    _kind = "host_buffer"

    def __init__(self, session: DeviceSession, nbytes: int):
        nbytes = _positive_size(nbytes, "nbytes")
        session._state.check_open()
        ptr = ffi.new("void **")

        def malloc_host():
            session._state.call("aclrtMallocHost", ptr, nbytes)
            return ptr[0]

        self._create(session, _free_host, malloc_host)
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


class Stream(Child):
    """An explicit stream (aclrtCreateStream). Objects used by enqueued work are kept alive
    until the next synchronize()."""

    _kind = "stream"

    def __init__(self, session: DeviceSession):
        session._state.check_open()
        stream = ffi.new("aclrtStream *")

        def create_stream():
            session._state.call("aclrtCreateStream", stream)
            return stream[0]

        self._create(session, _destroy_stream, create_stream)
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

    def wait(self, event: "Event"):
        """aclrtStreamWaitEvent: work queued on this stream after the call starts only once the
        event's latest record (its first one, if it was never recorded) has completed -- the
        order is kept on the device; the host does not wait."""
        if not isinstance(event, Event):
            raise InvalidTypeError(f"Stream.wait needs an Event, got {type(event).__name__}")
        if event._state is not self._state:
            raise InvalidArgumentError("Stream.wait: the event belongs to another Session")
        self._state.call("aclrtStreamWaitEvent", self._live_handle(), event.handle)
        self.keep_alive(event)

    def keep_alive(self, *objects):
        """Holds `objects` until the next synchronize() (work in flight uses them)."""
        with self._lock:
            self._in_flight.extend(objects)

    def synchronize(self):
        """Waits for the work queued on this stream. Ctrl-C stops the wait within
        SYNC_SLICE_MS (KeyboardInterrupt); the work stays queued, and what it uses alive."""
        state = self._state
        with state.in_flight():
            _wait_stream(state.bound_call(), self._live_handle())
        if self._in_flight:
            with self._lock:
                self._in_flight.clear()


class Event(Child):
    """An event; with timing=True it records timestamps for elapsed_ms()."""

    _kind = "event"

    def __init__(self, session: DeviceSession, timing: bool = True):
        session._state.check_open()
        event = ffi.new("aclrtEvent *")

        def create_event():
            if timing:
                session._state.call("aclrtCreateEventWithFlag", event, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC)
            else:
                session._state.call("aclrtCreateEvent", event)
            return event[0]

        self._create(session, _destroy_event, create_event)
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
    if value > MAX_ALLOC_BYTES:
        raise InvalidArgumentError(f"{name}={value} is beyond the {MAX_ALLOC_BYTES} B one allocation can ask for")
    return int(value)
