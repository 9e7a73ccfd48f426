"""acl-fa: the FlashAttention family on Huawei Ascend NPUs from numpy -- forward (with masks,
sliding windows, dropout and varlen batches), backward, KV-cache decode, LSE merge and ring /
Ulysses sequence parallelism -- through the CANN runtime and aclnn, or through the CPU simulator
of the same C ABI (see docs/architecture.md).

The package is in layers, each importing only those below it: runtime (cffi, loader, sessions,
buffers), spec (what a call means: options, the band rule, layouts, Philox), plan (tiling plans and
models), ops (one module per op family), reference (float64 references), parallel, jobs (the work
behind the CLI) and cli (click)."""
import importlib.metadata as _metadata
import sys as _sys

from .runtime.errors import (
    AclError, AclFaError, AclLibraryError, AclMemoryError, AclParamError, ClosedObjectError, ForkedSessionError,
    InsufficientMemoryError, InvalidArgumentError, InvalidTypeError)
from .runtime import sim_stats
from .api import (
    DeviceArray, Session, clear_cache, flash_attention, flash_attention_backward, flash_attention_varlen,
    flash_attention_varlen_backward, flash_attention_with_kvcache, flash_attn_func, merge_attention_partials,
    scaled_dot_product_attention)
from .api import flash_attention_int8
from .ops.kv_quant import quantize_kv_cache
from .runtime.loader import get_backend
from .ops import flash_attn_interface
from .ops.flash_attn_interface import (
    flash_attn_kvpacked_func, flash_attn_qkvpacked_func, flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func, flash_attn_with_kvcache)
from .reference.attention import attention_reference, attention_reference_backward
from .runtime.session import DeviceBuffer, DeviceSession, Event, HostBuffer, Stream
from .runtime.tensor import Tensor

# acl_fa.sim_stats stays importable by its public name (`from acl_fa.sim_stats import last_launch`).
_sys.modules[__name__ + ".sim_stats"] = sim_stats
# flash-attn's module path: `from acl_fa.flash_attn_interface import flash_attn_func` (ops layer).
_sys.modules[__name__ + ".flash_attn_interface"] = flash_attn_interface

try:
    __version__ = _metadata.version("acl-fa")  # the installed distribution's (pyproject.toml)
except _metadata.PackageNotFoundError:  # a source tree with no installed acl-fa
    __version__ = "0+unknown"

__all__ = [
    "AclError",
    "AclFaError",
    "AclLibraryError",
    "AclMemoryError",
    "AclParamError",
    "ClosedObjectError",
    "DeviceArray",
    "DeviceBuffer",
    "DeviceSession",
    "Event",
    "ForkedSessionError",
    "HostBuffer",
    "InsufficientMemoryError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "Session",
    "Stream",
    "Tensor",
    "attention_reference",
    "attention_reference_backward",
    "clear_cache",
    "flash_attention",
    "flash_attention_backward",
    "flash_attention_int8",
    "flash_attention_varlen",
    "flash_attention_varlen_backward",
    "flash_attention_with_kvcache",
    "flash_attn_func",
    "flash_attn_interface",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
    "get_backend",
    "merge_attention_partials",
    "quantize_kv_cache",
    "scaled_dot_product_attention",
    "sim_stats",
]
