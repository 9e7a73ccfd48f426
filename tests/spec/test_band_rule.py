"""One band rule (acl_fa/spec/band.py) behind every entry point: a bad window gives the same error
from the forward, the backward, varlen (forward and backward), decode and the decode plan, before
any device work; and the float64 reference, which computes its band itself from
docs/attention_options.md, agrees with it."""
import numpy as np
import pytest

import acl_fa
from acl_fa.plan.decode import decode_plan
from acl_fa.reference.attention import attention_reference
from acl_fa.spec.band import UNBOUNDED, band_visible, window_band
from acl_fa.spec.options import AttentionOptions

F16 = np.float16
B, N, S, D = 1, 2, 32, 16


def _qkv():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((B, N, S, D)).astype(F16) for _ in range(3)]


def _forward(window):
    q, k, v = _qkv()
    return acl_fa.flash_attention(q, k, v, window=window)


def _backward(window):
    q, k, v = _qkv()
    lse = np.zeros((B, N, S), np.float32)
    return acl_fa.flash_attention_backward(q, q, k, v, q, lse, window=window)


def _varlen(window):
    q, k, v = (x[0].transpose(1, 0, 2).copy() for x in _qkv())  # TND: [S, N, D]
    cu = np.array([0, S], np.int32)
    return acl_fa.flash_attention_varlen(q, k, v, cu, cu, window=window)


def _varlen_backward(window):
    q, k, v = (x[0].transpose(1, 0, 2).copy() for x in _qkv())
    cu = np.array([0, S], np.int32)
    lse = np.zeros((N, S), np.float32)
    return acl_fa.flash_attention_varlen_backward(q, q, k, v, q, lse, cu, cu, window=window)


def _decode(window):
    q = np.zeros((B, 1, N, D), F16)
    cache = np.zeros((B, S, N, D), F16)
    return acl_fa.flash_attention_with_kvcache(q, cache, cache, cache_seqlens=S, window=window)


def _decode_plan(window):
    return decode_plan(seq_kv=S, batch=B, heads=N, kv_heads=N, head_dim=D, causal=True, window=window)


ENTRY_POINTS = [_forward, _backward, _varlen, _varlen_backward, _decode, _decode_plan]


@pytest.mark.parametrize("call", ENTRY_POINTS, ids=lambda f: f.__name__.lstrip("_"))
@pytest.mark.parametrize("window, error, message", [
    ((1, 2, 3), acl_fa.InvalidArgumentError, r"window must be a pair \(left, right\), got 3 values"),
    ((1,), acl_fa.InvalidArgumentError, r"window must be a pair \(left, right\), got 1 values"),
    (5, acl_fa.InvalidTypeError, r"window must be a pair \(left, right\) of ints"),
    ((1.5, 2), acl_fa.InvalidTypeError, r"window\[0\] must be an integer"),
    ((-2, 0), acl_fa.InvalidArgumentError, r"window\[0\]=-2: window values must be >= -1"),
], ids=["three", "one", "scalar", "float", "below_minus_one"])
def test_every_entry_point_refuses_a_bad_window_alike(call, window, error, message):
    with pytest.raises(error, match=message):
        call(window)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [None, (-1, -1), (0, 0), (3, -1), (-1, 2), (4, 1), (2**40, 3), (0, -1)])
@pytest.mark.parametrize("sq, skv", [(7, 7), (5, 9), (9, 5)])
def test_the_reference_band_agrees_with_the_ops_band(causal, window, sq, skv):
    """The reference's own band (acl_fa/reference/attention.py) against spec.band: rows that see
    no key give lse -inf in the reference exactly where the ops' band leaves a row empty, and the
    outputs match a dense softmax under spec.band's mask."""
    rng = np.random.default_rng(1)
    q, k, v = rng.standard_normal((1, 1, sq, 8)), rng.standard_normal((1, 1, skv, 8)), rng.standard_normal((1, 1, skv, 8))
    pre, nxt = window_band(window, causal)
    visible = band_visible(AttentionOptions(pre_tokens=pre, next_tokens=nxt), sq, skv, slice(0, sq))
    scores = np.where(visible, (q[0, 0] @ k[0, 0].T) / np.sqrt(8), -np.inf)
    row_max = np.where(visible.any(axis=1, keepdims=True), scores.max(axis=1, keepdims=True), 0.0)
    p = np.exp(scores - row_max)
    expected = np.where(visible.any(axis=1, keepdims=True), (p @ v[0, 0]) / np.maximum(p.sum(axis=1, keepdims=True),
                                                                                      1e-300), 0.0)
    out, lse = attention_reference(q, k, v, causal=causal, window=window)
    np.testing.assert_allclose(out[0, 0], expected, rtol=1e-12, atol=1e-12)
    assert (np.isneginf(lse[0, 0]) == ~visible.any(axis=1)).all()


def test_unbounded_is_the_int32_maximum():
    assert UNBOUNDED == 2**31 - 1
    assert window_band(None, True) == (UNBOUNDED, 0)
