"""Soft-capping in the forward (FlashAttentionV3, docs/attention_options.md#soft-capping-flashattentionv3):
S = softcap * tanh(scale * Q K^T / softcap) before the mask and the softmax, as flash-attn 2.6.

- accuracy against the float64 reference (acl_fa/reference/attention.py, written from flash-attn's
  definition) under the forward's rule: at most twice the error of a naive attention in the input
  dtype (scores, capped scores and probabilities rounded to it), over dtypes, causal, windows,
  masks, GQA/MQA, layouts, tails and caps from heavy (1) to light (50); on the coupled chips too;
- softcap = 0 is the plain call: the same op and the same bytes;
- bad softcap refused before any device work (the backward has it:
  tests/ops/flash_attention_grad/test_flash_attention_backward_score_mods.py); direct aclnn callers are
  refused by the TilingFunc;
- the counted work: the same cube MACs and GM bytes as the plain call, and exactly three more
  vector passes over each score tile (Exp, Adds, Div) plus its 8-element constant and the LSE's
  shift back by softcap (one element per row).
"""
from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

import acl_fa
import sized_plans
from acl_fa.ops.forward_v2 import run_forward_v2
from acl_fa.reference.accuracy import ULP
from acl_fa.reference.attention import attention_reference
from acl_fa.runtime import sim_stats
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.session import live_counts
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.spec.options import build_options
from acl_fa.spec.problem import make_problem

from conftest import run_python
from kernel_model import aiv_rows, ceil_div, item_rows

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def _inputs(layout, b, n, nkv, sq, skv, d, dtype, seed=0, spread=3.0):
    """q, k, v with scores large enough (spread) that the cap bends them."""
    rng = np.random.default_rng(seed)
    qs, kvs = shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d)
    q = (rng.standard_normal(qs) * spread).astype(DTYPES[dtype])
    k = (rng.standard_normal(kvs) * spread).astype(DTYPES[dtype])
    v = rng.standard_normal(kvs).astype(DTYPES[dtype])
    return q, k, v


def _naive(q, k, v, *, layout, n, nkv, dtype, softcap, causal=False, window=None, attn_mask=None):
    """Attention with every intermediate rounded to the input dtype (fp32 arithmetic): scores,
    capped scores, probabilities; [B, N, Sq, D] float64. Visibility from the float64 reference's
    own rule is not reused: the band is written out here (bottom-right, -1 unbounded)."""
    t = DTYPES[dtype]
    qb, kb, vb = (to_bnsd(x, layout, h).astype(np.float32) for x, h in ((q, n), (k, nkv), (v, nkv)))
    b, _, sq, d = qb.shape
    skv = kb.shape[2]
    kb, vb = np.repeat(kb, n // nkv, axis=1), np.repeat(vb, n // nkv, axis=1)
    s = (qb @ kb.transpose(0, 1, 3, 2)).astype(t).astype(np.float32) * np.float32(1 / math.sqrt(d))
    s = (np.float32(softcap) * np.tanh(s / np.float32(softcap))).astype(t).astype(np.float32)
    left, right = (-1, -1) if window is None else window
    if causal:
        right = 0 if right == -1 else min(right, 0)
    i = np.arange(sq)[:, None] + (skv - sq)
    j = np.arange(skv)[None, :]
    seen = np.ones((sq, skv), bool)
    if left != -1:
        seen &= j >= i - left
    if right != -1:
        seen &= j <= i + right
    if attn_mask is not None:
        seen = seen & attn_mask
    s = np.where(seen, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (p / p.sum(axis=-1, keepdims=True)).astype(t).astype(np.float32)
    return np.nan_to_num(p @ vb).astype(t).astype(np.float64)


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal, window, mask, softcap)
CASES = [
    (1, 2, 2, 128, 128, 64, "float16", "BNSD", False, None, False, 30.0),
    (1, 2, 2, 128, 128, 64, "float16", "BNSD", True, None, False, 1.0),       # heavy cap: every score bent
    (2, 4, 2, 97, 113, 16, "float16", "BNSD", True, None, False, 5.0),       # GQA, Sq and Skv tails
    (1, 3, 1, 17, 200, 32, "bfloat16", "BSND", False, None, False, 50.0),    # MQA, light cap
    (1, 2, 2, 200, 50, 64, "float16", "BNSD", True, None, False, 5.0),       # Sq > Skv: rows that see nothing
    (1, 2, 1, 300, 333, 128, "bfloat16", "BSH", True, (64, 0), False, 10.0),  # a window (FlashAttentionV2's band)
    (1, 2, 2, 129, 255, 80, "float16", "BNSD", False, None, True, 20.0),     # an explicit mask, odd head dim
    (2, 2, 1, 65, 130, 64, "float32", "BNSD", True, None, False, 5.0),
    (1, 2, 2, 300, 300, 256, "float32", "BSND", False, (-1, 17), False, 2.0),
]


def _case_id(case):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mask, cap = case
    return (f"B{b}N{n}kv{nkv}-Sq{sq}-Skv{skv}-D{d}-{dtype}-{layout}{'-causal' if causal else ''}"
            f"{f'-window{window[0]}_{window[1]}' if window else ''}{'-mask' if mask else ''}-cap{cap:g}")


def _check(q, k, v, out, lse, case, attn_mask):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, _, cap = case
    kw = dict(layout=layout, num_heads=n, num_kv_heads=nkv, causal=causal, window=window, attn_mask=attn_mask)
    ref, ref_lse = attention_reference(q, k, v, softcap=cap, **kw)
    naive = _naive(q, k, v, n=n, nkv=nkv, dtype=dtype, softcap=cap, **{x: kw[x] for x in ("layout", "causal",
                                                                                          "window", "attn_mask")})
    ref_b = to_bnsd(ref, layout, n)
    got = to_bnsd(out, layout, n).astype(np.float64)
    err, naive_err = np.abs(got - ref_b).max(), np.abs(naive - ref_b).max()
    tol = max(2 * naive_err, ULP[dtype] * max(1.0, np.abs(ref_b).max()))
    assert err <= tol, f"max error {err:.3g} > tolerance {tol:.3g} (naive {naive_err:.3g})"
    finite = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    assert np.abs(lse[finite] - ref_lse[finite]).max() < 1e-3


def _mask(case, seed=5):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mask, cap = case
    return (np.random.default_rng(seed).random((sq, skv)) < 0.7) if mask else None


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_reference(session, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, _, cap = case
    q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    attn_mask = _mask(case)
    out, lse = session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                       window=window, attn_mask=attn_mask, softcap=cap, return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v3"
    assert out.dtype == q.dtype and out.shape == q.shape
    _check(q, k, v, out, lse, case, attn_mask)


def test_varlen_forward_takes_softcap(session):
    """flash_attention_varlen (FlashAttentionV3 with layout TND): each sequence capped alone."""
    rng = np.random.default_rng(2)
    cu_q, cu_k = np.array([0, 37, 37, 140], np.int32), np.array([0, 50, 81, 200], np.int32)
    q = (rng.standard_normal((140, 4, 64)) * 3).astype(np.float16)
    k = (rng.standard_normal((200, 2, 64)) * 3).astype(np.float16)
    v = rng.standard_normal((200, 2, 64)).astype(np.float16)
    out, lse = session.flash_attention_varlen(q, k, v, cu_q, cu_k, causal=True, softcap=4.0, return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v3"
    for s in range(len(cu_q) - 1):
        rows, keys = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        if rows.stop == rows.start:
            continue
        case = (1, 4, 2, rows.stop - rows.start, keys.stop - keys.start, 64, "float16", "BSND", True, None, False, 4.0)
        _check(q[None, rows], k[None, keys], v[None, keys], out[None, rows], lse[None, :, rows], case, None)


def test_float32_cap_far_above_the_scores(session):
    """The documented limit: with a cap far above the scores (where it barely bends them) the
    composed tanh's absolute error of a few float32 ulps of the cap can exceed a float32 naive
    attention's error; it stays within cap * 2^-20 per score, i.e. that times max |v| in the output."""
    case = (1, 2, 2, 128, 200, 64, "float32", "BNSD", False, None, False, 1000.0)
    q, k, v = _inputs("BNSD", 1, 2, 2, 128, 200, 64, "float32", spread=1.0)
    out = session.flash_attention(q, k, v, softcap=case[-1])
    ref, _ = attention_reference(q, k, v, softcap=case[-1])
    naive = _naive(q, k, v, layout="BNSD", n=2, nkv=2, dtype="float32", softcap=case[-1])
    err, naive_err = np.abs(out - ref).max(), np.abs(naive - ref).max()
    assert err <= max(2 * naive_err, case[-1] * 2.0 ** -20 * np.abs(v).max()), (err, naive_err)


def test_the_cap_bends_the_result(session):
    """The capped call differs from the plain one by far more than rounding (the cap is applied)."""
    q, k, v = _inputs("BNSD", 1, 2, 2, 64, 64, 64, "float16")
    plain = session.flash_attention(q, k, v).astype(np.float64)
    capped = session.flash_attention(q, k, v, softcap=1.0).astype(np.float64)
    assert np.abs(plain - capped).max() > 0.1


def test_flash_attn_func_takes_softcap():
    """flash-attn's face passes softcap through: BSHD tensors, the same result as flash_attention
    (both on the process-wide session, as flash-attn code calls them)."""
    q, k, v = _inputs("BSND", 1, 4, 2, 70, 90, 64, "float16")
    out, lse, _ = acl_fa.flash_attn_func(q, k, v, causal=True, softcap=7.5, return_attn_probs=True)
    same, same_lse = acl_fa.flash_attention(q, k, v, causal=True, layout="BSND", softcap=7.5, return_lse=True)
    np.testing.assert_array_equal(out, same)
    np.testing.assert_array_equal(lse, same_lse)


@pytest.mark.parametrize("options, kernel", [({}, "flash_attention"), ({"causal": True}, "flash_attention"),
                                             ({"window": (16, 0)}, "flash_attention_v2")])
def test_softcap_zero_is_the_plain_call(session, options, kernel):
    q, k, v = _inputs("BNSD", 1, 2, 1, 100, 120, 64, "float16")
    out, lse = session.flash_attention(q, k, v, softcap=0.0, return_lse=True, **options)
    assert sim_stats.last_launch(session.backend)["kernel"] == kernel
    plain, plain_lse = session.flash_attention(q, k, v, return_lse=True, **options)
    np.testing.assert_array_equal(out, plain)
    np.testing.assert_array_equal(lse, plain_lse)


BAD = [
    (-1.0, InvalidArgumentError, "softcap must be a finite number >= 0"),
    (float("nan"), InvalidArgumentError, "softcap must be a finite number >= 0"),
    (float("inf"), InvalidArgumentError, "softcap must be a finite number >= 0"),
    (-0.5, InvalidArgumentError, "softcap"),
    ("30", InvalidTypeError, "softcap must be a real number"),
    (True, InvalidTypeError, "softcap must be a real number"),
    (None, InvalidTypeError, "softcap must be a real number"),
]


@pytest.mark.parametrize("softcap, error, words", BAD, ids=[repr(b[0]) for b in BAD])
def test_bad_softcap_refused_before_device_work(session, softcap, error, words):
    q = np.zeros((1, 1, 16, 16), np.float16)
    session.flash_attention(q, q, q)
    before = live_counts(session.backend)
    for face in (lambda: session.flash_attention(q, q, q, softcap=softcap),
                 lambda: acl_fa.flash_attn_func(q, q, q, softcap=softcap)):
        with pytest.raises(error, match=words):
            face()
    assert live_counts(session.backend) == before


def test_the_tiling_refuses_a_bad_softcap_from_direct_aclnn_callers(session):
    """The op's own check, for callers that skip the Python layer: TilingFunc names softcap."""
    problem, q, k, v = make_problem(*(np.zeros((1, 1, 16, 16), np.float16),) * 3)
    options, _ = build_options(scores=(1, 1, 16, 16), softcap=1.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(acl_fa.AclFaError, match="softcap must be a finite number >= 0"):
            run_forward_v2(session, problem, dataclasses.replace(options, softcap=bad), q, k, v)


def _softcap_extra_vector_elems(plan) -> int:
    """Vector elements SoftCap's path adds to the plain one (tests/kernel_model.py's launch): per
    score tile of rows x its width (the columns QK wrote, rounded up to 16), SoftCap's four passes
    (Muls, Exp, Adds, Div: the scores are left shifted by -softcap, a constant the softmax ignores)
    and the row max's Sub pass, where the plain call takes one FusedMulAdd pass and two per-row
    Muls (the scale folded into the exponent's argument, flash_attention_rows.h; each path has one
    8-float constant), and per row the LSE's + softcap once per item. The plans below keep one tile
    per block (chunkRows = subBlockM)."""
    extra = 0
    n = plan.block_n
    for core in range(plan.used_core_num):
        for item in range(plan.core_item_start[core], plan.core_item_start[core + 1]):
            kv_end = item_rows(plan, item)[2]
            widths = [min(n, ceil_div(min(n, kv_end - j * n), 16) * 16) for j in range(ceil_div(kv_end, n))]
            for sub in (0, 1):
                rows = aiv_rows(plan, item, sub)[1]
                if rows:
                    extra += sum(4 * rows * w - 2 * rows for w in widths) + rows
    return extra


@pytest.mark.parametrize("shape", [(1, 4, 2, 300, 300, 64, True, 64, 64), (2, 3, 3, 97, 200, 128, False, 32, 208)])
def test_counted_work(session, sim_only, shape):
    """The same cube MACs, GM bytes and blocks as the plain call; exactly the extra vector passes."""
    b, n, nkv, sq, skv, d, causal, bm, bn = shape
    q, k, v = _inputs("BNSD", b, n, nkv, sq, skv, d, "float16", spread=1.0)
    session.flash_attention(q, k, v, causal=causal, block_m=bm, block_n=bn)
    plain = sim_stats.last_launch(session.backend, per_core=True)
    session.flash_attention(q, k, v, causal=causal, block_m=bm, block_n=bn, softcap=5.0)
    capped = sim_stats.last_launch(session.backend, per_core=True)
    assert capped["kernel"] == "flash_attention_v3"
    for key in ("cube_macs", "gm_read_bytes", "gm_write_bytes", "work_items", "block_dim", "scalar_accesses"):
        assert capped[key] == plain[key], key
    assert [c["cube_macs"] for c in capped["aic"]] == [c["cube_macs"] for c in plain["aic"]]
    plan = sized_plans.plan(batch=b, heads=n, kv_heads=nkv, seq=sq, seq_kv=skv, head_dim=d, dtype="float16",
                            layout="BNSD", causal=causal, block_m=bm, block_n=bn)
    assert capped["vector_elems"] - plain["vector_elems"] == _softcap_extra_vector_elems(plan)
    assert capped["ub_high_water"] == plain["ub_high_water"]  # no extra UB


COUPLED_SCRIPT = """
import json
import numpy as np
import acl_fa
from test_softcap import CASES, _case_id, _check, _inputs, _mask

out = {}
with acl_fa.Session(backend="sim") as s:
    out["soc"] = s.soc_name()
    for case in CASES:
        b, n, nkv, sq, skv, d, dtype, layout, causal, window, mask, cap = case
        if dtype != "float16" or mask:  # the coupled chips: float16 only, no atten_mask
            continue
        q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
        try:
            o, lse = s.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                       softcap=cap, return_lse=True)
            _check(q, k, v, o, lse, case, None)
            out[_case_id(case)] = "ok"
        except (AssertionError, acl_fa.AclFaError) as exc:
            out[_case_id(case)] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
def test_coupled_chips(soc):
    """The coupled path (310P, 910A) runs the same row ops: softcap works there too."""
    out = run_python(COUPLED_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    assert out.pop("soc") == soc
    out.pop("_stderr")
    assert len(out) >= 4 and all(v == "ok" for v in out.values()), out
