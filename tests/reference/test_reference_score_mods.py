"""The float64 reference's score modifiers (ALiBi, soft-capping, sinks, a float mask) against
dense formulas written here from their definitions (docs/attention_options.md, "Score
modifiers"), its gradients against finite differences, and the decode reference against the
forward reference."""
import math

import numpy as np
import pytest

from conftest import assert_reference_gradients
from acl_fa import attention_reference, attention_reference_backward
from acl_fa.reference.attention import attention_reference_varlen, attention_reference_varlen_backward
from acl_fa.reference.decode import kvcache_reference
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.spec.score_mods import alibi_slopes_value, sinks_value


def dense(q, k, v, *, scale, causal=False, softcap=0.0, slopes=None, bias=None, sinks=None):
    """[B, N, Sq, Skv] scores built whole, BNSD, N = Nkv; gpt-oss's sink formulation: the sink is
    one more column of the logits whose weight is dropped after the softmax."""
    b, n, sq, _ = q.shape
    skv = k.shape[2]
    s = np.einsum("bnid,bnjd->bnij", q, k) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    i = np.arange(sq)[:, None] + skv - sq
    j = np.arange(skv)[None, :]
    if slopes is not None:
        s = s - np.asarray(slopes, np.float64).reshape(-1 if np.ndim(slopes) == 2 else 1, n)[..., None, None] * np.abs(i - j)
    if bias is not None:
        s = s + bias
    if causal:
        s = np.where(j > i, -np.inf, s)
    if sinks is not None:
        s = np.concatenate([s, np.broadcast_to(np.asarray(sinks)[None, :, None, None], (b, n, sq, 1))], axis=-1)
    m = s.max(axis=-1, keepdims=True)
    w = np.exp(s - m)
    lse = (m + np.log(w.sum(axis=-1, keepdims=True)))[..., 0]
    w = w / w.sum(axis=-1, keepdims=True)
    if sinks is not None:
        w = w[..., :-1]
    return w @ v, lse


def inputs(seed, b=2, n=3, sq=5, skv=7, d=4):
    r = np.random.default_rng(seed)
    return r.standard_normal((b, n, sq, d)), r.standard_normal((b, n, skv, d)), r.standard_normal((b, n, skv, d))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mods", [dict(slopes=True), dict(sinks=True), dict(softcap=2.0, slopes=True),
                                  dict(bias=True), dict(softcap=1.5, slopes=True, sinks=True, bias=True)])
def test_forward_equals_dense_definition(causal, mods):
    q, k, v = inputs(3)
    r = np.random.default_rng(4)
    slopes = r.uniform(0.05, 0.5, (2, 3)) if mods.get("slopes") else None
    sinks = r.standard_normal(3) if mods.get("sinks") else None
    bias = r.standard_normal((1, 3, 5, 7)) if mods.get("bias") else None
    softcap = mods.get("softcap", 0.0)
    out, lse = attention_reference(q, k, v, scale=0.6, causal=causal, softcap=softcap, alibi_slopes=slopes,
                                   attn_bias=bias, sinks=sinks)
    want, want_lse = dense(q, k, v, scale=0.6, causal=causal, softcap=softcap, slopes=slopes, bias=bias, sinks=sinks)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12, atol=1e-12)


def test_alibi_slopes_per_head_repeat_over_batch():
    q, k, v = inputs(5)
    slopes = np.array([0.25, 0.125, 0.0625])
    a = attention_reference(q, k, v, alibi_slopes=slopes)[0]
    b = attention_reference(q, k, v, alibi_slopes=np.tile(slopes, (2, 1)))[0]
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - attention_reference(q, k, v)[0]).max() > 1e-3  # the bias changes the result


def test_sink_row_without_keys_gives_zero_and_sink_lse():
    q, k, v = inputs(6, b=1, n=1, sq=4, skv=2)
    out, lse = attention_reference(q, k, v, causal=True, sinks=np.array([0.7]))
    assert np.all(out[0, 0, :2] == 0) and np.all(lse[0, 0, :2] == 0.7)  # rows 0, 1 see no key
    assert np.all(np.abs(out[0, 0, 2:]) > 0)


@pytest.mark.parametrize("mods", [dict(softcap=1.3), dict(alibi_slopes=np.array([0.3, 0.1])),
                                  dict(sinks=np.array([0.4, -1.2])),
                                  dict(softcap=2.0, alibi_slopes=np.array([[0.2, 0.5]]), sinks=np.array([1.1, 0.3]))])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_finite_differences(mods, causal):
    r = np.random.default_rng(7)
    q, g = r.standard_normal((1, 2, 4, 3)), r.standard_normal((1, 2, 4, 3))
    k, v = r.standard_normal((1, 1, 6, 3)), r.standard_normal((1, 1, 6, 3))
    kw = dict(causal=causal, scale=0.8, num_kv_heads=1, **{key: (val.copy() if isinstance(val, np.ndarray) else val)
                                                             for key, val in mods.items()})
    grads = attention_reference_backward(g, q, k, v, **kw)
    assert len(grads) == (4 if "sinks" in mods else 3)
    assert_reference_gradients(grads, g, q, k, v, **kw)


def test_varlen_applies_each_sequences_own_alignment_and_slopes():
    r = np.random.default_rng(8)
    cu = np.array([0, 3, 8])
    q, k, v = r.standard_normal((8, 2, 4)), r.standard_normal((8, 2, 4)), r.standard_normal((8, 2, 4))
    slopes, sinks = np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([0.5, -0.5])
    out, _ = attention_reference_varlen(q, k, v, cu, cu, causal=True, alibi_slopes=slopes, sinks=sinks, softcap=3.0)
    for s, sl in enumerate([slice(0, 3), slice(3, 8)]):
        want, _ = dense(q[sl].transpose(1, 0, 2)[None], k[sl].transpose(1, 0, 2)[None], v[sl].transpose(1, 0, 2)[None],
                        scale=0.5, causal=True, softcap=3.0, slopes=slopes[s][None], sinks=sinks)
        np.testing.assert_allclose(out[sl], want[0].transpose(1, 0, 2), rtol=1e-12, atol=1e-12)
    grads = attention_reference_varlen_backward(q, q, k, v, cu, cu, causal=True, alibi_slopes=slopes, sinks=sinks)
    assert len(grads) == 4 and grads[3].shape == (2,) and np.all(grads[3] != 0)


@pytest.mark.parametrize("causal", [False, True])
def test_decode_reference_equals_forward_reference(causal):
    r = np.random.default_rng(9)
    b, sq, n, nkv, d, length = 2, 3, 4, 2, 8, 11
    q = r.standard_normal((b, sq, n, d))
    k_cache, v_cache = r.standard_normal((b, 16, nkv, d)), r.standard_normal((b, 16, nkv, d))
    slopes, sinks = r.uniform(0.1, 0.4, n), r.standard_normal(n)
    out, lse = kvcache_reference(q, k_cache, v_cache, np.array([length, length]), causal=causal, softcap=4.0,
                                 alibi_slopes=slopes, sinks=sinks)
    want, want_lse = attention_reference(q, k_cache[:, :length], v_cache[:, :length], layout="BSND", num_heads=n,
                                         num_kv_heads=nkv, causal=causal, softcap=4.0, alibi_slopes=slopes,
                                         sinks=sinks)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12, atol=1e-12)


def test_validators_name_the_argument_and_limit():
    assert alibi_slopes_value(None, batch=2, num_heads=3) is None
    got = alibi_slopes_value([0.5, 0.25, 0.125], batch=2, num_heads=3)
    assert got.dtype == np.float32 and got.shape == (2, 3) and got.flags.c_contiguous
    with pytest.raises(InvalidArgumentError, match=r"alibi_slopes must have shape \(num_heads,\) = \(3,\)"):
        alibi_slopes_value(np.ones(4), batch=2, num_heads=3)
    with pytest.raises(InvalidArgumentError, match="alibi_slopes must be finite.*element 1"):
        alibi_slopes_value([0.5, math.nan, 0.1], batch=1, num_heads=3)
    with pytest.raises(InvalidTypeError, match="alibi_slopes must hold floating-point"):
        alibi_slopes_value(np.arange(3), batch=1, num_heads=3)
    with pytest.raises(InvalidArgumentError, match="sinks must have shape"):
        sinks_value(np.zeros((1, 3)), num_heads=3)
    with pytest.raises(InvalidArgumentError, match="sinks must be finite"):
        sinks_value([0.0, np.inf, 1.0], num_heads=3)
    with pytest.raises(InvalidTypeError, match="sinks must hold floating-point values.*object"):
        sinks_value(object(), num_heads=3)
