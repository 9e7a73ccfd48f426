"""acl_fa.attention_reference_backward against central finite differences of the forward
reference, and its GQA / layout / masking semantics."""
import numpy as np
import pytest

from conftest import assert_reference_gradients
from acl_fa import attention_reference_backward

CASES = [  # (B, N, Nkv, Sq, Skv, D, causal, layout)
    (1, 2, 2, 5, 7, 4, False, "BNSD"),
    (1, 4, 2, 6, 4, 8, True, "BSND"),   # GQA, Sq > Skv: rows 0, 1 see no key
    (2, 3, 1, 3, 5, 4, True, "BSH"),    # MQA
]


@pytest.mark.parametrize("b,n,nkv,sq,skv,d,causal,layout", CASES)
def test_gradients_match_finite_differences(b, n, nkv, sq, skv, d, causal, layout):
    r = np.random.default_rng(sq * 31 + skv)
    shape = {"BNSD": lambda h, s: (b, h, s, d), "BSND": lambda h, s: (b, s, h, d),
             "BSH": lambda h, s: (b, s, h * d)}[layout]
    q, g = r.standard_normal(shape(n, sq)), r.standard_normal(shape(n, sq))
    k, v = r.standard_normal(shape(nkv, skv)), r.standard_normal(shape(nkv, skv))
    kw = dict(causal=causal, scale=0.7, layout=layout, num_heads=n, num_kv_heads=nkv)
    assert_reference_gradients(attention_reference_backward(g, q, k, v, **kw), g, q, k, v, **kw)


def test_rows_without_visible_keys_have_zero_dq():
    r = np.random.default_rng(1)
    q, dout = r.standard_normal((1, 1, 9, 4)), r.standard_normal((1, 1, 9, 4))
    k, v = r.standard_normal((1, 1, 3, 4)), r.standard_normal((1, 1, 3, 4))
    dq, dk, dv = attention_reference_backward(dout, q, k, v, causal=True)
    assert np.all(dq[0, 0, :6] == 0) and np.all(np.abs(dq[0, 0, 7:]) > 0)  # row 6 sees one key: dq 0 too
    assert np.isfinite(dk).all() and np.isfinite(dv).all()


def test_chunked_equals_unchunked(monkeypatch):
    import acl_fa.reference.attention as ref
    r = np.random.default_rng(2)
    q, dout = r.standard_normal((1, 2, 40, 8)), r.standard_normal((1, 2, 40, 8))
    k, v = r.standard_normal((1, 1, 33, 8)), r.standard_normal((1, 1, 33, 8))
    whole = attention_reference_backward(dout, q, k, v, causal=True)
    monkeypatch.setattr(ref, "_DEFAULT_CHUNK_BYTES", 33 * 8 * 3)  # 3 rows per chunk
    chunked = attention_reference_backward(dout, q, k, v, causal=True)
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
