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

from .layouts import to_bnsd
from .reference import head_chunks

__all__ = ["Accuracy", "ULP", "naive_same_precision", "check_accuracy"]

# Unit roundoff of the input dtypes (2^-p for a p-bit significand incl. the hidden bit).
ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


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


def naive_same_precision(q, k, v, dtype, *, causal, scale, layout, num_heads=None, num_kv_heads=None, heads):
    """Standard attention with every intermediate rounded to `dtype`, for `heads` only.

    Returns [B, len(heads), Sq, D] float64. Rows are processed in chunks like the reference.
    """
    qb = to_bnsd(np.asarray(q), layout, num_heads)
    out = np.zeros((qb.shape[0], len(heads), qb.shape[2], qb.shape[3]))
    for b, slot, rows, q_rows, k_head, v_head, masked in head_chunks(
            q, k, v, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, heads=heads,
            dtype=np.float32, chunk_bytes=32 << 20):
        s = (q_rows @ k_head.T).astype(dtype).astype(np.float32) * np.float32(scale)
        if causal:
            s[masked(rows)] = -np.inf
        m = s.max(axis=1, keepdims=True)
        m = np.where(np.isneginf(m), 0, m)
        p = np.exp(s - m)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = (p / p.sum(axis=1, keepdims=True)).astype(dtype).astype(np.float32)
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
