"""The attention mask and dropout in the FlashAttentionV2 forward (op_kernel/flash_attention_kernel.h
with attention_mask.h and philox_dropout.h): every option alone and in combination against the
float64 reference (acl_fa/reference/attention.py) under the forward's 2x-naive rule; the kernel's keep mask
against acl_fa/spec/philox.py bit for bit; reproducibility across thread counts, block sizes and
chips; the mask's block skipping in the cube counters; bad input refused before device work.

The naive attention here rounds the scores and the probabilities to the input dtype (fp32
accumulation) and applies the same visibility and keep multiplier as the reference.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.runtime import sim_stats
from acl_fa.reference.accuracy import check_accuracy
from acl_fa.spec.band import band_visible
from acl_fa.spec.options import build_options
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.spec.layouts import to_bnsd
from acl_fa.spec.philox import keep_mask
from acl_fa.reference.attention import attention_reference, attention_reference_varlen

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(DTYPES[dtype])


def make_mask(rng, kind, b, n, sq, skv):
    """A bool mask (True = may attend) of the given broadcast kind, or None."""
    shape = {None: None, "keypad": (b, 1, 1, skv), "shared": (sq, skv), "batch": (b, 1, sq, skv),
             "head": (1, n, sq, skv), "full": (b, n, sq, skv)}[kind]
    if shape is None:
        return None
    mask = rng.random(shape) < 0.7
    if kind == "keypad":
        mask[..., : skv // 2] = True        # key padding: the first half visible, then random
        mask[..., skv - skv // 4:] = False  # the last quarter hidden (whole key blocks skipped)
    return mask


def naive(q, k, v, vis, keep, scale, dtype):
    """One head, naive attention in the input dtype: q [sq, D], k / v [skv, D], vis [sq, skv]
    bool, keep [sq, skv] (Z / keep_prob) or None."""
    work = np.float32
    s = (q.astype(work) @ k.astype(work).T).astype(dtype).astype(work)
    s = np.where(vis, s * work(scale), -np.inf)
    m = s.max(axis=1, keepdims=True)
    m0 = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m0)
    l = p.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (p / np.where(l > 0, l, 1)).astype(dtype).astype(work)
        if keep is not None:
            p = (p * keep).astype(dtype).astype(work)
        out = np.where(l > 0, p @ v.astype(work), 0.0)
    return out.astype(dtype)


def visibility(b, n, sq, skv, causal, window, mask):
    """bool [b, n, sq, skv]: the band and the mask."""
    options, _ = build_options(scores=(b, n, sq, skv), causal=causal, window=window)
    vis = np.broadcast_to(band_visible(options, sq, skv, slice(0, sq)), (b, n, sq, skv))
    if mask is not None:
        vis = vis & np.broadcast_to(mask.reshape((1,) * (4 - mask.ndim) + mask.shape), (b, n, sq, skv))
    return vis


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal, window, mask kind, dropout_p, block_m, block_n)
CASES = [
    (2, 2, 2, 200, 200, 64, "float16", "BNSD", False, None, "keypad", 0.0, None, None),       # key padding
    (1, 2, 2, 150, 230, 64, "float16", "BSND", True, (80, -1), "shared", 0.0, 64, 64),        # causal+window+mask
    (1, 2, 2, 128, 128, 64, "bfloat16", "BNSD", False, None, "head", 0.0, 32, 48),            # per-head mask
    (1, 2, 1, 160, 160, 64, "float32", "BNSD", False, None, None, 0.25, None, None),          # dropout alone
    (2, 2, 2, 96, 144, 64, "float16", "BSH", False, None, "batch", 0.1, 64, 64),              # mask + dropout
    (2, 4, 2, 128, 192, 64, "float16", "BNSD", True, (100, 20), "full", 0.2, 32, 64),         # GQA, everything
    (1, 2, 2, 100, 300, 128, "bfloat16", "BSND", False, (60, 60), "keypad", 0.5, None, None), # window+keypad+dropout
    (1, 2, 2, 300, 400, 128, "float16", "BSND", True, (150, -1), "full", 0.2, 128, 512),    # row chunks (48 + 16 rows)
    (1, 2, 1, 300, 300, 64, "float32", "BNSD", False, None, "keypad", 0.1, 256, 256),        # row chunks, fp32, 128 rows
]


def run_case(session, case, seed=11, **extra):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, kind, p, bm, bn = case
    rng = np.random.default_rng(sq * 31 + skv)
    shapes = {"BNSD": ((b, n, sq, d), (b, nkv, skv, d)), "BSND": ((b, sq, n, d), (b, skv, nkv, d)),
              "BSH": ((b, sq, n * d), (b, skv, nkv * d))}[layout]
    q, k, v = rand(rng, shapes[0], dtype), rand(rng, shapes[1], dtype), rand(rng, shapes[1], dtype)
    mask = make_mask(rng, kind, b, n, sq, skv)
    kwargs = dict(causal=causal, window=window, attn_mask=mask, dropout_p=p, seed=seed, offset=5, layout=layout,
                  num_heads=n, block_m=bm, block_n=bn)
    kwargs.update(extra)
    result = acl_fa.flash_attention(q, k, v, return_lse=True, return_dropout_mask=p > 0, session=session, **kwargs)
    return (q, k, v, mask), result


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(x) for x in c))
def test_options_match_the_reference(session, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, kind, p, _, _ = case
    (q, k, v, mask), result = run_case(session, case)
    out, lse = result[0], result[1]
    assert out.shape == q.shape and lse.shape == (b, n, sq)
    ref_out, ref_lse = attention_reference(q, k, v, causal=causal, window=window, attn_mask=mask, dropout_p=p,
                                           seed=11, offset=5, layout=layout, num_heads=n)
    qb, kb, vb = (to_bnsd(x, layout, nh) for x, nh in ((q, n), (k, nkv), (v, nkv)))
    ob, rb = to_bnsd(out, layout, n), to_bnsd(ref_out, layout, n)
    vis = visibility(b, n, sq, skv, causal, window, mask)
    keep_prob = float(np.float32(1 - p))
    scale = 1 / np.sqrt(d)
    nv = np.zeros(qb.shape, dtype=DTYPES[dtype])
    for bi in range(b):
        for h in range(n):
            keep = None
            if p > 0:
                z = keep_mask(11, 5, bi, h, n, sq, skv, keep_prob)
                keep = z.astype(np.float32) * np.float32(1 / keep_prob)
            g = h * nkv // n
            nv[bi, h] = naive(qb[bi, h], kb[bi, g], vb[bi, g], vis[bi, h], keep, scale, DTYPES[dtype])
    acc = check_accuracy(ob, lse, rb, ref_lse, nv, dtype, range(n))
    assert acc.ok, acc
    assert acc.lse_max_error < 1e-3, acc
    blind = ~vis.any(axis=3)
    assert (ob[blind] == 0).all() and np.isneginf(lse[blind]).all()
    if p > 0:
        assert result.seed == 11 and result.offset == 5 and result.next_offset == 5 + b * n
        keep = result[2]
        assert keep.shape == (b, n, sq, skv) and keep.dtype == np.uint8
        expected = np.stack([np.stack([keep_mask(11, 5, bi, h, n, sq, skv, keep_prob) for h in range(n)])
                             for bi in range(b)])
        assert np.array_equal(keep.astype(bool), expected & vis)


@pytest.mark.parametrize("dropout_p", [0.0, 0.2])
def test_masked_blocks_between_computed_ones(session, dropout_p):
    """Hidden key blocks between computed ones (computed blocks 0, 2, 5, 6 of 64 keys, mixed and
    visible): the pipeline's slots follow the computed blocks, not their indices, so the result
    still matches the reference, and the cube ran exactly the computed blocks."""
    rng = np.random.default_rng(21)
    b, n, sq, skv, d = 1, 2, 96, 448, 64
    q, k, v = rand(rng, (b, n, sq, d), "float16"), rand(rng, (b, n, skv, d), "float16"), \
        rand(rng, (b, n, skv, d), "float16")
    mask = np.zeros((b, 1, 1, skv), dtype=bool)
    for block in (0, 2, 5, 6):
        mask[..., block * 64:(block + 1) * 64] = True
    mask[..., 130] = False  # block 2 mixed
    out, lse = acl_fa.flash_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, seed=4, block_m=32, block_n=64,
                                      return_lse=True, session=session)
    macs = sim_stats.last_launch(session.backend)["cube_macs"]
    ref_out, ref_lse = attention_reference(q, k, v, attn_mask=mask, dropout_p=dropout_p, seed=4)
    assert np.abs(out.astype(np.float64) - ref_out).max() < 5e-3
    assert np.abs(lse - ref_lse).max() < 1e-3
    # 2 matmuls x rows (16 per AIV half, 6 halves per head) x 4 blocks x 64 keys x D, per head
    assert macs == 2 * n * sq * 4 * 64 * d


def test_rows_that_see_no_key(session):
    """Rows the mask hides completely (alone, and with causal) give 0 and LSE -inf; others are finite."""
    rng = np.random.default_rng(2)
    q, k, v = (rand(rng, (1, 2, 100, 64), "float16") for _ in range(3))
    mask = rng.random((100, 100)) < 0.5
    mask[:, 0] = True  # every row sees key 0 (causal keeps it) ...
    mask[10:30] = False  # ... but these, which see nothing
    for causal in (False, True):
        out, lse = acl_fa.flash_attention(q, k, v, attn_mask=mask, causal=causal, dropout_p=0.3, seed=1,
                                          return_lse=True, session=session)
        assert (out[:, :, 10:30] == 0).all() and np.isneginf(lse[:, :, 10:30]).all()
        assert np.isfinite(lse[:, :, 30:]).all() and np.isfinite(lse[:, :, :10]).all()


def test_varlen_causal_window_dropout(session):
    """varlen + causal + window + dropout (+ GQA) against the float64 varlen reference; the keep
    mask [sequences, N, max Sq, max Skv] equals Philox on each sequence's visible pairs."""
    rng = np.random.default_rng(9)
    lens_q, lens_kv = (37, 0, 100, 5), (50, 10, 80, 5)
    n, nkv, d = 4, 2, 64
    q, k, v = rand(rng, (sum(lens_q), n, d), "float16"), rand(rng, (sum(lens_kv), nkv, d), "float16"), \
        rand(rng, (sum(lens_kv), nkv, d), "float16")
    cu_q, cu_k = np.cumsum((0,) + lens_q), np.cumsum((0,) + lens_kv)
    out, lse, keep = acl_fa.flash_attention_varlen(q, k, v, cu_q, cu_k, causal=True, window=(40, 0), dropout_p=0.2,
                                                   seed=3, offset=7, return_lse=True, return_dropout_mask=True,
                                                   block_m=32, block_n=32, session=session)
    ref_out, ref_lse = attention_reference_varlen(q, k, v, cu_q, cu_k, causal=True, window=(40, 0), dropout_p=0.2,
                                                  seed=3, offset=7)
    err = np.abs(out.astype(np.float64) - ref_out).max()
    assert err < 2e-2, err  # the fixed-length table applies the 2x-naive rule; this one a bound
    finite = np.isfinite(ref_lse)
    assert np.array_equal(finite, np.isfinite(lse)) and np.abs(lse[finite] - ref_lse[finite]).max() < 1e-3
    keep_prob = float(np.float32(0.8))
    options, _ = build_options(scores=(1, n, 1, 1), causal=True, window=(40, 0))
    assert keep.shape == (4, n, 100, 80)
    for s, (sq, skv) in enumerate(zip(lens_q, lens_kv)):
        vis = band_visible(options, sq, skv, slice(0, sq))
        for h in range(n):
            z = keep_mask(3, 7, s, h, n, sq, skv, keep_prob)
            assert np.array_equal(keep[s, h, :sq, :skv].astype(bool), z & vis)
        assert not keep[s, :, sq:].any() and not keep[s, :, :, skv:].any()


def test_same_result_for_every_block_size(session):
    """The keep mask depends only on (seed, offset, b, n, i, j): the same for any blocks; the
    outputs agree to rounding."""
    case = (1, 2, 2, 200, 200, 64, "float16", "BNSD", True, None, "keypad", 0.3, None, None)
    runs = [run_case(session, case[:-2] + blocks)[1] for blocks in ((None, None), (32, 32), (128, 64))]
    for other in runs[1:]:
        assert np.array_equal(runs[0][2], other[2])
        assert np.abs(runs[0][0].astype(np.float32) - other[0].astype(np.float32)).max() < 1e-2


REPRO_SCRIPT = """
import hashlib, json, sys
sys.path.insert(0, {tests!r})
import acl_fa
from test_mask_dropout_forward import CASES, run_case

with acl_fa.Session(backend="sim") as s:
    _, result = run_case(s, CASES[5])
    print(json.dumps(dict(soc=s.soc_name(), out=hashlib.sha256(result[0].tobytes()).hexdigest(),
                          lse=hashlib.sha256(result[1].tobytes()).hexdigest(),
                          keep=hashlib.sha256(result[2].tobytes()).hexdigest())))
"""


def test_reproducible_across_threads_and_chips(sim_only):
    """The GQA case with everything: bit-identical out, LSE and keep mask with 1 or 4 simulator
    threads, and on an Atlas A3 chip (other core count) as on the 910B2."""
    from pathlib import Path

    from conftest import TESTS, run_python

    script = REPRO_SCRIPT.format(tests=str(TESTS))
    runs = [run_python(script, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc, ACL_FA_SIM_THREADS=threads)
            for soc, threads in (("Ascend910B2", 1), ("Ascend910B2", 4), ("Ascend910_93", 2))]
    assert [r["soc"] for r in runs] == ["Ascend910B2", "Ascend910B2", "Ascend910_93"]
    for key in ("out", "lse", "keep"):
        assert len({r[key] for r in runs}) == 1, (key, runs)


def test_masked_key_blocks_are_skipped(session, sim_only):
    """A key-padding mask that hides whole key blocks: those blocks are neither loaded nor
    computed (cube MACs fall with the hidden blocks), and the mask's device bytes are its own."""
    rng = np.random.default_rng(4)
    q, k, v = (rand(rng, (1, 2, 256, 64), "float16") for _ in range(3))
    stats = {}
    for hidden in (0, 128):
        mask = np.ones((1, 1, 1, 256), dtype=bool)
        mask[..., 256 - hidden:] = False
        acl_fa.flash_attention(q, k, v, attn_mask=mask, block_m=64, block_n=64, session=session)
        stats[hidden] = sim_stats.last_launch(session.backend)
    assert stats[0]["kernel"] == "flash_attention_v2"
    assert stats[128]["cube_macs"] * 2 == stats[0]["cube_macs"]


def test_coupled_chips_refuse_mask_and_dropout(sim_only):
    from conftest import run_python

    script = """
import json
import numpy as np
import acl_fa
q = np.zeros((1, 1, 64, 64), np.float16)
msgs = []
with acl_fa.Session(backend="sim") as s:
    for kw in (dict(attn_mask=np.ones((64, 64), bool)), dict(dropout_p=0.1, seed=1)):
        try:
            acl_fa.flash_attention(q, q, q, session=s, **kw)
            msgs.append("ran")
        except acl_fa.InvalidArgumentError as exc:
            msgs.append(str(exc))
print(json.dumps(dict(msgs=msgs)))
"""
    run = run_python(script, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC="Ascend310P3")
    assert len(run["msgs"]) == 2
    # Named as the Python call names them (attn_mask, dropout_p), not by aclnn's atten_mask / keep_prob.
    assert run["msgs"][0].startswith("attn_mask:") and "Atlas A2/A3" in run["msgs"][0], run
    assert run["msgs"][1].startswith("dropout_p > 0:") and "Ascend310P3" in run["msgs"][1], run


BAD = [
    (dict(attn_mask=np.ones((64, 64), np.uint8)), InvalidTypeError, "True = the query may attend"),
    (dict(attn_mask=np.zeros((64, 64), np.float32)), InvalidTypeError, "True = the query may attend"),
    (dict(attn_mask=np.ones((3, 64), bool)), InvalidArgumentError, "does not broadcast"),
    (dict(attn_mask=np.ones((2, 1, 64, 64), bool)), InvalidArgumentError, "does not broadcast"),
    (dict(window=(-2, 0)), InvalidArgumentError, "window[0]=-2"),
    (dict(dropout_p=1.0), InvalidArgumentError, "dropout_p must be in [0, 1)"),
    (dict(dropout_p=-0.1), InvalidArgumentError, "dropout_p must be in [0, 1)"),
    (dict(dropout_p=0.1, seed=-1), InvalidArgumentError, "seed must be in [0, 2**64 - 1]"),
    (dict(dropout_p=0.1, seed=1 << 64), InvalidArgumentError, "seed must be in [0, 2**64 - 1]"),
    (dict(dropout_p=0.1, seed=1, offset=-3), InvalidArgumentError, "offset must be in [0, 2**64 - 1]"),
    (dict(return_dropout_mask=1), InvalidTypeError, "return_dropout_mask must be a bool"),
]


@pytest.mark.parametrize("kwargs, error, text", BAD, ids=lambda x: str(x)[:40])
def test_bad_input_is_refused(session, kwargs, error, text):
    q = np.zeros((1, 2, 64, 64), np.float16)
    with pytest.raises(error, match=re.escape(text)):
        acl_fa.flash_attention(q, q, q, session=session, **kwargs)


def test_varlen_refuses_a_mask_over_the_tokens(session):
    """A varlen mask spans [sequences, N, longest Sq, longest Skv] (test_varlen_mask.py), not the tokens."""
    q = np.zeros((10, 2, 64), np.float16)
    cu = np.array([0, 4, 10], np.int32)
    with pytest.raises(InvalidArgumentError, match=re.escape("does not broadcast to [B, N, Sq, Skv] = [2, 2, 6, 6]")):
        acl_fa.flash_attention_varlen(q, q, q, cu, cu, attn_mask=np.ones((10, 10), bool), session=session)


def test_default_seed_is_drawn_and_returned(session):
    rng = np.random.default_rng(0)
    q = rand(rng, (1, 1, 64, 64), "float16")
    a = acl_fa.flash_attention(q, q, q, dropout_p=0.5, return_lse=True, session=session)
    b = acl_fa.flash_attention(q, q, q, dropout_p=0.5, seed=a.seed, offset=a.offset, return_lse=True,
                               session=session)
    assert 0 <= a.seed < 1 << 64 and a.offset == 0 and a.next_offset == 1
    assert np.array_equal(a[0], b[0]) and np.array_equal(a.lse, b.lse)


@pytest.mark.parametrize("kwargs", [dict(attn_mask=np.ones((2, 1, 1, 200), bool)),
                                    dict(dropout_p=0.2, seed=1),
                                    dict(attn_mask=np.ones((200, 200), bool), dropout_p=0.2, seed=1,
                                         return_dropout_mask=True)], ids=["mask", "dropout", "all"])
def test_ub_budget_is_the_kernels(session, sim_only, kwargs):
    """The policy's UB lines for the mask and dropout (MaskTilesUbBytes, PhiloxUbBytes, the keep
    rows) are what the kernel places: the plan's UB total equals the launch's UB high water, and
    the workspace holds the mask summary."""
    from acl_fa.ops import forward_v2 as attention_v2
    from acl_fa.spec.problem import make_problem

    rng = np.random.default_rng(5)
    q, k, v = (rand(rng, (2, 2, 200, 64), "float16") for _ in range(3))
    acl_fa.flash_attention(q, k, v, session=session, **kwargs)
    ub = sim_stats.last_launch(session.backend)["ub_high_water"]
    problem, *_ = make_problem(q, k, v)
    options, _ = build_options(scores=(2, 2, 200, 200), **kwargs)
    plan = attention_v2.check_v2_plan(attention_v2.V2Call(problem, options), session.soc_name())
    lines = {line.name: line.bytes for line in plan.budget}
    assert ub == lines["UB total per AIV"]
    assert any(name.startswith("maskBuf") for name in lines) == ("attn_mask" in kwargs)
    assert any(name.startswith("philoxBuf") for name in lines) == ("dropout_p" in kwargs)
    assert any(name.startswith("keepBuf") for name in lines) == ("return_dropout_mask" in kwargs)
    slices = plan.used_core_num * plan.ws_bytes_per_core  # one per AIC group
    summary = 0
    if "attn_mask" in kwargs:  # one byte per (mask batch, mask head, query block, key block), 512-B aligned
        mb, mn, mq, mk = options.mask_shape
        blocks = mb * mn * (1 if mq == 1 else -(-mq // plan.block_m)) * -(-mk // plan.block_n)
        summary = -(-blocks // 512) * 512
    assert plan.user_workspace_bytes == slices + summary


def philox_ub_bytes(lanes):
    """op_kernel/philox_dropout.h PhiloxKeepMask::UbBytes."""
    return lanes * 4 * 58 + -(-(2 * lanes) // 32) * 32


@pytest.mark.parametrize("kwargs,lanes", [
    # 32 rows of 20 counters per AIV; since S and P have two buffers each (the next chunk's load
    # and the previous chunk's store overlap the vector work), less UB is left than the 320 lanes
    # (two chunks of 16 rows) before: 224 lanes
    (dict(dropout_p=0.1, seed=1), 224),
    # with the mask's tiles (320 before)
    (dict(dropout_p=0.1, seed=1, attn_mask=np.ones((1, 1, 1, 4096), bool)), 160),
    # keep rows (320 before)
    (dict(dropout_p=0.1, seed=1, return_dropout_mask=True), 144),
], ids=["dropout", "dropout+mask", "dropout+keep-mask"])
def test_dropout_chunks_take_the_ub_left(session, kwargs, lanes):
    """The Philox chunk takes the UB the other buffers leave, in the fewest chunks of equal rows
    (a chunk issues the same instructions whatever its size), never below 128 lanes (before: 128
    lanes, six chunks of 6 rows for 32 rows); the blocks that fit are those that fit with 128."""
    from acl_fa.ops import forward_v2 as attention_v2
    from acl_fa.spec.problem import make_problem

    shells = [np.empty((1, 2, 4096, 128), np.float16) for _ in range(3)]
    problem, *_ = make_problem(*shells, block_m=64, block_n=320)
    options, _ = build_options(scores=(1, 2, 4096, 4096), **kwargs)
    plan = attention_v2.check_v2_plan(attention_v2.V2Call(problem, options), session.soc_name())
    lines = {line.name: (line.bytes, line.capacity) for line in plan.budget}
    philox = next(v for name, v in lines.items() if name.startswith("philoxBuf"))
    assert philox[0] == philox_ub_bytes(lanes)
    total, ub = lines["UB total per AIV"]
    assert total <= ub
