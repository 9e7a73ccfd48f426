"""flash-attn's flash_attn_with_kvcache (acl_fa.ops.decode_compat) against the float64 decode
reference under the 2x-naive rule: rotary (interleaved or not, causal or not, contiguous and
paged), cache_batch_idx, cache_leftpad, flash-attn's defaults, and a table of bad inputs each
refused before any device work."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import acl_fa
from acl_fa.ops.decode_compat import flash_attn_with_kvcache
from acl_fa.reference.accuracy import check_accuracy
from acl_fa.reference.decode import kvcache_reference, rotary_reference

from test_decode import F16, BF16, make_cache, with_changes

# flash-attn's own signature (flash_attn/flash_attn_interface.py, 2.x)
FLASH_ATTN_SIGNATURE = (
    "(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None, "
    "cache_batch_idx=None, cache_leftpad=None, block_table=None, softmax_scale=None, causal=False, "
    "window_size=(-1, -1), softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0, "
    "return_softmax_lse=False)")


def test_signature_is_flash_attns():
    import inspect
    assert str(inspect.signature(flash_attn_with_kvcache)) == FLASH_ATTN_SIGNATURE


def _check(out, lse, ref_args, ref_kwargs, naive_args, dtype):
    ref, ref_lse = kvcache_reference(*ref_args, **ref_kwargs)
    naive, naive_lse = kvcache_reference(*naive_args, **ref_kwargs, precision=dtype)
    name = "bfloat16" if dtype == BF16 else "float16"
    acc = check_accuracy(out, lse, ref, ref_lse, naive, name, heads=range(out.shape[2]))
    assert acc.ok, acc
    # The LSE under the same rule as the output: within 2x the naive same-dtype LSE's error (the
    # inputs' rounding to bfloat16 alone moves it past 1e-3 for some draws), never looser than 1e-3.
    finite = np.isfinite(ref_lse)
    naive_lse_error = np.abs(naive_lse[finite] - ref_lse[finite]).max(initial=0)
    assert np.abs(lse[finite] - ref_lse[finite]).max(initial=0) <= max(2 * naive_lse_error, 1e-3), acc


def _rotary_tables(rng, positions, rot, dtype):
    angle = rng.random((positions, rot // 2)) * 2 * np.pi
    return np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)


# name, B, Sq, N, Nkv, D, lengths, block_size, dtype, causal, window, s_new, rotary_dim, interleaved
ROTARY = [
    ("interleaved_causal_contiguous", 2, 1, 8, 2, 64, [17, 300], None, F16, True, (-1, -1), 1, 64, True),
    ("neox_causal_paged_sq3", 3, 3, 8, 2, 64, [60, 200, 5], 32, F16, True, (-1, -1), 3, 32, False),
    ("interleaved_noncausal_sq2", 2, 2, 4, 1, 128, [90, 33], None, BF16, False, (-1, -1), 2, 64, True),
    ("neox_local_window", 2, 2, 4, 2, 64, [400, 100], 64, F16, False, (50, 0), 2, 64, False),
]


@pytest.mark.parametrize("case", ROTARY, ids=[c[0] for c in ROTARY])
def test_rotary_q_and_appended_k_as_flash_attn(backend, case):
    _, batch, sq, heads, kv_heads, d, lengths, block_size, dtype, causal, window, s_new, rot, inter = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))  # stable across processes (hash() is salted)
    total = [length + s_new for length in lengths]
    k_cache, v_cache, table = make_cache(rng, batch, total, kv_heads, d, dtype, block_size)
    q = rng.standard_normal((batch, sq, heads, d)).astype(dtype)
    k_new = rng.standard_normal((batch, s_new, kv_heads, d)).astype(dtype)
    v_new = rng.standard_normal((batch, s_new, kv_heads, d)).astype(dtype)
    cos, sin = _rotary_tables(rng, max(total) + sq + 3, rot, dtype)
    seqlens = np.array(lengths, np.int32)
    before_k = k_cache.copy()
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin,
                                       cache_seqlens=seqlens, block_table=table, causal=causal, window_size=window,
                                       rotary_interleaved=inter, return_softmax_lse=True)
    # flash-attn's positions: k at cache_seqlens + t; q at cache_seqlens + s if causal or local, else all
    # of q at cache_seqlens (tests/test_flash_attn.py, test_flash_attn_kvcache)
    k_pos = seqlens[:, None] + np.arange(s_new)
    local = causal or window != (-1, -1)
    q_pos = seqlens[:, None] + (np.arange(sq) if local else np.zeros(sq, int))
    q64 = rotary_reference(q, cos, sin, q_pos, interleaved=inter)
    k64 = rotary_reference(k_new, cos, sin, k_pos, interleaved=inter)
    # the caller's cache holds the rotated keys (in its dtype) and the unrotated values
    ref_k, ref_v, naive_k = before_k.astype(np.float64), v_cache.astype(np.float64), before_k.copy()
    for b, length in enumerate(lengths):
        for t in range(s_new):
            pos = length + t
            slot = (b, pos) if table is None else (table[b, pos // block_size], pos % block_size)
            ref_k[slot], ref_v[slot] = k64[b, t], v_new[b, t]
            naive_k[slot] = k64[b, t].astype(dtype)
            np.testing.assert_allclose(k_cache[slot].astype(np.float64), k64[b, t], rtol=0,
                                       atol=4 * float(np.abs(k64).max()) * (2.0 ** -7 if dtype == BF16 else 2.0 ** -10))
    kwargs = dict(block_table=table, causal=causal, window=window)
    _check(out, lse, (q64, ref_k, ref_v, np.array(total)), kwargs,
           (q64.astype(dtype), naive_k, v_cache, np.array(total)), dtype)


def test_cache_batch_idx_reads_and_appends_the_named_rows(backend):
    rng = np.random.default_rng(3)
    batch, cache_batch, heads, kv_heads, d = 3, 5, 8, 2, 64
    lengths = [40, 7, 130]
    k_cache, v_cache, _ = make_cache(rng, cache_batch, [140] * cache_batch, kv_heads, d, F16)
    idx = np.array([4, 0, 2], np.int32)
    q = rng.standard_normal((batch, 2, heads, d)).astype(F16)
    k_new = rng.standard_normal((batch, 2, kv_heads, d)).astype(F16)
    v_new = rng.standard_normal((batch, 2, kv_heads, d)).astype(F16)
    untouched = k_cache[[1, 3]].copy()
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=np.array(lengths, np.int32),
                                       cache_batch_idx=idx, causal=True, return_softmax_lse=True)
    for b, row in enumerate(idx):
        np.testing.assert_array_equal(k_cache[row, lengths[b]:lengths[b] + 2], k_new[b])
        np.testing.assert_array_equal(v_cache[row, lengths[b]:lengths[b] + 2], v_new[b])
    np.testing.assert_array_equal(k_cache[[1, 3]].view(np.uint16), untouched.view(np.uint16))
    total = np.array(lengths) + 2
    kwargs = dict(causal=True, cache_batch_idx=idx)
    _check(out, lse, (q, k_cache, v_cache, total), kwargs, (q, k_cache, v_cache, total), F16)


@pytest.mark.parametrize("append", [0, 2], ids=["no_append", "append2"])
def test_cache_leftpad_hides_the_first_keys(backend, append):
    rng = np.random.default_rng(4 + append)
    batch, heads, kv_heads, d, sq = 3, 4, 2, 64, 2
    ends = [50, 300, 20]
    leftpad = np.array([10, 0, 20], np.int32)       # the last sequence holds only its new tokens
    k_cache, v_cache, _ = make_cache(rng, batch, [320] * batch, kv_heads, d, F16)
    for b, pad in enumerate(leftpad):  # the padding may hold anything: it must never be read
        k_cache[b, :pad] = np.nan
        v_cache[b, :pad] = np.nan
    q = rng.standard_normal((batch, sq, heads, d)).astype(F16)
    new = {}
    if append:
        new = dict(k=rng.standard_normal((batch, append, kv_heads, d)).astype(F16),
                   v=rng.standard_normal((batch, append, kv_heads, d)).astype(F16))
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, **new, cache_seqlens=np.array(ends, np.int32),
                                       cache_leftpad=leftpad, causal=True, window_size=(100, -1),
                                       return_softmax_lse=True)
    if append:
        for b, end in enumerate(ends):
            np.testing.assert_array_equal(k_cache[b, end:end + append], new["k"][b])
    total = np.array(ends) + append
    kwargs = dict(causal=True, window=(100, -1), cache_leftpad=leftpad)
    _check(out, lse, (q, k_cache, v_cache, total), kwargs, (q, k_cache, v_cache, total), F16)
    if not append:  # sequence 2 sees no key at all
        assert not out[2].astype(np.float32).any() and np.isneginf(lse[2]).all()


def test_alibi_and_softcap_with_leftpad_and_batch_idx(backend):
    """flash-attn's alibi_slopes [B, N] and softcap through the compat face, with left padding
    (ALiBi's distance counts from the sequence's end) and cache_batch_idx."""
    rng = np.random.default_rng(12)
    k_cache, v_cache, _ = make_cache(rng, 4, [200] * 4, 2, 64, F16)
    q = (3.0 * rng.standard_normal((2, 2, 8, 64))).astype(F16)
    slopes = (2.0 ** -np.arange(1, 9) * rng.uniform(0.5, 1.5, (2, 1))).astype(np.float32)
    ends, leftpad, idx = np.array([150, 90], np.int32), np.array([30, 5], np.int32), np.array([3, 1], np.int32)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=ends, cache_batch_idx=idx,
                                       cache_leftpad=leftpad, causal=True, softcap=4.0, alibi_slopes=slopes,
                                       return_softmax_lse=True)
    kwargs = dict(causal=True, softcap=4.0, alibi_slopes=slopes, cache_batch_idx=idx, cache_leftpad=leftpad)
    _check(out, lse, (q, k_cache, v_cache, ends), kwargs, (q, k_cache, v_cache, ends), F16)


def test_flash_attn_defaults_noncausal_and_full_cache(backend):
    """causal defaults to False (flash-attn's), cache_seqlens None = every sequence fills the cache,
    softmax_scale defaults to D ** -0.5; the result is out alone."""
    rng = np.random.default_rng(8)
    k_cache, v_cache, _ = make_cache(rng, 2, [96, 96], 2, 64, F16)
    q = rng.standard_normal((2, 4, 4, 64)).astype(F16)
    out = flash_attn_with_kvcache(q, k_cache, v_cache)
    assert isinstance(out, np.ndarray) and out.shape == q.shape
    ref, ref_lse = kvcache_reference(q, k_cache, v_cache, [96, 96], causal=False)
    naive, _ = kvcache_reference(q, k_cache, v_cache, [96, 96], causal=False, precision=F16)
    acc = check_accuracy(out, ref_lse, ref, ref_lse, naive, "float16", heads=range(4))  # out only: no LSE to check
    assert acc.ok, acc
    causal_ref, _ = kvcache_reference(q, k_cache, v_cache, [96, 96], causal=True)
    assert np.abs(causal_ref - ref).max() > 10 * acc.tolerance  # the default is visibly not causal


def _args(rng):
    q = rng.standard_normal((2, 1, 4, 32)).astype(F16)
    k_cache, v_cache, _ = make_cache(rng, 3, [48, 48, 48], 2, 32, F16)
    cos, sin = _rotary_tables(rng, 48, 32, F16)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, k=np.zeros((2, 1, 2, 32), F16),
                v=np.zeros((2, 1, 2, 32), F16), rotary_cos=cos, rotary_sin=sin,
                cache_seqlens=np.array([40, 20], np.int32), cache_batch_idx=np.array([2, 0], np.int32))


BAD = [
    ("cos_too_short", with_changes(rotary_cos=lambda a: a["rotary_cos"][:40], rotary_sin=lambda a: a["rotary_sin"][:40]),
     acl_fa.InvalidArgumentError, r"have 40 positions .* need at least 41 rows"),
    ("cos_without_sin", with_changes(rotary_sin=None), acl_fa.InvalidArgumentError, "given together"),
    ("cos_sin_shapes_differ", with_changes(rotary_sin=lambda a: a["rotary_sin"][:, :8]), acl_fa.InvalidArgumentError,
     "same shape"),
    ("rotary_dim_not_16", with_changes(rotary_cos=lambda a: a["rotary_cos"][:, :4], rotary_sin=lambda a: a["rotary_sin"][:, :4]),
     acl_fa.InvalidArgumentError, "rotary_dim=8; it must be a multiple of 16"),
    ("rotary_dim_beyond_d", with_changes(rotary_cos=lambda a: np.ones((48, 32), F16), rotary_sin=lambda a: np.ones((48, 32), F16)),
     acl_fa.InvalidArgumentError, "rotary_dim=64.* <= headdim=32"),
    ("rotary_without_k", with_changes(k=None, v=None), acl_fa.InvalidArgumentError, "need the new k and v"),
    ("cos_int", with_changes(rotary_cos=lambda a: np.ones((48, 16), np.int32)), acl_fa.InvalidTypeError, "floating-point"),
    ("cos_nan", with_changes(rotary_cos=lambda a: np.full((48, 16), np.nan, F16)), acl_fa.InvalidArgumentError, "finite"),
    ("batch_idx_out_of_range", with_changes(cache_batch_idx=np.array([3, 0], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_batch_idx\[0\] = 3 is out of range: k_cache holds 3 sequences"),
    ("batch_idx_negative", with_changes(cache_batch_idx=np.array([1, -1], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_batch_idx\[1\] = -1 is out of range"),
    ("batch_idx_repeated_with_append", with_changes(cache_batch_idx=np.array([1, 1], np.int32)), acl_fa.InvalidArgumentError,
     "twice while k/v are appended"),
    ("batch_idx_shape", with_changes(cache_batch_idx=np.array([1], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_batch_idx must have shape \(2,\)"),
    ("batch_idx_float", with_changes(cache_batch_idx=np.array([1.0, 0.0])), acl_fa.InvalidTypeError, "integer array"),
    ("leftpad_beyond_cache", with_changes(cache_leftpad=np.array([41, 0], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_leftpad\[0\] = 41 must be in \[0, cache_seqlens\[0\] = 40\]"),
    ("leftpad_negative", with_changes(cache_leftpad=np.array([0, -2], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_leftpad\[1\] = -2"),
    ("batch_idx_paged", with_changes(k_cache=lambda a: a["k_cache"][:, :16], v_cache=lambda a: a["v_cache"][:, :16],
                             block_table=np.array([[0, 1, 2], [2, 1, 0]], np.int32), rotary_cos=None,
                             rotary_sin=None, cache_seqlens=np.array([8, 8], np.int32)),
     acl_fa.InvalidArgumentError, "cache_batch_idx indexes a contiguous cache"),
    ("append_without_seqlens", with_changes(cache_seqlens=None), acl_fa.InvalidArgumentError, "cache_seqlens is required"),
    ("append_overflows", with_changes(cache_seqlens=np.array([48, 20], np.int32), rotary_cos=None, rotary_sin=None),
     acl_fa.InvalidArgumentError, "exceeds the cache capacity S_max=48"),
    ("window_size_one_value", with_changes(window_size=(5,)), acl_fa.InvalidArgumentError, "window_size must be a pair"),
    ("window_size_float", with_changes(window_size=(5.0, 0)), acl_fa.InvalidTypeError, "pair of integers"),
    ("alibi_wrong_shape", with_changes(alibi_slopes=np.ones(3, np.float32)), acl_fa.InvalidArgumentError,
     "alibi_slopes must have shape"),
    ("softcap_negative", with_changes(softcap=-1.0), acl_fa.InvalidArgumentError, "softcap must be a finite number >= 0"),
    ("interleaved_not_bool", with_changes(rotary_interleaved=1), acl_fa.InvalidTypeError, "rotary_interleaved must be a bool"),
]


@pytest.mark.parametrize("name,edit,error,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_before_device_work(backend, name, edit, error, message):
    args = edit(_args(np.random.default_rng(5)))
    q, k_cache, v_cache = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    k_before = k_cache.copy()
    with pytest.raises(error, match=message):
        flash_attn_with_kvcache(q, k_cache, v_cache, **args)
    np.testing.assert_array_equal(k_cache.view(np.uint16), k_before.view(np.uint16))  # nothing appended


def test_leftpad_with_device_and_paged_caches(backend):
    """cache_leftpad is the kernel's (FlashAttentionDecodeV2): DeviceArray caches and paged caches
    take it too (flash-attn refuses paged + leftpad; acl-fa accepts it)."""
    rng = np.random.default_rng(9)
    k_cache, v_cache, table = make_cache(rng, 2, [200, 130], 2, 64, F16, 32)
    q = rng.standard_normal((2, 2, 8, 64)).astype(F16)
    ends, leftpad = np.array([200, 130], np.int32), np.array([70, 129], np.int32)
    for b, pad in enumerate(leftpad):  # the padding may hold anything: it must never be read
        for j in range(pad):
            k_cache[table[b, j // 32], j % 32] = np.nan
            v_cache[table[b, j // 32], j % 32] = np.nan
    with acl_fa.Session(backend=backend.name) as session:
        kd, vd = acl_fa.DeviceArray.from_host(session, k_cache), acl_fa.DeviceArray.from_host(session, v_cache)
        out, lse = flash_attn_with_kvcache(q, kd, vd, cache_seqlens=ends, block_table=table, cache_leftpad=leftpad,
                                           causal=True, return_softmax_lse=True)
        kd.close()
        vd.close()
    kwargs = dict(block_table=table, causal=True, cache_leftpad=leftpad)
    _check(out, lse, (q, k_cache, v_cache, ends), kwargs, (q, k_cache, v_cache, ends), F16)
