"""numpy dtype <-> aclDataType (values of enum aclDataType in CANN's acl_base.h).

bfloat16 comes from ml_dtypes (numpy has none); arrays of it are stored as 2-byte words,
exactly as the device stores them.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import InvalidTypeError

ACL_DT_UNDEFINED = -1
ACL_FLOAT = 0
ACL_FLOAT16 = 1
ACL_INT8 = 2
ACL_INT32 = 3
ACL_UINT8 = 4
ACL_INT16 = 6
ACL_UINT16 = 7
ACL_UINT32 = 8
ACL_INT64 = 9
ACL_UINT64 = 10
ACL_DOUBLE = 11
ACL_BOOL = 12
ACL_BF16 = 27

_NUMPY_TO_ACL: dict[np.dtype, int] = {
    np.dtype(np.float32): ACL_FLOAT,
    np.dtype(np.float16): ACL_FLOAT16,
    np.dtype(ml_dtypes.bfloat16): ACL_BF16,
    np.dtype(np.float64): ACL_DOUBLE,
    np.dtype(np.int8): ACL_INT8,
    np.dtype(np.int16): ACL_INT16,
    np.dtype(np.int32): ACL_INT32,
    np.dtype(np.int64): ACL_INT64,
    np.dtype(np.uint8): ACL_UINT8,
    np.dtype(np.uint16): ACL_UINT16,
    np.dtype(np.uint32): ACL_UINT32,
    np.dtype(np.uint64): ACL_UINT64,
    np.dtype(np.bool_): ACL_BOOL,
}
_ACL_TO_NUMPY: dict[int, np.dtype] = {v: k for k, v in _NUMPY_TO_ACL.items()}

# Accepted spellings besides numpy's own ("bf16", "fp16", ...).
_ALIASES = {
    "bf16": ml_dtypes.bfloat16,
    "bfloat16": ml_dtypes.bfloat16,
    "fp16": np.float16,
    "half": np.float16,
    "fp32": np.float32,
    "float": np.float32,
}


def as_dtype(dtype) -> np.dtype:
    """numpy dtype of `dtype` (a dtype, type, or name such as "bf16"), or InvalidTypeError."""
    if isinstance(dtype, str) and dtype.lower() in _ALIASES:
        dtype = _ALIASES[dtype.lower()]
    try:
        result = np.dtype(dtype)
    except TypeError as exc:
        raise InvalidTypeError(f"dtype {dtype!r} is not a numpy dtype") from exc
    if result not in _NUMPY_TO_ACL:
        raise InvalidTypeError(
            f"dtype {result} has no aclDataType; supported: {', '.join(map(str, _NUMPY_TO_ACL))}"
        )
    return result


def to_acl(dtype) -> int:
    """aclDataType value of a numpy dtype."""
    return _NUMPY_TO_ACL[as_dtype(dtype)]


def from_acl(acl_dtype: int) -> np.dtype:
    """numpy dtype of an aclDataType value."""
    try:
        return _ACL_TO_NUMPY[int(acl_dtype)]
    except KeyError:
        raise InvalidTypeError(f"aclDataType {acl_dtype} has no numpy dtype here") from None
