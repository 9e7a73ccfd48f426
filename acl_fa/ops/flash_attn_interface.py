"""flash-attn 2.x's public functions on numpy arrays: ``from acl_fa.flash_attn_interface import
flash_attn_func`` where flash-attn code says ``from flash_attn.flash_attn_interface import ...``.

Names, argument order and defaults are flash-attn 2.x's (Dao-AILab/flash-attention,
flash_attn/flash_attn_interface.py): tensors are numpy arrays (float16, bfloat16 from ml_dtypes,
float32) or, for the unpacked non-varlen functions, DeviceArrays; q [B, Sq, N, D], k / v
[B, Skv, Nkv, D] (flash-attn's BSHD = our layout "BSND"); varlen q [Tq, N, D], k / v [Tkv, Nkv, D]
with cu_seqlens int32 [num_seqs + 1]; any head dim 1..256. Semantics as flash-attn's: causal and
window_size aligned bottom-right, GQA/MQA by fewer kv heads, softmax_scale = D ** -0.5 by default,
rows that see no key give 0. Each function is a thin face over acl_fa.flash_attention /
flash_attention_varlen (docs/attention_options.md); flash_attn_with_kvcache, over the decode op, is
acl_fa.ops.decode_compat's (docs/decode.md).

Return values. out; with return_attn_probs=True a tuple (out, softmax_lse, S_dmask) with
softmax_lse float32 in flash-attn's layout ([B, N, Sq]; varlen [N, Tq]) and S_dmask, where
flash-attn returns the softmax matrix whose sign encodes the dropout pattern, the kernel's
dropout keep mask itself: uint8 [B, N, Sq, Skv] (varlen [num_seqs, N, max Sq, max Skv]), 1 = kept,
0 = dropped or not visible; None when dropout_p == 0 (the kernel never forms the probabilities).
The tuple also carries the dropout's random state, ``.seed`` and ``.offset`` (flash-attn keeps it
in torch's generator), which the backward needs.

Gradients. numpy has no autograd; the gradient of a call is acl_fa.flash_attention_backward (or
flash_attention_varlen_backward) with the same options:

    out, lse, _ = r = flash_attn_func(q, k, v, dropout_p=p, causal=True, return_attn_probs=True)
    dq, dk, dv = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, layout="BSND", causal=True,
                                                 dropout_p=p, seed=r.seed, offset=r.offset)

(window_size -> window=, softmax_scale -> scale=, softcap / alibi_slopes under their own names;
deterministic= is the backward's own argument there.)
"""

from __future__ import annotations

import numbers

import numpy as np

from .decode_compat import flash_attn_with_kvcache
from .paged_prefill import gather_paged_kv
from .problem import AttentionOutputs
from .routed import flash_attention
from .varlen import flash_attention_varlen
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..spec.problem import as_array

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"]


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidTypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def _window(window_size):
    """flash-attn's window_size (left, right), -1 = unbounded, as acl_fa's window (None for
    (-1, -1)); the values' limits are checked by acl_fa's window rule (spec/band.py)."""
    if isinstance(window_size, (str, bytes)) or not hasattr(window_size, "__len__"):
        raise InvalidTypeError(f"window_size must be a pair (left, right) of integers, got {window_size!r}")
    if len(window_size) != 2:
        raise InvalidArgumentError(f"window_size must be a pair (left, right), got {window_size!r}")
    for i, w in enumerate(window_size):
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, numbers.Integral):
            raise InvalidTypeError(f"window_size[{i}] must be an integer, got {w!r}")
    window = (int(window_size[0]), int(window_size[1]))
    return None if window == (-1, -1) else window


def _options(dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
             return_attn_probs) -> dict:
    """The library keywords of flash-attn's common arguments. softcap and alibi_slopes are passed
    only when the caller set them (the library validates each; docs/attention_options.md
    "Score modifiers"); deterministic concerns the backward (the forward is deterministic)."""
    if isinstance(dropout_p, (bool, np.bool_)) or not isinstance(dropout_p, numbers.Real):
        raise InvalidTypeError(f"dropout_p must be a real number in [0, 1), got {dropout_p!r}")
    _check_bool("deterministic", deterministic)
    probs = _check_bool("return_attn_probs", return_attn_probs)
    options = dict(dropout_p=dropout_p, scale=softmax_scale, causal=causal, window=_window(window_size),
                   return_lse=probs, return_dropout_mask=probs and dropout_p > 0)
    if isinstance(softcap, (bool, np.bool_)) or not isinstance(softcap, numbers.Real):
        raise InvalidTypeError(f"softcap must be a real number (0.0 = off), got {softcap!r}")
    if softcap != 0.0:
        options["softcap"] = softcap
    if alibi_slopes is not None:
        options["alibi_slopes"] = alibi_slopes
    return options


def _result(result, return_attn_probs: bool):
    """out, or flash-attn's (out, softmax_lse, S_dmask) with the dropout's seed and offset."""
    if not return_attn_probs:
        return result
    return AttentionOutputs(result.out, result.lse, result.dropout_mask, seed=result.seed, offset=result.offset,
                            next_offset=result.next_offset, return_lse=True, return_dropout_mask=True)


def _unpack(name: str, packed, count: int, axis: int, shape: str) -> tuple:
    """The `count` tensors stacked along `axis` of a packed numpy array (views, no copy)."""
    packed = as_array(name, packed)
    if isinstance(packed, DeviceArray):
        raise InvalidTypeError(f"{name}: packed tensors are taken as numpy arrays, not DeviceArrays")
    rank = 5 if axis == 2 else 4
    if packed.ndim != rank or packed.shape[axis] != count:
        raise InvalidArgumentError(f"{name} must be {shape}, got shape {packed.shape}")
    return tuple(np.take(packed, i, axis=axis) for i in range(count))


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn's flash_attn_func: q [B, Sq, N, D], k, v [B, Skv, Nkv, D] -> out [B, Sq, N, D];
    with return_attn_probs (out, softmax_lse [B, N, Sq], S_dmask) (module docstring)."""
    options = _options(dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                       return_attn_probs)
    return _result(flash_attention(q, k, v, layout="BSND", **options), options["return_lse"])


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                             softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn's flash_attn_kvpacked_func: kv [B, Skv, 2, Nkv, D] (k then v)."""
    k, v = _unpack("kv", kv, 2, 2, "[batch, seqlen, 2, nheads_k, headdim]")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                              softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn's flash_attn_qkvpacked_func: qkv [B, S, 3, N, D] (q, k, v)."""
    q, k, v = _unpack("qkv", qkv, 3, 2, "[batch, seqlen, 3, nheads, headdim]")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
                           deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash-attn's flash_attn_varlen_func: q [Tq, N, D], k / v [Tkv, Nkv, D] packed sequences
    (cu_seqlens_q / cu_seqlens_k: int32 [num_seqs + 1] cumulative starts from 0; max_seqlen_q /
    max_seqlen_k at least the longest sequence) -> out [Tq, N, D]; with return_attn_probs
    (out, softmax_lse [N, Tq], S_dmask).

    block_table (int32 [num_seqs, max_blocks_per_seq]): k / v are paged caches [num_blocks,
    block_size, Nkv, D] and sequence s's keys its first cu_seqlens_k[s+1] - cu_seqlens_k[s] rows
    through block_table[s] (acl_fa.ops.paged_prefill: the used blocks are gathered into
    contiguous keys before the upload)."""
    options = _options(dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                       return_attn_probs)
    if block_table is not None:
        k, v = gather_paged_kv(k, v, block_table, cu_seqlens_k)
    result = flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                                    max_seqlen_k=max_seqlen_k, **options)
    return _result(result, options["return_lse"])


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn's flash_attn_varlen_kvpacked_func: kv [Tkv, 2, Nkv, D]."""
    k, v = _unpack("kv", kv, 2, 1, "[total_k, 2, nheads_k, headdim]")
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                                  softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                                  return_attn_probs)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None, causal=False,
                                     window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """flash-attn's flash_attn_varlen_qkvpacked_func: qkv [T, 3, N, D], one cu_seqlens and
    max_seqlen for queries and keys."""
    q, k, v = _unpack("qkv", qkv, 3, 1, "[total, 3, nheads, headdim]")
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p, softmax_scale,
                                  causal, window_size, softcap, alibi_slopes, deterministic, return_attn_probs)
