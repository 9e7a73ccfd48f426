"""How close a FlashAttention result must be to the float64 reference.

The rule of flash-attention's own tests: the kernel's max error against a float64 reference may
be at most twice the max error of a naive attention computed in the input precision (scores and
probabilities rounded to the input dtype, fp32 accumulation), plus a floor of one unit in the
last place of the input dtype at the output's magnitude, so that exact-looking cases do not fail
on a single rounding.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..spec.layouts import to_bnsd
from .attention import ScoreRule, attention_reference_backward, head_chunks

__all__ = ["Accuracy", "ULP", "naive_same_precision", "check_accuracy", "GradientAccuracy", "check_gradients"]

# Unit roundoff of the input dtypes (2^-p for a p-bit significand incl. the hidden bit).
ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23}


@dataclasses.dataclass(frozen=True)
class Accuracy:
    max_error: float        # max |out - reference| over the checked elements
    naive_error: float      # the same for the same-precision naive attention
    tolerance: float        # max(2 * naive_error, ULP * max(1, max |reference|))
    checked_heads: tuple    # query-head indices compared
    lse_max_error: float    # max |lse - reference lse| over finite entries

    @property
    def ok(self) -> bool:
        return self.max_error <= self.tolerance and not math.isnan(self.max_error)


def naive_same_precision(q, k, v, dtype, *, causal, scale, layout, num_heads=None, num_kv_heads=None, heads,
                         **features):
    """Standard attention with every intermediate rounded to `dtype`, for `heads` only.
    `features`: window / attn_mask / dropout_p / seed / offset / softcap / alibi_slopes / attn_bias /
    sinks, as attention_reference.

    Returns [B, len(heads), Sq, D] float64. Rows are processed in chunks like the reference.
    """
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    sq, skv = qb.shape[2], to_bnsd(np.asarray(k), layout, num_kv_heads or num_heads).shape[2]
    rule = ScoreRule(causal=causal, **features)
    out = np.zeros((qb.shape[0], len(heads), qb.shape[2], qb.shape[3]))
    for b, slot, rows, cols, q_rows, k_head, v_head, hidden, keep in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads,
            dtype=np.float32, chunk_bytes=32 << 20, rule=rule):
        s = (q_rows @ k_head.T).astype(dtype).astype(np.float32) * np.float32(scale)
        # The score modifiers (the reference's ScoreRule): the cap rounded to the dtype, ALiBi and a
        # float mask added in fp32, the sink in the fp32 denominator.
        if rule.softcap:
            cap = np.float32(rule.softcap)
            s = (cap * np.tanh(s / cap)).astype(dtype).astype(np.float32)
        bias, sink = rule.terms(b, heads[slot], rows, cols, sq, skv)
        if bias is not None:
            s = s + bias.astype(np.float32)
        if hidden is not None:
            s[hidden] = -np.inf
        m = s.max(axis=1, keepdims=True)
        if sink is not None:
            m = np.maximum(m, np.float32(sink))
        m = np.where(np.isneginf(m), 0, m)
        p = np.exp(s - m)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = p / (p.sum(axis=1, keepdims=True) + (0 if sink is None else np.exp(np.float32(sink) - m)))
        p = (p if keep is None else p * keep).astype(dtype).astype(np.float32)
        out[b, slot, rows] = np.nan_to_num(p @ v_head, nan=0.0).astype(dtype)
    return out


def _max_abs(a, b) -> float:
    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    if diff.size == 0:
        return 0.0
    if np.isnan(diff).any():
        return float("nan")
    return float(diff.max())


def check_accuracy(out, lse, ref_out, ref_lse, naive_out, dtype_name, heads) -> Accuracy:
    """out/ref_out/naive_out: [B, len(heads), Sq, D]; lse/ref_lse: [B, len(heads), Sq]."""
    ref_out = np.asarray(ref_out, dtype=np.float64)
    finite = np.isfinite(ref_out)
    max_error = _max_abs(np.asarray(out, dtype=np.float64)[finite], ref_out[finite])
    # Non-finite reference entries (NaN/Inf inputs) must be reproduced exactly.
    if not np.array_equal(np.isnan(np.asarray(out, dtype=np.float64)), np.isnan(ref_out)):
        max_error = float("nan")
    naive_error = _max_abs(naive_out[finite], ref_out[finite])
    scale = max(1.0, float(np.abs(ref_out[finite]).max()) if finite.any() else 1.0)
    tolerance = max(2.0 * naive_error, ULP[dtype_name] * scale)
    ref_lse = np.asarray(ref_lse, dtype=np.float64)
    lse = np.asarray(lse, dtype=np.float64)
    lse_finite = np.isfinite(ref_lse)
    lse_error = _max_abs(lse[lse_finite], ref_lse[lse_finite])
    if not np.array_equal(np.isneginf(lse), np.isneginf(ref_lse)):
        lse_error = float("inf")
    return Accuracy(max_error, naive_error, tolerance, tuple(heads), lse_error)


@dataclasses.dataclass(frozen=True)
class GradientAccuracy:
    """One gradient (dq, dk or dv) against the float64 backward, by the same rule."""

    name: str
    max_error: float        # max |grad - reference|
    naive_error: float      # the same for the same-precision naive backward
    tolerance: float        # 2 * naive_error + ULP * max(1, max |reference|)

    @property
    def ok(self) -> bool:
        return self.max_error <= self.tolerance and not math.isnan(self.max_error)


def check_gradients(grads, inputs, *, causal, scale, layout, num_heads, num_kv_heads, dtype_name,
                    kv_heads=None, **features) -> list:
    """dq, dk, dv (in `layout`) of the backward of `inputs` = (q, k, v, dout) against the float64
    backward. The naive same-precision backward takes the inputs in the dtype, computes in fp32, rounds P and dS to the dtype before the
    matmuls that read them and its results to the dtype. kv_heads (default all) restricts the
    check to those kv heads and the query heads of their groups (the reference costs
    O(Sq * Skv * D) per head). `features`: window / attn_mask / dropout_p / seed / offset, as
    attention_reference_backward. Returns [GradientAccuracy] for dq, dk, dv."""
    q, k, v, dout = inputs
    group = num_heads // num_kv_heads
    kv_heads = list(range(num_kv_heads)) if kv_heads is None else list(kv_heads)
    heads = [h * group + g for h in kv_heads for g in range(group)]
    dtype = np.asarray(q).dtype
    kw = dict(causal=causal, scale=scale, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads,
              **features)
    ref = attention_reference_backward(dout, q, k, v, **kw)
    naive = attention_reference_backward(dout, q, k, v, work_dtype=np.float32, round_to=dtype, **kw)
    results = []
    for i, name in enumerate(("dq", "dk", "dv")):
        n_ref = len(heads) if i == 0 else num_kv_heads
        got = to_bnsd(np.asarray(grads[i]), layout, num_heads if i == 0 else num_kv_heads)
        got = got[:, heads] if i == 0 else got[:, kv_heads]
        want = to_bnsd(ref[i], layout, n_ref)
        same = to_bnsd(naive[i].astype(dtype), layout, n_ref)
        if i > 0:
            want, same = want[:, kv_heads], same[:, kv_heads]
        error = _max_abs(got, want)
        naive_error = _max_abs(same, want)
        floor = ULP[dtype_name] * max(1.0, float(np.abs(want).max()) if want.size else 1.0)
        results.append(GradientAccuracy(name, error, naive_error, 2.0 * naive_error + floor))
    return results
