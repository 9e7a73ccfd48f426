"""DeviceArray: an n-dimensional array that lives in device memory of one Session.

``Session.to_device(x)`` copies a numpy array to the device once; ``Session.empty(shape, dtype)``
allocates one uninitialized. The ops accept a DeviceArray wherever they accept a numpy array:
its memory is used in place (no copy through the host), so inputs that stay the same across
calls -- a KV cache above all -- cross the host-device link once. Ops that append to a cache
(acl_fa.flash_attention_with_kvcache with k/v) write into it on the device.

A DeviceArray is C-contiguous; ``.numpy()`` reads it back into a new host array. It belongs to
its Session: passing it to an op of another Session, or using it after close() (its own or
the Session's), raises before any device work.
"""

from __future__ import annotations

import itertools
import math
from typing import Optional

import numpy as np

from . import dtypes
from .errors import ClosedObjectError, InvalidArgumentError, InvalidTypeError
from .session import MAX_ALLOC_BYTES, DeviceBuffer, DeviceSession, as_c_contiguous

__all__ = ["DeviceArray", "is_device_array", "check_device_array"]

_serials = itertools.count(1)
# The most bytes an array may span (its buffer's limit); counted in int64 a size past it wraps --
# 2**65 elements would read as 0 B.
MAX_ARRAY_BYTES = MAX_ALLOC_BYTES


class DeviceArray:
    """``shape``, ``dtype``, ``nbytes``, ``session``; ``numpy()``, ``close()``, ``closed``."""

    layout = "C"  # row-major, contiguous: the only layout a DeviceArray has

    def __init__(self, session: DeviceSession, shape, dtype, *, _buffer: Optional[DeviceBuffer] = None):
        shape = _check_shape(shape)
        dtype = dtypes.as_dtype(dtype)
        nbytes = _array_bytes(shape, dtype)
        self.session = session
        self.shape = shape
        self.dtype = dtype
        self.nbytes = nbytes
        # Identity for caches keyed on the memory an op reads (a closed array's number is never reused).
        self.serial = next(_serials)
        self._closing = False  # close() began: new calls refuse the array (its memory may not be freed yet)
        self.buffer = _buffer if _buffer is not None else DeviceBuffer(session, max(nbytes, 1), shape=shape,
                                                                       dtype=dtype)

    @classmethod
    def from_host(cls, session: DeviceSession, array) -> "DeviceArray":
        if isinstance(array, DeviceArray):
            raise InvalidTypeError("to_device needs a host (numpy) array; this is already a DeviceArray")
        host = as_c_contiguous(array)
        result = cls(session, host.shape, host.dtype)
        try:
            result.buffer.copy_from_host(host)
        except BaseException:
            result.close()
            raise
        return result

    @classmethod
    def empty(cls, session: DeviceSession, shape, dtype) -> "DeviceArray":
        return cls(session, shape, dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def closed(self) -> bool:
        return self._closing or self.buffer.closed

    def close(self):
        """Frees the device memory. Calls that begin after close() began refuse the array at
        once (ClosedObjectError); calls that other threads have in flight on the Session at that
        moment may be reading it, so the memory is freed when they have ended (close() waits for
        them). Idempotent; after a Ctrl-C during the wait, calling close() again finishes it."""
        self._closing = True
        if self.buffer.closed:
            return
        if self.session.in_this_process and not self.session.closed:
            self.session.wait_for_running_calls()
        self.buffer.close()

    def numpy(self) -> np.ndarray:
        """A new host array with the contents."""
        return self.buffer.copy_to_host(np.empty(self.shape, self.dtype))

    def __enter__(self) -> "DeviceArray":
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __array__(self, *args, **kwargs):
        raise InvalidTypeError(
            "a DeviceArray does not convert implicitly to numpy (that would copy it to the host); "
            "call .numpy()")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.nbytes} B"
        return f"<DeviceArray shape={self.shape} dtype={self.dtype} {state}>"


def is_device_array(x) -> bool:
    return isinstance(x, DeviceArray)


def check_device_array(name: str, array: DeviceArray, session: DeviceSession):
    """Raises unless `array` is open and belongs to `session` (checked before any device work)."""
    if array.session is not session:
        raise InvalidArgumentError(
            f"{name} is a DeviceArray of another Session ({array.session!r}); this call runs on {session!r}")
    if session.closed:
        raise ClosedObjectError(f"{name}: its Session is closed")
    if array.closed:
        raise ClosedObjectError(f"{name} is a closed DeviceArray")


def _array_bytes(shape: tuple, dtype: np.dtype) -> int:
    """The bytes of a C-contiguous array of `shape`, counted exactly (Python integers, no
    wrap-around); InvalidArgumentError naming the shape past MAX_ARRAY_BYTES."""
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise InvalidArgumentError(
            f"shape {shape} of {dtype} has {count} elements ({nbytes} B): beyond the {MAX_ARRAY_BYTES} B "
            f"one device allocation can ask for")
    return nbytes


def _check_shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError as exc:
        raise InvalidTypeError(f"shape must be a tuple of integers, got {shape!r}") from exc
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise InvalidTypeError(f"shape must be a tuple of integers, got {shape!r}")
        if dim < 0:
            raise InvalidArgumentError(f"shape {dims} has a negative dimension")
    return tuple(int(d) for d in dims)
