"""Tensor: an aclTensor (nnopbase) describing an array that lives in a DeviceBuffer.

Shape, strides and offset are in elements (aclCreateTensor's convention). Format ND. A
contiguous tensor at offset 0 gives storageDims = viewDims; a strided or offset view gives
the 1-D storage of the whole buffer, as torch_npu does for ND tensors.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import dtypes
from .ffi import ffi
from .errors import InvalidArgumentError, InvalidTypeError
from .loader import Backend
from .session import DeviceBuffer, DeviceSession, Child

ACL_FORMAT_ND = 2


def contiguous_strides(shape: Sequence[int]) -> tuple:
    """Row-major strides in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def _destroy_tensor(backend: Backend, tensor):
    backend.call("aclDestroyTensor", tensor)


class Tensor(Child):
    """``Tensor(buffer, shape=None, dtype=None, strides=None, offset=0)``: an aclTensor over
    `buffer` (shape/dtype default to the buffer's, as set by Session.upload). Keeps the
    buffer alive; a Session destroys its tensors before its buffers."""

    _kind = "tensor"

    def __init__(self, buffer: DeviceBuffer, shape: Optional[Sequence[int]] = None, dtype=None,
                 strides: Optional[Sequence[int]] = None, offset: int = 0):
        if not isinstance(buffer, DeviceBuffer):
            raise InvalidTypeError(f"Tensor needs a DeviceBuffer, got {type(buffer).__name__}")
        session: DeviceSession = buffer.session
        if shape is None:
            if buffer.shape is None:
                raise InvalidArgumentError("Tensor needs a shape (the buffer has none)")
            shape = buffer.shape
        shape = tuple(int(x) for x in shape)
        dtype = dtypes.as_dtype(dtype if dtype is not None else buffer.dtype)
        strides = tuple(int(x) for x in strides) if strides is not None else contiguous_strides(shape)
        if len(strides) != len(shape):
            raise InvalidArgumentError(f"strides {strides} and shape {shape} differ in rank")
        if any(x < 0 for x in shape) or any(s < 0 for s in strides) or offset < 0:
            raise InvalidArgumentError(
                f"shape {shape}, strides {strides} and offset {offset} must be >= 0")
        capacity = buffer.nbytes // dtype.itemsize
        last = offset + sum((x - 1) * s for x, s in zip(shape, strides)) if all(shape) else offset - 1
        if last >= capacity:
            raise InvalidArgumentError(
                f"a {dtype} tensor of shape {shape}, strides {strides}, offset {offset} reaches "
                f"element {last}; the buffer holds {capacity}")

        contiguous = offset == 0 and strides == contiguous_strides(shape)
        storage = shape if contiguous else (capacity,)
        view_dims = ffi.new("int64_t[]", list(shape) or [0])
        stride_arr = ffi.new("int64_t[]", list(strides) or [0])
        storage_dims = ffi.new("int64_t[]", list(storage) or [0])
        self._create(session, _destroy_tensor, lambda: session._state.call(
            "aclCreateTensor", view_dims, len(shape), dtypes.to_acl(dtype), stride_arr, offset,
            ACL_FORMAT_ND, storage_dims, len(storage), buffer.ptr))
        self.buffer = buffer
        self.shape = shape
        self.dtype = dtype
        self.strides = strides
        self.offset = int(offset)

    @property
    def handle(self):
        """The ``aclTensor *``."""
        return self._live_handle()

    def to_numpy(self) -> np.ndarray:
        """The tensor's elements as a new C-contiguous host array."""
        storage = self.buffer.to_numpy(shape=(self.buffer.nbytes // self.dtype.itemsize,), dtype=self.dtype)
        if not self.shape:
            return storage[self.offset:self.offset + 1].reshape(()).copy()
        view = np.lib.stride_tricks.as_strided(
            storage[self.offset:], shape=self.shape,
            strides=tuple(s * self.dtype.itemsize for s in self.strides))
        return np.ascontiguousarray(view)

    def __repr__(self) -> str:
        return f"<Tensor shape={self.shape} dtype={self.dtype} strides={self.strides}>"
