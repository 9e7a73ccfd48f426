"""acl_fa.flash_attention against the float64 reference, over a table of cases.

Tolerance (flash-attention's rule, acl_fa.reference.accuracy): the error against float64 is at most twice
the error of a naive attention in the input precision, with a floor of one unit roundoff of the
dtype at the output's magnitude. Both numbers are printed on failure.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.spec.layouts import shape_of, to_bnsd

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
DTYPE_NAMES = {F16: "float16", BF16: "bfloat16", F32: "float32"}


def _inputs(layout, b, n, nkv, sq, skv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    qs, kvs = shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (qs, kvs, kvs))


def _assert_close(q, k, v, out, lse, *, causal, layout, n, nkv, dtype, scale=None, heads=None):
    """Holds out (and lse) to the tolerance rule on `heads` (default: all)."""
    d = to_bnsd(q, layout, n).shape[-1]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    heads = list(range(n)) if heads is None else heads
    kwargs = dict(causal=causal, scale=scale, layout=layout, num_heads=n, num_kv_heads=nkv, heads=heads)
    ref, ref_lse = acl_fa.attention_reference(q, k, v, **kwargs)
    naive = naive_same_precision(q, k, v, dtype, **kwargs)
    acc = check_accuracy(to_bnsd(out, layout, n)[:, heads].astype(np.float64), lse[:, heads],
                         to_bnsd(ref, layout, len(heads)), ref_lse, naive,
                         DTYPE_NAMES[dtype], heads)
    assert acc.ok, f"max error {acc.max_error:.3g} > tolerance {acc.tolerance:.3g} (naive {acc.naive_error:.3g})"
    assert acc.lse_max_error < 1e-3, f"LSE error {acc.lse_max_error}"


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal)
CASES = [
    (1, 2, 2, 128, 128, 64, F16, "BNSD", False),
    (1, 2, 2, 128, 128, 64, F16, "BNSD", True),
    (2, 4, 2, 97, 113, 16, F16, "BNSD", True),        # GQA, tails, Sq < Skv
    (1, 3, 1, 17, 200, 32, F16, "BSND", False),       # MQA
    (1, 2, 2, 200, 50, 64, F16, "BNSD", True),        # Sq > Skv: first 150 rows see nothing
    (1, 1, 1, 1, 1, 16, F16, "BNSD", False),
    (1, 1, 1, 1, 97, 48, BF16, "BSH", True),
    (1, 2, 1, 1023, 1024, 128, F16, "BNSD", True),
    (1, 2, 2, 300, 300, 256, BF16, "BSND", True),     # largest head dim
    (2, 4, 4, 113, 203, 80, BF16, "BSH", False),
    (1, 1, 1, 4097, 4097, 64, F16, "BNSD", True),
    (1, 2, 2, 1025, 77, 96, BF16, "BNSD", False),
    # float32 end to end (float32 cube operands on Atlas A2/A3; the naive reference is float32)
    (1, 2, 2, 128, 128, 64, F32, "BNSD", True),
    (2, 4, 2, 97, 113, 16, F32, "BNSD", True),
    (1, 3, 1, 17, 200, 32, F32, "BSND", False),
    (1, 1, 1, 1, 97, 48, F32, "BSH", True),
    (1, 2, 2, 300, 300, 256, F32, "BSND", True),
    (1, 2, 2, 1025, 77, 96, F32, "BNSD", False),
]


def _case_id(case):
    b, n, nkv, sq, skv, d, dtype, layout, causal = case
    return f"B{b}N{n}kv{nkv}-Sq{sq}-Skv{skv}-D{d}-{dtype}-{layout}{'-causal' if causal else ''}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_reference(session, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal = case
    q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    out, lse = session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                       return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (b, n, sq)
    _assert_close(q, k, v, out, lse, causal=causal, layout=layout, n=n, nkv=nkv, dtype=dtype)


# The full table of the kernel issue, covered without its 8820-case product: every (Sq, Skv)
# pair of SIZES once, with D, heads, dtype, layout, causal and block overrides cycling through
# their values at co-prime periods so that each value meets many of the others.
SIZES = (1, 17, 97, 113, 128, 1023, 4097)
HEAD_DIMS = (64, 80, 96, 128, 256)
HEAD_PAIRS = ((8, 8), (8, 2), (8, 1))
LAYOUTS = ("BNSD", "BSND", "BSH")
BLOCKS = ((None, None), (None, None), (64, 64), (None, None), (32, 128), (None, None), (128, 16))
TABLE = []
for _i, (_sq, _skv) in enumerate((a, b) for a in SIZES for b in SIZES):
    TABLE.append((_sq, _skv, HEAD_DIMS[_i % 5], HEAD_PAIRS[_i % 3], (F16, BF16)[(_i // 2) % 2], LAYOUTS[_i % 3],
                  (_i // 3) % 2 == 0, BLOCKS[_i % 7]))
# Problems this large are checked on two heads (the float64 reference costs O(Sq * Skv * D) per head).
SAMPLED_PAIRS = 1023 * 1023


def _table_id(case):
    sq, skv, d, (n, nkv), dtype, layout, causal, (bm, bn) = case
    blocks = f"-bm{bm}-bn{bn}" if bm else ""
    return f"Sq{sq}-Skv{skv}-D{d}-N{n}kv{nkv}-{dtype}-{layout}{'-causal' if causal else ''}{blocks}"


@pytest.mark.parametrize("case", TABLE, ids=[_table_id(c) for c in TABLE])
def test_numerical_table(session, case):
    sq, skv, d, (n, nkv), dtype, layout, causal, (block_m, block_n) = case
    q, k, v = _inputs(layout, 1, n, nkv, sq, skv, d, dtype, seed=sq * 7 + skv)
    out, lse = session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                       block_m=block_m, block_n=block_n, return_lse=True)
    heads = [0, n - 1] if sq * skv >= SAMPLED_PAIRS else None
    _assert_close(q, k, v, out, lse, causal=causal, layout=layout, n=n, nkv=nkv, dtype=dtype, heads=heads)


@pytest.mark.parametrize("blocks", [(32, 16), (64, 64), (128, 256)])
def test_user_blocks(session, blocks):
    q, k, v = _inputs("BNSD", 1, 2, 2, 150, 333, 64, F16)
    out, lse = session.flash_attention(q, k, v, causal=True, block_m=blocks[0], block_n=blocks[1], return_lse=True)
    _assert_close(q, k, v, out, lse, causal=True, layout="BNSD", n=2, nkv=2, dtype=F16)


# Blocks the MIX path admits since P.V and O rows take the S and P tiles' UB (n >= D) and L0C is
# budgeted by the Matmul base tile: wide K/V blocks (several base tiles of C) and 128-row items.
@pytest.mark.parametrize("blocks, dtype", [((96, 384), F16), ((96, 512), BF16), ((128, 320), F16), ((128, 384), F16)])
def test_wide_blocks_with_shared_tiles(session, blocks, dtype):
    q, k, v = _inputs("BSND", 1, 4, 2, 700, 1100, 128, dtype)
    out, lse = session.flash_attention(q, k, v, causal=True, layout="BSND", block_m=blocks[0], block_n=blocks[1],
                                       return_lse=True)
    _assert_close(q, k, v, out, lse, causal=True, layout="BSND", n=4, nkv=2, dtype=dtype)


def test_scale_and_noncontiguous_inputs(session):
    q, k, v = _inputs("BNSD", 1, 2, 2, 64, 96, 32, F16)
    qf = np.asfortranarray(q)
    kt = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # strided view
    vr = v[:, :, ::-1][:, :, ::-1]                                            # negative strides
    vr.setflags(write=False)
    out, lse = session.flash_attention(qf, kt, vr, scale=0.3, return_lse=True)
    _assert_close(q, k, v, out, lse, causal=False, layout="BNSD", n=2, nkv=2, dtype=F16, scale=0.3)


def test_fully_masked_rows_give_zero_and_neg_inf(session):
    q, k, v = _inputs("BNSD", 1, 1, 1, 40, 8, 16, F16)
    out, lse = session.flash_attention(q, k, v, causal=True, return_lse=True)
    blind = 40 - 8  # rows i with i + Skv - Sq < 0
    assert np.all(out[0, 0, :blind] == 0)
    assert np.all(np.isneginf(lse[0, 0, :blind]))
    assert np.all(np.isfinite(lse[0, 0, blind:]))


def test_repeat_calls_reuse_state_and_are_bit_identical(session, backend):
    q, k, v = _inputs("BNSD", 1, 4, 4, 256, 256, 64, F16)
    first = session.flash_attention(q, k, v, causal=True)
    if backend.name == "sim":
        allocations = session.live_counts()["deviceAllocations"]
    for _ in range(3):
        again = session.flash_attention(q, k, v, causal=True)
        assert np.array_equal(first.view(np.uint16), again.view(np.uint16))
    if backend.name == "sim":
        assert session.live_counts()["deviceAllocations"] == allocations  # buffers cached per shape


def test_large_magnitudes_stay_finite(session):
    rng = np.random.default_rng(3)
    q = (rng.standard_normal((1, 2, 64, 64)) * 300).astype(F16)
    k = (rng.standard_normal((1, 2, 64, 64)) * 200).astype(F16)
    v = (rng.uniform(-6e4, 6e4, (1, 2, 64, 64))).astype(F16)
    out, lse = session.flash_attention(q, k, v, scale=4.0, return_lse=True)
    assert np.all(np.isfinite(out.astype(np.float32)))
    # A naive fp16 attention overflows its scores here (|scale * q.k| >> 65504), so the bound is
    # absolute: 4 units of fp16 roundoff at the output's magnitude (fp32 softmax inside).
    ref, ref_lse = acl_fa.attention_reference(q, k, v, scale=4.0)
    error = np.abs(out.astype(np.float64) - ref).max()
    bound = 4 * 2.0 ** -10 * np.abs(ref).max()
    assert error <= bound, f"max error {error:.4g} > {bound:.4g}"
    assert np.abs(lse - ref_lse).max() <= 1e-6 * np.abs(ref_lse).max()


def test_nan_input_propagates_like_the_reference(session):
    q, k, v = _inputs("BNSD", 1, 1, 1, 32, 32, 16, F16)
    q[0, 0, 5, 3] = np.nan
    out = session.flash_attention(q, k, v)
    ref, _ = acl_fa.attention_reference(q, k, v)
    assert np.array_equal(np.isnan(out.astype(np.float32)), np.isnan(ref))
