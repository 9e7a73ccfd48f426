"""flash_attn_func and scaled_dot_product_attention: flash-attn's and torch's semantics, checked
against the float64 reference with the other library's conventions spelled out (BSHD layout,
torch's top-left causal mask), and against torch's CPU SDPA when torch is installed."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.reference.attention import attention_reference

TOL = 2e-3  # fp16 output of inputs ~ N(0, 1): the forward's error is far below this


def _randn(shape, seed, dtype=np.float16):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _top_left_reference(q, k, v, scale=None):
    """torch's is_causal on BNSD float64: query i sees keys j <= i, an explicit mask."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * q @ np.swapaxes(k, -1, -2)
    lq, lk = s.shape[-2:]
    s = np.where(np.tril(np.ones((lq, lk), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# ---- flash_attn_func -------------------------------------------------------------------------

@pytest.mark.parametrize("b, sq, skv, n, nkv, d, causal", [
    (2, 37, 53, 4, 2, 64, True),
    (1, 64, 16, 2, 1, 32, True),    # Sq > Skv: bottom-right leaves the first rows empty
    (1, 40, 40, 3, 3, 16, False),
])
def test_flash_attn_func_is_bshd_bottom_right(b, sq, skv, n, nkv, d, causal):
    q = _randn((b, sq, n, d), 1)
    k, v = _randn((b, skv, nkv, d), 2), _randn((b, skv, nkv, d), 3)
    out = acl_fa.flash_attn_func(q, k, v, causal=causal)
    ref, ref_lse = attention_reference(q, k, v, causal=causal, layout="BSND")
    assert out.shape == q.shape and out.dtype == q.dtype
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=TOL)
    out2, lse, probs = acl_fa.flash_attn_func(q, k, v, softmax_scale=0.3, causal=causal, return_attn_probs=True,
                                              deterministic=True)
    ref2, ref_lse2 = attention_reference(q, k, v, causal=causal, scale=0.3, layout="BSND")
    np.testing.assert_allclose(out2.astype(np.float64), ref2, atol=TOL)
    assert lse.shape == (b, n, sq) and lse.dtype == np.float32 and probs is None
    seen = np.isfinite(ref_lse2)
    np.testing.assert_allclose(lse[seen], ref_lse2[seen], atol=1e-4)


@pytest.mark.parametrize("window_size,causal", [((16, 0), False), ([-1, 4], False), ((8, 8), True)])
def test_flash_attn_func_window_size_is_the_sliding_window(window_size, causal):
    q = _randn((1, 40, 2, 16), 1)
    k, v = _randn((1, 56, 2, 16), 2), _randn((1, 56, 2, 16), 3)
    out = acl_fa.flash_attn_func(q, k, v, causal=causal, window_size=window_size)
    ref, _ = attention_reference(q, k, v, causal=causal, window=tuple(window_size), layout="BSND")
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=TOL)


@pytest.mark.parametrize("kwargs, feature", [
    ({"dropout_p": 0.1}, "dropout"),
    ({"alibi_slopes": np.ones(2, np.float32)}, "ALiBi"),
])
def test_flash_attn_func_unbuilt_features_name_themselves(kwargs, feature):
    q = _randn((1, 16, 2, 16), 0)
    with pytest.raises(NotImplementedError, match=feature):
        acl_fa.flash_attn_func(q, q, q, **kwargs)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"dropout_p": "0"}, InvalidTypeError, "dropout_p"),
    ({"window_size": -1}, InvalidTypeError, "window_size"),
    ({"window_size": (-1, -1, -1)}, InvalidArgumentError, "window_size"),
    ({"window_size": (-2, 0)}, InvalidArgumentError, "window"),
    ({"return_attn_probs": 1}, InvalidTypeError, "return_attn_probs"),
    ({"causal": 1}, InvalidTypeError, "causal"),
])
def test_flash_attn_func_bad_arguments(kwargs, error, words):
    q = _randn((1, 16, 2, 16), 0)
    with pytest.raises(error, match=words):
        acl_fa.flash_attn_func(q, q, q, **kwargs)


# ---- scaled_dot_product_attention ------------------------------------------------------------

@pytest.mark.parametrize("lead, hq, hkv, lq, lk, e, is_causal", [
    ((2,), 4, 4, 48, 48, 32, True),     # square: top-left == bottom-right
    ((2,), 4, 4, 20, 70, 32, True),     # L < S: top-left sees only the first L keys
    ((1,), 2, 2, 70, 20, 16, True),     # L > S: rows >= S see every key
    ((2, 3), 2, 1, 33, 57, 16, True),   # two leading dims, GQA
    ((), 1, 1, 40, 24, 64, False),      # [L, E]
    ((1,), 6, 2, 25, 25, 48, False),
])
def test_sdpa_is_bnsd_top_left(lead, hq, hkv, lq, lk, e, is_causal):
    heads_q = (hq,) if lead or hq > 1 else ()
    heads_kv = (hkv,) if lead or hkv > 1 else ()
    q = _randn(lead + heads_q + (lq, e), 4)
    k, v = _randn(lead + heads_kv + (lk, e), 5), _randn(lead + heads_kv + (lk, e), 6)
    out = acl_fa.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=hq != hkv)
    assert out.shape == q.shape and out.dtype == q.dtype
    b = int(np.prod(lead)) if lead else 1
    q4, k4, v4 = q.reshape(b, hq, lq, e), k.reshape(b, hkv, lk, e), v.reshape(b, hkv, lk, e)
    if is_causal:
        ref = _top_left_reference(q4, k4, v4)
    else:
        ref, _ = attention_reference(q4, k4, v4)
    np.testing.assert_allclose(out.reshape(ref.shape).astype(np.float64), ref, atol=TOL)


def test_sdpa_top_left_differs_from_bottom_right_when_lengths_differ():
    q, k, v = _randn((1, 2, 20, 32), 7), _randn((1, 2, 70, 32), 8), _randn((1, 2, 70, 32), 9)
    torch_like = acl_fa.scaled_dot_product_attention(q, k, v, is_causal=True)
    ours = acl_fa.flash_attention(q, k, v, causal=True)
    assert np.abs(torch_like.astype(np.float32) - ours.astype(np.float32)).max() > 0.1


def test_sdpa_scale_and_bfloat16():
    q = _randn((1, 2, 30, 32), 10, ml_dtypes.bfloat16)
    k, v = _randn((1, 2, 45, 32), 11, ml_dtypes.bfloat16), _randn((1, 2, 45, 32), 12, ml_dtypes.bfloat16)
    out = acl_fa.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    assert out.dtype == ml_dtypes.bfloat16
    ref = _top_left_reference(q, k, v, scale=0.5)
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=2e-2)


@pytest.mark.parametrize("kwargs, shapes, error, words", [
    ({"attn_mask": np.ones((16, 16), bool)}, None, NotImplementedError, "attn_mask"),
    ({"dropout_p": 0.5}, None, NotImplementedError, "dropout"),
    ({}, ((1, 2, 16, 16), (1, 2, 16, 16), (1, 2, 16, 32)), NotImplementedError, "value head dim"),
    ({}, ((2, 2, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16)), NotImplementedError, "broadcasting"),
    ({}, ((1, 4, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16)), InvalidArgumentError, "enable_gqa=True"),
    ({"enable_gqa": True}, ((1, 3, 16, 16), (1, 2, 16, 16), (1, 2, 16, 16)), InvalidArgumentError, "multiple"),
    ({"is_causal": 1}, None, InvalidTypeError, "is_causal"),
    ({"enable_gqa": "yes"}, None, InvalidTypeError, "enable_gqa"),
    ({}, ((16,), (16,), (16,)), InvalidArgumentError, "at least 2 dimensions"),
    ({}, ((1, 2, 16, 16), (2, 16, 16), (2, 16, 16)), InvalidArgumentError, "same rank"),
])
def test_sdpa_refusals(kwargs, shapes, error, words):
    shapes = shapes or ((1, 2, 16, 16),) * 3
    q, k, v = (_randn(s, i) for i, s in enumerate(shapes))
    with pytest.raises(error, match=words):
        acl_fa.scaled_dot_product_attention(q, k, v, **kwargs)


def test_sdpa_scale_and_gqa_are_keyword_only():
    q = _randn((1, 2, 16, 16), 0)
    with pytest.raises(TypeError):
        acl_fa.scaled_dot_product_attention(q, q, q, None, 0.0, False, 0.5)


# ---- against torch's CPU SDPA ----------------------------------------------------------------

@pytest.mark.parametrize("hq, hkv, lq, lk, is_causal", [
    (4, 4, 20, 70, True), (2, 2, 70, 20, True), (4, 2, 33, 33, True), (2, 2, 17, 40, False)])
def test_sdpa_matches_torch(hq, hkv, lq, lk, is_causal):
    torch = pytest.importorskip("torch")
    q = _randn((2, hq, lq, 32), 13)
    k, v = _randn((2, hkv, lk, 32), 14), _randn((2, hkv, lk, 32), 15)
    gqa = hq != hkv
    ours = acl_fa.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=gqa)
    tq, tk, tv = (torch.from_numpy(x.astype(np.float64)) for x in (q, k, v))
    theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=is_causal,
                                                               enable_gqa=gqa).numpy()
    np.testing.assert_allclose(ours.astype(np.float64), theirs, atol=TOL)
