"""Float64 (and same-precision naive) attention against a KV cache, with exactly the semantics of
acl_fa.flash_attention_with_kvcache, for checking it.

Sequence b has L = cache_seqlens[b] keys: rows [0, L) of its contiguous cache, or of the blocks
block_table[b] names for a paged one. Query token s sees key j iff
s + L - Sq - left <= j <= s + L - Sq + right (left/right from the window, -1 = unbounded; causal
sets right = 0). Query head h reads kv head h // (N / Nkv). A row that sees no key gives 0 and
LSE -inf.

Score modifiers (docs/attention_options.md, "Score modifiers"): softcap caps the scaled score,
ALiBi adds -slope[b, h] * |s + L - Sq - j| after it, and a sink logit sink[h] joins each row's
denominator with no value (a row that sees no key then gives 0 and LSE = sink).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

__all__ = ["gather_sequence", "kvcache_reference", "rotary_reference", "quantize_kv_reference",
           "dequantize_kv_reference", "int8_kvcache_reference"]


def gather_sequence(cache: np.ndarray, b: int, length: int, block_table: Optional[np.ndarray]) -> np.ndarray:
    """The first `length` keys of sequence b as [length, Nkv, D]."""
    cache = np.asarray(cache)
    if block_table is None:
        return cache[b, :length]
    block_size = cache.shape[1]
    blocks = -(-length // block_size)
    rows = cache[np.asarray(block_table)[b, :blocks]].reshape(blocks * block_size, *cache.shape[2:])
    return rows[:length]


def rotary_reference(x, cos, sin, positions, *, interleaved: bool) -> np.ndarray:
    """Rotary embedding of flash-attn's ``apply_rotary_emb`` in float64: x [B, S, H, D], cos / sin
    [S_ro, R / 2], positions [B, S] integer (the row of cos / sin each token uses). The first R
    dims of each head rotate, the rest pass through. Interleaved (GPT-J): pairs (2i, 2i + 1);
    otherwise (GPT-NeoX): pairs (i, i + R / 2). A pair (a, b) at angle t becomes
    (a cos t - b sin t, a sin t + b cos t)."""
    x = np.asarray(x, np.float64)
    cos = np.asarray(cos, np.float64)[np.asarray(positions)][:, :, None, :]   # [B, S, 1, R / 2]
    sin = np.asarray(sin, np.float64)[np.asarray(positions)][:, :, None, :]
    rot = 2 * cos.shape[-1]
    out = x.copy()
    if interleaved:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2] = a * cos - b * sin
        out[..., 1:rot:2] = a * sin + b * cos
    else:
        a, b = x[..., :rot // 2], x[..., rot // 2:rot]
        out[..., :rot // 2] = a * cos - b * sin
        out[..., rot // 2:rot] = a * sin + b * cos
    return out


def kvcache_reference(q, k_cache, v_cache, cache_seqlens, *, block_table=None, causal=True, window=None,
                      scale=None, precision=None, softcap=0.0, alibi_slopes=None, sinks=None,
                      cache_batch_idx=None, cache_leftpad=None):
    """Returns (out [B, Sq, N, D] float64, lse [B, N, Sq] float64).

    cache_batch_idx [B]: sequence b reads cache row cache_batch_idx[b] of a contiguous cache.
    cache_leftpad [B]: keys [0, cache_leftpad[b]) of sequence b are invisible (flash-attn's
    left padding; cache_seqlens[b] stays the end index, the diagonal and ALiBi distances are
    measured from it, so bottom-right alignment is unchanged).

    precision None: float64 throughout. precision = an input dtype: the naive same-precision
    attention of the 2x rule (acl_fa.reference.accuracy) -- scores and probabilities rounded to it, fp32
    arithmetic otherwise.
    """
    q = np.asarray(q)
    batch, sq, heads, d = q.shape
    kv_heads = np.asarray(k_cache).shape[2]
    group = heads // kv_heads
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    left, right = (-1, -1) if window is None else window
    if causal:
        right = 0
    work = np.float64 if precision is None else np.float32
    out = np.zeros((batch, sq, heads, d), np.float64)
    lse = np.full((batch, heads, sq), -np.inf, np.float64)
    lengths = np.broadcast_to(np.asarray(cache_seqlens), (batch,))
    slopes = None if alibi_slopes is None else np.broadcast_to(np.asarray(alibi_slopes, np.float64), (batch, heads))
    rows = np.arange(batch) if cache_batch_idx is None else np.asarray(cache_batch_idx)
    starts = np.zeros(batch, np.int64) if cache_leftpad is None else np.asarray(cache_leftpad, np.int64)
    for b in range(batch):
        length = int(lengths[b])
        row = b if block_table is not None else int(rows[b])   # paged: the table names the blocks
        keys = gather_sequence(k_cache, row, length, block_table).astype(work)
        values = gather_sequence(v_cache, row, length, block_table).astype(work)
        keys[:starts[b]] = 0      # left padding: invisible, and may hold anything (NaN included)
        values[:starts[b]] = 0
        diag = np.arange(sq)[:, None] + length - sq        # [Sq, 1]: each token's diagonal key
        cols = np.arange(length)[None, :]
        visible = np.broadcast_to(cols >= starts[b], (sq, length)).copy()
        if left >= 0:
            visible &= cols >= diag - left
        if right >= 0:
            visible &= cols <= diag + right
        for h in range(heads):
            kh, vh = keys[:, h // group], values[:, h // group]
            s = q[b, :, h].astype(work) @ kh.T
            if precision is not None:
                s = s.astype(precision).astype(work) * work(scale)
            else:
                s = s * scale
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            if slopes is not None:
                s = (s - slopes[b, h] * np.abs(diag - cols)).astype(work)
            s = np.where(visible, s, -np.inf)
            m = s.max(axis=1, keepdims=True) if length else np.full((sq, 1), -np.inf)
            seen = ~np.isneginf(m[:, 0])
            sink = None if sinks is None else float(np.asarray(sinks, np.float64)[h])
            if sink is not None:
                m = np.maximum(m, sink)
            safe = np.where(np.isneginf(m), 0.0, m)
            p = np.exp(s - safe)
            total = p.sum(axis=1, keepdims=True)
            if sink is not None:
                total = total + np.exp(sink - safe)
            with np.errstate(divide="ignore", invalid="ignore"):
                if precision is not None:
                    o = (p / total).astype(precision).astype(work) @ vh
                    o = o.astype(precision)
                else:
                    o = (p @ vh) / total
                row_lse = safe[:, 0] + np.log(total[:, 0])
            o = np.where(seen[:, None], o, 0.0)
            out[b, :, h] = o
            lse[b, h] = row_lse if sink is not None else np.where(seen, row_lse, -np.inf)
    return out, lse


# ---- the int8 KV cache (docs/int8.md "Int8 KV cache (decode)") ---------------------------------
# Keys per channel: k = k_scale[h, c] * k_int8, k_scale [Nkv, D]; values per token:
# v = v_scale[slot, h] * v_int8 with v_scale laid out [rows, Nkv, slots_per_row] (rows = B for a
# contiguous cache, cache blocks for a paged one). Quantization: clip(rint(x / scale), -127, 127).


def quantize_kv_reference(k_cache, v_cache) -> tuple:
    """(k_int8, v_int8, k_scale, v_scale) of a float cache [rows, slots, Nkv, D] by the documented
    scheme: k_scale = max |k| over rows and slots / 127 per (kv head, channel), v_scale = max |v|
    over D / 127 per (slot, kv head); NaN slots ignored for the scales and stored as 0; a zero
    maximum gives scale 1."""
    k = np.asarray(k_cache, dtype=np.float64)
    v = np.asarray(v_cache, dtype=np.float64)
    k_abs = np.nan_to_num(np.abs(k), nan=0.0, posinf=0.0)
    v_abs = np.nan_to_num(np.abs(v), nan=0.0, posinf=0.0)
    k_max = k_abs.max(axis=(0, 1))
    v_max = v_abs.max(axis=3)
    k_scale = np.where(k_max > 0, k_max / 127.0, 1.0).astype(np.float32)
    v_scale = np.where(v_max > 0, v_max / 127.0, 1.0).astype(np.float32)  # [rows, slots, Nkv]

    def to_int8(x, scale):
        y = np.rint(x / scale.astype(np.float64))
        return np.clip(np.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0), -127, 127).astype(np.int8)

    return (to_int8(k, k_scale[None, None]), to_int8(v, v_scale[..., None]), k_scale,
            np.ascontiguousarray(v_scale.transpose(0, 2, 1)))


def dequantize_kv_reference(k_int8, v_int8, k_scale, v_scale) -> tuple:
    """Float64 caches [rows, slots, Nkv, D] of an int8 cache and its scales."""
    k = np.asarray(k_int8, np.float64) * np.asarray(k_scale, np.float64)[None, None]
    v = np.asarray(v_int8, np.float64) * np.asarray(v_scale, np.float64).transpose(0, 2, 1)[..., None]
    return k, v


def int8_kvcache_reference(q, k_int8, v_int8, k_scale, v_scale, cache_seqlens, **options):
    """kvcache_reference over the dequantized cache, in float64: what the int8 cache holds, exactly."""
    k, v = dequantize_kv_reference(k_int8, v_int8, k_scale, v_scale)
    return kvcache_reference(np.asarray(q, np.float64), k, v, cache_seqlens, **options)
