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
    res2 = acl_fa.flash_attn_func(q, k, v, softmax_scale=0.3, causal=causal, return_attn_probs=True,
                                  deterministic=True)
    out2, lse, probs = res2
    ref2, ref_lse2 = attention_reference(q, k, v, causal=causal, scale=0.3, layout="BSND")
    np.testing.assert_allclose(out2.astype(np.float64), ref2, atol=TOL)
    assert lse.shape == (b, n, sq) and lse.dtype == np.float32 and probs is None
    assert res2.seed == 0  # no dropout: the tuple still carries the (unused) random state
    seen = np.isfinite(ref_lse2)
    np.testing.assert_allclose(lse[seen], ref_lse2[seen], atol=1e-4)


@pytest.mark.parametrize("window_size,causal", [((16, 0), False), ([-1, 4], False), ((8, 8), True)])
def test_flash_attn_func_window_size_is_the_sliding_window(window_size, causal):
    q = _randn((1, 40, 2, 16), 1)
    k, v = _randn((1, 56, 2, 16), 2), _randn((1, 56, 2, 16), 3)
    out = acl_fa.flash_attn_func(q, k, v, causal=causal, window_size=window_size)
    ref, _ = attention_reference(q, k, v, causal=causal, window=tuple(window_size), layout="BSND")
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=TOL)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"dropout_p": "0"}, InvalidTypeError, "dropout_p"),
    ({"dropout_p": 1.0}, InvalidArgumentError, "dropout_p"),
    ({"deterministic": "yes"}, InvalidTypeError, "deterministic"),
    ({"softcap": "1"}, InvalidTypeError, "softcap"),
    ({"softcap": -1.0}, InvalidArgumentError, "softcap"),
    ({"softcap": float("nan")}, InvalidArgumentError, "softcap"),
    ({"softmax_scale": -1.0}, InvalidArgumentError, "scale"),
    ({"window_size": -1}, InvalidTypeError, "window_size"),
    ({"window_size": (1.5, 0)}, InvalidTypeError, "window_size"),
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
    ({"attn_mask": np.ones((16, 16), bool), "is_causal": True}, None, InvalidArgumentError, "attn_mask and is_causal"),
    ({"attn_mask": np.ones((3, 16, 16), bool)}, None, InvalidArgumentError, "attn_mask of shape"),
    ({"attn_mask": np.ones((16, 17), bool)}, None, InvalidArgumentError, "does not broadcast"),
    ({"dropout_p": -0.5}, None, InvalidArgumentError, "dropout_p"),
    ({"dropout_p": "0.5"}, None, InvalidTypeError, "dropout_p"),
    ({}, ((1, 2, 16, 16), (1, 2, 16, 32), (1, 2, 16, 32)), InvalidArgumentError, "head dim"),
    ({}, ((1, 2, 16, 16), (1, 2, 16, 16), (1, 2, 17, 16)), InvalidArgumentError, "but the last"),
    ({}, ((2, 2, 16, 16), (3, 2, 16, 16), (3, 2, 16, 16)), InvalidArgumentError, "do not broadcast"),
    ({}, ((1, 2, 16, 300), (1, 2, 16, 300), (1, 2, 16, 300)), InvalidArgumentError, "<= 256"),
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


# ---- what the faces used to refuse: dropout, masks, head dims, broadcasting -------------------

def _masked_reference(q, k, v, allowed=None, bias=None, scale=None):
    """softmax(scale q k^T + bias, hidden where not allowed) v on BNSD float64 (GQA by repeat)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * q @ np.swapaxes(k, -1, -2)
    if bias is not None:
        s = s + bias.astype(np.float64)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(p / p.sum(-1, keepdims=True) @ v)


@pytest.mark.parametrize("mask_shape", [(40, 56), (2, 1, 40, 56), (1, 3, 1, 56), (2, 3, 40, 56)])
def test_sdpa_bool_mask_broadcasts_like_torch(mask_shape):
    q = _randn((2, 3, 40, 32), 20)
    k, v = _randn((2, 3, 56, 32), 21), _randn((2, 3, 56, 32), 22)
    mask = np.random.default_rng(23).random(mask_shape) < 0.7
    out = acl_fa.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    np.testing.assert_allclose(out.astype(np.float64), _masked_reference(q, k, v, allowed=mask), atol=TOL)


def test_sdpa_mask_with_leading_dims_folds_into_the_batch():
    """query [2, 3, H, L, E] and a mask [3, 1, L, S]: the mask's leading dim is expanded over the
    first (the only copy), then folded with it into the op's batch."""
    q = _randn((2, 3, 2, 24, 16), 24)
    k, v = _randn((2, 3, 2, 30, 16), 25), _randn((2, 3, 2, 30, 16), 26)
    mask = np.random.default_rng(27).random((3, 1, 24, 30)) < 0.6
    mask[..., 0] = True
    out = acl_fa.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref = _masked_reference(q.reshape(6, 2, 24, 16), k.reshape(6, 2, 30, 16), v.reshape(6, 2, 30, 16),
                            allowed=np.broadcast_to(mask, (2, 3, 2, 24, 30)).reshape(6, 2, 24, 30))
    np.testing.assert_allclose(out.reshape(6, 2, 24, 16).astype(np.float64), ref, atol=TOL)


def test_sdpa_broadcast_key_value_leading_dims_and_value_head_dim():
    q = _randn((2, 4, 20, 24), 28)
    k, v = _randn((1, 2, 33, 24), 29), _randn((1, 2, 33, 40), 30)
    out = acl_fa.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=0.3)
    assert out.shape == (2, 4, 20, 40)
    kb, vb = np.broadcast_to(k, (2, 2, 33, 24)), np.broadcast_to(v, (2, 2, 33, 40))
    np.testing.assert_allclose(out.astype(np.float64), _masked_reference(q, kb, vb, scale=0.3), atol=TOL)


@pytest.mark.parametrize("e", [8, 59, 100])
def test_sdpa_any_head_dim(e):
    q, k, v = _randn((1, 2, 30, e), 31), _randn((1, 2, 45, e), 32), _randn((1, 2, 45, e), 33)
    out = acl_fa.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(out.astype(np.float64), _top_left_reference(q, k, v), atol=TOL)


def test_sdpa_dropout_keeps_the_mean():
    """Dropout in the kernel: each call draws its own pattern; kept values are scaled by
    1/(1-p), so the average output over many calls approaches the undropped one."""
    q, k, v = _randn((1, 2, 16, 16), 34), _randn((1, 2, 16, 16), 35), _randn((1, 2, 16, 16), 36)
    plain = acl_fa.scaled_dot_product_attention(q, k, v).astype(np.float64)
    runs = [acl_fa.scaled_dot_product_attention(q, k, v, dropout_p=0.3).astype(np.float64) for _ in range(40)]
    assert not np.array_equal(runs[0], runs[1])
    assert np.abs(np.mean(runs, axis=0) - plain).mean() < 0.1 * np.abs(plain).mean() + 0.02


def test_flash_attn_func_dropout_returns_the_keep_mask_and_seed():
    """flash_attn_func(dropout_p, return_attn_probs=True) -> (out, lse, keep mask), the tuple
    carrying the seed and offset; the float64 reference with that seed gives out, and the
    backward with them gives the reference gradients."""
    q, k, v, dout = (_randn((1, 48, 2, 32), s) for s in (37, 38, 39, 40))
    res = acl_fa.flash_attn_func(q, k, v, dropout_p=0.25, causal=True, return_attn_probs=True)
    out, lse, keep = res
    assert keep.shape == (1, 2, 48, 48) and keep.dtype == np.uint8
    assert not keep[0, 0][np.triu_indices(48, 1)].any()
    ref, _ = attention_reference(q, k, v, causal=True, layout="BSND", dropout_p=0.25, seed=res.seed,
                                 offset=res.offset)
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=4e-3)
    grads = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, layout="BSND", causal=True, dropout_p=0.25,
                                            seed=res.seed, offset=res.offset)
    ref_grads = acl_fa.attention_reference_backward(dout, q, k, v, causal=True, layout="BSND", dropout_p=0.25,
                                                    seed=res.seed, offset=res.offset)
    for got, want in zip(grads, ref_grads):
        np.testing.assert_allclose(got.astype(np.float64), want, atol=2e-2)


# ---- the packed and varlen faces -----------------------------------------------------------

def test_packed_faces_equal_the_unpacked_call():
    qkv = _randn((2, 40, 3, 4, 32), 41)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    want = acl_fa.flash_attn_func(q, k, v, causal=True)
    np.testing.assert_array_equal(acl_fa.flash_attn_qkvpacked_func(qkv, causal=True), want)
    kv = np.stack([k, v], axis=2)
    np.testing.assert_array_equal(acl_fa.flash_attn_kvpacked_func(q, kv, causal=True), want)


def _varlen_inputs(lq, lk, n, nkv, d, seed):
    cu_q, cu_k = np.cumsum([0] + lq).astype(np.int32), np.cumsum([0] + lk).astype(np.int32)
    q = _randn((cu_q[-1], n, d), seed)
    k, v = _randn((cu_k[-1], nkv, d), seed + 1), _randn((cu_k[-1], nkv, d), seed + 2)
    return q, k, v, cu_q, cu_k


def test_varlen_faces_match_the_reference_and_each_other():
    from acl_fa.reference.attention import attention_reference_varlen
    q, k, v, cu_q, cu_k = _varlen_inputs([30, 1, 50], [40, 20, 50], 4, 2, 32, 42)
    out, lse, probs = acl_fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 50, 50, causal=True, window_size=(16, 0),
                                                    return_attn_probs=True)
    ref, ref_lse = attention_reference_varlen(q, k, v, cu_q, cu_k, causal=True, window=(16, 0))
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=TOL)
    assert lse.shape == (4, cu_q[-1]) and probs is None
    seen = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[seen], ref_lse[seen], atol=1e-4)
    kv = np.stack([k, v], axis=1)
    np.testing.assert_array_equal(
        acl_fa.flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, 50, 50, causal=True, window_size=(16, 0)), out)
    qkv = np.stack([q, q, q], axis=1)
    packed = acl_fa.flash_attn_varlen_qkvpacked_func(qkv, cu_q, 50)
    np.testing.assert_array_equal(packed, acl_fa.flash_attn_varlen_func(q, q, q, cu_q, cu_q, 50, 50))


def _paged(k, v, cu_k, block_size, seed):
    """The keys of each sequence scattered over a shuffled paged cache with spare blocks."""
    lens = np.diff(cu_k)
    per_seq = -(-lens // block_size)
    num_blocks = int(per_seq.sum()) + 3
    order = np.random.default_rng(seed).permutation(num_blocks)
    table = np.zeros((len(lens), int(per_seq.max()) + 1), np.int32)
    kc = np.zeros((num_blocks, block_size) + k.shape[1:], k.dtype)
    vc = np.zeros_like(kc)
    used = 0
    for s, length in enumerate(lens):
        for j in range(per_seq[s]):
            blk = order[used]
            used += 1
            table[s, j] = blk
            rows = slice(cu_k[s] + j * block_size, cu_k[s] + min(length, (j + 1) * block_size))
            kc[blk, :rows.stop - rows.start] = k[rows]
            vc[blk, :rows.stop - rows.start] = v[rows]
    return kc, vc, table


@pytest.mark.parametrize("block_size", [16, 7])
def test_varlen_block_table_reads_the_paged_cache(block_size):
    q, k, v, cu_q, cu_k = _varlen_inputs([5, 12, 1], [37, 12, 70], 4, 1, 48, 43)
    kc, vc, table = _paged(k, v, cu_k, block_size, 44)
    got = acl_fa.flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, 12, 70, causal=True, block_table=table)
    np.testing.assert_array_equal(got, acl_fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 12, 70, causal=True))


@pytest.mark.parametrize("change, error, words", [
    (lambda t, kc: (t.astype(np.float32), kc), InvalidTypeError, "block_table must be an integer"),
    (lambda t, kc: (t[:, :1], kc), InvalidArgumentError, "blocks per sequence"),
    (lambda t, kc: (t[:2], kc), InvalidArgumentError, r"block_table must be \[num_seqs=3"),
    (lambda t, kc: (np.where(t == t[1, 0], 99, t), kc), InvalidArgumentError, r"block_table\[1, 0\] = 99"),
    (lambda t, kc: (np.where(t == t[2, 1], -1, t), kc), InvalidArgumentError, "outside the cache"),
    (lambda t, kc: (t, kc[0]), InvalidArgumentError, "paged cache"),
])
def test_varlen_bad_block_tables_are_refused(change, error, words):
    q, k, v, cu_q, cu_k = _varlen_inputs([5, 12, 1], [37, 12, 70], 4, 1, 48, 45)
    kc, vc, table = _paged(k, v, cu_k, 16, 46)
    table, kc = change(table, kc)
    with pytest.raises(error, match=words):
        acl_fa.flash_attn_varlen_func(q, kc, vc, cu_q, cu_k, 12, 70, block_table=table)


@pytest.mark.parametrize("call, error, words", [
    (lambda x: acl_fa.flash_attn_qkvpacked_func(x[:, :, :2]), InvalidArgumentError, "qkv must be"),
    (lambda x: acl_fa.flash_attn_kvpacked_func(x[:, :, 0], x), InvalidArgumentError, "kv must be"),
    (lambda x: acl_fa.flash_attn_varlen_qkvpacked_func(x[0, :, :2], np.array([0, 16], np.int32), 16),
     InvalidArgumentError, "qkv must be"),
    (lambda x: acl_fa.flash_attn_varlen_func(x[0, :, 0], x[0, :, 1], x[0, :, 2], np.array([0, 16], np.int32),
                                             np.array([0, 16], np.int32), 8, 16), InvalidArgumentError,
     "max_seqlen_q=8"),
    (lambda x: acl_fa.flash_attn_varlen_func(x[0, :, 0], x[0, :, 1], x[0, :, 2], [0, 16.0], [0, 16], 16, 16),
     InvalidTypeError, "cu_seqlens_q"),
])
def test_packed_and_varlen_bad_arguments(call, error, words):
    x = _randn((1, 16, 3, 2, 16), 47)
    with pytest.raises(error, match=words):
        call(x)


def test_signatures_are_flash_attn_2s():
    """Argument names, order and defaults of flash-attn 2.x (flash_attn/flash_attn_interface.py)."""
    import inspect
    from acl_fa import flash_attn_interface as fai
    common = ["dropout_p", "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes", "deterministic",
              "return_attn_probs"]
    expected = {
        "flash_attn_func": ["q", "k", "v"] + common,
        "flash_attn_kvpacked_func": ["q", "kv"] + common,
        "flash_attn_qkvpacked_func": ["qkv"] + common,
        "flash_attn_varlen_func": ["q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"]
        + common + ["block_table"],
        "flash_attn_varlen_kvpacked_func": ["q", "kv", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                            "max_seqlen_k"] + common,
        "flash_attn_varlen_qkvpacked_func": ["qkv", "cu_seqlens", "max_seqlen"] + common,
    }
    defaults = dict(dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None)
    for name, params in expected.items():
        sig = inspect.signature(getattr(fai, name))
        assert list(sig.parameters) == params, name
        for p in sig.parameters.values():
            assert p.kind is p.POSITIONAL_OR_KEYWORD
            if p.name in defaults:
                assert p.default == defaults[p.name], (name, p.name)
        assert getattr(acl_fa, name) is getattr(fai, name)
