"""The int8 KV cache of decode (FlashAttentionDecodeV3, docs/int8.md "Int8 KV cache (decode)"):
per-channel K and per-token V scales, contiguous and paged, GQA, causal Sq > 1, split keys,
appended float k/v quantized into the cache, outlier key channels.

Accuracy (#31 item 4): against float64 attention on the unquantized cache, the kernel's error is at
most 2x the error of the float64 attention over the quantized cache (the quantized reference, which
applies the same quantization exactly), plus one unit in the last place; cosine >= 0.999. And
against that quantized reference itself, the 2x-naive rule of every other op (the kernel computes
the quantized attention as well as a same-precision naive attention would). Bad scales and appends
are refused before any device work."""
from __future__ import annotations

import json

import zlib

import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main
from acl_fa.ops import decode as decode_op
from acl_fa.reference.accuracy import ULP, check_accuracy
from acl_fa.reference.decode import (dequantize_kv_reference, int8_kvcache_reference, kvcache_reference,
                                     quantize_kv_reference)

from test_decode import BF16, F16, make_cache


def _valid(lengths, sq, heads, causal):
    """[B, Sq, N] mask of the query rows that see a key (others give 0 in both)."""
    lengths = np.asarray(lengths)
    rows = np.zeros((len(lengths), sq, heads), bool)
    for b, length in enumerate(lengths):
        for s in range(sq):
            rows[b, s] = length > 0 and (not causal or s + length - sq >= 0)
    return rows


def check_int8(q, caches, quantized, lengths, table, out, lse, *, causal=True, window=None, dtype=F16):
    """The two rules of the module docstring; returns (kernel error, quantized reference's error, cosine)."""
    k_cache, v_cache = caches
    opts = dict(block_table=table, causal=causal, window=window)
    ref, _ = kvcache_reference(np.asarray(q, np.float64), k_cache.astype(np.float64), v_cache.astype(np.float64),
                               lengths, **opts)
    qref, qref_lse = int8_kvcache_reference(q, *quantized, lengths, **opts)
    k_deq, v_deq = dequantize_kv_reference(*quantized)
    naive, _ = kvcache_reference(q, k_deq, v_deq, lengths, precision=dtype, **opts)
    name = "bfloat16" if dtype == BF16 else "float16"
    acc = check_accuracy(out, lse, qref, qref_lse, naive, name, heads=range(q.shape[2]))
    assert acc.ok, acc

    rows = _valid(lengths, q.shape[1], q.shape[2], causal)
    got = np.asarray(out, np.float64)[rows]
    err_kernel = float(np.abs(got - ref[rows]).max())
    err_quant = float(np.abs(qref[rows] - ref[rows]).max())
    floor = ULP[name] * max(1.0, float(np.abs(ref[rows]).max()))
    assert err_kernel <= 2 * err_quant + floor, (err_kernel, err_quant, floor)
    cosine = float((got * ref[rows]).sum() / np.sqrt((got * got).sum() * (ref[rows] ** 2).sum()))
    assert cosine >= 0.999, cosine
    return err_kernel, err_quant, cosine


def _int8_cache(rng, batch, lengths, kv_heads, d, dtype, block_size, outliers=0):
    k, v, table = make_cache(rng, batch, lengths, kv_heads, d, dtype, block_size)
    if outliers:  # a few key channels 20x the rest, as real models have (#31)
        channels = rng.choice(d, outliers, replace=False)
        k = k.astype(np.float32)
        k[..., channels] *= 20.0
        k = k.astype(dtype)
    return (k, v), acl_fa.quantize_kv_cache(k, v), table


# name, B, Sq, N, Nkv, D, lengths, block_size, dtype, causal, window, num_splits, outlier channels
CASES = [
    ("contiguous_gqa4", 2, 1, 8, 2, 128, [300, 1000], None, F16, True, None, 0, 0),
    ("paged_bf16_split3", 2, 1, 8, 2, 64, [2000, 130], 64, BF16, True, None, 3, 0),
    ("paged_block16_gqa1", 3, 1, 4, 4, 128, [100, 33, 260], 16, F16, True, None, 0, 0),
    ("causal_sq4_window", 2, 4, 8, 2, 64, [200, 45], 32, F16, True, (64, 0), 1, 0),
    ("outlier_channels", 2, 1, 16, 2, 128, [1500, 700], None, F16, True, None, 0, 4),
    ("outlier_channels_paged_bf16", 1, 1, 8, 1, 128, [4096], 128, BF16, True, None, 0, 4),
    ("empty_sequence", 2, 1, 4, 1, 64, [0, 90], None, F16, True, None, 0, 0),
    ("row_groups_sq40", 1, 40, 16, 2, 64, [700], 64, F16, True, None, 0, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_int8_cache_matches_references(session, case):
    _, batch, sq, heads, kv_heads, d, lengths, block_size, dtype, causal, window, splits, outliers = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))  # stable across processes (hash() is salted)
    caches, quantized, table = _int8_cache(rng, batch, lengths, kv_heads, d, dtype, block_size, outliers)
    q = rng.standard_normal((batch, sq, heads, d)).astype(dtype)
    kq, vq, ks, vs = quantized
    out, lse = session.flash_attention_with_kvcache(q, kq, vq, k_scale=ks, v_scale=vs, cache_seqlens=np.array(
        lengths, np.int32), block_table=table, causal=causal, window=window, num_splits=splits, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape
    check_int8(q, caches, quantized, lengths, table, out, lse, causal=causal, window=window, dtype=dtype)


def test_quantize_kv_cache_is_the_documented_scheme():
    """acl_fa.quantize_kv_cache equals the reference's quantization, written from docs/int8.md."""
    rng = np.random.default_rng(7)
    (k, v), quantized, _ = _int8_cache(rng, 2, [50, 9], 2, 64, F16, 16, outliers=2)
    expected = quantize_kv_reference(k, v)
    for got, want in zip(quantized, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert quantized[3].shape == (k.shape[0], 2, k.shape[1])  # v_scale [blocks, Nkv, block_size]


@pytest.mark.parametrize("paged,device", [(False, False), (True, False), (True, True)],
                         ids=["contiguous_host", "paged_host", "paged_device"])
def test_appended_tokens_are_quantized_into_the_cache(session, paged, device):
    """k / v (float) appended to an int8 cache enter it quantized with the cache's scheme: keys with
    its channel scales (saturating), values with a new per-token scale written into v_scale at the
    token's slot; attention then sees them (as the float64 reference over the updated cache)."""
    rng = np.random.default_rng(11)
    lengths, s_new, heads, kv_heads, d = [40, 17], 2, 8, 2, 64
    caches, (kq, vq, ks, vs), table = _int8_cache(rng, 2, [n + s_new for n in lengths], kv_heads, d, F16,
                                                  16 if paged else None)
    k_new = rng.standard_normal((2, s_new, kv_heads, d)).astype(F16)
    k_new[0, 0, 0, 0] = 1e3  # far beyond the channel's scale: saturates at 127
    v_new = rng.standard_normal((2, s_new, kv_heads, d)).astype(F16)
    q = rng.standard_normal((2, 1, heads, d)).astype(F16)
    seqlens = np.array(lengths, np.int32)
    args = (kq, vq, vs)
    if device:
        args = tuple(session.to_device(x) for x in args)
    out, lse = session.flash_attention_with_kvcache(q, args[0], args[1], k_scale=ks, v_scale=args[2], k=k_new,
                                                    v=v_new, cache_seqlens=seqlens, block_table=table, return_lse=True)
    if device:
        kq, vq, vs = (x.numpy() for x in args)
        for x in args:
            x.close()
    for b in range(2):
        for t in range(s_new):
            pos = lengths[b] + t
            block, row = (table[b, pos // 16], pos % 16) if paged else (b, pos)
            want_k = np.clip(np.rint(k_new[b, t].astype(np.float64) / ks), -127, 127)
            np.testing.assert_array_equal(kq[block, row], want_k.astype(np.int8))
            amax = np.abs(v_new[b, t].astype(np.float64)).max(axis=-1)
            np.testing.assert_allclose(vs[block, :, row], amax / 127, rtol=1e-6)
            np.testing.assert_array_equal(
                vq[block, row], np.clip(np.rint(v_new[b, t] / vs[block, :, row][:, None].astype(np.float64)),
                                        -127, 127).astype(np.int8))
    assert kq[(table[0, lengths[0] // 16], lengths[0] % 16) if paged else (0, lengths[0])][0, 0] == 127
    ref, ref_lse = int8_kvcache_reference(q, kq, vq, ks, vs, seqlens + s_new, block_table=table)
    k_deq, v_deq = dequantize_kv_reference(kq, vq, ks, vs)
    naive, _ = kvcache_reference(q, k_deq, v_deq, seqlens + s_new, block_table=table, precision=F16)
    acc = check_accuracy(out, lse, ref, ref_lse, naive, "float16", heads=range(heads))
    assert acc.ok, acc


def _bad_args():
    rng = np.random.default_rng(3)
    _, (kq, vq, ks, vs), _ = _int8_cache(rng, 2, [30, 20], 2, 64, F16, None)
    q = rng.standard_normal((2, 1, 4, 64)).astype(F16)
    return dict(q=q, k_cache=kq, v_cache=vq, k_scale=ks, v_scale=vs, cache_seqlens=np.array([30, 20], np.int32))


def _with(**changes):
    def make():
        args = _bad_args()
        for key, value in changes.items():
            args[key] = value(args) if callable(value) else value
        return args
    return make


def _zero_k_scale(args):
    ks = args["k_scale"].copy()
    ks[1, 5] = 0.0
    return ks


def _nan_v_scale(at):
    def change(args):
        vs = args["v_scale"].copy()
        vs[at] = np.nan
        return vs
    return change


BAD = [
    ("k_scale_missing", _with(k_scale=None), acl_fa.InvalidArgumentError, "k_scale is required"),
    ("k_scale_shape", _with(k_scale=lambda a: a["k_scale"][:, :32]), acl_fa.InvalidArgumentError,
     r"k_scale must have shape \(2, 64\)"),
    ("v_scale_layout", _with(v_scale=lambda a: a["v_scale"].transpose(0, 2, 1)), acl_fa.InvalidArgumentError,
     r"v_scale must have shape \(2, 2, 30\)"),
    ("v_scale_dtype", _with(v_scale=lambda a: a["v_scale"].astype(np.float16)), acl_fa.InvalidTypeError,
     "v_scale must be float32"),
    ("k_scale_zero", _with(k_scale=_zero_k_scale), acl_fa.InvalidArgumentError, r"k_scale\[1, 5\] = 0.0"),
    ("v_scale_nan_used", _with(v_scale=_nan_v_scale((1, 0, 19))), acl_fa.InvalidArgumentError,
     r"v_scale\[1, 0, 19\] = nan.*finite and > 0"),
    ("int8_appends", _with(k=lambda a: np.zeros((2, 1, 2, 64), np.int8), v=lambda a: np.zeros((2, 1, 2, 64), np.int8)),
     acl_fa.InvalidTypeError, "quantized with the cache's scheme"),
    ("mixed_cache_dtypes", _with(v_cache=lambda a: a["v_cache"].astype(F16)), acl_fa.InvalidTypeError,
     "both be int8"),
    ("scales_with_float_cache", _with(k_cache=lambda a: a["k_cache"].astype(F16),
                                      v_cache=lambda a: a["v_cache"].astype(F16)),
     acl_fa.InvalidArgumentError, "k_scale describes an int8 cache"),
    ("head_dim_16", _with(q=np.zeros((2, 1, 4, 16), F16), k_cache=np.zeros((2, 30, 2, 16), np.int8),
                          v_cache=np.zeros((2, 30, 2, 16), np.int8), k_scale=np.ones((2, 16), np.float32)),
     acl_fa.InvalidArgumentError, "multiple of 32"),
]


@pytest.mark.parametrize("name,make,error,match", BAD, ids=[b[0] for b in BAD])
def test_bad_int8_inputs_are_refused_before_device_work(session, name, make, error, match):
    args = make()
    q, k_cache, v_cache = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    before = k_cache.copy()
    with pytest.raises(error, match=match):
        session.flash_attention_with_kvcache(q, k_cache, v_cache, **args)
    np.testing.assert_array_equal(k_cache, before)  # nothing appended


def test_unused_slots_may_hold_any_scale(session):
    """v_scale slots past a sequence's length are never read: NaN there is fine."""
    args = _bad_args()
    args["v_scale"][1, :, 25:] = np.nan  # sequence 1 holds 20 tokens
    q, k_cache, v_cache = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    out = session.flash_attention_with_kvcache(q, k_cache, v_cache, **args)
    assert np.isfinite(out.astype(np.float32)).all()


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
def test_int8_cache_on_chips_without_the_decode_kernel_is_refused(sim_only, soc):
    from conftest import run_python

    result = run_python("""
        import json, numpy as np, acl_fa
        q = np.zeros((1, 1, 4, 64), np.float16)
        k = np.zeros((1, 32, 2, 64), np.int8)
        with acl_fa.Session() as s:
            try:
                s.flash_attention_with_kvcache(q, k, k, cache_seqlens=16, k_scale=np.ones((2, 64), np.float32),
                                               v_scale=np.ones((1, 2, 32), np.float32))
                print(json.dumps({"error": None}))
            except acl_fa.InvalidArgumentError as exc:
                print(json.dumps({"error": str(exc)}))
    """, ACL_FA_SIM_SOC=soc)
    assert result["error"] is not None and "int8" in result["error"] and "Atlas A2/A3" in result["error"], result


def test_int8_calls_run_on_v3_and_float_calls_keep_their_entries():
    p = decode_op._validated(((1, 1, 4, 64), F16), (((1, 32, 2, 64), np.dtype(np.int8)),) * 2, None, None,
                             (None, 2**31 - 1, 0, 0))
    assert p.kv_int8 and decode_op.op_for(p) is decode_op.FLASH_ATTENTION_DECODE_V3
    f = decode_op._validated(((1, 1, 4, 64), F16), (((1, 32, 2, 64), F16),) * 2, None, None, (None, 2**31 - 1, 0, 0))
    assert not f.kv_int8 and decode_op.op_for(f) is decode_op.FLASH_ATTENTION_DECODE


@pytest.mark.parametrize("args", [["--decode", "--seq-kv", "300"], ["--paged", "--block-size", "32", "--seq-kv", "200",
                                                                    "--batch", "2", "--dtype", "bfloat16"]])
def test_run_decode_int8_cache_json(sim_only, args):
    """`acl-fa run --decode --kv-cache-dtype int8`: the check (against the float64 attention over what
    the int8 cache holds) passes, K/V read once as int8 (with the V scales), and the cache's device
    bytes are half the float cache's plus its scales (#31's memory goal)."""
    result = CliRunner().invoke(main, ["run", *args, "--seq", "1", "--heads", "8", "--kv-heads", "2", "--head-dim",
                                       "64", "--steps", "2", "--kv-cache-dtype", "int8", "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    data = json.loads(result.stdout)
    assert data["check"]["ok"] and data["kv_cache_dtype"] == "int8"
    batch, kv_heads, d = data["batch"], 2, 64
    slots = data["float_cache_bytes"] // (2 * 2 * kv_heads * d)  # rows x slots of the cache
    scales = kv_heads * d * 4 + slots * kv_heads * 4
    assert data["cache_device_bytes"] == data["float_cache_bytes"] // 2 + scales
    held = 2 * batch * (data["seq_kv"] + 2) * kv_heads * d
    assert data["kv_read_bytes"] <= 1.05 * (held + batch * (data["seq_kv"] + 2) * kv_heads * 4)
    assert data["modeled_step_us"] > 0


def test_kv_cache_dtype_needs_decode(sim_only):
    result = CliRunner().invoke(main, ["run", "--seq", "64", "--kv-cache-dtype", "int8"])
    assert result.exit_code != 0 and "--kv-cache-dtype is for --decode / --paged" in result.output


@pytest.mark.parametrize("block_size", [None, 32])
def test_left_padding_hides_keys_whose_scales_may_be_anything(session, block_size):
    """cache_leftpad with an int8 cache: an int8 chunk starts at the first visible key rounded down
    to 8 (its scales then land aligned in UB), so up to 7 padding keys are read; they are masked
    and their scales zeroed, so NaN scales there change nothing (the reference never sees them)."""
    rng = np.random.default_rng(5)
    lengths, pads = [300, 150], [13, 77]
    caches, (kq, vq, ks, vs), table = _int8_cache(rng, 2, lengths, 2, 64, F16, block_size)
    for b, pad in enumerate(pads):  # the padding's stored scales: NaN
        for j in range(pad):
            block, row = (table[b, j // block_size], j % block_size) if block_size else (b, j)
            vs[block, :, row] = np.nan
    q = rng.standard_normal((2, 1, 8, 64)).astype(F16)
    seqlens = np.array(lengths, np.int32)
    leftpad = np.array(pads, np.int32)
    out, lse = session.flash_attention_with_kvcache(q, kq, vq, k_scale=ks, v_scale=vs, cache_seqlens=seqlens,
                                                    block_table=table, cache_leftpad=leftpad, return_lse=True)
    opts = dict(block_table=table, cache_leftpad=leftpad)
    vs_clean = np.where(np.isfinite(vs), vs, 1.0).astype(np.float32)
    ref, ref_lse = int8_kvcache_reference(q, kq, vq, ks, vs_clean, seqlens, **opts)
    k_deq, v_deq = dequantize_kv_reference(kq, vq, ks, vs_clean)
    naive, _ = kvcache_reference(q, k_deq, v_deq, seqlens, precision=F16, **opts)
    acc = check_accuracy(out, lse, ref, ref_lse, naive, "float16", heads=range(8))
    assert acc.ok, acc
