"""The int8 KV cache of decode (FlashAttentionDecodeV3): its scheme, the host helper that quantizes
a float cache, the checks of its scales and the quantization of appended tokens.

docs/int8.md "Int8 KV cache (decode)". The scheme is Ascend's "antiquant" (x = scale * x_int8, no
offset), with FusedInferAttentionScore's modes key_antiquant_mode 0 (per channel) and
value_antiquant_mode 1 (per token):

- keys per channel: ``k_scale`` float32 [Nkv, D], one scale per kv head and channel for the whole
  cache (the op's key_antiquant_scale);
- values per token: ``v_scale`` float32 [num_blocks, Nkv, block_size] for a paged cache, [B, Nkv,
  S_max] for a contiguous one (the op's value_antiquant_scale: a kv head's tokens of one cache block
  are contiguous, so a chunk's scales are one copy);
- x_int8 = clip(rint(x / scale), -127, 127) (round half to even; -128 unused, symmetric).

Appended k/v (float, q's dtype) are quantized with the same scheme: each new value token gets its
own scale (amax over D / 127, written into v_scale at its slot); new keys use the cache's channel
scales and saturate at +-127 x scale (a channel of a new key larger than every key the scales were
made from is clipped: make the scales with headroom, ``quantize_kv_cache(..., k_headroom=)``).
"""

from __future__ import annotations

from typing import Optional

import ml_dtypes
import numpy as np

from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["INT8", "QMAX", "quantize_kv_cache", "quantize_keys", "quantize_values", "scale_arrays",
           "check_value_scales"]

INT8 = np.dtype(np.int8)
F32 = np.dtype(np.float32)
QMAX = 127
FLOAT_CACHE_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))


def _finite_abs(x: np.ndarray) -> np.ndarray:
    """|x| in float64 with non-finite entries (unused cache slots may hold NaN) as 0."""
    a = np.abs(x.astype(np.float64))
    return np.where(np.isfinite(a), a, 0.0)


def _to_int8(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """clip(rint(x / scale), -127, 127) as int8; non-finite x gives 0."""
    y = np.rint(x.astype(np.float64) / scale.astype(np.float64))
    y = np.where(np.isfinite(y), y, 0.0)
    return np.clip(y, -QMAX, QMAX).astype(INT8)


def quantize_keys(k: np.ndarray, k_scale: np.ndarray) -> np.ndarray:
    """k [..., Nkv, D] float with the channel scales k_scale [Nkv, D]: int8, saturating."""
    return _to_int8(k, k_scale)


def quantize_values(v: np.ndarray) -> tuple:
    """v [..., Nkv, D] float: (int8 [..., Nkv, D], scales float32 [..., Nkv]), one scale per token
    and kv head, amax over D / 127 (1.0 where the token is all zeros or not finite)."""
    amax = _finite_abs(v).max(axis=-1)
    scale = np.where(amax > 0, amax / QMAX, 1.0).astype(F32)
    return _to_int8(v, scale[..., None]), scale


def quantize_kv_cache(k_cache, v_cache, *, k_headroom: float = 1.0) -> tuple:
    """(k_int8, v_int8, k_scale, v_scale) of a float cache: contiguous [B, S_max, Nkv, D] or paged
    [num_blocks, block_size, Nkv, D] (float16, bfloat16 or float32 numpy arrays), for
    ``flash_attention_with_kvcache(q, k_int8, v_int8, k_scale=, v_scale=, ...)``.

    k_scale [Nkv, D] = k_headroom x (max |k| over every slot of the kv head and channel) / 127;
    v_scale [num_blocks, Nkv, block_size] = per slot and kv head, max |v| over D / 127. Non-finite
    slots (unused slots may hold NaN) are ignored for the scales and stored as 0; an all-zero
    channel or token gets scale 1. k_headroom >= 1 leaves room for appended keys larger than
    the cache's (they saturate at +-127 x scale)."""
    arrays = []
    for name, x in (("k_cache", k_cache), ("v_cache", v_cache)):
        if isinstance(x, DeviceArray):
            x = x.numpy()
        x = np.asarray(x)
        if x.dtype not in FLOAT_CACHE_DTYPES:
            raise InvalidTypeError(f"{name} must be float16, bfloat16 or float32 to be quantized, got {x.dtype}")
        if x.ndim != 4:
            raise InvalidArgumentError(f"{name} must be [B, S_max, Nkv, D] or [num_blocks, block_size, Nkv, D], "
                                       f"got shape {x.shape}")
        arrays.append(x)
    k, v = arrays
    if k.shape != v.shape:
        raise InvalidArgumentError(f"k_cache {k.shape} and v_cache {v.shape} must have the same shape")
    if not (np.isfinite(k_headroom) and k_headroom >= 1.0):
        raise InvalidArgumentError(f"k_headroom must be a finite number >= 1, got {k_headroom!r}")
    amax = _finite_abs(k).max(axis=(0, 1))  # [Nkv, D]
    k_scale = np.where(amax > 0, k_headroom * amax / QMAX, 1.0).astype(F32)
    vq, v_scale = quantize_values(v)          # v_scale [blocks, block_size, Nkv]
    return quantize_keys(k, k_scale), vq, k_scale, np.ascontiguousarray(v_scale.transpose(0, 2, 1))


def _scale_array(name: str, x, shape: tuple, read_back: bool = True):
    """A float32 host copy of a scale argument of `shape` (a DeviceArray is read back, or with
    read_back False only its shape and dtype are checked and None is returned)."""
    if x is None:
        raise InvalidArgumentError(f"{name} is required with an int8 k_cache / v_cache: "
                                   "acl_fa.flash_attention_with_kvcache(..., k_scale=, v_scale=) (docs/int8.md)")
    if isinstance(x, DeviceArray):
        if x.dtype != F32:
            raise InvalidTypeError(f"{name} must be float32, got {x.dtype}")
        if tuple(x.shape) != shape:
            raise InvalidArgumentError(f"{name} must have shape {shape}, got {tuple(x.shape)}")
        if not read_back:
            return None
        x = x.numpy()
    if isinstance(x, (str, bytes)) or not hasattr(x, "__len__"):
        raise InvalidTypeError(f"{name} must be a float32 array, got {type(x).__name__}")
    a = np.asarray(x)
    if a.dtype != F32:
        raise InvalidTypeError(f"{name} must be float32, got {a.dtype}")
    if a.shape != shape:
        raise InvalidArgumentError(f"{name} must have shape {shape}, got {a.shape}")
    return a


def _refuse_bad_values(name: str, values: np.ndarray, where) -> None:
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        first = int(np.argmax(bad.reshape(-1)))
        raise InvalidArgumentError(f"{name}{where(first)} = {float(values.reshape(-1)[first])!r}: every "
                                   "dequantization scale the call reads must be finite and > 0")


def scale_arrays(k_scale, v_scale, *, num_kv_heads: int, head_dim: int, cache_rows: int,
                 block_size: int) -> tuple:
    """(k_scale, v_scale) as float32 host arrays of their shapes; k_scale's values finite and > 0
    (v_scale's are checked where the call reads them: check_value_scales). A DeviceArray v_scale
    is not read back (the cache's per-token scales: a MiB at 32K tokens, every step): its shape and
    dtype are checked, and None stands for its values."""
    ks = _scale_array("k_scale", k_scale, (num_kv_heads, head_dim))
    vs = _scale_array("v_scale", v_scale, (cache_rows, num_kv_heads, block_size), read_back=False)
    _refuse_bad_values("k_scale", ks, lambda i: f"[{i // head_dim}, {i % head_dim}]")
    return ks, vs


def check_value_scales(v_scale: np.ndarray, lengths: np.ndarray, table: np.ndarray, block_size: int,
                       start: Optional[np.ndarray] = None) -> None:
    """Refuses a non-finite or non-positive value scale of a slot the call reads: slots
    [start[b], lengths[b]) of each sequence b (through its block-table row). Slots a sequence does
    not use may hold anything."""
    for b, length in enumerate(lengths):
        first = 0 if start is None else int(start[b])
        if length <= first:
            continue
        for j0 in range(first - first % block_size, int(length), block_size):
            block = int(table[b, j0 // block_size])
            lo, hi = max(first - j0, 0), min(int(length) - j0, block_size)
            values = v_scale[block, :, lo:hi]
            _refuse_bad_values("v_scale", values,
                               lambda i, block=block, lo=lo, hi=hi: f"[{block}, {i // (hi - lo)}, {lo + i % (hi - lo)}]")
