"""Float64 numpy attention (forward and backward) with exactly the operator's semantics, for
checking results.

softmax(scale * Q K^T + mask) V per head, where `causal` masks key j > i + (Skv - Sq)
(bottom-right aligned), query head h reads kv head h // (N // Nkv), and a row that sees no
key gives output 0 and LSE -inf. Query rows are processed in chunks so that a long sequence
never holds an Sq x Skv matrix: peak extra memory is chunk_rows x Skv float64 per head.
"""

from __future__ import annotations

import math

import numpy as np

from .layouts import to_bnsd, from_bnsd

__all__ = ["attention_reference", "attention_reference_backward", "attention_backward_math", "head_chunks"]

# Rows of Q per chunk are chosen so a chunk's scores take at most this many bytes.
_DEFAULT_CHUNK_BYTES = 64 << 20


def head_chunks(q, k, v, *, layout, num_heads=None, num_kv_heads=None, heads=None, dtype=np.float64,
                chunk_bytes=_DEFAULT_CHUNK_BYTES):
    """Yields (b, slot, rows, q_rows, k_head, v_head, causal_cols) for every selected query head and
    chunk of query rows: q_rows [rows, D], k_head / v_head [Skv, D] of the kv head it reads (all in
    `dtype`), `rows` the slice of query rows, `causal_cols` a function giving the boolean mask of
    keys each row may not see (key j > i + Skv - Sq). `slot` indexes `heads` (default: all)."""
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    kb = to_bnsd(np.asarray(k), layout, num_kv_heads or num_heads)
    vb = to_bnsd(np.asarray(v), layout, num_kv_heads or num_heads)
    batch, n_heads, sq, _ = qb.shape
    n_kv, skv = kb.shape[1], kb.shape[2]
    if n_heads % n_kv:
        raise ValueError(f"query heads {n_heads} must be a multiple of key/value heads {n_kv}")
    group = n_heads // n_kv
    head_list = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    chunk = max(1, chunk_bytes // max(1, skv * np.dtype(dtype).itemsize))
    cols = np.arange(skv)

    def masked(rows: slice):
        return cols[None, :] > np.arange(rows.start, rows.stop)[:, None] + (skv - sq)

    for b in range(batch):
        for slot, h in enumerate(head_list):
            k_head = kb[b, h // group].astype(dtype)
            v_head = vb[b, h // group].astype(dtype)
            for r0 in range(0, sq, chunk):
                rows = slice(r0, min(sq, r0 + chunk))
                yield b, slot, rows, qb[b, h, rows].astype(dtype), k_head, v_head, masked


def attention_reference(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                        num_kv_heads=None, heads=None, out_dtype=np.float64):
    """Returns (out, lse): out in `layout` like q (dtype `out_dtype`), lse float64 [B, N, Sq].

    `heads` optionally restricts the computation to those query-head indices (out and lse then
    hold only those heads, in that order) -- used to check large problems on a sample.
    """
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    batch, n_heads, sq, d = qb.shape
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    n_out = n_heads if heads is None else len(heads)
    out = np.zeros((batch, n_out, sq, d), dtype=np.float64)
    lse = np.full((batch, n_out, sq), -np.inf, dtype=np.float64)
    for b, slot, rows, q_rows, k_head, v_head, masked in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads):
        scores = (q_rows @ k_head.T) * scale
        if causal:
            scores[masked(rows)] = -np.inf
        row_max = scores.max(axis=1, keepdims=True)
        seen = ~np.isneginf(row_max[:, 0])            # NaN rows count as seen: NaN propagates
        safe_max = np.where(np.isneginf(row_max), 0.0, row_max)
        p = np.exp(scores - safe_max)
        row_sum = p.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            o = (p @ v_head) / row_sum
            row_lse = safe_max[:, 0] + np.log(row_sum[:, 0])
        o[~seen] = 0.0
        row_lse[~seen] = -np.inf
        out[b, slot, rows] = o
        lse[b, slot, rows] = row_lse
    return from_bnsd(out, layout).astype(out_dtype, copy=False), lse


def attention_backward_math(dout_rows, q_rows, k_head, v_head, masked_cols, scale, work_dtype=np.float64,
                            round_to=None):
    """Gradients of one chunk of query rows of one head, in `work_dtype` (analytic formulas):

        S = scale * Q K^T (masked -inf), P = softmax_rows(S) (0 on rows that see no key),
        O = P V, D = rowsum(dO * O), dP = dO V^T, dS = P * (dP - D),
        dQ = scale * dS K,  dK = scale * dS^T Q,  dV = P^T dO.

    `masked_cols`: boolean [rows, Skv] (True = key not visible) or None. `round_to` (a numpy
    dtype) rounds P and dS to it before the matmuls that read them, as a same-precision
    backward does. Returns (dq_rows [rows, D], dk [Skv, D], dv [Skv, D]); dk/dv are this
    chunk's contributions."""
    s = (q_rows @ k_head.T) * work_dtype(scale)
    if masked_cols is not None:
        s[masked_cols] = -np.inf
    row_max = s.max(axis=1, keepdims=True)
    seen = ~np.isneginf(row_max[:, 0])
    p = np.exp(s - np.where(np.isneginf(row_max), 0, row_max))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = p / p.sum(axis=1, keepdims=True)
    p[~seen] = 0
    o = p @ v_head
    d = (dout_rows * o).sum(axis=1, keepdims=True)
    ds = p * ((dout_rows @ v_head.T) - d)
    if round_to is not None:
        p = p.astype(round_to).astype(work_dtype)
        ds = ds.astype(round_to).astype(work_dtype)
    scale = work_dtype(scale)
    return scale * (ds @ k_head), scale * (ds.T @ q_rows), p.T @ dout_rows


def attention_reference_backward(dout, q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                                 num_kv_heads=None, heads=None, out_dtype=np.float64, work_dtype=np.float64,
                                 round_to=None):
    """Returns (dq, dk, dv) of softmax(scale * Q K^T + mask) V for the upstream gradient `dout`
    (dq like q, dk/dv like k/v, in `layout`). GQA/MQA: dk/dv of a kv head sum over its
    query-head group. Rows that see no key give dq 0. Float64 by default, query rows in chunks
    as the forward reference: nothing Sq x Skv is held. `heads` restricts dq to those query
    heads (dk/dv then sum only their contributions). work_dtype / round_to give the
    same-precision naive backward that the accuracy rule compares against."""
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    kb = to_bnsd(np.asarray(k), layout, num_kv_heads or num_heads)
    db = to_bnsd(np.asarray(dout), layout, num_heads)
    batch, n_heads, sq, d = qb.shape
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    n_kv = kb.shape[1]
    group = n_heads // n_kv
    head_list = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    dq = np.zeros((batch, len(head_list), sq, d), dtype=work_dtype)
    dk = np.zeros(kb.shape, dtype=work_dtype)
    dv = np.zeros(kb.shape, dtype=work_dtype)
    for b, slot, rows, q_rows, k_head, v_head, masked in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads,
            dtype=work_dtype):
        h = head_list[slot]
        dout_rows = db[b, h, rows].astype(work_dtype)
        dq_rows, dk_part, dv_part = attention_backward_math(
            dout_rows, q_rows, k_head, v_head, masked(rows) if causal else None, scale, work_dtype, round_to)
        dq[b, slot, rows] = dq_rows
        dk[b, h // group] += dk_part
        dv[b, h // group] += dv_part
    return tuple(from_bnsd(x, layout).astype(out_dtype, copy=False) for x in (dq, dk, dv))
