"""Float64 numpy attention with exactly the operator's semantics, for checking results.

softmax(scale * Q K^T + mask) V per head, where `causal` masks key j > i + (Skv - Sq)
(bottom-right aligned), query head h reads kv head h // (N // Nkv), and a row that sees no
key gives output 0 and LSE -inf. Query rows are processed in chunks so that a long sequence
never holds an Sq x Skv matrix: peak extra memory is chunk_rows x Skv float64 per head.
"""

from __future__ import annotations

import math

import numpy as np

from .layouts import to_bnsd, from_bnsd

__all__ = ["attention_reference"]

# Rows of Q per chunk: 256 rows x 32768 keys x 8 bytes = 64 MiB of scores at most.
_DEFAULT_CHUNK_BYTES = 64 << 20


def attention_reference(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                        num_kv_heads=None, heads=None, out_dtype=np.float64):
    """Returns (out, lse): out in `layout` like q (dtype `out_dtype`), lse float64 [B, N, Sq].

    `heads` optionally restricts the computation to those query-head indices (out and lse then
    hold only those heads, in that order) -- used to check large problems on a sample.
    """
    qb, kb, vb = (to_bnsd(np.asarray(x), layout, n) for x, n in
                  ((q, num_heads), (k, num_kv_heads or num_heads), (v, num_kv_heads or num_heads)))
    batch, n_heads, sq, d = qb.shape
    n_kv, skv = kb.shape[1], kb.shape[2]
    if n_heads % n_kv:
        raise ValueError(f"query heads {n_heads} must be a multiple of key/value heads {n_kv}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    head_list = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    group = n_heads // n_kv
    out = np.zeros((batch, len(head_list), sq, d), dtype=np.float64)
    lse = np.full((batch, len(head_list), sq), -np.inf, dtype=np.float64)
    chunk = max(1, _DEFAULT_CHUNK_BYTES // max(1, skv * 8))
    diagonal = skv - sq
    cols = np.arange(skv)
    for b in range(batch):
        for slot, h in enumerate(head_list):
            kh = kb[b, h // group].astype(np.float64)
            vh = vb[b, h // group].astype(np.float64)
            for r0 in range(0, sq, chunk):
                r1 = min(sq, r0 + chunk)
                scores = (qb[b, h, r0:r1].astype(np.float64) @ kh.T) * scale
                if causal:
                    rows = np.arange(r0, r1)[:, None]
                    scores[cols[None, :] > rows + diagonal] = -np.inf
                row_max = scores.max(axis=1, keepdims=True)
                seen = np.isfinite(row_max[:, 0]) | np.isnan(row_max[:, 0])
                safe_max = np.where(np.isneginf(row_max), 0.0, row_max)
                p = np.exp(scores - safe_max)
                row_sum = p.sum(axis=1, keepdims=True)
                with np.errstate(divide="ignore", invalid="ignore"):
                    o = (p @ vh) / row_sum
                    row_lse = safe_max[:, 0] + np.log(row_sum[:, 0])
                o[~seen] = 0.0
                row_lse[~seen] = -np.inf
                out[b, slot, r0:r1] = o
                lse[b, slot, r0:r1] = row_lse
    return from_bnsd(out, layout).astype(out_dtype, copy=False), lse
