"""Adding one DeviceArray into another on a stream: CANN's builtin ``aclnnInplaceAdd``
(``selfRef += alpha * other``, libopapi.so; docs/builtin_ops.md), with alpha 1.

The ring backward keeps its dK/dV (and dQ) sums in float32 on the device and adds each call's
float16/bfloat16/float32 partial into them: the op promotes the two dtypes (float16 with float32
gives float32) and casts the result to selfRef's, so a float32 accumulator takes a partial of any
of the three dtypes directly, without a cast kernel.

``DeviceAdds`` keeps one repeatable executor per (selfRef, other) pair of arrays, so a loop that
adds the same arrays again only launches phase two.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..runtime import dtypes
from ..runtime.ffi import ffi
from ..runtime.device_array import DeviceArray, check_device_array
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import Executor
from ..runtime.session import DeviceBuffer, DeviceSession, Stream
from ..runtime.tensor import Tensor

__all__ = ["DeviceAdds", "check_add", "ADD_DTYPES"]

ADD_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))


def _dtype_name(dtype: np.dtype) -> str:
    return "bfloat16" if dtype == np.dtype(ml_dtypes.bfloat16) else str(dtype)


def check_add(session: DeviceSession, self_ref, other) -> None:
    """self_ref and other: open DeviceArrays of `session` of one shape, each float16, bfloat16 or
    float32 (checked before any device work, naming the argument)."""
    for name, x in (("self_ref", self_ref), ("other", other)):
        if not isinstance(x, DeviceArray):
            raise InvalidTypeError(f"{name} must be a DeviceArray, got {type(x).__name__}")
        check_device_array(name, x, session)
        if x.dtype not in ADD_DTYPES:
            raise InvalidTypeError(f"{name} must be float16, bfloat16 or float32, got {_dtype_name(x.dtype)}")
    if tuple(other.shape) != tuple(self_ref.shape):
        raise InvalidArgumentError(f"other has shape {tuple(other.shape)}; it must have self_ref's "
                                   f"{tuple(self_ref.shape)}")


class DeviceAdds:
    """``enqueue(stream, self_ref, other)``: self_ref += other on `stream`, without waiting. The
    executors (and their aclTensors) live until close(), which the caller runs after the streams
    that ran them were waited for; the arrays must stay open as long."""

    def __init__(self, session: DeviceSession):
        self.session = session
        self._calls: dict = {}  # (self_ref.serial, other.serial) -> (executor, workspace, tensors, arrays)

    def enqueue(self, stream: Stream, self_ref: DeviceArray, other: DeviceArray) -> None:
        check_add(self.session, self_ref, other)
        key = (self_ref.serial, other.serial)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = self._prepare(self_ref, other)
        executor, workspace = call[:2]
        ws, ws_size = (workspace.ptr, workspace.nbytes) if workspace is not None else (ffi.NULL, 0)
        self.session.call("aclnnInplaceAdd", ws, ws_size, executor.handle, stream.handle)

    def _prepare(self, self_ref: DeviceArray, other: DeviceArray) -> tuple:
        s = self.session
        tensors = [Tensor(x.buffer, shape=x.shape, dtype=x.dtype) for x in (self_ref, other)]
        try:
            alpha_value = ffi.new("float *", 1.0)
            alpha = s.call("aclCreateScalar", alpha_value, dtypes.to_acl(np.float32))
            try:
                size = ffi.new("uint64_t *")
                handle = ffi.new("aclOpExecutor **")

                def phase1():
                    s.call("aclnnInplaceAddGetWorkspaceSize", tensors[0].handle, tensors[1].handle, alpha, size,
                           handle)
                    return handle[0]

                executor = Executor(s, phase1)
            finally:
                # Phase one takes alpha's value into the executor (aclnn_add.h: a host scalar).
                s.call("aclDestroyScalar", alpha)
            try:
                s.call("aclSetAclOpExecutorRepeatable", executor.handle)
                # On a chip a mixed-dtype add casts `other` first, into workspace memory.
                workspace = DeviceBuffer(s, int(size[0])) if int(size[0]) else None
            except BaseException:
                executor.close()
                raise
        except BaseException:
            for tensor in tensors:
                tensor.close()
            raise
        return executor, workspace, tensors, (self_ref, other)

    def close(self):
        calls, self._calls = list(self._calls.values()), {}
        for executor, workspace, tensors, _ in calls:
            executor.close()
            for obj in (*tensors, workspace):
                if obj is not None:
                    obj.close()
