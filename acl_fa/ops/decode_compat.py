"""flash-attn 2.x's ``flash_attn_with_kvcache`` on numpy arrays, over acl_fa's decode op.

Signature, defaults and semantics of Dao-AILab/flash-attention ``flash_attn/flash_attn_interface.py``
(``flash_attn_with_kvcache``) and its test ``tests/test_flash_attn.py::test_flash_attn_kvcache``
(docs/decode.md, "flash-attn's flash_attn_with_kvcache, exactly"):

- q [B, Sq, N, D]; k_cache / v_cache [B_cache, S_max, Nkv, D] contiguous, or paged
  [num_blocks, block_size, Nkv, D] with block_table [B, max_blocks] int32;
- k / v [B, S_new, Nkv, D] (positional, as flash-attn's): written into the cache in place at
  positions cache_seqlens[b] .. + S_new, then attended; cache_seqlens is not advanced;
- cache_seqlens: int or int [B], the end of each sequence in its cache row (None: every
  sequence fills the cache, S_max or max_blocks x block_size keys; required with k / v);
- rotary_cos / rotary_sin [S_ro, R / 2] (R <= D, a multiple of 16; k / v required): the first R
  dims of the appended k rotate at positions cache_seqlens[b] + t, those of q at cache_seqlens[b]
  + s when causal or local (window_size != (-1, -1)), else all of q's tokens at cache_seqlens[b];
  interleaved (GPT-J: pairs 2i, 2i + 1) or not (GPT-NeoX: pairs i, i + R / 2). The rotated k is
  what enters the cache. Applied on the host while q and k are copied for upload (one pass over
  each, in float32, rounded to q's dtype: q and k are Sq and S_new tokens, small beside the
  cache; the decode kernel has no rotary stage yet);
- cache_batch_idx int [B] (contiguous caches): sequence b uses cache row cache_batch_idx[b]
  (the kernel's own block-table addressing, no copy: acl_fa.flash_attention_with_kvcache's
  cache_batch_idx);
- cache_leftpad int [B]: keys [0, cache_leftpad[b]) of sequence b are invisible; cache_seqlens[b]
  stays the end index, so the causal diagonal, windows, ALiBi and the rotary positions are those
  of the unpadded call. In the kernel (FlashAttentionDecodeV2: each sequence's first visible key;
  the chunks before it are never read). flash-attn takes it for contiguous caches only; acl-fa
  takes it with a paged cache too;
- softmax_scale (default D ** -0.5), causal (default False: flash-attn's), window_size,
  num_splits (0 auto, 1, S >= 2), return_softmax_lse -> (out, lse [B, N, Sq] float32);
  softcap > 0 and alibi_slopes [N] / [B, N] (bias -slope * |s + L - Sq - j|, L the sequence's
  keys: with cache_leftpad, counted from the end as flash-attn does) run on the decode op's
  FlashAttentionDecodeV2, computed in the kernel.

acl_fa.flash_attention_with_kvcache keeps its own names (window, return_lse, keyword-only k / v,
causal=True, scale); docs/decode.md puts the two side by side.
"""

from __future__ import annotations

import numbers
import numpy as np

from .decode import flash_attention_with_kvcache, seqlens_array
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["flash_attn_with_kvcache", "apply_rotary"]

ROTARY_DIM_MULTIPLE = 16  # flash-attn: "rotary_dim must be divisible by 16"


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                           cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                           rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """flash-attn's ``flash_attn_with_kvcache`` (see the module docstring). Returns out
    [B, Sq, N, D], or (out, softmax_lse [B, N, Sq] float32) with return_softmax_lse."""
    q_shape, k_cache_shape = _shape("q", q), _shape("k_cache", k_cache)
    if len(q_shape) != 4:
        raise InvalidArgumentError(f"q must be (batch_size, seqlen, nheads, headdim), got shape {q_shape}")
    if len(k_cache_shape) != 4:
        raise InvalidArgumentError(f"k_cache must be (batch_size_cache, seqlen_cache, nheads_k, headdim) or paged "
                                   f"(num_blocks, page_block_size, nheads_k, headdim), got shape {k_cache_shape}")
    batch = q_shape[0]
    if (k is None) != (v is None):
        raise InvalidArgumentError("k and v must be given together (new keys and values to append)")
    if not isinstance(rotary_interleaved, (bool, np.bool_)):
        raise InvalidTypeError(f"rotary_interleaved must be a bool, got {rotary_interleaved!r}")
    if not isinstance(return_softmax_lse, (bool, np.bool_)):
        raise InvalidTypeError(f"return_softmax_lse must be a bool, got {return_softmax_lse!r}")
    local = _is_local(window_size)
    if cache_seqlens is None:
        if k is not None:
            raise InvalidArgumentError("cache_seqlens is required when k and v are appended (the position where "
                                       "they enter each sequence; flash-attn requires it too)")
        capacity = k_cache_shape[1] * (_shape("block_table", block_table)[-1] if block_table is not None else 1)
        cache_seqlens = capacity   # flash-attn: without cache_seqlens every sequence fills the cache
    seqlens = seqlens_array(cache_seqlens, batch)
    if rotary_cos is not None or rotary_sin is not None:
        q, k = _rotated(q, k, rotary_cos, rotary_sin, seqlens, interleaved=bool(rotary_interleaved),
                        per_token=bool(causal) or local)
    return flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, block_table=block_table, k=k, v=v,
                                        causal=causal, window=window_size, scale=softmax_scale, num_splits=num_splits,
                                        return_lse=bool(return_softmax_lse), softcap=softcap,
                                        cache_batch_idx=cache_batch_idx, alibi_slopes=alibi_slopes,
                                        cache_leftpad=cache_leftpad)


# ---- rotary ----------------------------------------------------------------------------------

def apply_rotary(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, positions: np.ndarray, *,
                 interleaved: bool) -> np.ndarray:
    """x [B, S, H, D] with its first R = 2 * cos.shape[1] dims rotated at the rows `positions`
    [B, S] of cos / sin [S_ro, R / 2], computed in float32 and returned in x's dtype (one new
    array: the copy that is uploaded). Pairs (2i, 2i + 1) interleaved, else (i, i + R / 2); a
    pair (a, b) at angle t becomes (a cos t - b sin t, a sin t + b cos t)."""
    half = cos.shape[1]
    c = cos[positions][:, :, None, :]   # [B, S, 1, R / 2] float32
    s = sin[positions][:, :, None, :]
    out = np.array(x, copy=True)
    lo, hi = ((slice(0, 2 * half, 2), slice(1, 2 * half, 2)) if interleaved
              else (slice(0, half), slice(half, 2 * half)))
    a, b = x[..., lo].astype(np.float32), x[..., hi].astype(np.float32)
    out[..., lo] = (a * c - b * s).astype(x.dtype)
    out[..., hi] = (a * s + b * c).astype(x.dtype)
    return out


def _rotated(q, k, rotary_cos, rotary_sin, seqlens: np.ndarray, *, interleaved: bool, per_token: bool):
    """(q, k) rotated as flash-attn rotates them (module docstring), checked first."""
    if rotary_cos is None or rotary_sin is None:
        raise InvalidArgumentError("rotary_cos and rotary_sin must be given together")
    if k is None:
        raise InvalidArgumentError("rotary_cos / rotary_sin need the new k and v to append (flash-attn rotates the "
                                   "appended keys and q; the cached keys are already rotated)")
    q, k = _host("q", q), _host("k", k)
    cos, sin = _table("rotary_cos", rotary_cos), _table("rotary_sin", rotary_sin)
    if cos.shape != sin.shape:
        raise InvalidArgumentError(f"rotary_cos {cos.shape} and rotary_sin {sin.shape} must have the same shape")
    batch, seq_q, _, d = q.shape
    if k.ndim != 4 or k.shape[0] != batch or k.shape[3] != d:
        raise InvalidArgumentError(f"k must be (batch_size={batch}, seqlen_new, nheads_k, headdim={d}), got {k.shape}")
    rot = 2 * cos.shape[1]
    if rot % ROTARY_DIM_MULTIPLE or rot > d:
        raise InvalidArgumentError(f"rotary_cos / rotary_sin (seqlen_ro, rotary_dim / 2) give rotary_dim={rot}; it must "
                                   f"be a multiple of {ROTARY_DIM_MULTIPLE} and <= headdim={d}")
    seq_new = k.shape[1]
    k_pos = seqlens[:, None].astype(np.int64) + np.arange(seq_new)
    q_pos = seqlens[:, None].astype(np.int64) + (np.arange(seq_q) if per_token else np.zeros(seq_q, np.int64))
    if seqlens.size and (seqlens < 0).any():
        b = int(np.argmax(seqlens < 0))
        raise InvalidArgumentError(f"cache_seqlens[{b}] = {int(seqlens[b])} must be >= 0")
    needed = int(max(k_pos.max(initial=0), q_pos.max(initial=0))) + 1
    if needed > cos.shape[0]:
        raise InvalidArgumentError(f"rotary_cos / rotary_sin have {cos.shape[0]} positions (rows), but the tokens sit "
                                   f"at positions up to {needed - 1} (cache_seqlens + the new tokens): they need at "
                                   f"least {needed} rows")
    return (apply_rotary(q, cos, sin, q_pos, interleaved=interleaved),
            apply_rotary(k, cos, sin, k_pos, interleaved=interleaved))


def _table(name: str, x) -> np.ndarray:
    """A cos / sin table [S_ro, R / 2] of floats as float32."""
    a = _host(name, x)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        raise InvalidTypeError(f"{name} must hold floating-point values, got dtype {a.dtype}")
    if a.ndim != 2 or 0 in a.shape:
        raise InvalidArgumentError(f"{name} must be (seqlen_ro, rotary_dim / 2), got shape {a.shape}")
    a = a.astype(np.float32)
    if not np.isfinite(a).all():
        raise InvalidArgumentError(f"{name} must be finite")
    return a


# ---- small helpers ---------------------------------------------------------------------------

def _is_local(window_size) -> bool:
    """flash-attn's "local": window_size other than (-1, -1) (validated again by the op)."""
    if isinstance(window_size, (str, bytes)) or not hasattr(window_size, "__len__") or len(window_size) != 2:
        raise InvalidArgumentError(f"window_size must be a pair (left, right), -1 = unbounded; got {window_size!r}")
    for w in window_size:
        if isinstance(w, bool) or not isinstance(w, numbers.Integral):
            raise InvalidTypeError(f"window_size must be a pair of integers, got {window_size!r}")
    return tuple(int(w) for w in window_size) != (-1, -1)


def _shape(name: str, x) -> tuple:
    if isinstance(x, DeviceArray):
        return tuple(x.shape)
    if x is None or isinstance(x, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a numpy array or a DeviceArray, got {type(x).__name__}")
    return np.shape(x)


def _host(name: str, x) -> np.ndarray:
    """A host array of x (a DeviceArray is read back: q, k and the cos / sin rows are small)."""
    if isinstance(x, DeviceArray):
        return x.numpy()
    if x is None or isinstance(x, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a numpy array or a DeviceArray, got {type(x).__name__}")
    return np.asarray(x)

