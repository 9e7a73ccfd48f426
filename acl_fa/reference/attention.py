"""Float64 numpy attention (forward and backward) with exactly the operator's semantics, for
checking results.

softmax(cap(scale * Q K^T) + mask) V per head, where `causal` masks key j > i + (Skv - Sq)
(bottom-right aligned), query head h reads kv head h // (N // Nkv), and a row that sees no
key gives output 0 and LSE -inf. Query rows are processed in chunks so that a long sequence
never holds an Sq x Skv matrix: peak extra memory is chunk_rows x Skv float64 per head.
cap is the forward's soft-capping, written from flash-attn's definition (Dao-AILab/flash-attention,
tests/test_flash_attn.py attention_ref: ``scores = torch.tanh(scores / softcap) * softcap`` on the
scaled scores when softcap > 0, before any mask): cap(s) = softcap * tanh(s / softcap), or s.

Score modifiers (docs/attention_options.md, "Score modifiers"), written here from their definitions:
ALiBi adds -slope[b, h] * |i + Skv - Sq - j| to the capped score (flash-attn's attention_ref adds
its alibi bias after the soft-cap); a float mask (torch SDPA's float attn_mask) is added likewise;
a sink logit sink[h] joins each row's softmax denominator with no value, so
P_ij = exp(s_ij - m) / (sum_j exp(s_ij - m) + exp(sink - m)) and LSE = log of that whole sum (a row
that sees no key then gives output 0 and LSE = sink).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..spec.options import build_options
from ..spec.layouts import to_bnsd, from_bnsd
from ..spec.philox import keep_mask

__all__ = ["ScoreRule", "alibi_bias", "attention_reference", "attention_reference_backward", "attention_backward_math", "head_chunks",
           "attention_reference_varlen", "attention_reference_varlen_backward", "varlen_sequences"]

# Rows of Q per chunk are chosen so a chunk's scores take at most this many bytes.
_DEFAULT_CHUNK_BYTES = 64 << 20


def _features(batch, n_heads, sq, skv, rule):
    """AttentionOptions (for the dropout) and uint8 device mask (1 = masked out) of the rule's mask
    and dropout. The band is not taken from them: see _Band."""
    return build_options(scores=(batch, n_heads, sq, skv), attn_mask=rule.attn_mask,
                         dropout_p=rule.dropout_p, seed=rule.seed, offset=rule.offset)


class _Band:
    """The keys each query row sees under causal / window, computed here from the documented rule
    (docs/attention_options.md, "Visibility window") rather than the ops' translation
    (acl_fa/spec/band.py), so the check shares no code with what it checks:

        key j is visible from query row i iff  i + diag - left <= j <= i + diag + right,

    diag = Skv - Sq (bottom-right aligned), window = (left, right) with -1 = unbounded on that
    side, causal = the window (-1, 0) intersected with the window: right = 0 if right == -1
    else min(right, 0)."""

    def __init__(self, causal: bool, window, sq: int, skv: int):
        left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
        if causal:
            right = 0 if right == -1 else min(right, 0)
        reach = sq + skv  # a side reaching this far sees every key: the same as unbounded
        self.left = None if left == -1 or left >= reach else left
        self.right = None if right == -1 or right >= reach else right
        self.sq, self.skv, self.diag = sq, skv, skv - sq
        self.bounded = self.left is not None or self.right is not None

    def columns(self, rows: slice) -> slice:
        """The keys any of `rows` sees (empty slice when none)."""
        lo = 0 if self.left is None else max(0, rows.start + self.diag - self.left)
        hi = self.skv if self.right is None else min(self.skv, rows.stop - 1 + self.diag + self.right + 1)
        return slice(lo, max(lo, hi))

    def hidden(self, rows: slice, cols: slice) -> np.ndarray:
        """bool [rows, cols], True = outside the band."""
        i = np.arange(rows.start, rows.stop, dtype=np.int64)[:, None] + self.diag
        j = np.arange(cols.start, cols.stop, dtype=np.int64)[None, :]
        seen = np.ones((rows.stop - rows.start, cols.stop - cols.start), bool)
        if self.left is not None:
            seen &= j >= i - self.left
        if self.right is not None:
            seen &= j <= i + self.right
        return ~seen


@dataclasses.dataclass(frozen=True)
class ScoreRule:
    """Which scores a row keeps and how its probabilities are dropped, in the ops' own keywords
    (docs/attention_options.md): the causal / window band, an explicit mask (True = attend) and
    dropout with its Philox seed and offset."""

    causal: bool = False
    window: object = None
    attn_mask: object = None
    dropout_p: float = 0.0
    seed: int = 0
    offset: int = 0
    softcap: float = 0.0       # > 0: cap(s) = softcap * tanh(s / softcap) on the scaled score
    alibi_slopes: object = None  # [N] or [B, N]: adds -slope * |i + Skv - Sq - j|
    attn_bias: object = None     # float, broadcast to [B, N, Sq, Skv]: added to the score (SDPA)
    sinks: object = None         # [N]: a logit per query head in every row's denominator

    def terms(self, b, h, rows, cols, sq, skv):
        """(bias [rows, cols] float64 or None, sink float or None) of batch b, query head h."""
        bias = None
        if self.alibi_slopes is not None:
            bias = alibi_bias(self.alibi_slopes, b, h, rows, cols, sq, skv)
        if self.attn_bias is not None:
            given = np.asarray(self.attn_bias, dtype=np.float64)
            given = given.reshape((1,) * (4 - given.ndim) + given.shape)
            part = np.broadcast_to(given, (max(b + 1, given.shape[0]), max(h + 1, given.shape[1]), sq, skv))
            part = part[min(b, given.shape[0] - 1), min(h, given.shape[1] - 1), rows, cols]
            bias = part if bias is None else bias + part
        sink = None if self.sinks is None else float(np.asarray(self.sinks, np.float64)[h])
        return bias, sink


def alibi_bias(slopes, b, h, rows, cols, sq, skv):
    """-slope * |i + Skv - Sq - j| (float64 [rows, cols]) for query rows `rows` and keys `cols`:
    flash-attn's ALiBi, bottom-right aligned like its causal mask (slopes [N] or [B, N])."""
    s = np.asarray(slopes, dtype=np.float64)
    slope = s[h] if s.ndim == 1 else s[b, h]
    i = np.arange(rows.start, rows.stop, dtype=np.int64)[:, None] + (skv - sq)
    j = np.arange(cols.start, cols.stop, dtype=np.int64)[None, :]
    return -slope * np.abs(i - j).astype(np.float64)


def head_chunks(q, k, v, *, layout, num_heads=None, num_kv_heads=None, heads=None, dtype=np.float64,
                chunk_bytes=_DEFAULT_CHUNK_BYTES, rule=ScoreRule()):
    """Yields (b, slot, rows, cols, q_rows, k_head, v_head, hidden, keep) for every selected query
    head and chunk of query rows: `rows` the slice of query rows, `cols` the slice of keys the
    band lets those rows see (all keys without a window), q_rows [rows, D], k_head / v_head
    [cols, D] of the kv head it reads (all in `dtype`), `slot` the index into `heads` (default:
    all). hidden: bool [rows, cols], True = key not visible (outside the causal/window band or
    masked out by attn_mask, True = attend), or None when every key is visible. keep: the
    dropout multiplier [rows, cols] in `dtype` (Z / keep_prob, Z the Philox keep mask of
    acl_fa/spec/philox.py), or None without dropout. Semantics: docs/attention_options.md."""
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    kb = to_bnsd(np.asarray(k), layout, num_kv_heads or num_heads)
    vb = to_bnsd(np.asarray(v), layout, num_kv_heads or num_heads)
    batch, n_heads, sq, _ = qb.shape
    n_kv, skv = kb.shape[1], kb.shape[2]
    if n_heads % n_kv:
        raise ValueError(f"query heads {n_heads} must be a multiple of key/value heads {n_kv}")
    options, mask = _features(batch, n_heads, sq, skv, rule)
    band = _Band(rule.causal, rule.window, sq, skv)
    group = n_heads // n_kv
    head_list = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    chunk = max(1, chunk_bytes // max(1, skv * np.dtype(dtype).itemsize))
    inv_keep = np.dtype(dtype).type(1.0 / options.keep_prob)

    def hidden_of(b, h, rows, cols):
        hidden = band.hidden(rows, cols) if band.bounded else None
        if mask is not None:
            m = mask[min(b, mask.shape[0] - 1), min(h, mask.shape[1] - 1)]
            m = (m[rows] if m.shape[0] == sq else m)[:, cols].astype(bool)
            hidden = np.broadcast_to(m, (rows.stop - rows.start, cols.stop - cols.start)) if hidden is None \
                else hidden | m
        return hidden

    for b in range(batch):
        for slot, h in enumerate(head_list):
            k_head = kb[b, h // group].astype(dtype)
            v_head = vb[b, h // group].astype(dtype)
            for r0 in range(0, sq, chunk):
                rows = slice(r0, min(sq, r0 + chunk))
                cols = band.columns(rows) if band.bounded else slice(0, skv)
                keep = None
                if options.has_dropout:
                    z = keep_mask(options.seed, options.offset, b, h, n_heads, sq, skv, options.keep_prob, rows=rows,
                                  cols=cols)
                    keep = z.astype(dtype) * inv_keep
                yield (b, slot, rows, cols, qb[b, h, rows].astype(dtype), k_head[cols], v_head[cols],
                       hidden_of(b, h, rows, cols), keep)


def attention_reference(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                        num_kv_heads=None, heads=None, out_dtype=np.float64, window=None, attn_mask=None,
                        dropout_p=0.0, seed=0, offset=0, softcap=0.0, alibi_slopes=None, attn_bias=None, sinks=None):
    """Returns (out, lse): out in `layout` like q (dtype `out_dtype`), lse float64 [B, N, Sq].

    softcap, alibi_slopes ([N] or [B, N]), attn_bias (float, broadcast to [B, N, Sq, Skv], added to
    the scores) and sinks ([N]): the score modifiers of the module docstring.

    window (left, right), attn_mask (bool, True = attend), dropout_p with seed/offset: as
    flash_attention (docs/attention_options.md); dropout scales the kept P by 1/keep_prob in
    P.V only, the LSE is of the undropped scores. `heads` optionally restricts the computation
    to those query-head indices (out and lse then hold only those heads, in that order) -- used
    to check large problems on a sample.
    """
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    batch, n_heads, sq, d = qb.shape
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    n_out = n_heads if heads is None else len(heads)
    out = np.zeros((batch, n_out, sq, d), dtype=np.float64)
    lse = np.full((batch, n_out, sq), -np.inf, dtype=np.float64)
    skv = to_bnsd(np.asarray(k), layout, num_kv_heads or num_heads).shape[2]
    rule = ScoreRule(causal, window, attn_mask, dropout_p, seed, offset, softcap, alibi_slopes, attn_bias, sinks)
    head_list = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    for b, slot, rows, cols, q_rows, k_head, v_head, hidden, keep in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads, rule=rule):
        bias, sink = rule.terms(b, head_list[slot], rows, cols, sq, skv)
        o, row_lse = _forward_rows(q_rows, k_head, v_head, hidden, keep, scale, softcap, bias, sink)
        out[b, slot, rows] = o
        lse[b, slot, rows] = row_lse
    return from_bnsd(out, layout).astype(out_dtype, copy=False), lse


def _scores(q_rows, k_head, scale, softcap, bias, hidden):
    """(scores [rows, cols], capped [rows, cols] or None): cap(scale * Q K^T) + bias, -inf where
    hidden; `capped` is cap's output before the bias (its derivative needs it), None without softcap."""
    scores = (q_rows @ k_head.T) * scale
    capped = None
    if softcap > 0:
        scores = capped = softcap * np.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if hidden is not None:
        scores = np.where(hidden, -np.inf, scores)
    return scores, capped


def _softmax_rows(scores, sink):
    """(p [rows, cols], row_max [rows, 1] finite, row_sum [rows, 1], seen [rows]) of the scores,
    the sink logit (or None) in the denominator; p = 0 on rows that see no key."""
    row_max = scores.max(axis=1, keepdims=True) if scores.shape[1] else np.full((scores.shape[0], 1), -np.inf)
    seen = ~np.isneginf(row_max[:, 0])            # NaN rows count as seen: NaN propagates
    if sink is not None:
        row_max = np.maximum(row_max, sink)
    safe_max = np.where(np.isneginf(row_max), 0.0, row_max)
    p = np.exp(scores - safe_max)
    row_sum = p.sum(axis=1, keepdims=True)
    if sink is not None:
        row_sum = row_sum + np.exp(sink - safe_max)
    return p, safe_max, row_sum, seen


def _forward_rows(q_rows, k_head, v_head, hidden, keep, scale, softcap=0.0, bias=None, sink=None):
    """(out [rows, D], lse [rows]) of one chunk: softmax of the visible scores (soft-capped
    when softcap > 0, plus bias, the sink in the denominator), dropped by `keep` in P.V only;
    rows that see no key give 0 and LSE -inf (the sink's logit with a sink)."""
    scores, _ = _scores(q_rows, k_head, scale, softcap, bias, hidden)
    p, safe_max, row_sum, seen = _softmax_rows(scores, sink)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = ((p if keep is None else p * keep) @ v_head) / row_sum
        row_lse = safe_max[:, 0] + np.log(row_sum[:, 0])
    o[~seen] = 0.0
    if sink is None:
        row_lse[~seen] = -np.inf
    return o, row_lse


def attention_backward_math(dout_rows, q_rows, k_head, v_head, hidden, scale, work_dtype=np.float64,
                            round_to=None, keep=None, softcap=0.0, bias=None, sink=None):
    """Gradients of one chunk of query rows of one head, in `work_dtype` (analytic formulas):

        T = cap(scale * Q K^T), S = T + bias (hidden -inf),
        P = exp(S - m) / (sum_j exp(S - m) + exp(sink - m))  (no sink term without a sink; 0 on rows
        that see no key), Pd = P o keep (keep = Z / keep_prob, the dropout multiplier; 1 without
        dropout), O = Pd V, D = rowsum(dO * O), dP = (dO V^T) o keep, dS = P * (dP - D),
        dT = dS o cap'(.) where cap'(x) = 1 - (T / softcap)^2 (1 without softcap),
        dQ = scale * dT K,  dK = scale * dT^T Q,  dV = Pd^T dO,
        dsink = -sum_i P_sink,i * D_i,  P_sink,i = exp(sink - m_i) / (row i's denominator).

    `hidden`: boolean [rows, Skv] (True = key not visible) or None; `bias` [rows, cols] (ALiBi, a
    float mask) or None; `sink` a float or None. `round_to` (a numpy dtype) rounds Pd and dT to it
    before the matmuls that read them, as a same-precision backward does. Returns (dq_rows
    [rows, D], dk [Skv, D], dv [Skv, D], dsink): dk/dv/dsink are this chunk's contributions
    (dsink 0.0 without a sink)."""
    scores, capped = _scores(q_rows, k_head, work_dtype(scale), softcap, bias, hidden)
    scores = scores.astype(work_dtype, copy=False)
    p, safe_max, row_sum, seen = _softmax_rows(scores, sink)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = p / row_sum
    p[~seen] = 0
    pd = p if keep is None else p * keep
    o = pd @ v_head
    d = (dout_rows * o).sum(axis=1, keepdims=True)
    dp = dout_rows @ v_head.T
    if keep is not None:
        dp = dp * keep
    ds = p * (dp - d)
    if capped is not None:
        ds = ds * (1 - (capped / softcap) ** 2)
    dsink = 0.0
    if sink is not None:
        p_sink = np.exp(sink - safe_max[:, 0]) / row_sum[:, 0]
        dsink = float(-(p_sink * d[:, 0]).sum())
    if round_to is not None:
        pd = pd.astype(round_to).astype(work_dtype)
        ds = ds.astype(round_to).astype(work_dtype)
    scale = work_dtype(scale)
    return scale * (ds @ k_head), scale * (ds.T @ q_rows), pd.T @ dout_rows, dsink


def attention_reference_backward(dout, q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                                 num_kv_heads=None, heads=None, out_dtype=np.float64, work_dtype=np.float64,
                                 round_to=None, window=None, attn_mask=None, dropout_p=0.0, seed=0, offset=0,
                                 softcap=0.0, alibi_slopes=None, attn_bias=None, sinks=None):
    """Returns (dq, dk, dv) of the forward reference's output for the upstream gradient `dout`
    (dq like q, dk/dv like k/v, in `layout`), with the same window / attn_mask / dropout
    arguments (the dropout mask regenerated from seed and offset) and score modifiers; with
    `sinks`, (dq, dk, dv, dsinks) with dsinks float64 [N] (summed over batch and rows). GQA/MQA: dk/dv of a kv head
    sum over its query-head group. Rows that see no key give dq 0. Float64 by default, query
    rows in chunks as the forward reference: nothing Sq x Skv is held. `heads` restricts dq to
    those query heads (dk/dv then sum only their contributions). work_dtype / round_to give the
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
    dsinks = np.zeros(n_heads, dtype=np.float64)
    rule = ScoreRule(causal, window, attn_mask, dropout_p, seed, offset, softcap, alibi_slopes, attn_bias, sinks)
    for b, slot, rows, cols, q_rows, k_head, v_head, hidden, keep in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads,
            dtype=work_dtype, rule=rule):
        h = head_list[slot]
        bias, sink = rule.terms(b, h, rows, cols, sq, kb.shape[2])
        dout_rows = db[b, h, rows].astype(work_dtype)
        dq_rows, dk_part, dv_part, dsink = attention_backward_math(
            dout_rows, q_rows, k_head, v_head, hidden, scale, work_dtype, round_to, keep, softcap, bias, sink)
        dq[b, slot, rows] = dq_rows
        dk[b, h // group, cols] += dk_part
        dv[b, h // group, cols] += dv_part
        dsinks[h] += dsink
    grads = tuple(from_bnsd(x, layout).astype(out_dtype, copy=False) for x in (dq, dk, dv))
    return grads if sinks is None else grads + (dsinks,)


def varlen_sequences(cu_seqlens_q, cu_seqlens_k):
    """(index, q rows slice, kv rows slice) of each sequence of a TND batch, from flash-attn's
    cumulative starts (leading 0)."""
    cq, ck = np.asarray(cu_seqlens_q, dtype=np.int64), np.asarray(cu_seqlens_k, dtype=np.int64)
    if cq.shape != ck.shape:
        raise ValueError(f"cu_seqlens_q {cq.shape} and cu_seqlens_k {ck.shape} must list the same sequences")
    return [(s, slice(int(cq[s]), int(cq[s + 1])), slice(int(ck[s]), int(ck[s + 1]))) for s in range(cq.size - 1)]


def _sequence_offset(offset, seq_index, n_heads):
    """The dropout offset that makes sequence `seq_index`, run alone as batch 0, draw the
    streams offset + seq_index*N + n of the whole varlen call (docs/attention_options.md#dropout)."""
    return (int(offset) + seq_index * n_heads) % (1 << 64)


def _sequence_slopes(alibi_slopes, seq_index):
    """Sequence seq_index's ALiBi slopes ([N]) from [N] or [B, N] slopes (None stays None)."""
    if alibi_slopes is None:
        return None
    slopes = np.asarray(alibi_slopes, dtype=np.float64)
    return slopes if slopes.ndim == 1 else slopes[seq_index]


def _sequence_mask(mask, seq_index, sq, skv):
    """Sequence seq_index's part of a varlen mask (docs/attention_options.md "Masks with varlen"):
    the mask broadcast over [sequences, N, longest Sq, longest Skv] (leading dims of size 1 or
    missing), of which the sequence takes its row of the first dim and the top-left [sq, skv]
    corner; returned as [1, N or 1, sq or 1, skv] (None stays None)."""
    if mask is None:
        return None
    m = np.asarray(mask)
    m = m.reshape((1,) * (4 - m.ndim) + m.shape)
    return m[seq_index if m.shape[0] > 1 else 0][None, :, :sq, :skv]


def attention_reference_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=False, scale=None, window=None,
                               dropout_p=0.0, seed=0, offset=0, out_dtype=np.float64, softcap=0.0,
                               alibi_slopes=None, sinks=None, attn_mask=None, attn_bias=None):
    """Variable-length batch (layout TND): q [Tq, N, D], k/v [Tkv, Nkv, D], sequence s holding
    rows cu_seqlens[s]:cu_seqlens[s+1]. Each sequence is attended alone, with its own Sq/Skv
    for the causal/window/ALiBi alignment and s as the dropout batch index (alibi_slopes [N] or
    [B, N], row s for sequence s). attn_mask (bool, True = attend) and attn_bias (float, added):
    over [sequences, N, longest Sq, longest Skv] (broadcast), sequence s reading the top-left
    [Sq(s), Skv(s)] corner of its slice. Returns (out [Tq, N, D] in `out_dtype`, lse float64 [N, Tq])."""
    q, k, v = (np.asarray(x) for x in (q, k, v))
    n_heads = q.shape[1]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[2])
    out = np.zeros(q.shape, dtype=np.float64)
    lse = np.full((n_heads, q.shape[0]), -np.inf)
    for s, qr, kr in varlen_sequences(cu_seqlens_q, cu_seqlens_k):
        if qr.stop == qr.start or kr.stop == kr.start:
            continue  # no queries, or rows that see no key: 0 and -inf
        o, l = attention_reference(q[None, qr], k[None, kr], v[None, kr], causal=causal, scale=scale, layout="BSND",
                                   window=window, dropout_p=dropout_p, seed=seed,
                                   offset=_sequence_offset(offset, s, n_heads), softcap=softcap,
                                   alibi_slopes=_sequence_slopes(alibi_slopes, s), sinks=sinks,
                                   attn_mask=_sequence_mask(attn_mask, s, qr.stop - qr.start, kr.stop - kr.start),
                                   attn_bias=_sequence_mask(attn_bias, s, qr.stop - qr.start, kr.stop - kr.start))
        out[qr], lse[:, qr] = o[0], l[0]
    return out.astype(out_dtype, copy=False), lse


def attention_reference_varlen_backward(dout, q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=False, scale=None,
                                        window=None, dropout_p=0.0, seed=0, offset=0, out_dtype=np.float64,
                                        work_dtype=np.float64, round_to=None, softcap=0.0, alibi_slopes=None,
                                        sinks=None):
    """(dq [Tq, N, D], dk, dv [Tkv, Nkv, D]) of attention_reference_varlen for `dout` [Tq, N, D]
    (and dsinks float64 [N] last with `sinks`); sequences that see no key give zero gradients."""
    q, k, v, dout = (np.asarray(x) for x in (q, k, v, dout))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[2])
    dq = np.zeros(q.shape, dtype=work_dtype)
    dk = np.zeros(k.shape, dtype=work_dtype)
    dv = np.zeros(k.shape, dtype=work_dtype)
    dsinks = np.zeros(q.shape[1], dtype=np.float64)
    for s, qr, kr in varlen_sequences(cu_seqlens_q, cu_seqlens_k):
        if qr.stop == qr.start or kr.stop == kr.start:
            continue
        grads = attention_reference_backward(
            dout[None, qr], q[None, qr], k[None, kr], v[None, kr], causal=causal, scale=scale, layout="BSND",
            window=window, dropout_p=dropout_p, seed=seed, offset=_sequence_offset(offset, s, q.shape[1]),
            work_dtype=work_dtype, out_dtype=work_dtype, round_to=round_to, softcap=softcap,
            alibi_slopes=_sequence_slopes(alibi_slopes, s), sinks=sinks)
        dq[qr], dk[kr], dv[kr] = grads[0][0], grads[1][0], grads[2][0]
        if sinks is not None:
            dsinks += grads[3]
    grads = tuple(x.astype(out_dtype, copy=False) for x in (dq, dk, dv))
    return grads if sinks is None else grads + (dsinks,)
