"""The public faces with the V2 options (window, varlen) against the float64 reference with the
same options, forward and backward, each option alone and combined, under the 2x-naive rule
(acl_fa.reference.accuracy); bad options refused before device work."""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import check_accuracy, check_gradients, naive_same_precision
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.reference.attention import attention_reference_varlen, attention_reference_varlen_backward

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
NAMES = {F16: "float16", BF16: "bfloat16"}


def _inputs(layout, b, n, nkv, sq, skv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    qs, kvs = shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (qs, kvs, kvs, qs))


# id, (B, N, Nkv, Sq, Skv, D), dtype, layout, options
CASES = [
    ("window", (1, 2, 2, 200, 200, 64), F16, "BNSD", dict(window=(40, 8))),
    ("causal-window", (1, 2, 1, 150, 190, 32), F16, "BNSD", dict(causal=True, window=(33, -1))),
    ("window-sq-gt-skv", (1, 2, 2, 160, 70, 32), BF16, "BSND", dict(window=(16, 0))),
    ("gqa-causal-window", (2, 4, 2, 130, 170, 64), BF16, "BSND", dict(causal=True, window=(48, 4))),
    ("window-diagonal-only", (1, 2, 2, 96, 96, 32), F16, "BNSD", dict(window=(0, -1), causal=True)),
]


@pytest.mark.parametrize("dims,dtype,layout,opts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_forward_and_backward_match_the_reference(dims, dtype, layout, opts):
    b, n, nkv, sq, skv, d = dims
    q, k, v, dout = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    kw = dict(opts)
    out, lse = acl_fa.flash_attention(q, k, v, layout=layout, num_heads=n, num_kv_heads=nkv, return_lse=True, **kw)
    heads = list(range(n))
    ref_kw = dict(scale=1 / np.sqrt(d), layout=layout, num_heads=n, num_kv_heads=nkv, heads=heads,
                  causal=kw.pop("causal", False), **kw)
    ref, ref_lse = acl_fa.attention_reference(q, k, v, **ref_kw)
    naive = naive_same_precision(q, k, v, dtype, **ref_kw)
    acc = check_accuracy(to_bnsd(out, layout, n).astype(np.float64), lse, to_bnsd(ref, layout, n), ref_lse, naive,
                         NAMES[dtype], heads)
    assert acc.ok, acc
    assert acc.lse_max_error < 1e-3
    grads = acl_fa.flash_attention_backward(dout, q, k, v, out, lse,
                                            **{k_: v_ for k_, v_ in ref_kw.items() if k_ not in ("heads", "scale")})
    ref_kw.pop("heads")
    for check in check_gradients(grads, (q, k, v, dout), dtype_name=NAMES[dtype], **ref_kw):
        assert check.ok, check


VARLEN = [  # id, lengths_q, lengths_k, (N, Nkv, D), options
    ("plain", [70, 1, 130], [70, 1, 130], (2, 2, 32), {}),
    ("causal-window", [96, 33, 150], [120, 33, 100], (4, 2, 64), dict(causal=True, window=(20, -1))),
    ("empty-and-blind", [64, 0, 17, 90], [64, 5, 17, 0], (2, 1, 32), dict(causal=True, window=(8, 2))),
]


@pytest.mark.parametrize("lq,lk,heads,opts", [c[1:] for c in VARLEN], ids=[c[0] for c in VARLEN])
def test_varlen_matches_the_reference(lq, lk, heads, opts):
    n, nkv, d = heads
    cu_q, cu_k = np.cumsum([0] + lq).astype(np.int32), np.cumsum([0] + lk).astype(np.int64)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((cu_q[-1], n, d), dtype=np.float32).astype(F16)
    k, v = (rng.standard_normal((cu_k[-1], nkv, d), dtype=np.float32).astype(F16) for _ in range(2))
    dout = rng.standard_normal(q.shape, dtype=np.float32).astype(F16)
    out, lse = acl_fa.flash_attention_varlen(q, k, v, cu_q, cu_k, return_lse=True, **opts)
    assert out.shape == q.shape and lse.shape == (n, cu_q[-1])
    ref, ref_lse = attention_reference_varlen(q, k, v, cu_q, cu_k, **opts)
    naive_err = 0.0
    for s in range(len(lq)):  # the naive same-precision error, sequence by sequence
        qr, kr = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        if lq[s] and lk[s]:
            nv = naive_same_precision(q[None, qr], k[None, kr], v[None, kr], F16, scale=1 / np.sqrt(d),
                                      layout="BSND", num_heads=n, num_kv_heads=nkv, heads=list(range(n)),
                                      **{"causal": False, **opts})
            naive_err = max(naive_err, float(np.abs(nv.transpose(0, 2, 1, 3)[0] - ref[qr]).max()))
    err = float(np.abs(out.astype(np.float64) - ref).max())
    assert err <= max(2 * naive_err, 2**-10 * max(1.0, float(np.abs(ref).max()))), (err, naive_err)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    grads = acl_fa.flash_attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, **opts)
    ref_g = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_k, **opts)
    naive_g = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_k, work_dtype=np.float32, round_to=F16,
                                                  **{"causal": False, **opts})
    for got, want, same in zip(grads, ref_g, naive_g):
        err, naive_err = (float(np.abs(x.astype(np.float64) - want).max()) for x in (got, same.astype(F16)))
        assert err <= 2 * naive_err + 2**-10 * max(1.0, float(np.abs(want).max())), (err, naive_err)


BAD = [  # id, call kwargs, exception, words
    ("window-low", dict(window=(-3, 0)), acl_fa.InvalidArgumentError, ["window[0]=-3"]),
    ("window-scalar", dict(window=4), acl_fa.InvalidTypeError, ["window", "pair"]),
    ("window-float", dict(window=(1.5, 0)), acl_fa.InvalidTypeError, ["window[0]", "integer"]),
]


@pytest.mark.parametrize("kw,exc,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_options_through_the_public_faces(kw, exc, words):
    q, k, v, dout = _inputs("BNSD", 1, 2, 2, 32, 32, 16, F16)
    lse = np.zeros((1, 2, 32), np.float32)
    for call in (lambda: acl_fa.flash_attention(q, k, v, **kw),
                 lambda: acl_fa.flash_attention_backward(dout, q, k, v, q, lse, **kw)):
        with pytest.raises(exc) as info:
            call()
        assert all(w in str(info.value) for w in words), str(info.value)


@pytest.mark.parametrize("kw,words", [
    (dict(cu_seqlens_q=np.array([0, 10, 20], np.float32)), ["cu_seqlens_q", "int32 or int64"]),
    (dict(cu_seqlens_q=np.array([1, 10, 20], np.int32)), ["cu_seqlens_q", "start at 0"]),
    (dict(cu_seqlens_k=np.array([0, 12, 11], np.int32)), ["cu_seqlens_k", "non-decreasing"]),
    (dict(cu_seqlens_k=np.array([0, 12, 19], np.int32)), ["cu_seqlens_k", "token count 20"]),
    (dict(cu_seqlens_k=np.array([0, 20], np.int32)), ["2 sequences", "1"]),
    (dict(max_seqlen_q=9), ["max_seqlen_q=9", "10 tokens"]),
], ids=["float", "start", "decreasing", "end", "count", "max-seqlen"])
def test_bad_varlen_inputs(kw, words):
    q = np.zeros((20, 2, 16), F16)
    args = dict(cu_seqlens_q=np.array([0, 10, 20], np.int32), cu_seqlens_k=np.array([0, 10, 20], np.int64))
    args.update(kw)
    with pytest.raises((acl_fa.InvalidArgumentError, acl_fa.InvalidTypeError)) as info:
        acl_fa.flash_attention_varlen(q, q, q, args.pop("cu_seqlens_q"), args.pop("cu_seqlens_k"), **args)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_session_methods_and_v1_path_for_plain_options():
    q, k, v, dout = _inputs("BNSD", 1, 2, 2, 64, 64, 32, F16)
    with acl_fa.Session() as s:
        plain = s.flash_attention(q, k, v, causal=True)
        as_window = s.flash_attention(q, k, v, window=(-1, 0))      # (-1, 0) is causal: the V1 op
        assert np.array_equal(plain, as_window)
        cu = np.array([0, 64], np.int32)
        out, lse = s.flash_attention_varlen(q[0].transpose(1, 0, 2), k[0].transpose(1, 0, 2),
                                            v[0].transpose(1, 0, 2), cu, cu, causal=True, return_lse=True)
        np.testing.assert_allclose(out.transpose(1, 0, 2).astype(np.float32), plain[0].astype(np.float32),
                                   atol=2e-3)
        grads = s.flash_attention_varlen_backward(dout[0].transpose(1, 0, 2), q[0].transpose(1, 0, 2),
                                                  k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2), out, lse, cu, cu,
                                                  causal=True)
        assert grads[0].shape == (64, 2, 32)
