"""acl_fa/spec/options.py: the V2 options' conversions and the error every bad input gives."""
import numpy as np
import pytest

from acl_fa.spec.band import UNBOUNDED, band_columns, band_visible, window_band
from acl_fa.spec.options import (
    AttentionOptions, build_options, check_max_seqlen, cu_seqlens_ends, device_mask, dropout_keep_prob)
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError

B, N, SQ, SKV = 2, 3, 5, 7


@pytest.mark.parametrize("window,causal,band", [
    (None, False, (UNBOUNDED, UNBOUNDED)),
    (None, True, (UNBOUNDED, 0)),
    ((-1, -1), False, (UNBOUNDED, UNBOUNDED)),
    ((256, 0), False, (256, 0)),
    ((4, 3), True, (4, 0)),          # causal intersects: next = min(right, 0)
    ((4, -1), True, (4, 0)),
    ((-1, 5), False, (UNBOUNDED, 5)),
    ((0, 0), False, (0, 0)),
    ([2, 2**40], False, (2, UNBOUNDED)),
    ((np.int64(3), np.int32(1)), False, (3, 1)),
])
def test_window_band(window, causal, band):
    assert window_band(window, causal) == band


def test_band_visible_is_the_rule():
    opts = AttentionOptions(pre_tokens=2, next_tokens=1)
    vis = band_visible(opts, SQ, SKV, slice(0, SQ))
    for i in range(SQ):
        for j in range(SKV):
            assert vis[i, j] == (i + 2 - 2 <= j <= i + 2 + 1)
    for r0, r1 in ((0, 1), (1, 4), (4, 5)):
        cols = band_columns(opts, SQ, SKV, slice(r0, r1))
        seen = np.flatnonzero(vis[r0:r1].any(axis=0))
        assert (cols.start, cols.stop) == (seen[0], seen[-1] + 1)
        assert (band_visible(opts, SQ, SKV, slice(r0, r1), cols) == vis[r0:r1, cols]).all()
    assert band_columns(AttentionOptions(pre_tokens=0, next_tokens=0), 9, 3, slice(0, 5)).stop == 0  # sees nothing


@pytest.mark.parametrize("shape", [(SQ, SKV), (SKV,), (B, 1, SQ, SKV), (1, N, SQ, SKV), (B, N, SQ, SKV),
                                   (B, 1, 1, SKV), (N, 1, SKV)])
def test_device_mask_keeps_the_given_shape(shape):
    rng = np.random.default_rng(0)
    mask = rng.random(shape) < 0.5
    dev = device_mask(mask, B, N, SQ, SKV)
    assert dev.dtype == np.uint8 and dev.ndim == 4 and dev.size == mask.size  # never expanded
    assert dev.shape == (1,) * (4 - mask.ndim) + shape
    np.testing.assert_array_equal(dev.reshape(shape), (~mask).astype(np.uint8))  # 1 = masked out
    assert np.shares_memory(dev, dev.reshape(shape))


def test_default_options_are_v1():
    opts, mask = build_options(scores=(B, N, SQ, SKV), causal=True)
    assert opts.is_default and opts.is_causal and mask is None and opts.seed == 0
    assert not build_options(scores=(B, N, SQ, SKV), window=(8, 0))[0].is_default
    assert not build_options(scores=(B, N, SQ, SKV), return_dropout_mask=True)[0].is_default
    opts, mask = build_options(scores=(B, N, SQ, SKV), attn_mask=np.ones(SKV, bool))
    assert not opts.is_default and opts.mask_shape == (1, 1, 1, SKV)


def test_dropout_seed_drawn_and_kept():
    a, _ = build_options(scores=(B, N, SQ, SKV), dropout_p=0.1)
    b, _ = build_options(scores=(B, N, SQ, SKV), dropout_p=0.1)
    assert a.seed != b.seed and 0 <= a.seed < 2**64 and a.has_dropout and not a.is_default
    c, _ = build_options(scores=(B, N, SQ, SKV), dropout_p=0.1, seed=2**64 - 1, offset=5)
    assert (c.seed, c.offset, c.keep_prob) == (2**64 - 1, 5, float(np.float32(0.9)))
    assert c.dropout_threshold == 26  # round((1 - float32(0.9)) * 256): keeps 230 of 256 draws
    assert dropout_keep_prob(0) == 1.0


@pytest.mark.parametrize("cu,total,ends", [
    (np.array([0, 3, 3, 10], np.int32), 10, (3, 3, 10)),
    (np.array([0, 4096, 5096, 5113], np.int64), 5113, (4096, 5096, 5113)),
    ([0, 5], 5, (5,)),
])
def test_cu_seqlens_to_aclnn_form(cu, total, ends):
    assert cu_seqlens_ends("cu_seqlens_q", cu, total) == ends
    assert check_max_seqlen("max_seqlen_q", None, ends) == max(np.diff((0,) + ends))


def _opts(**kw):
    return build_options(scores=(B, N, SQ, SKV), **kw)


BAD = [  # (id, call, exception, words the message must hold)
    ("window-scalar", lambda: _opts(window=5), InvalidTypeError, ["window", "pair"]),
    ("window-three", lambda: _opts(window=(1, 2, 3)), InvalidArgumentError, ["window", "pair"]),
    ("window-below", lambda: _opts(window=(-2, 0)), InvalidArgumentError, ["window[0]=-2", ">= -1"]),
    ("window-right-below", lambda: _opts(window=(0, -5)), InvalidArgumentError, ["window[1]=-5", ">= -1"]),
    ("window-float", lambda: _opts(window=(1.5, 0)), InvalidTypeError, ["window[0]", "integer"]),
    ("window-bool", lambda: _opts(window=(True, 0)), InvalidTypeError, ["window[0]", "integer"]),
    ("mask-int", lambda: _opts(attn_mask=np.ones((SQ, SKV), np.int64)), InvalidTypeError,
     ["attn_mask", "bool", "True = the query may attend", "int64", "1 = masked out"]),
    ("mask-float", lambda: _opts(attn_mask=np.zeros((SQ, SKV), np.float32)), InvalidTypeError,
     ["attn_mask", "bool", "True = the query may attend", "float32"]),
    ("mask-uint8", lambda: _opts(attn_mask=np.zeros((SQ, SKV), np.uint8)), InvalidTypeError,
     ["attn_mask", "True = the query may attend"]),
    ("mask-shape", lambda: _opts(attn_mask=np.ones((SQ + 1, SKV), bool)), InvalidArgumentError,
     ["attn_mask", f"({SQ + 1}, {SKV})", f"[{B}, {N}, {SQ}, {SKV}]"]),
    ("mask-heads", lambda: _opts(attn_mask=np.ones((B, 2, SQ, SKV), bool)), InvalidArgumentError,
     ["attn_mask", f"({B}, 2, {SQ}, {SKV})", f"[{B}, {N}, {SQ}, {SKV}]"]),
    ("mask-rank5", lambda: _opts(attn_mask=np.ones((1, B, N, SQ, SKV), bool)), InvalidArgumentError,
     ["attn_mask", "rank"]),
    ("mask-key-bcast", lambda: _opts(attn_mask=np.ones((SQ, 1), bool)), InvalidArgumentError,
     ["attn_mask", f"Skv={SKV}"]),
    ("mask-str", lambda: _opts(attn_mask="causal"), InvalidTypeError, ["attn_mask"]),
    ("mask-masked-array", lambda: _opts(attn_mask=np.ma.ones((SQ, SKV), bool)), InvalidTypeError,
     ["attn_mask", "MaskedArray"]),
    ("dropout-one", lambda: _opts(dropout_p=1.0), InvalidArgumentError, ["dropout_p", "[0, 1)"]),
    ("dropout-negative", lambda: _opts(dropout_p=-0.1), InvalidArgumentError, ["dropout_p", "[0, 1)"]),
    ("dropout-nan", lambda: _opts(dropout_p=float("nan")), InvalidArgumentError, ["dropout_p", "[0, 1)"]),
    ("dropout-str", lambda: _opts(dropout_p="0.1"), InvalidTypeError, ["dropout_p"]),
    ("dropout-bool", lambda: _opts(dropout_p=True), InvalidTypeError, ["dropout_p"]),
    ("seed-negative", lambda: _opts(dropout_p=0.1, seed=-1), InvalidArgumentError, ["seed", "uint64"]),
    ("seed-big", lambda: _opts(dropout_p=0.1, seed=2**64), InvalidArgumentError, ["seed", "uint64"]),
    ("seed-float", lambda: _opts(dropout_p=0.1, seed=1.0), InvalidTypeError, ["seed", "integer"]),
    ("offset-negative", lambda: _opts(offset=-1), InvalidArgumentError, ["offset", "uint64"]),
    ("offset-big", lambda: _opts(offset=2**64), InvalidArgumentError, ["offset", "uint64"]),
    ("causal-int", lambda: _opts(causal=1), InvalidTypeError, ["causal", "bool"]),
    ("return-mask-int", lambda: _opts(return_dropout_mask=1), InvalidTypeError, ["return_dropout_mask"]),
    ("cu-float", lambda: cu_seqlens_ends("cu_seqlens_q", np.array([0.0, 3.0]), 3), InvalidTypeError,
     ["cu_seqlens_q", "int32 or int64", "float64"]),
    ("cu-uint", lambda: cu_seqlens_ends("cu_seqlens_k", np.array([0, 3], np.uint32), 3), InvalidTypeError,
     ["cu_seqlens_k", "int32 or int64"]),
    ("cu-none", lambda: cu_seqlens_ends("cu_seqlens_q", None, 3), InvalidTypeError, ["cu_seqlens_q"]),
    ("cu-2d", lambda: cu_seqlens_ends("cu_seqlens_q", np.zeros((2, 2), np.int32), 0), InvalidArgumentError,
     ["cu_seqlens_q", "1-D"]),
    ("cu-short", lambda: cu_seqlens_ends("cu_seqlens_q", np.array([0], np.int32), 0), InvalidArgumentError,
     ["cu_seqlens_q", "at least 2"]),
    ("cu-start", lambda: cu_seqlens_ends("cu_seqlens_q", np.array([1, 3], np.int32), 3), InvalidArgumentError,
     ["cu_seqlens_q", "start at 0", "got 1"]),
    ("cu-decreasing", lambda: cu_seqlens_ends("cu_seqlens_k", np.array([0, 5, 4, 9], np.int64), 9),
     InvalidArgumentError, ["cu_seqlens_k", "non-decreasing", "5 then 4"]),
    ("cu-end", lambda: cu_seqlens_ends("cu_seqlens_q", np.array([0, 3, 8], np.int32), 9), InvalidArgumentError,
     ["cu_seqlens_q", "token count 9", "got 8"]),
    ("max-seqlen-small", lambda: check_max_seqlen("max_seqlen_q", 4, (3, 8, 9)), InvalidArgumentError,
     ["max_seqlen_q=4", "sequence 1", "5 tokens"]),
    ("max-seqlen-float", lambda: check_max_seqlen("max_seqlen_k", 4.0, (3,)), InvalidTypeError, ["max_seqlen_k"]),
]


@pytest.mark.parametrize("call,exc,words", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_options(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))
