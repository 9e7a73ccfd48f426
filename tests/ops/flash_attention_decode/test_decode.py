"""acl_fa.flash_attention_with_kvcache (the FlashAttentionDecode op) against the float64
reference under the 2x-naive rule: contiguous and paged caches (shuffled block tables), mixed
lengths, appended k/v, causal with Sq > 1, windows, GQA 1/4/8, float16/bfloat16, split and
unsplit keys; unused cache slots hold NaN, which must never reach a result."""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import check_accuracy
from acl_fa.reference.decode import kvcache_reference

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


def make_cache(rng, batch, lengths, kv_heads, d, dtype, block_size=None, extra_blocks=3):
    """Caches holding random keys/values in each sequence's first `lengths[b]` slots and NaN
    everywhere else. Contiguous [B, S_max, Nkv, D] when block_size is None, else paged with a
    shuffled block table (and spare blocks no sequence uses)."""
    capacity = max(max(lengths), 1)
    if block_size is None:
        k = np.full((batch, capacity, kv_heads, d), np.nan, np.float32)
        v = np.full_like(k, np.nan)
        for b, length in enumerate(lengths):
            k[b, :length] = rng.standard_normal((length, kv_heads, d))
            v[b, :length] = rng.standard_normal((length, kv_heads, d))
        return k.astype(dtype), v.astype(dtype), None
    per_seq = -(-capacity // block_size)
    num_blocks = batch * per_seq + extra_blocks
    table = rng.permutation(num_blocks)[:batch * per_seq].reshape(batch, per_seq).astype(np.int32)
    k = np.full((num_blocks, block_size, kv_heads, d), np.nan, np.float32)
    v = np.full_like(k, np.nan)
    for b, length in enumerate(lengths):
        for j in range(length):
            block, row = table[b, j // block_size], j % block_size
            k[block, row] = rng.standard_normal((kv_heads, d))
            v[block, row] = rng.standard_normal((kv_heads, d))
    return k.astype(dtype), v.astype(dtype), table


def check(q, k_cache, v_cache, lengths, table, out, lse, *, causal, window=None, dtype=F16):
    ref, ref_lse = kvcache_reference(q, k_cache, v_cache, lengths, block_table=table, causal=causal, window=window)
    naive, _ = kvcache_reference(q, k_cache, v_cache, lengths, block_table=table, causal=causal, window=window,
                                 precision=dtype)
    name = "bfloat16" if dtype == BF16 else "float16"
    acc = check_accuracy(out, lse, ref, ref_lse, naive, name, heads=range(q.shape[2]))
    assert acc.ok, acc
    assert acc.lse_max_error < 1e-3, acc
    return acc


# name, B, Sq, N, Nkv, D, lengths, block_size, dtype, causal, window, num_splits, s_new
CASES = [
    ("decode_gqa4_contiguous", 2, 1, 8, 2, 64, [17, 300], None, F16, True, None, 0, 0),
    ("mixed_lengths_paged", 4, 1, 8, 1, 64, [1, 17, 4096, 32768], 128, F16, True, None, 0, 0),
    ("gqa1_bf16_paged", 3, 1, 4, 4, 128, [100, 33, 260], 16, BF16, True, None, 0, 0),
    ("gqa8_bf16_contiguous", 2, 1, 16, 2, 128, [513, 64], None, BF16, True, None, 0, 0),
    ("causal_sq4_append_paged", 3, 4, 8, 2, 64, [60, 200, 5], 32, F16, True, None, 0, 4),
    ("causal_sq3_blind_rows", 2, 3, 4, 2, 32, [2, 40], None, F16, True, None, 0, 0),
    ("window_noncausal_sq2", 2, 2, 4, 1, 64, [300, 90], 64, F16, False, (64, 16), 0, 0),
    ("window_causal", 1, 1, 8, 2, 64, [1000], None, F16, True, (100, -1), 0, 0),
    ("no_split_paged", 3, 1, 8, 2, 64, [700, 20, 130], 128, F16, True, None, 1, 0),
    ("empty_sequence", 2, 1, 4, 2, 64, [0, 50], None, F16, True, None, 0, 0),
    ("append_contiguous_sq1", 2, 1, 8, 8, 64, [10, 77], None, BF16, True, None, 0, 1),
    # explicit split counts: fewer chunks than splits (clamped per group), uneven pieces, a count
    # above the vector cores (clamped to them), an empty sequence, causal Sq > 1 with a window
    ("splits_2_mixed_paged", 4, 1, 8, 2, 64, [1, 17, 4096, 700], 128, F16, True, None, 2, 0),
    ("splits_5_bf16_contiguous", 3, 1, 8, 1, 128, [3000, 0, 129], None, BF16, True, None, 5, 0),
    ("splits_1000_clamped", 2, 2, 4, 2, 64, [2048, 300], 64, F16, True, (500, -1), 1000, 2),
    # more than 255 query rows per kv head (speculative decoding), cut into row groups: whole heads
    # (GQA 8 x 40: 2 heads x 40 tokens), one head's tokens (GQA 8 x 64; 4 x 100 with D 128: 50 of
    # a head's 100 tokens), with appends, windows and explicit splits
    ("rows_gqa8x40_heads", 2, 40, 16, 2, 64, [300, 77], None, F16, True, None, 0, 0),
    ("rows_gqa8x64_spec", 2, 64, 16, 2, 64, [600, 130], 128, F16, True, None, 0, 8),
    ("rows_gqa4x100_tokens_bf16", 2, 100, 8, 2, 128, [300, 450], 64, BF16, True, (200, -1), 3, 0),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kvcache_matches_reference(session, case):
    _, batch, sq, heads, kv_heads, d, lengths, block_size, dtype, causal, window, splits, s_new = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))  # stable across processes (hash() is salted)
    total = [length + s_new for length in lengths]
    k_cache, v_cache, table = make_cache(rng, batch, total, kv_heads, d, dtype, block_size)
    q = rng.standard_normal((batch, sq, heads, d)).astype(dtype)
    kwargs = dict(block_table=table, causal=causal, window=window, num_splits=splits, return_lse=True)
    if s_new:
        k_new = np.empty((batch, s_new, kv_heads, d), dtype)
        v_new = np.empty_like(k_new)
        for b, length in enumerate(lengths):  # the tokens the cache already has at those slots
            for t in range(s_new):
                pos = length + t
                if table is None:
                    k_new[b, t], v_new[b, t] = k_cache[b, pos], v_cache[b, pos]
                else:
                    block, row = table[b, pos // block_size], pos % block_size
                    k_new[b, t], v_new[b, t] = k_cache[block, row], v_cache[block, row]
        full_k, full_v = k_cache.copy(), v_cache.copy()
        for cache in (k_cache, v_cache):  # the slots to append to start as NaN
            for b, length in enumerate(lengths):
                for t in range(s_new):
                    pos = length + t
                    if table is None:
                        cache[b, pos] = np.nan
                    else:
                        cache[table[b, pos // block_size], pos % block_size] = np.nan
        kwargs.update(k=k_new, v=v_new)
    seqlens = np.array(lengths, np.int32)
    out, lse = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=seqlens, **kwargs)
    assert out.shape == q.shape and out.dtype == dtype and lse.shape == (batch, heads, sq)
    if s_new:  # appended in place into the numpy caches
        np.testing.assert_array_equal(k_cache.view(np.uint16), full_k.view(np.uint16))
        np.testing.assert_array_equal(v_cache.view(np.uint16), full_v.view(np.uint16))
    check(q, k_cache, v_cache, np.array(total), table, out, lse, causal=causal, window=window, dtype=dtype)
    if 0 in total:
        b = total.index(0)
        assert not out[b].astype(np.float32).any() and np.isneginf(lse[b]).all()


def test_split_and_unsplit_agree(session):
    rng = np.random.default_rng(7)
    k_cache, v_cache, table = make_cache(rng, 2, [900, 50], 2, 64, F16, 64)
    q = rng.standard_normal((2, 1, 8, 64)).astype(F16)
    lens = np.array([900, 50], np.int32)
    split = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table)
    whole = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                 num_splits=1)
    assert np.abs(split.astype(np.float32) - whole.astype(np.float32)).max() < 2e-3
    again = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table)
    np.testing.assert_array_equal(split.view(np.uint16), again.view(np.uint16))  # fixed combine order
    for splits in (2, 3, 7, 48):  # explicit counts: the same result, and the same again
        explicit = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                        num_splits=splits)
        assert np.abs(explicit.astype(np.float32) - whole.astype(np.float32)).max() < 2e-3, splits
        repeat = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                      num_splits=splits)
        np.testing.assert_array_equal(explicit.view(np.uint16), repeat.view(np.uint16))


def test_int_cache_seqlens_and_default_session():
    rng = np.random.default_rng(8)
    k_cache, v_cache, _ = make_cache(rng, 2, [40, 40], 1, 32, F16)
    q = rng.standard_normal((2, 1, 2, 32)).astype(F16)
    out, lse = acl_fa.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=40, return_lse=True)
    check(q, k_cache, v_cache, np.array([40, 40]), None, out, lse, causal=True)


def test_decode_loop_of_64_steps_equals_one_prefill(session):
    """A prompt prefilled into a device cache, then 64 decode steps appending one token each:
    every step's output matches the causal prefill over all tokens (2x-naive rule against the
    float64 reference, and close to the forward op's own rows), and no K/V byte crosses the
    host-device link beyond the new tokens (the session's copy counters)."""
    rng = np.random.default_rng(11)
    batch, heads, kv_heads, d, prompt, steps, block = 2, 8, 2, 64, 70, 64, 32
    total = prompt + steps
    q_all = rng.standard_normal((batch, total, heads, d)).astype(F16)
    k_all = rng.standard_normal((batch, total, kv_heads, d)).astype(F16)
    v_all = rng.standard_normal((batch, total, kv_heads, d)).astype(F16)
    prefill = session.flash_attention(q_all, k_all, v_all, causal=True, layout="BSND")
    ref, _ = kvcache_reference(q_all, k_all, v_all, np.full(batch, total), causal=True)

    per_seq = -(-total // block)
    table = rng.permutation(batch * per_seq).reshape(batch, per_seq).astype(np.int32)
    host_k = np.full((batch * per_seq, block, kv_heads, d), np.nan, F16)  # the prompt's K/V, NaN after it
    host_v = host_k.copy()
    for b in range(batch):
        for j in range(prompt):
            host_k[table[b, j // block], j % block] = k_all[b, j]
            host_v[table[b, j // block], j % block] = v_all[b, j]
    k_cache, v_cache = session.to_device(host_k), session.to_device(host_v)
    seqlens = np.full(batch, prompt, np.int32)
    before = session.copy_counters()
    outs = []
    for t in range(prompt, total):
        outs.append(session.flash_attention_with_kvcache(
            q_all[:, t:t + 1], k_cache, v_cache, cache_seqlens=seqlens, block_table=table,
            k=k_all[:, t:t + 1], v=v_all[:, t:t + 1]))
        seqlens += 1
    after = session.copy_counters()
    decoded = np.concatenate(outs, axis=1)
    naive, _ = kvcache_reference(q_all, k_all, v_all, np.full(batch, total), causal=True, precision=F16)
    acc = check_accuracy(decoded, np.zeros(1), ref[:, prompt:], np.zeros(1), naive[:, prompt:], "float16",
                         heads=range(heads))
    assert acc.ok, acc
    assert np.abs(decoded.astype(np.float32) - prefill[:, prompt:].astype(np.float32)).max() <= 2 * acc.tolerance
    # Host -> device per step: q, the new k and v, the lengths and the block table; nothing else.
    token = batch * kv_heads * d * 2
    per_step = batch * heads * d * 2 + 2 * token + batch * 4 + table.nbytes
    assert after["h2d"]["bytes"] - before["h2d"]["bytes"] == steps * per_step
    # Device -> host: only the outputs; device -> device: the appended tokens.
    assert after["d2h"]["bytes"] - before["d2h"]["bytes"] == steps * batch * heads * d * 2
    assert after["d2d"]["bytes"] - before["d2d"]["bytes"] == steps * 2 * token
    cache = k_cache.numpy().reshape(-1, kv_heads, d)
    for b in range(batch):
        rows = [table[b, j // block] * block + j % block for j in range(total)]
        np.testing.assert_array_equal(cache[rows].view(np.uint16), k_all[b].view(np.uint16))
    k_cache.close()
    v_cache.close()


def _bad_call_args(rng):
    q = rng.standard_normal((2, 1, 4, 32)).astype(F16)
    k_cache, v_cache, table = make_cache(rng, 2, [40, 20], 2, 32, F16, 16)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=np.array([40, 20], np.int32),
                block_table=table)


def with_changes(**changes):
    def edit(args):
        args = dict(args)
        for key, value in changes.items():
            args[key] = value(args) if callable(value) else value
        return args
    return edit


BAD = [
    ("seqlen_beyond_reach", with_changes(cache_seqlens=np.array([49, 20], np.int32)), acl_fa.InvalidArgumentError,
     "exceeds the block table's reach"),
    ("negative_seqlen", with_changes(cache_seqlens=np.array([-1, 20], np.int32)), acl_fa.InvalidArgumentError,
     r"cache_seqlens\[0\] = -1 must be >= 0"),
    ("table_out_of_range", with_changes(block_table=lambda a: np.where(a["block_table"] == a["block_table"][0, 0], 99,
                                                                a["block_table"]).astype(np.int32)),
     acl_fa.InvalidArgumentError, "out of range"),
    ("table_repeats_block", with_changes(block_table=lambda a: np.stack([np.full(3, a["block_table"][0, 0]),
                                                                  a["block_table"][1]]).astype(np.int32)),
     acl_fa.InvalidArgumentError, "twice"),
    ("block_size_not_16", with_changes(k_cache=lambda a: a["k_cache"][:, :8], v_cache=lambda a: a["v_cache"][:, :8]),
     acl_fa.InvalidArgumentError, "multiple of 16"),
    ("append_overflows", with_changes(k=lambda a: np.zeros((2, 9, 2, 32), F16), v=lambda a: np.zeros((2, 9, 2, 32), F16)),
     acl_fa.InvalidArgumentError, "k's new tokens"),
    ("head_dim_differs", with_changes(q=lambda a: np.zeros((2, 1, 4, 64), F16)), acl_fa.InvalidArgumentError,
     "head dim differs"),
    ("dtype_differs", with_changes(q=lambda a: a["q"].astype(BF16)), acl_fa.InvalidTypeError, "share one dtype"),
    ("k_without_v", with_changes(k=lambda a: np.zeros((2, 1, 2, 32), F16)), acl_fa.InvalidArgumentError,
     "k and v must be given together"),
    ("table_batch", with_changes(block_table=lambda a: a["block_table"][:1]), acl_fa.InvalidArgumentError,
     "block_table must be"),
    ("num_splits_negative", with_changes(num_splits=-1), acl_fa.InvalidArgumentError,
     r"num_splits must be 0 .* or a split count in \[2, 2147483647\].*got -1"),
    ("num_splits_beyond_int32", with_changes(num_splits=2**31), acl_fa.InvalidArgumentError, "got 2147483648"),
    ("float_table", with_changes(block_table=lambda a: a["block_table"].astype(np.float32)), acl_fa.InvalidTypeError,
     "integer array"),
    ("window_type", with_changes(window=5), acl_fa.InvalidTypeError, "window must be"),
    ("num_splits_bool", with_changes(num_splits=True), acl_fa.InvalidTypeError, "num_splits must be an integer"),
    ("scale_bool", with_changes(scale=True), acl_fa.InvalidTypeError, "scale must be a real number"),
    ("causal_int", with_changes(causal=1), acl_fa.InvalidTypeError, "causal must be a bool"),
]


@pytest.mark.parametrize("name,edit,error,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_before_device_work(session, backend, name, edit, error, message):
    args = edit(_bad_call_args(np.random.default_rng(5)))
    q, k_cache, v_cache = args.pop("q"), args.pop("k_cache"), args.pop("v_cache")
    before = acl_fa.runtime.session.live_counts(backend) if backend.name == "sim" else None
    with pytest.raises(error, match=message):
        session.flash_attention_with_kvcache(q, k_cache, v_cache, **args)
    if before is not None:
        assert acl_fa.runtime.session.live_counts(backend) == before  # nothing allocated, nothing launched


def test_device_arrays_of_another_or_a_closed_session_are_refused(session, backend):
    rng = np.random.default_rng(6)
    args = _bad_call_args(rng)
    with acl_fa.Session(backend=backend.name) as other:
        foreign = other.to_device(args["k_cache"])
        with pytest.raises(acl_fa.InvalidArgumentError, match="another Session"):
            session.flash_attention_with_kvcache(args["q"], foreign, args["v_cache"],
                                                 cache_seqlens=args["cache_seqlens"], block_table=args["block_table"])
    closed = session.to_device(args["k_cache"])
    closed.close()
    with pytest.raises(acl_fa.ClosedObjectError, match="closed DeviceArray"):
        session.flash_attention_with_kvcache(args["q"], closed, args["v_cache"], cache_seqlens=args["cache_seqlens"],
                                             block_table=args["block_table"])


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
def test_chips_without_separate_vector_cores_are_refused_before_device_work(sim_only, soc):
    """The decode kernel is an AIC:AIV 1:2 kernel (Atlas A2/A3): other chips get a clear error
    naming the chip, from the op's chip check that runs before any device buffer is made."""
    from conftest import run_python

    result = run_python("""
        import json, numpy as np, acl_fa
        q = np.zeros((1, 1, 4, 64), np.float16)
        k = np.zeros((1, 32, 2, 64), np.float16)
        with acl_fa.Session() as s:
            try:
                s.flash_attention_with_kvcache(q, k, k, cache_seqlens=16)
                print(json.dumps({"error": None}))
            except acl_fa.InvalidArgumentError as exc:
                print(json.dumps({"error": str(exc)}))
    """, ACL_FA_SIM_SOC=soc)
    assert result["error"] is not None and "Atlas A2/A3" in result["error"] and soc in result["error"], result


@pytest.mark.parametrize("splits,busy_aiv", [(1, 1), (2, 2), (5, 5), (0, 48), (1000, 48)])
def test_explicit_num_splits_cut_each_sequence_into_that_many_pieces(session, sim_only, splits, busy_aiv):
    """One sequence and kv head of 48 chunks on the 910B2 (24 AIC, 48 AIV): num_splits=S puts
    S pieces on S vector cores (S clamped to 48), 0 spreads the keys over all 48, 1 keeps one."""
    from acl_fa.runtime import sim_stats

    rng = np.random.default_rng(11)
    k_cache, v_cache, table = make_cache(rng, 1, [48 * 128], 1, 64, F16, 128)
    q = rng.standard_normal((1, 1, 4, 64)).astype(F16)
    lens = np.array([48 * 128], np.int32)
    out, lse = session.flash_attention_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
                                                    num_splits=splits, return_lse=True)
    stats = sim_stats.last_launch(session.backend, per_core=True)
    assert sum(1 for core in stats["aiv"] if core["vector_elems"]) == busy_aiv
    check(q, k_cache, v_cache, lens, table, out, lse, causal=True)
