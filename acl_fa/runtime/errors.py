"""Exceptions of acl-fa, grouped by who is at fault.

- Caller mistakes, found before any device work: ``InvalidArgumentError`` (a ``ValueError``),
  ``InvalidTypeError`` (a ``TypeError``), ``ClosedObjectError`` (a ``ValueError``, like I/O on
  a closed file), and its ``ForkedSessionError`` for a Session used in a forked child.
- Errors returned by an ACL / aclnn call: ``AclError`` (a ``RuntimeError``) with the numeric
  code, its symbolic name, the API called and the runtime's own message
  (``aclGetRecentErrMsg()``). Out-of-memory codes give ``AclMemoryError`` (also a
  ``MemoryError``); codes saying a parameter was rejected give ``AclParamError`` (also a
  ``ValueError``).
- Not enough memory for a call, found before any device work (device: aclrtGetMemInfo's free
  bytes; host: MemAvailable): ``InsufficientMemoryError`` (a ``MemoryError``) saying what is
  needed and what is free.
- Errors returned by an HCCL call: ``HcclError`` (an ``AclError``: the same code, name, API
  and message attributes; names from ``HcclResult``, the message HcclGetErrorString's text and
  the runtime's). ``HCCL_E_PARA``/``HCCL_E_PTR`` give ``HcclParamError`` (also a
  ``ValueError``), ``HCCL_E_MEMORY``/``HCCL_E_OOM`` ``HcclMemoryError`` (also a ``MemoryError``).
- Libraries missing or unusable: ``AclLibraryError`` (an ``ImportError``), listing every
  path tried and why each failed.

All of them pickle (they cross process boundaries in test runners and executors).
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence


class AclFaError(Exception):
    """Base of every exception raised by acl-fa."""


class InvalidArgumentError(AclFaError, ValueError):
    """A caller mistake in a value (shape, size, option), detected before any device work."""


class InvalidTypeError(AclFaError, TypeError):
    """A caller mistake in a type (dtype, object kind), detected before any device work."""


class ClosedObjectError(AclFaError, ValueError):
    """A Session, Stream, buffer, Event or Tensor was used after close()."""


class ForkedSessionError(ClosedObjectError):
    """A Session (or an object of one) was used in a process forked from the one that opened
    it: device contexts do not cross fork, so it is closed for this process."""


class CodeInfo(NamedTuple):
    name: str
    explanation: str


# code -> symbolic name and a plain explanation. Values from the ACL headers
# (acl_base_rt.h, error_codes/rt_error_codes.h) and nnopbase's op_errno.h.
ERROR_CODES: dict[int, CodeInfo] = {
    # ACL
    100000: CodeInfo("ACL_ERROR_INVALID_PARAM", "an argument was rejected"),
    100001: CodeInfo("ACL_ERROR_UNINITIALIZE", "aclInit has not been called"),
    100002: CodeInfo("ACL_ERROR_REPEAT_INITIALIZE", "aclInit was already called in this process"),
    100003: CodeInfo("ACL_ERROR_INVALID_FILE", "a file (e.g. the aclInit config) is invalid"),
    100024: CodeInfo("ACL_ERROR_OP_NOT_FOUND", "the operator is not registered"),
    100037: CodeInfo("ACL_ERROR_REPEAT_FINALIZE", "aclFinalize was already called"),
    100039: CodeInfo(
        "ACL_ERROR_COMPILING_STUB_MODE",
        "a link-only stub library (devlib/) was loaded instead of the real runtime",
    ),
    200000: CodeInfo("ACL_ERROR_BAD_ALLOC", "memory allocation failed"),
    200001: CodeInfo("ACL_ERROR_API_NOT_SUPPORT", "this API is not supported here"),
    200002: CodeInfo("ACL_ERROR_INVALID_DEVICE", "the device id is invalid"),
    200003: CodeInfo("ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "a memory address is not aligned"),
    500000: CodeInfo("ACL_ERROR_INTERNAL_ERROR", "internal error of the ACL library"),
    500001: CodeInfo("ACL_ERROR_FAILURE", "the ACL call failed"),
    500003: CodeInfo("ACL_ERROR_RT_FAILURE", "the runtime failed"),
    # runtime
    107000: CodeInfo("ACL_ERROR_RT_PARAM_INVALID", "an argument was rejected by the runtime"),
    107001: CodeInfo("ACL_ERROR_RT_INVALID_DEVICEID", "the device id is invalid"),
    107002: CodeInfo(
        "ACL_ERROR_RT_CONTEXT_NULL",
        "no current context on this thread (aclrtSetDevice was not called on it)",
    ),
    107003: CodeInfo("ACL_ERROR_RT_STREAM_CONTEXT", "the stream belongs to another context"),
    107006: CodeInfo("ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", "an event has no valid timestamp"),
    107007: CodeInfo("ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL", "the end event was recorded before the start"),
    107008: CodeInfo("ACL_ERROR_RT_ADDR_UNALIGNED", "a memory address is not aligned"),
    107019: CodeInfo("ACL_ERROR_RT_WAIT_TIMEOUT", "a stream's wait for an event timed out"),
    107020: CodeInfo("ACL_ERROR_RT_TASK_TIMEOUT", "a task on the stream timed out"),
    107022: CodeInfo("ACL_ERROR_RT_DEVICE_TASK_ABORT", "the device aborted the task"),
    207000: CodeInfo("ACL_ERROR_RT_FEATURE_NOT_SUPPORT", "feature not supported by this device"),
    207001: CodeInfo("ACL_ERROR_RT_MEMORY_ALLOCATION", "device memory allocation failed"),
    207002: CodeInfo("ACL_ERROR_RT_MEMORY_FREE", "freeing device memory failed"),
    207005: CodeInfo("ACL_ERROR_RT_RESOURCE_ALLOC_FAIL", "a runtime resource could not be allocated"),
    207007: CodeInfo("ACL_ERROR_RT_NO_EVENT_RESOURCE", "no event resource is left"),
    207008: CodeInfo("ACL_ERROR_RT_NO_STREAM_RESOURCE", "no stream resource is left"),
    207004: CodeInfo("ACL_ERROR_RT_NO_DEVICE", "no device is available"),
    207018: CodeInfo("ACL_ERROR_RT_DEVICE_OOM", "the device ran out of memory"),
    507000: CodeInfo("ACL_ERROR_RT_INTERNAL_ERROR", "internal error of the runtime"),
    507006: CodeInfo("ACL_ERROR_RT_EVENT_NOT_COMPLETE", "the event has not completed"),
    507014: CodeInfo("ACL_ERROR_RT_AICORE_TIMEOUT", "a kernel on the AI Core timed out"),
    507015: CodeInfo("ACL_ERROR_RT_AICORE_EXCEPTION", "a kernel on the AI Core raised an exception"),
    507016: CodeInfo(
        "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", "a kernel on the AI Core hit a trap"
    ),
    507033: CodeInfo("ACL_ERROR_RT_DEV_SETUP_ERROR", "the device could not be set up"),
    507035: CodeInfo(
        "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "a kernel on a vector core raised an exception"
    ),
    507046: CodeInfo("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", "stream synchronization timed out"),
    507053: CodeInfo("ACL_ERROR_RT_DEVICE_MEM_ERROR", "a device memory error (hardware fault)"),
    507899: CodeInfo("ACL_ERROR_RT_DRV_INTERNAL_ERROR", "internal error of the driver"),
    # aclnn
    161001: CodeInfo("ACLNN_ERR_PARAM_NULLPTR", "a required argument was NULL"),
    161002: CodeInfo("ACLNN_ERR_PARAM_INVALID", "an argument was rejected by the operator"),
    361001: CodeInfo("ACLNN_ERR_RUNTIME_ERROR", "the runtime failed under the op API"),
    561000: CodeInfo("ACLNN_ERR_INNER", "internal error of the op API"),
    561001: CodeInfo("ACLNN_ERR_INNER_INFERSHAPE_ERROR", "the operator's shape inference failed"),
    561002: CodeInfo("ACLNN_ERR_INNER_TILING_ERROR", "the operator's tiling function failed"),
    561003: CodeInfo(
        "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", "no compiled kernel matches these inputs"
    ),
    561101: CodeInfo("ACLNN_ERR_INNER_CREATE_EXECUTOR", "the op executor could not be created"),
    561103: CodeInfo("ACLNN_ERR_INNER_NULLPTR", "an internal pointer was NULL"),
    561107: CodeInfo(
        "ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND",
        "the operator package path is not set (ASCEND_OPP_PATH)",
    ),
    561112: CodeInfo(
        "ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND", "the operator's kernel package was not found"
    ),
}

ACL_SUCCESS = 0
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACLNN_ERR_INNER_NULLPTR = 561103

class InsufficientMemoryError(AclFaError, MemoryError):
    """A call needs more memory than is free, found before any device work. ``where``:
    "device" or "host"; ``needed`` and ``free`` in bytes."""

    def __init__(self, message: str, where: str = "device", needed: int = 0, free: int = 0):
        self.where = where
        self.needed = int(needed)
        self.free = int(free)
        super().__init__(message)

    def __reduce__(self):
        return (self.__class__, (self.args[0], self.where, self.needed, self.free))


# Codes meaning "out of memory" (AclMemoryError) and "an argument was rejected" (AclParamError).
MEMORY_CODES = frozenset({200000, 207001, 207018})
PARAM_CODES = frozenset({100000, 107000, 161001, 161002})


def code_name(code: int) -> str:
    info = ERROR_CODES.get(code)
    return info.name if info else "UNKNOWN"


class AclError(AclFaError, RuntimeError):
    """A non-zero status from an ACL or aclnn call.

    Attributes: ``code`` (int), ``name`` (symbolic, "UNKNOWN" when not in the table),
    ``api`` (the function called), ``message`` (``aclGetRecentErrMsg()`` text, may be "").
    """

    _codes = ERROR_CODES  # code -> CodeInfo of this family

    def __init__(self, code: int, api: str, message: str = ""):
        self.code = int(code)
        info = self._codes.get(self.code)
        self.name = info.name if info else "UNKNOWN"
        self.api = api
        self.message = message or ""
        super().__init__(self.code, self.api, self.message)

    def __str__(self) -> str:
        info = self._codes.get(self.code)
        text = f"{self.api} failed with {self.code} ({self.name})"
        if info:
            text += f": {info.explanation}"
        if self.message:
            text += f"\nruntime message: {self.message.strip()}"
        return text

    def __reduce__(self):
        return (self.__class__, (self.code, self.api, self.message))


class AclMemoryError(AclError, MemoryError):
    """Device or host memory exhausted (codes 200000, 207001, 207018)."""


class AclParamError(AclError, ValueError):
    """The library rejected an argument (codes 100000, 107000, 161001, 161002)."""


def _error_of_family(code: int, api: str, message: str, families: tuple, default: type) -> AclError:
    """families: ((codes, exception class), ...), the first whose codes hold `code` wins."""
    cls = next((cls for codes, cls in families if code in codes), default)
    return cls(code, api, message)


def error_for_code(code: int, api: str, message: str = "") -> AclError:
    """The exception of the right family for an ACL/aclnn status."""
    return _error_of_family(code, api, message, ((MEMORY_CODES, AclMemoryError), (PARAM_CODES, AclParamError)),
                            AclError)


# HcclResult (hccl/hccl_types.h): code -> name and a plain explanation.
HCCL_ERROR_CODES: dict[int, CodeInfo] = {
    1: CodeInfo("HCCL_E_PARA", "an argument was rejected by HCCL"),
    2: CodeInfo("HCCL_E_PTR", "a required pointer was NULL"),
    3: CodeInfo("HCCL_E_MEMORY", "HCCL could not get memory"),
    4: CodeInfo("HCCL_E_INTERNAL", "internal error of HCCL"),
    5: CodeInfo("HCCL_E_NOT_SUPPORT", "HCCL does not support this"),
    6: CodeInfo("HCCL_E_NOT_FOUND", "a resource HCCL looked for was not found"),
    7: CodeInfo("HCCL_E_UNAVAIL", "a resource is unavailable"),
    8: CodeInfo("HCCL_E_SYSCALL", "a system call failed inside HCCL"),
    9: CodeInfo("HCCL_E_TIMEOUT", "HCCL timed out (a rank did not join or answer)"),
    10: CodeInfo("HCCL_E_OPEN_FILE_FAILURE", "HCCL could not open a file"),
    11: CodeInfo("HCCL_E_TCP_CONNECT", "a TCP connection between ranks failed"),
    12: CodeInfo("HCCL_E_ROCE_CONNECT", "a RoCE connection between ranks failed"),
    13: CodeInfo("HCCL_E_TCP_TRANSFER", "a TCP transfer between ranks failed"),
    14: CodeInfo("HCCL_E_ROCE_TRANSFER", "a RoCE transfer between ranks failed"),
    15: CodeInfo("HCCL_E_RUNTIME", "an ACL runtime call made by HCCL failed"),
    16: CodeInfo("HCCL_E_DRV", "a driver call made by HCCL failed"),
    17: CodeInfo("HCCL_E_PROFILING", "a profiling call made by HCCL failed"),
    18: CodeInfo("HCCL_E_CCE", "a CCE call made by HCCL failed"),
    19: CodeInfo("HCCL_E_NETWORK", "a network call made by HCCL failed"),
    20: CodeInfo("HCCL_E_AGAIN", "try again"),
    21: CodeInfo("HCCL_E_REMOTE", "a remote rank reported an error"),
    22: CodeInfo("HCCL_E_SUSPENDING", "the communicator is suspending"),
    23: CodeInfo("HCCL_E_OPRETRY_FAIL", "retrying the operation failed"),
    24: CodeInfo("HCCL_E_OOM", "HCCL ran out of memory"),
}
HCCL_PARAM_CODES = frozenset({1, 2})
HCCL_MEMORY_CODES = frozenset({3, 24})


class HcclError(AclError):
    """A non-zero ``HcclResult`` from an HCCL call: ``code``, ``name`` (HCCL_E_*), ``api``,
    ``message`` (HcclGetErrorString's text, then the runtime's recent messages)."""

    _codes = HCCL_ERROR_CODES


class HcclParamError(HcclError, ValueError):
    """HCCL rejected an argument (HCCL_E_PARA, HCCL_E_PTR)."""


class HcclMemoryError(HcclError, MemoryError):
    """HCCL ran out of memory (HCCL_E_MEMORY, HCCL_E_OOM)."""


def hccl_error_for_code(code: int, api: str, message: str = "") -> HcclError:
    """The exception of the right family for a non-zero HcclResult."""
    return _error_of_family(code, api, message, ((HCCL_PARAM_CODES, HcclParamError),
                                                 (HCCL_MEMORY_CODES, HcclMemoryError)), HcclError)


class LoadAttempt(NamedTuple):
    """One library path the loader tried. ``outcome``: "loaded", "not found",
    "failed to load" (dlopen failed; ``detail`` holds dlerror) or "unusable" (loaded but
    rejected, e.g. no device; ``detail`` says why)."""

    library: str
    path: str
    outcome: str
    detail: str = ""

    def describe(self) -> str:
        text = f"{self.library}: {self.path}: {self.outcome}"
        return f"{text}: {self.detail}" if self.detail else text


class AclLibraryError(AclFaError, ImportError):
    """No usable CANN (or simulator) library. ``attempts`` lists every path tried, in order;
    ``env`` the environment variables that were read, with their values (None = unset)."""

    def __init__(
        self,
        summary: str,
        attempts: Sequence[LoadAttempt] = (),
        env: Optional[dict] = None,
    ):
        self.summary = summary
        self.attempts = [LoadAttempt(*a) for a in attempts]
        self.env = dict(env or {})
        super().__init__(summary)

    def __str__(self) -> str:
        lines = [self.summary]
        if self.attempts:
            lines.append("paths tried, in order:")
            lines += [f"  {a.describe()}" for a in self.attempts]
        if self.env:
            lines.append("environment read:")
            lines += [
                f"  {k}={v}" if v is not None else f"  {k} (unset)" for k, v in self.env.items()
            ]
        return "\n".join(lines)

    def __reduce__(self):
        return (self.__class__, (self.summary, [tuple(a) for a in self.attempts], self.env))
