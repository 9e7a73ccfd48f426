"""Score modifiers in the forward (FlashAttentionV5, docs/attention_options.md "Score modifiers" and
"Score modifiers in the forward (FlashAttentionV5)"): ALiBi slopes, attention sinks and float
(additive) masks, alone and together, with soft-capping, causal, windows, bool masks, GQA/MQA,
layouts, tails and varlen batches.

- accuracy against the float64 reference (acl_fa/reference/attention.py, which implements each
  modifier independently) under the forward's rule: at most twice the error of the naive attention
  in the input dtype (acl_fa/reference/accuracy.py naive_same_precision: scores rounded to it, then
  the modifiers in fp32, the sink in the fp32 denominator, probabilities rounded to it); the LSE
  within 1e-3 (it includes the sink);
- rows that see no key give 0 and LSE = the sink (-inf without one);
- float masks of every broadcast shape, with -inf entries (whole rows too), read at their shape;
- bad input refused before any device work, naming the argument and the limit;
- the coupled chips refuse each modifier naming the chip (tests/ops/test_chips.py runs every chip).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.plan import forward as planmod
from acl_fa.reference.accuracy import ULP, check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference, attention_reference_varlen
from acl_fa.runtime import sim_stats
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.session import live_counts
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.spec.problem import sized_problem

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def alibi_paper_slopes(n: int) -> np.ndarray:
    """The ALiBi paper's slopes for n heads (a power of two): 2^(-8 h / n), h = 1..n."""
    return (2.0 ** (-8.0 * np.arange(1, n + 1) / n)).astype(np.float32)


def _inputs(layout, b, n, nkv, sq, skv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    qs, kvs = shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d)
    q = rng.standard_normal(qs).astype(DTYPES[dtype])
    k = rng.standard_normal(kvs).astype(DTYPES[dtype])
    v = rng.standard_normal(kvs).astype(DTYPES[dtype])
    return q, k, v


def _naive(q, k, v, *, layout, n, nkv, dtype, causal=False, **features):
    """The naive attention in the input dtype of the accuracy rule (acl_fa/reference/accuracy.py:
    scores rounded to the dtype, the cap rounded, ALiBi and the float mask added in fp32, the sink in
    the fp32 denominator, P rounded), every head; [B, N, Sq, D] float64."""
    scale = 1 / math.sqrt(q.shape[-1] if layout != "BSH" else q.shape[-1] // n)
    return naive_same_precision(q, k, v, np.dtype(DTYPES[dtype]), causal=causal, scale=scale, layout=layout,
                                num_heads=n, num_kv_heads=nkv, heads=list(range(n)), **features)


def _check(out, lse, q, k, v, *, layout, n, nkv, dtype, **mods):
    """The accuracy rule (acl_fa/reference/accuracy.py check_accuracy) and the LSE within 1e-3."""
    ref, ref_lse = attention_reference(q, k, v, layout=layout, num_heads=n, num_kv_heads=nkv, **mods)
    naive = _naive(q, k, v, layout=layout, n=n, nkv=nkv, dtype=dtype, **mods)
    got = to_bnsd(out, layout, n).astype(np.float64)
    result = check_accuracy(got, lse, to_bnsd(ref, layout, n), ref_lse, naive, dtype, list(range(n)))
    assert result.ok, result
    assert result.lse_max_error < 1e-3, result


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal, window, modifiers); modifiers: a = ALiBi, s = sinks,
# f = float mask [B, N, Sq, Skv] with -inf entries, m = bool mask, c = softcap.
CASES = [
    (1, 2, 2, 128, 128, 64, "float16", "BNSD", False, None, "a"),
    (1, 2, 2, 128, 128, 64, "float16", "BNSD", True, None, "a"),
    (2, 4, 2, 97, 113, 32, "float16", "BNSD", True, None, "a"),        # GQA, tails
    (1, 4, 1, 200, 300, 64, "bfloat16", "BSND", False, (40, 17), "a"),  # MQA, a window both sides
    (2, 2, 2, 65, 130, 64, "float32", "BNSD", True, None, "a"),
    (1, 2, 2, 128, 128, 64, "float16", "BNSD", False, None, "s"),
    (1, 2, 1, 200, 50, 64, "float16", "BNSD", True, None, "s"),         # Sq > Skv: rows that see nothing
    (1, 2, 2, 100, 140, 64, "bfloat16", "BSH", True, (30, 0), "s"),
    (2, 2, 2, 65, 90, 64, "float32", "BSND", False, None, "s"),
    (1, 2, 2, 128, 160, 64, "float16", "BNSD", False, None, "f"),
    (2, 2, 1, 97, 113, 32, "bfloat16", "BSND", True, None, "f"),
    (1, 2, 2, 70, 90, 64, "float32", "BNSD", False, None, "f"),
    (1, 4, 2, 150, 170, 64, "float16", "BNSD", True, None, "asfc"),      # every modifier together
    (1, 2, 2, 129, 255, 80, "bfloat16", "BNSD", False, (50, 50), "asmc"),
    (2, 2, 2, 100, 100, 64, "float32", "BSND", True, None, "asf"),
]


def _case_id(case):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mods = case
    return (f"B{b}N{n}kv{nkv}-Sq{sq}-Skv{skv}-D{d}-{dtype}-{layout}{'-causal' if causal else ''}"
            f"{f'-window{window[0]}_{window[1]}' if window else ''}-{mods}")


def _modifiers(case, seed=3):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mods = case
    rng = np.random.default_rng(seed)
    kw = {}
    if "a" in mods:
        kw["alibi_slopes"] = (alibi_paper_slopes(n) if b == 1 else
                              (rng.random((b, n)) * 0.3).astype(np.float32))
    if "s" in mods:
        kw["sinks"] = (rng.standard_normal(n) * 2).astype(np.float32)
    if "f" in mods:
        bias = rng.standard_normal((b, n, sq, skv)).astype(DTYPES[dtype])
        bias[rng.random((b, n, sq, skv)) < 0.2] = -np.inf
        bias[:, :, 3] = -np.inf  # a row every key of which the float mask hides
        kw["attn_bias"] = bias
    if "m" in mods:
        kw["attn_mask"] = rng.random((sq, skv)) < 0.7
    if "c" in mods:
        kw["softcap"] = 5.0
    return kw


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_reference(session, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, _ = case
    q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    mods = _modifiers(case)
    call = {key: val for key, val in mods.items() if key != "attn_bias"}
    if "attn_bias" in mods:
        call["attn_mask"] = mods["attn_bias"]  # a float attn_mask is the additive one
    out, lse = session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                       window=window, return_lse=True, **call)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v5"
    assert out.dtype == q.dtype and out.shape == q.shape
    _check(out, lse, q, k, v, layout=layout, n=n, nkv=nkv, dtype=dtype, causal=causal, window=window, **mods)


def test_rows_that_see_no_key_give_zero_and_the_sink(session):
    """Sq > Skv causal: the first Sq - Skv rows see no key; with sinks O = 0 and LSE = sink[h]."""
    q, k, v = _inputs("BNSD", 1, 2, 2, 96, 40, 64, "float16")
    sinks = np.array([0.5, -1.25], np.float32)
    out, lse = session.flash_attention(q, k, v, causal=True, sinks=sinks, return_lse=True)
    assert np.all(out[:, :, :56] == 0)
    np.testing.assert_array_equal(lse[0, :, :56], np.repeat(sinks[:, None], 56, axis=1))


FLOAT_MASK_SHAPES = [(160,), (70, 160), (1, 1, 70, 160), (2, 1, 70, 160), (1, 3, 1, 160), (2, 3, 70, 160),
                     (2, 1, 1, 160), (3, 70, 160)]


@pytest.mark.parametrize("shape", FLOAT_MASK_SHAPES, ids=["x".join(map(str, s)) for s in FLOAT_MASK_SHAPES])
def test_float_mask_broadcast_shapes(session, shape):
    """Every shape torch broadcasts to [B, N, Sq, Skv] with Skv columns, with -inf entries."""
    rng = np.random.default_rng(7)
    q, k, v = _inputs("BNSD", 2, 3, 3, 70, 160, 64, "float16")
    bias = (rng.standard_normal(shape) * 2).astype(np.float16)
    bias[rng.random(shape) < 0.25] = -np.inf
    out, lse = session.flash_attention(q, k, v, attn_mask=bias, return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v5"
    _check(out, lse, q, k, v, layout="BNSD", n=3, nkv=3, dtype="float16", attn_bias=bias)


def test_varlen_alibi_and_sinks(session):
    """flash_attention_varlen: a slope row per sequence, each aligned by its own lengths."""
    rng = np.random.default_rng(2)
    cu_q, cu_k = np.array([0, 37, 60, 140], np.int32), np.array([0, 50, 81, 200], np.int32)
    q = rng.standard_normal((140, 4, 64)).astype(np.float16)
    k = rng.standard_normal((200, 2, 64)).astype(np.float16)
    v = rng.standard_normal((200, 2, 64)).astype(np.float16)
    slopes = (rng.random((3, 4)) * 0.5).astype(np.float32)
    sinks = rng.standard_normal(4).astype(np.float32)
    out, lse = session.flash_attention_varlen(q, k, v, cu_q, cu_k, causal=True, alibi_slopes=slopes, sinks=sinks,
                                              softcap=6.0, return_lse=True)
    assert sim_stats.last_launch(session.backend)["kernel"] == "flash_attention_v5"
    ref, ref_lse = attention_reference_varlen(q, k, v, cu_q, cu_k, causal=True, alibi_slopes=slopes, sinks=sinks,
                                              softcap=6.0)
    naive_err = 0.0
    for s in range(3):
        rows, keys = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        naive = _naive(q[None, rows], k[None, keys], v[None, keys], layout="BSND", n=4, nkv=2, dtype="float16",
                       causal=True, softcap=6.0, alibi_slopes=slopes[s][None], sinks=sinks)
        naive_err = max(naive_err, np.abs(to_bnsd(ref[None, rows], "BSND", 4) - naive).max())
    err = np.abs(out.astype(np.float64) - ref).max()
    assert err <= max(2 * naive_err, ULP["float16"] * max(1.0, np.abs(ref).max())), (err, naive_err)
    assert np.abs(lse - ref_lse).max() < 1e-3


def test_modifiers_change_the_result(session):
    """Each modifier moves the output far beyond rounding (it is applied, not dropped)."""
    q, k, v = _inputs("BNSD", 1, 2, 2, 64, 64, 64, "float16")
    plain = session.flash_attention(q, k, v).astype(np.float64)
    for kw in (dict(alibi_slopes=np.array([0.5, 0.25], np.float32)), dict(sinks=np.array([3.0, 2.0], np.float32)),
               dict(attn_mask=(-2.0 * (np.arange(64)[None, :] % 2)).astype(np.float16))):
        assert np.abs(session.flash_attention(q, k, v, **kw) - plain).max() > 0.05, kw


def _q(shape=(1, 2, 16, 16), dtype=np.float16):
    return np.zeros(shape, dtype)


BAD = [
    (dict(alibi_slopes=np.zeros(3, np.float32)), InvalidArgumentError, r"alibi_slopes must have shape \(num_heads,\)"),
    (dict(alibi_slopes=np.zeros((2, 2), np.float32)), InvalidArgumentError, "alibi_slopes must have shape"),
    (dict(alibi_slopes=np.array([1.0, np.nan], np.float32)), InvalidArgumentError, "alibi_slopes must be finite"),
    (dict(alibi_slopes=np.array([1.0, np.inf], np.float32)), InvalidArgumentError, "alibi_slopes must be finite"),
    (dict(alibi_slopes=np.array([1, 2])), InvalidTypeError, "alibi_slopes must hold floating-point values"),
    (dict(sinks=np.zeros(3, np.float32)), InvalidArgumentError, r"sinks must have shape \(num_heads,\)"),
    (dict(sinks=np.array([np.nan, 0.0], np.float32)), InvalidArgumentError, "sinks must be finite"),
    (dict(sinks=np.array([-np.inf, 0.0], np.float32)), InvalidArgumentError, "sinks must be finite"),
    (dict(attn_mask=np.zeros((16, 16), np.float32)), InvalidTypeError, "float attn_mask must have the query's dtype"),
    (dict(attn_mask=np.zeros((16, 1), np.float16)), InvalidArgumentError, "last dimension must be Skv=16"),
    (dict(attn_mask=np.zeros((16, 15), np.float16)), InvalidArgumentError, "does not broadcast"),
    (dict(attn_mask=np.zeros((3, 1, 16, 16), np.float16)), InvalidArgumentError, "does not broadcast"),
    (dict(attn_mask=np.zeros((1, 1, 1, 1, 16), np.float16)), InvalidArgumentError, "rank must be 1 to 4"),
    (dict(attn_mask=np.full((16, 16), np.nan, np.float16)), InvalidArgumentError, "finite values or -inf"),
    (dict(attn_mask=np.full((16, 16), np.inf, np.float16)), InvalidArgumentError, "finite values or -inf"),
]


@pytest.mark.parametrize("kwargs, error, words", BAD, ids=[f"{i}-{next(iter(b[0]))}" for i, b in enumerate(BAD)])
def test_bad_input_refused_before_device_work(session, kwargs, error, words):
    q = _q()
    session.flash_attention(q, q, q)
    before = live_counts(session.backend)
    with pytest.raises(error, match=words):
        session.flash_attention(q, q, q, **kwargs)
    assert live_counts(session.backend) == before


def test_varlen_bad_slopes_refused(session):
    q = np.zeros((32, 2, 16), np.float16)
    cu = np.array([0, 16, 32], np.int32)
    with pytest.raises(InvalidArgumentError, match=r"\(batch, num_heads\) = \(2, 2\)"):
        session.flash_attention_varlen(q, q, q, cu, cu, alibi_slopes=np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
@pytest.mark.parametrize("kwargs, name", [(dict(alibi=True), "alibi_slopes"), (dict(sinks=True), "sinks"),
                                          (dict(bias_shape=(1, 1, 64, 64)), "atten_bias")])
def test_coupled_chips_refuse_naming_the_chip(soc, kwargs, name):
    """The policy (the same C++ the TilingFunc runs) refuses each modifier on the coupled chips."""
    problem = sized_problem(batch=1, num_heads=2, seq_q=64, head_dim=64)
    with pytest.raises(planmod.PlanError, match=f"{name}.*only; {soc}"):
        planmod.plan(problem, soc, planmod.PlanOptions(**kwargs))


def test_plan_budgets_the_modifiers_ub():
    """ALiBi's ramps and the float mask's tiles are UB lines of the plan, of the kernel's sizes
    (score_mods.h AlibiRamps::UbBytes, FloatBiasTiles::UbBytes)."""
    problem = sized_problem(batch=1, num_heads=2, seq_q=4096, head_dim=128, causal=True)
    plan = planmod.plan(problem, "Ascend910B2", planmod.PlanOptions(alibi=True, bias_shape=(1, 1, 4096, 4096)))
    lines = {line.name: line.bytes for line in plan.budget}
    c, n = plan.sub_block_m, plan.block_n
    chunk = next(v for key, v in lines.items() if key.startswith("scoreQue")) // (2 * n * 4)
    align = lambda x, a: (x + a - 1) // a * a  # noqa: E731
    assert lines["alibiBuf ALiBi ramps [n],[m] fp32"] == 3 * align(n, 16) * 4 + 2 * align(chunk, 8) * 4 + chunk * 32
    assert lines["biasBuf float mask [16,n] T+fp32"] == align(16 * align(n, 16) * 2, 32) + 16 * align(n, 16) * 4
    assert c >= chunk


def test_acl_fa_flash_attention_face():
    """The process-wide face takes the keywords the flash-attn / SDPA faces build on."""
    q, k, v = _inputs("BNSD", 1, 2, 2, 40, 40, 32, "float16")
    slopes = alibi_paper_slopes(2)
    out = acl_fa.flash_attention(q, k, v, causal=True, alibi_slopes=slopes, sinks=np.zeros(2, np.float32))
    ref, _ = attention_reference(q, k, v, causal=True, alibi_slopes=slopes, sinks=np.zeros(2))
    assert np.abs(out - ref).max() < 4e-3
