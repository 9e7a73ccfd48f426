"""The score modifiers through the flash-attn and SDPA faces: alibi_slopes and softcap reach the
kernel from flash_attn_func, flash_attn_varlen_func and flash_attn_with_kvcache, and SDPA's float
attn_mask is added to the scores, each against the float64 reference with the faces' own
conventions (BSHD, SDPA's BNSD). The kernels' accuracy under the 2x rule is tested per op
(tests/ops/flash_attention/test_score_mods.py, the backward's and decode's); this checks the wiring."""
from __future__ import annotations

import numpy as np
import pytest

import acl_fa
from acl_fa.reference.attention import attention_reference, attention_reference_varlen
from acl_fa.reference.decode import kvcache_reference

TOL = 3e-3  # fp16 outputs of N(0, 1) inputs: the kernels' error is far below this


def _randn(rng, shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("slopes_shape", ["N", "BN"])
def test_flash_attn_func_alibi_and_softcap(causal, slopes_shape):
    rng = np.random.default_rng(1)
    b, sq, skv, n, nkv, d = 2, 40, 56, 4, 2, 64
    q, k, v = _randn(rng, (b, sq, n, d)), _randn(rng, (b, skv, nkv, d)), _randn(rng, (b, skv, nkv, d))
    slopes = rng.uniform(0.01, 0.3, (n,) if slopes_shape == "N" else (b, n)).astype(np.float32)
    out, lse, _ = acl_fa.flash_attn_func(q, k, v, causal=causal, softcap=8.0, alibi_slopes=slopes,
                                         return_attn_probs=True)
    want, want_lse = attention_reference(q, k, v, layout="BSND", num_heads=n, num_kv_heads=nkv, causal=causal,
                                         softcap=8.0, alibi_slopes=slopes)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=TOL, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=TOL, rtol=0)
    plain = acl_fa.flash_attn_func(q, k, v, causal=causal, softcap=8.0)
    assert np.abs(plain.astype(np.float64) - want).max() > 10 * TOL  # the slopes were not dropped


def test_flash_attn_varlen_func_alibi_per_sequence():
    rng = np.random.default_rng(2)
    cu = np.array([0, 17, 48, 64], np.int32)
    n, nkv, d = 4, 4, 32
    q, k, v = (_randn(rng, (64, h, d)) for h in (n, nkv, nkv))
    slopes = rng.uniform(0.05, 0.5, (3, n)).astype(np.float32)
    out = acl_fa.flash_attn_varlen_func(q, k, v, cu, cu, 31, 31, causal=True, alibi_slopes=slopes)
    want, _ = attention_reference_varlen(q, k, v, cu, cu, causal=True, alibi_slopes=slopes)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("mask_shape", [(24, 40), (1, 3, 24, 40), (2, 1, 24, 40), (1, 1, 1, 40)])
def test_sdpa_float_mask_is_added_to_the_scores(mask_shape):
    rng = np.random.default_rng(3)
    q, k, v = _randn(rng, (2, 3, 24, 32)), _randn(rng, (2, 3, 40, 32)), _randn(rng, (2, 3, 40, 32))
    bias = rng.standard_normal(mask_shape).astype(np.float16)
    bias[..., 5] = -np.inf  # key 5 hidden from every row
    out = acl_fa.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    want, _ = attention_reference(q, k, v, attn_bias=bias.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want, atol=TOL, rtol=0)


@pytest.mark.parametrize("paged", [False, True])
def test_flash_attn_with_kvcache_alibi_and_softcap(paged):
    rng = np.random.default_rng(4)
    b, sq, n, nkv, d, cap = 2, 2, 8, 2, 64, 256
    q = _randn(rng, (b, sq, n, d))
    k_cache, v_cache = _randn(rng, (b, cap, nkv, d)), _randn(rng, (b, cap, nkv, d))
    seqlens = np.array([200, 97], np.int32)
    slopes = rng.uniform(0.01, 0.1, n).astype(np.float32)
    kw = dict(cache_seqlens=seqlens, causal=True, softcap=6.0, alibi_slopes=slopes, return_softmax_lse=True)
    if paged:
        table = np.arange(2 * (cap // 64), dtype=np.int32).reshape(b, cap // 64)
        out, lse = acl_fa.flash_attn_with_kvcache(q, k_cache.reshape(-1, 64, nkv, d), v_cache.reshape(-1, 64, nkv, d),
                                                  block_table=table, **kw)
    else:
        out, lse = acl_fa.flash_attn_with_kvcache(q, k_cache, v_cache, **kw)
    want, want_lse = kvcache_reference(q, k_cache, v_cache, seqlens, causal=True, softcap=6.0, alibi_slopes=slopes)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=TOL, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=TOL, rtol=0)


def test_sinks_through_flash_attention_and_its_backward():
    rng = np.random.default_rng(5)
    q, k, v = _randn(rng, (1, 4, 48, 64)), _randn(rng, (1, 2, 48, 64)), _randn(rng, (1, 2, 48, 64))
    sinks = rng.standard_normal(4).astype(np.float32)
    out, lse = acl_fa.flash_attention(q, k, v, causal=True, sinks=sinks, return_lse=True)
    want, want_lse = attention_reference(q, k, v, causal=True, sinks=sinks)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=TOL, rtol=0)
    np.testing.assert_allclose(lse, want_lse, atol=TOL, rtol=0)
    g = _randn(rng, q.shape)
    dq, dk, dv, dsinks = acl_fa.flash_attention_backward(g, q, k, v, out, lse, causal=True, sinks=sinks)
    *grads, want_dsinks = acl_fa.attention_reference_backward(g, q, k, v, causal=True, sinks=sinks)
    for got, w in zip((dq, dk, dv), grads):
        np.testing.assert_allclose(got.astype(np.float64), w, atol=2e-2, rtol=0)
    np.testing.assert_allclose(dsinks, want_dsinks, rtol=2e-2, atol=2e-2)
