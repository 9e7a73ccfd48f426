"""The float64 reference with window, mask, dropout and varlen (docs/attention_options.md):
against a dense implementation written from the rule, finite differences for the backward,
chunking, and the varlen layout."""
import numpy as np
import pytest

from acl_fa import attention_reference, attention_reference_backward
from conftest import assert_reference_gradients
from acl_fa.spec.philox import keep_mask
from acl_fa.reference.attention import attention_reference_varlen, attention_reference_varlen_backward


def _dense(q, k, v, *, scale, causal=False, window=None, attn_mask=None, dropout_p=0.0, seed=0, offset=0):
    """BNSD attention from the rule, element by element visibility, whole matrices."""
    b_, n_, sq, _ = q.shape
    nkv, skv = k.shape[1], k.shape[2]
    left, right = window if window is not None else (-1, -1)
    out, lse = np.zeros(q.shape), np.full((b_, n_, sq), -np.inf)
    mask = None if attn_mask is None else np.broadcast_to(attn_mask, (b_, n_, sq, skv))
    for b in range(b_):
        for n in range(n_):
            vis = np.ones((sq, skv), bool)
            for i in range(sq):
                for j in range(skv):
                    diag = i + skv - sq
                    vis[i, j] = ((left == -1 or j >= diag - left) and (right == -1 or j <= diag + right)
                                 and (not causal or j <= diag) and (mask is None or mask[b, n, i, j]))
            s = q[b, n] @ k[b, n // (n_ // nkv)].T * scale
            s[~vis] = -np.inf
            for i in range(sq):
                if not vis[i].any():
                    continue
                p = np.exp(s[i] - s[i].max())
                lse[b, n, i] = s[i].max() + np.log(p.sum())
                p /= p.sum()
                if dropout_p:
                    kp = float(np.float32(1 - dropout_p))
                    p = p * keep_mask(seed, offset, b, n, n_, sq, skv, kp)[i] / kp
                out[b, n, i] = p @ v[b, n // (n_ // nkv)]
    return out, lse


CASES = [  # id, (B, N, Nkv, Sq, Skv), options
    ("window", (1, 2, 2, 9, 9), dict(window=(2, 1))),
    ("window-causal", (1, 2, 1, 7, 11), dict(window=(3, 4), causal=True)),
    ("window-right-only", (2, 1, 1, 6, 5), dict(window=(-1, 0))),
    ("mask-2d", (2, 2, 2, 5, 8), dict(mask_shape=(5, 8))),
    ("mask-keypad", (2, 4, 2, 5, 8), dict(mask_shape=(2, 1, 1, 8))),
    ("mask-heads", (1, 3, 3, 6, 6), dict(mask_shape=(1, 3, 6, 6), causal=True)),
    ("dropout", (2, 2, 1, 8, 13), dict(dropout_p=0.3, seed=123, offset=7)),
    ("everything", (2, 4, 2, 9, 12), dict(window=(5, 2), causal=True, mask_shape=(2, 1, 9, 12), dropout_p=0.25,
                                          seed=2**63 + 5, offset=2**64 - 2)),
    ("rows-see-nothing", (1, 1, 1, 6, 6), dict(window=(0, 0), mask_shape=(6, 6))),
]


def _inputs(dims, opts, seed=0):
    b, n, nkv, sq, skv = dims
    r = np.random.default_rng(seed)
    q, k, v = r.standard_normal((b, n, sq, 8)), r.standard_normal((b, nkv, skv, 8)), r.standard_normal((b, nkv, skv, 8))
    kw = {key: val for key, val in opts.items() if key != "mask_shape"}
    if "mask_shape" in opts:
        kw["attn_mask"] = r.random(opts["mask_shape"]) < 0.6
    return q, k, v, kw


@pytest.mark.parametrize("dims,opts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_forward_follows_the_rule(dims, opts):
    q, k, v, kw = _inputs(dims, opts)
    out, lse = attention_reference(q, k, v, scale=0.5, **kw)
    want, want_lse = _dense(q, k, v, scale=0.5, **kw)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
    np.testing.assert_allclose(lse[np.isfinite(lse)], want_lse[np.isfinite(want_lse)], rtol=1e-12)


def test_rows_that_see_no_key():
    q, k, v, kw = _inputs((1, 1, 1, 6, 6), {})
    mask = np.ones((6, 6), bool)
    mask[2] = False
    out, lse = attention_reference(q, k, v, attn_mask=mask)
    assert (out[0, 0, 2] == 0).all() and np.isneginf(lse[0, 0, 2]) and np.isfinite(lse[0, 0, [0, 1, 3]]).all()
    dout = np.ones_like(q)
    dq, dk, dv = attention_reference_backward(dout, q, k, v, attn_mask=mask)
    assert (dq[0, 0, 2] == 0).all()
    # row 2 adds nothing to dk/dv: the same gradients with q row 2 changed
    q2 = q.copy()
    q2[0, 0, 2] += 5
    dq2, dk2, dv2 = attention_reference_backward(dout, q2, k, v, attn_mask=mask)
    np.testing.assert_allclose(dk2, dk, atol=1e-14)
    np.testing.assert_allclose(dv2, dv, atol=1e-14)


@pytest.mark.parametrize("dims,opts", [
    ((1, 2, 1, 5, 7), dict(window=(2, 1), causal=True, mask_shape=(5, 7), dropout_p=0.3, seed=9, offset=1)),
    ((2, 2, 2, 4, 4), dict(window=(1, -1), mask_shape=(2, 1, 1, 4), dropout_p=0.5, seed=3)),
], ids=["gqa-window-causal-mask-dropout", "keypad-window-dropout"])
def test_backward_matches_finite_differences(dims, opts):
    q, k, v, kw = _inputs(dims, opts, seed=4)
    g = np.random.default_rng(5).standard_normal(q.shape)
    kw.update(scale=0.7)
    grads = attention_reference_backward(g, q, k, v, **kw)
    assert_reference_gradients(grads, g, q, k, v, **kw)
    assert any(np.abs(gr).max() > 0 for gr in grads)


def test_chunked_equals_unchunked_with_options(monkeypatch):
    import acl_fa.reference.attention as ref
    q, k, v, kw = _inputs((1, 2, 1, 40, 33), dict(window=(7, 3), mask_shape=(40, 33), dropout_p=0.2, seed=1))
    dout = np.random.default_rng(8).standard_normal(q.shape)
    whole = attention_reference(q, k, v, **kw), attention_reference_backward(dout, q, k, v, **kw)
    monkeypatch.setattr(ref, "_DEFAULT_CHUNK_BYTES", 33 * 8 * 3)  # 3 rows per chunk
    chunked = attention_reference(q, k, v, **kw), attention_reference_backward(dout, q, k, v, **kw)
    for a, b in zip(whole[0] + whole[1], chunked[0] + chunked[1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_varlen_is_each_sequence_alone():
    lengths_q, lengths_k = [5, 0, 9, 3], [7, 4, 9, 0]
    cu_q, cu_k = np.cumsum([0] + lengths_q), np.cumsum([0] + lengths_k).astype(np.int32)
    r = np.random.default_rng(2)
    n, nkv, d = 4, 2, 8
    q, dout = r.standard_normal((cu_q[-1], n, d)), r.standard_normal((cu_q[-1], n, d))
    k, v = r.standard_normal((cu_k[-1], nkv, d)), r.standard_normal((cu_k[-1], nkv, d))
    kw = dict(causal=True, window=(4, -1), dropout_p=0.2, seed=11, offset=3)
    out, lse = attention_reference_varlen(q, k, v, cu_q, cu_k, **kw)
    dq, dk, dv = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_k, **kw)
    assert out.shape == q.shape and lse.shape == (n, cu_q[-1]) and dk.shape == k.shape
    for s in range(4):
        qr, kr = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        if lengths_q[s] == 0:
            continue
        if lengths_k[s] == 0:  # sequence 3 sees no key
            assert (out[qr] == 0).all() and np.isneginf(lse[:, qr]).all() and (dq[qr] == 0).all()
            continue
        # alone as batch 0, its dropout streams are offset + s*N + n of the whole call
        o, l = attention_reference(q[None, qr], k[None, kr], v[None, kr], layout="BSND", **{**kw, "offset": 3 + s * n})
        want, _ = _dense(q[None, qr].transpose(0, 2, 1, 3),
                         k[None, kr].transpose(0, 2, 1, 3), v[None, kr].transpose(0, 2, 1, 3),
                         scale=1 / np.sqrt(d), causal=True, window=(4, -1), dropout_p=0.2, seed=11, offset=3 + s * n)
        np.testing.assert_allclose(out[qr], want[0].transpose(1, 0, 2), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(lse[:, qr], l[0])
        g = attention_reference_backward(dout[None, qr], q[None, qr], k[None, kr], v[None, kr], layout="BSND",
                                         **{**kw, "offset": 3 + s * n})
        np.testing.assert_allclose(dq[qr], g[0][0])
        np.testing.assert_allclose(dk[kr], g[1][0])
        np.testing.assert_allclose(dv[kr], g[2][0])
