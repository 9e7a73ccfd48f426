"""Masks with a variable-length batch (docs/attention_options.md "Masks with varlen"):
flash_attention_varlen's attn_mask, bool (True = attend; FlashAttentionV2's atten_mask) or float
(added to the scores; FlashAttentionV5's atten_bias), over [sequences, N, longest Sq, longest Skv]
(each dim but the last may be 1), sequence s reading the top-left [Sq(s), Skv(s)] corner.

- accuracy against the float64 reference (acl_fa/reference/attention.py attention_reference_varlen,
  which slices the mask from the documented semantics) under the forward's rule: at most twice
  the error of the naive attention in the input dtype, sequence by sequence; LSE within 1e-3;
- a mask that hides nothing gives exactly the unmasked call's result;
- the dropout keep mask is 0 where the mask hides a pair;
- a mask over the wrong grid is refused before any device work, naming the grid; the plan
  (libaclfa_plan, the operator's own policy) takes the varlen mask.
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

from acl_fa.plan import forward as planmod
from acl_fa.reference.accuracy import ULP, naive_same_precision
from acl_fa.reference.attention import attention_reference_varlen
from acl_fa.runtime import sim_stats
from acl_fa.runtime.errors import InvalidArgumentError
from acl_fa.spec.layouts import to_bnsd
from acl_fa.spec.problem import sized_problem

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}

# Three sequences: (Sq, Skv) = (37, 50), (23, 31), (80, 119) -- tails everywhere, Sq != Skv.
CU_Q = np.array([0, 37, 60, 140], np.int32)
CU_K = np.array([0, 50, 81, 200], np.int32)
LONGEST_Q, LONGEST_K = 80, 119


def _inputs(dtype, n=4, nkv=2, d=64, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((CU_Q[-1], n, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((CU_K[-1], nkv, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((CU_K[-1], nkv, d)).astype(DTYPES[dtype])
    return q, k, v


def _corner(mask, s, sq, skv):
    """Sequence s's [1, N or 1, sq or 1, skv] part of a [S or 1, N or 1, Sq or 1, Skv] mask."""
    m = np.asarray(mask)
    m = m.reshape((1,) * (4 - m.ndim) + m.shape)
    return m[s if m.shape[0] > 1 else 0][None, :, :sq, :skv]


def _check(out, lse, q, k, v, dtype, *, causal=False, window=None, attn_mask=None, attn_bias=None):
    """The accuracy rule per sequence against attention_reference_varlen; LSE within 1e-3."""
    ref, ref_lse = attention_reference_varlen(q, k, v, CU_Q, CU_K, causal=causal, window=window, attn_mask=attn_mask,
                                              attn_bias=attn_bias)
    n, nkv = q.shape[1], k.shape[1]
    naive_err = 0.0
    for s in range(len(CU_Q) - 1):
        rows, keys = slice(CU_Q[s], CU_Q[s + 1]), slice(CU_K[s], CU_K[s + 1])
        sq, skv = rows.stop - rows.start, keys.stop - keys.start
        features = {}
        if attn_mask is not None:
            features["attn_mask"] = _corner(attn_mask, s, sq, skv)
        if attn_bias is not None:
            features["attn_bias"] = _corner(attn_bias, s, sq, skv)
        naive = naive_same_precision(q[None, rows], k[None, keys], v[None, keys], np.dtype(DTYPES[dtype]),
                                     causal=causal, scale=1 / math.sqrt(q.shape[-1]), layout="BSND", num_heads=n,
                                     num_kv_heads=nkv, heads=list(range(n)), window=window, **features)
        naive_err = max(naive_err, np.abs(to_bnsd(ref[None, rows], "BSND", n) - naive).max())
    err = np.abs(out.astype(np.float64) - ref).max()
    assert err <= max(2 * naive_err, ULP[dtype] * max(1.0, np.abs(ref).max())), (err, naive_err)
    finite = np.isfinite(ref_lse)
    assert np.array_equal(finite, np.isfinite(lse))
    assert np.abs(lse[finite] - ref_lse[finite]).max() < 1e-3


def _bool_mask(shape, seed=5, density=0.7):
    mask = np.random.default_rng(seed).random(shape) < density
    return mask


# (dtype, mask shape as a function of (S, N), causal, window)
BOOL_CASES = [
    ("float16", (3, 4, LONGEST_Q, LONGEST_K), False, None),
    ("bfloat16", (1, 1, LONGEST_Q, LONGEST_K), True, None),
    ("float16", (3, 1, 1, LONGEST_K), False, None),           # a key-padding mask per sequence
    ("float32", (LONGEST_Q, LONGEST_K), False, (20, 5)),      # broadcast from the right, with a window
]


@pytest.mark.parametrize("dtype, shape, causal, window", BOOL_CASES,
                         ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}{'-causal' if c[2] else ''}"
                              f"{'-window' if c[3] else ''}" for c in BOOL_CASES])
def test_bool_mask_matches_reference(session, dtype, shape, causal, window):
    q, k, v = _inputs(dtype)
    mask = _bool_mask(shape)
    out, lse = session.flash_attention_varlen(q, k, v, CU_Q, CU_K, causal=causal, window=window, attn_mask=mask,
                                              return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v2"
    _check(out, lse, q, k, v, dtype, causal=causal, window=window, attn_mask=mask)


def test_float_mask_matches_reference(session):
    rng = np.random.default_rng(9)
    q, k, v = _inputs("float16")
    bias = (rng.standard_normal((3, 4, LONGEST_Q, LONGEST_K)) * 2).astype(np.float16)
    bias[rng.random(bias.shape) < 0.2] = -np.inf
    bias[1, :, 4] = -np.inf  # a row of sequence 1 that sees no key: 0 and LSE -inf
    out, lse = session.flash_attention_varlen(q, k, v, CU_Q, CU_K, causal=True, attn_mask=bias, return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v5"
    _check(out, lse, q, k, v, "float16", causal=True, attn_bias=bias)
    assert np.all(out[CU_Q[1] + 4] == 0) and np.all(np.isneginf(lse[:, CU_Q[1] + 4]))


def test_a_mask_that_hides_nothing_changes_nothing(session):
    q, k, v = _inputs("float16")
    plain = session.flash_attention_varlen(q, k, v, CU_Q, CU_K, causal=True, return_lse=True)
    masked = session.flash_attention_varlen(q, k, v, CU_Q, CU_K, causal=True, return_lse=True,
                                            attn_mask=np.ones((3, 1, LONGEST_Q, LONGEST_K), bool))
    assert np.array_equal(plain[0], masked[0]) and np.array_equal(plain.lse, masked.lse)


def test_dropout_keep_mask_is_zero_where_the_mask_hides(session):
    q, k, v = _inputs("float16")
    mask = _bool_mask((3, 1, LONGEST_Q, LONGEST_K), seed=11, density=0.5)
    result = session.flash_attention_varlen(q, k, v, CU_Q, CU_K, attn_mask=mask, dropout_p=0.3, seed=7,
                                            return_dropout_mask=True)
    keep = result.dropout_mask
    assert keep.shape == (3, 4, LONGEST_Q, LONGEST_K)
    for s in range(3):
        sq, skv = CU_Q[s + 1] - CU_Q[s], CU_K[s + 1] - CU_K[s]
        assert not np.any(keep[s, :, :sq, :skv][:, ~mask[s, 0, :sq, :skv]])
        assert not np.any(keep[s, :, sq:]) and not np.any(keep[s, :, :, skv:])


def test_a_mask_over_another_grid_is_refused(session):
    q, k, v = _inputs("float16")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"[B, N, Sq, Skv] = [3, 4, {LONGEST_Q}, {LONGEST_K}]")):
        session.flash_attention_varlen(q, k, v, CU_Q, CU_K, attn_mask=np.ones((3, 4, LONGEST_Q, 200), bool))


def test_the_plan_takes_a_varlen_mask():
    """The operator's own policy (libaclfa_plan) plans a varlen batch with a mask: it refused it before."""
    problem = sized_problem(batch=3, num_heads=4, num_kv_heads=2, seq_q=LONGEST_Q, seq_kv=LONGEST_K, head_dim=64,
                            dtype="float16", layout="TND")
    lens_q, lens_k = tuple(int(x) for x in np.diff(CU_Q)), tuple(int(x) for x in np.diff(CU_K))
    options = planmod.PlanOptions(mask_shape=(3, 1, LONGEST_Q, LONGEST_K), seq_lens_q=lens_q, seq_lens_kv=lens_k)
    plan = planmod.plan(problem, "Ascend910B2", options)
    assert plan.workspace_bytes > 0
