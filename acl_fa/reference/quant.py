"""float64 reference of the int8 QK^T forward (docs/int8.md), written from the documented
semantics: AttentionQuant's per-block quantization and FlashAttentionInt8's attention over it.

Quantization of x [B, H, S, D] (BNSD) with one scale per `block` rows of each (b, h):
    x' = x - mean_s(x)            (smooth: the per-channel mean over the sequence, per (b, h))
    scale = max |x'| over the block / 127   (a block of zeros: FLT_MIN / 127)
    y = round_half_even(half(x' * 127 / max|x'|)), in [-127, 127]
        (through float16 as the kernel rounds: the Atlas A2/A3 vector unit has no fp32 -> int8 Cast)
Attention over the quantized Q (not smoothed) and K (smoothed):
    S = (y_q . y_k^T) * scale_q[row block] * scale_k[key block] * softmax_scale
    out = softmax(S + mask) . V,  LSE = logsumexp(S + mask)
K's smoothing is exact for softmax: it subtracts q . mean from every score of a row, a constant
per row (masked or not), so only the rounding differs from attention on the unquantized inputs.
"""

from __future__ import annotations

import numpy as np

from ..spec.layouts import from_bnsd, to_bnsd

__all__ = ["INT8_LEVELS", "SCALE_FLOOR", "quantize_blocks", "dequantize_blocks", "int8_attention_reference"]

INT8_LEVELS = 127.0  # symmetric: y in [-127, 127]
SCALE_FLOOR = float(np.finfo(np.float32).tiny)  # the amax of a block of zeros


def quantize_blocks(x, block: int, *, smooth: bool) -> tuple:
    """(y int8 [B, H, S, D], scale float32 [B, H, ceil(S / block)]) of x [B, H, S, D] (BNSD),
    computed in float64; the scale is rounded to float32 first and y is computed with that
    float32 scale, as the kernel stores it."""
    x = np.asarray(x, np.float64)
    b, h, s, d = x.shape
    if smooth:
        x = x - x.mean(axis=2, keepdims=True)
    nblocks = -(-s // block)
    pad = nblocks * block - s
    padded = np.pad(x, ((0, 0), (0, 0), (0, pad), (0, 0))).reshape(b, h, nblocks, block, d)
    amax = np.maximum(np.abs(padded).max(axis=(3, 4)), SCALE_FLOOR)
    scale = (amax / INT8_LEVELS).astype(np.float32)
    y = np.rint((padded * (INT8_LEVELS / amax)[..., None, None]).astype(np.float16).astype(np.float64))
    y = np.clip(y, -INT8_LEVELS, INT8_LEVELS).reshape(b, h, nblocks * block, d)[:, :, :s]
    return y.astype(np.int8), scale


def dequantize_blocks(y, scale, block: int) -> np.ndarray:
    """float64 y * scale of each row's block: [B, H, S, D]."""
    rows = np.repeat(np.asarray(scale, np.float64), block, axis=2)[:, :, : y.shape[2]]
    return np.asarray(y, np.float64) * rows[..., None]


def int8_attention_reference(q, k, v, *, block_m: int, block_n: int, causal=False, scale=None, layout="BNSD",
                             num_heads=None, num_kv_heads=None):
    """(out float64 in `layout`, lse float64 [B, N, Sq]) of attention over Q quantized per block_m
    rows and K smoothed and quantized per block_n keys (the module docstring); v as given
    (float64 of its values). GQA: query head h reads kv head h // (N / Nkv)."""
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
    kb = to_bnsd(np.asarray(k), layout, kv_heads)
    vb = to_bnsd(np.asarray(v), layout, kv_heads)
    qy, qs = quantize_blocks(qb, block_m, smooth=False)
    ky, ks = quantize_blocks(kb, block_n, smooth=True)
    qd = dequantize_blocks(qy, qs, block_m)
    kd = dequantize_blocks(ky, ks, block_n)
    b, n, sq, d = qd.shape
    nkv, skv = kd.shape[1], kd.shape[2]
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    group = n // nkv
    out = np.zeros((b, n, sq, d))
    lse = np.full((b, n, sq), -np.inf)
    rows = np.arange(sq)[:, None]
    cols = np.arange(skv)[None, :]
    hidden = cols > rows + (skv - sq) if causal else np.zeros((sq, skv), bool)
    vf = np.asarray(vb, np.float64)
    for bi in range(b):
        for h in range(n):
            s = qd[bi, h] @ kd[bi, h // group].T * scale
            s = np.where(hidden, -np.inf, s)
            m = s.max(axis=1, keepdims=True)
            seen = np.isfinite(m[:, 0])
            m = np.where(np.isfinite(m), m, 0.0)
            p = np.exp(s - m)
            l_sum = p.sum(axis=1)
            out[bi, h] = np.where(seen[:, None], (p @ vf[bi, h // group]) / np.where(seen, l_sum, 1.0)[:, None], 0.0)
            lse[bi, h] = np.where(seen, m[:, 0] + np.log(np.where(seen, l_sum, 1.0)), -np.inf)
    return from_bnsd(out, layout), lse
