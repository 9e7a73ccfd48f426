"""acl-fa: FlashAttention forward on Huawei Ascend NPUs from numpy, through the CANN runtime
and aclnn, or through the CPU simulator of the same C ABI (see docs/architecture.md)."""
import importlib.metadata as _metadata

from .errors import (
    AclError,
    AclFaError,
    AclLibraryError,
    AclMemoryError,
    AclParamError,
    ClosedObjectError,
    ForkedSessionError,
    InsufficientMemoryError,
    InvalidArgumentError,
    InvalidTypeError,
)
from . import sim_stats
from .api import (
    DeviceArray,
    Session,
    flash_attention,
    flash_attention_backward,
    flash_attention_varlen,
    flash_attention_varlen_backward,
    flash_attention_with_kvcache,
    flash_attn_func,
    merge_attention_partials,
    scaled_dot_product_attention,
)
from .loader import get_backend
from .reference import attention_reference, attention_reference_backward
from .runtime import DeviceBuffer, DeviceSession, Event, HostBuffer, Stream
from .tensor import Tensor

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
    "flash_attention",
    "flash_attention_backward",
    "flash_attention_varlen",
    "flash_attention_varlen_backward",
    "flash_attention_with_kvcache",
    "flash_attn_func",
    "get_backend",
    "merge_attention_partials",
    "scaled_dot_product_attention",
    "sim_stats",
]
