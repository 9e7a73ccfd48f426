"""Score modifiers in decode (FlashAttentionDecodeV2): softcap, ALiBi and attention sinks against the
float64 reference under the 2x-naive rule -- contiguous and paged, GQA, causal Sq > 1, windows,
row groups, one piece per group and groups split over the vector cores (the sink must join each
row's denominator exactly once, however many pieces), empty sequences; bad modifiers refused
before any device work."""
from __future__ import annotations

import dataclasses

import zlib

import numpy as np
import pytest

import acl_fa
from acl_fa.ops import decode as decode_op
from acl_fa.reference.accuracy import check_accuracy
from acl_fa.reference.decode import kvcache_reference

from test_decode import F16, BF16, make_cache


def _mods(rng, batch, heads, which):
    mods = {}
    if "softcap" in which:
        mods["softcap"] = 2.5
    if "alibi" in which:
        slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)  # ALiBi's geometric slopes
        mods["alibi_slopes"] = (slopes if "alibi_bn" not in which
                                else slopes * rng.uniform(0.5, 1.5, (batch, 1))).astype(np.float32)
    if "sinks" in which:  # of the rows' own scale (q is 3x: the largest scores reach about 10), so
        # that a sink counted once per piece instead of once per row moves the result
        mods["sinks"] = rng.uniform(4.0, 10.0, heads).astype(np.float32)
    return mods


# name, B, Sq, N, Nkv, D, lengths, block_size, dtype, causal, window, num_splits, modifiers
CASES = [
    ("softcap_contiguous", 2, 1, 8, 2, 64, [300, 77], None, F16, True, None, 0, "softcap"),
    ("alibi_paged_split", 2, 1, 8, 2, 64, [2000, 130], 128, F16, True, None, 0, "alibi"),
    ("alibi_bn_causal_sq4", 2, 4, 8, 2, 64, [200, 45], None, BF16, True, None, 1, "alibi alibi_bn"),
    ("alibi_noncausal_window", 2, 2, 4, 1, 64, [300, 90], 64, F16, False, (64, 16), 0, "alibi"),
    ("sinks_one_piece", 3, 1, 8, 2, 64, [100, 33, 0], None, F16, True, None, 1, "sinks"),
    ("sinks_five_splits", 2, 1, 8, 2, 128, [3000, 129], 128, F16, True, None, 5, "sinks"),
    ("sinks_auto_split", 1, 1, 16, 2, 64, [8192], None, BF16, True, None, 0, "sinks"),
    ("all_three_paged_split", 2, 2, 8, 2, 64, [1500, 300], 64, F16, True, None, 3, "softcap alibi sinks"),
    ("all_three_row_groups", 1, 40, 16, 2, 64, [500], None, F16, True, None, 0, "softcap alibi sinks"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_score_mods_match_reference(session, case):
    _, batch, sq, heads, kv_heads, d, lengths, block_size, dtype, causal, window, splits, which = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))  # stable across processes (hash() is salted)
    k_cache, v_cache, table = make_cache(rng, batch, lengths, kv_heads, d, dtype, block_size)
    q = (3.0 * rng.standard_normal((batch, sq, heads, d))).astype(dtype)  # large scores: the cap bites
    mods = _mods(rng, batch, heads, which)
    seqlens = np.array(lengths, np.int32)
    out, lse = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, block_table=table,
                                                    causal=causal, window=window, num_splits=splits,
                                                    return_lse=True, **mods)
    kwargs = dict(block_table=table, causal=causal, window=window, **mods)
    ref, ref_lse = kvcache_reference(q, k_cache, v_cache, seqlens, **kwargs)
    naive, _ = kvcache_reference(q, k_cache, v_cache, seqlens, precision=dtype, **kwargs)
    acc = check_accuracy(out, lse, ref, ref_lse, naive, "bfloat16" if dtype == BF16 else "float16",
                         heads=range(heads))
    assert acc.ok, acc
    assert acc.lse_max_error < 2e-3, acc
    if "sinks" in which and 0 in lengths:  # a sequence without keys: O = 0, LSE = the sink
        b = lengths.index(0)
        assert not out[b].astype(np.float32).any()
        np.testing.assert_allclose(lse[b], np.repeat(mods["sinks"][:, None], sq, axis=1), rtol=1e-6)


def test_each_modifier_changes_the_result(session):
    """The modifiers reach the kernel: each alone moves the output far beyond the tolerance."""
    rng = np.random.default_rng(11)
    k_cache, v_cache, _ = make_cache(rng, 1, [600], 2, 64, F16)
    q = (3.0 * rng.standard_normal((1, 1, 8, 64))).astype(F16)
    plain = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=600).astype(np.float64)
    for which in ("softcap", "alibi", "sinks"):
        mods = _mods(rng, 1, 8, which)
        out = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=600,
                                                   **mods).astype(np.float64)
        assert np.abs(out - plain).max() > 0.02, which


def _args(rng):
    k_cache, v_cache, _ = make_cache(rng, 2, [40, 20], 2, 32, F16)
    return dict(q=rng.standard_normal((2, 1, 4, 32)).astype(F16), k_cache=k_cache, v_cache=v_cache,
                cache_seqlens=np.array([40, 20], np.int32))


BAD = [
    ("softcap_negative", dict(softcap=-1.0), acl_fa.InvalidArgumentError, "softcap must be a finite number >= 0"),
    ("softcap_nan", dict(softcap=float("nan")), acl_fa.InvalidArgumentError, "softcap must be a finite"),
    ("softcap_str", dict(softcap="1"), acl_fa.InvalidTypeError, "softcap must be a real number"),
    ("slopes_shape", dict(alibi_slopes=np.ones(3, np.float32)), acl_fa.InvalidArgumentError,
     r"alibi_slopes must have shape \(num_heads,\) = \(4,\) or \(batch, num_heads\) = \(2, 4\)"),
    ("slopes_int", dict(alibi_slopes=np.ones(4, np.int32)), acl_fa.InvalidTypeError, "floating-point"),
    ("slopes_inf", dict(alibi_slopes=np.array([1, np.inf, 1, 1], np.float32)), acl_fa.InvalidArgumentError,
     "alibi_slopes must be finite"),
    ("sinks_shape", dict(sinks=np.ones((2, 4), np.float32)), acl_fa.InvalidArgumentError,
     r"sinks must have shape \(num_heads,\) = \(4,\)"),
    ("sinks_nan", dict(sinks=np.array([0, np.nan, 0, 0], np.float32)), acl_fa.InvalidArgumentError,
     "sinks must be finite"),
]


@pytest.mark.parametrize("name,extra,error,message", BAD, ids=[b[0] for b in BAD])
def test_bad_modifiers_are_refused_before_device_work(session, backend, name, extra, error, message):
    args = _args(np.random.default_rng(5))
    q, k_cache, v_cache = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    before = acl_fa.runtime.session.live_counts(backend) if backend.name == "sim" else None
    with pytest.raises(error, match=message):
        session.flash_attention_with_kvcache(q, k_cache, v_cache, **args, **extra)
    if before is not None:
        assert acl_fa.runtime.session.live_counts(backend) == before


def test_calls_without_modifiers_keep_the_v1_entry():
    p = decode_op.DecodeProblem(1, 1, 8, 2, 64, np.dtype(np.float16), 1, 128, 1, False, 0.125, 2**31 - 1, 0, 0)
    assert decode_op.op_for(p) is decode_op.FLASH_ATTENTION_DECODE
    for mods in (dict(softcap=1.0), dict(alibi=True), dict(sinks=True)):
        assert decode_op.op_for(dataclasses.replace(p, **mods)) is decode_op.FLASH_ATTENTION_DECODE_V2
