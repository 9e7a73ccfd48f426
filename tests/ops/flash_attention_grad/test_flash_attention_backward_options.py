"""FlashAttentionGradV2 with the attention mask and dropout (acl_fa.flash_attention_backward /
flash_attention_varlen_backward): each option alone and in combination with causal, a window,
GQA and varlen, against the float64 reference backward (acl_fa.reference, which has every
option and its own numpy Philox); masked blocks skipped; the same bits with other thread counts
and chips; bad input.

Tolerance (flash-attention's rule, as tests/ops/flash_attention_grad/test_flash_attention_backward.py): the max error of
dq, dk, dv against float64 is at most twice the error of a naive backward in the input
precision (inputs in the dtype, fp32 arithmetic, P and dS rounded to the dtype) plus one unit
roundoff at the gradient's magnitude. O and LSE come from the float64 reference forward (the
backward's inputs; the forward kernel is tested on its own).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import ULP
from acl_fa.runtime.errors import InvalidArgumentError
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.reference.attention import (
    attention_reference, attention_reference_backward, attention_reference_varlen,
    attention_reference_varlen_backward)
from acl_fa.runtime.sim_stats import last_launch

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
SEED = 0x1234_5678_9ABC_DEF0  # both key words non-zero


def _inputs(q_shape, kv_shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (q_shape, kv_shape, kv_shape, q_shape))


def _mask(kind, b, n, sq, skv, rng):
    """The torch-convention bool mask (True = may attend) of a case, or None. Every mask has whole
    blocks of each class for 64 x 64 blocks: keys [64, 128) hidden, [0, 64) visible."""
    if kind is None:
        return None
    shape = {"SqSkv": (sq, skv), "B1SqSkv": (b, 1, sq, skv), "BNSqSkv": (b, n, sq, skv), "keypad": (b, 1, 1, skv)}[kind]
    mask = rng.uniform(size=shape) > 0.3
    mask[..., :64] = True
    mask[..., 64:128] = False
    if kind != "keypad":
        mask[..., 3, :] = False  # a row that sees no key
    return mask


def _check(grads, want, naive, dtype, inputs):
    name = "bfloat16" if dtype == BF16 else "float16"
    for label, got, ref, same, x in zip(("dq", "dk", "dv"), grads, want, naive, inputs):
        assert got.shape == x.shape and got.dtype == x.dtype
        error = float(np.abs(got.astype(np.float64) - ref).max())
        naive_error = float(np.abs(same.astype(dtype).astype(np.float64) - ref).max())
        tolerance = 2 * naive_error + ULP[name] * max(1.0, float(np.abs(ref).max()))
        assert error <= tolerance, f"{label}: max error {error:.3g} > {tolerance:.3g} (naive {naive_error:.3g})"


def _dense(session, case, deterministic=True, seed=0):
    """Runs one dense case through flash_attention_backward; returns (grads, reference lse, options kwargs)."""
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mask_kind, p = case
    q, k, v, dout = _inputs(shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d), dtype, seed)
    mask = _mask(mask_kind, b, n, sq, skv, np.random.default_rng(seed + 5))
    heads = dict(layout=layout, num_heads=n, num_kv_heads=nkv)
    opts = dict(causal=causal, window=window, attn_mask=mask, dropout_p=p, seed=SEED if p else 0, offset=11)
    out, lse = attention_reference(q, k, v, **heads, **opts)
    want = attention_reference_backward(dout, q, k, v, **heads, **opts)
    naive = attention_reference_backward(dout, q, k, v, **heads, **opts, work_dtype=np.float32, round_to=dtype)
    grads = acl_fa.flash_attention_backward(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), **heads, **opts,
                                            deterministic=deterministic, session=session)
    _check(grads, want, naive, dtype, (q, k, v))
    return grads, lse, layout, n


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal, window, mask, dropout_p)
DENSE = [
    (1, 2, 2, 150, 200, 32, F16, "BNSD", False, None, "SqSkv", 0.0),            # mask alone
    (2, 2, 2, 96, 256, 16, F16, "BNSD", False, None, "keypad", 0.0),            # key padding
    (2, 2, 1, 130, 130, 32, BF16, "BSND", True, (60, -1), "B1SqSkv", 0.0),     # causal + window + mask, MQA
    (1, 2, 2, 100, 180, 32, F16, "BNSD", False, None, "BNSqSkv", 0.2),          # mask + dropout
    (1, 2, 2, 200, 200, 64, F16, "BNSD", False, None, None, 0.1),               # dropout alone
    (1, 3, 3, 77, 77, 16, BF16, "BSH", True, None, None, 0.5),                  # causal + dropout, BSH
    (2, 4, 2, 160, 160, 32, BF16, "BSND", True, (90, -1), "BNSqSkv", 0.25),     # GQA with everything
]


def _ids(c):
    return (f"B{c[0]}N{c[1]}kv{c[2]}-Sq{c[3]}-Skv{c[4]}-D{c[5]}-{c[6]}-{c[7]}" + ("-causal" if c[8] else "") +
            (f"-w{c[9][0]},{c[9][1]}" if c[9] else "") + (f"-mask{c[10]}" if c[10] else "") +
            (f"-p{c[11]}" if c[11] else ""))


@pytest.mark.parametrize("case", DENSE, ids=_ids)
def test_mask_and_dropout_match_reference(session, case):
    grads, lse, layout, n = _dense(session, case)
    blind = np.isneginf(lse)  # [B, N, Sq]: rows that see no key get dq exactly 0
    if blind.any():
        assert not to_bnsd(grads[0], layout, n)[blind].any()


@pytest.mark.parametrize("case", [DENSE[3], DENSE[6]], ids=_ids)
def test_atomic_dq_mode_matches_reference(session, case):
    _dense(session, case, deterministic=False, seed=2)


# (N, Nkv, D, dtype, query lengths, key lengths, causal, window, dropout_p)
VARLEN = [
    (4, 2, 32, F16, (150, 17, 300), (160, 40, 300), True, (50, -1), 0.1),    # varlen + causal + window + dropout
    (2, 2, 16, BF16, (64, 0, 90), (64, 30, 120), False, None, 0.3),
]


@pytest.mark.parametrize("case", VARLEN, ids=lambda c: f"N{c[0]}kv{c[1]}-D{c[2]}-{c[3]}-q{c[4]}-kv{c[5]}-p{c[8]}")
def test_varlen_dropout_matches_reference(session, case):
    n, nkv, d, dtype, lens_q, lens_kv, causal, window, p = case
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int64)
    cu_kv = np.concatenate([[0], np.cumsum(lens_kv)]).astype(np.int64)
    q, k, v, dout = _inputs((cu_q[-1], n, d), (cu_kv[-1], nkv, d), dtype, seed=3)
    opts = dict(causal=causal, window=window, dropout_p=p, seed=SEED, offset=5)
    out, lse = attention_reference_varlen(q, k, v, cu_q, cu_kv, **opts)
    want = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_kv, **opts)
    naive = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_kv, **opts, work_dtype=np.float32,
                                                round_to=dtype)
    grads = acl_fa.flash_attention_varlen_backward(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), cu_q,
                                                   cu_kv, **opts, session=session)
    _check(grads, want, naive, dtype, (q, k, v))


def test_dropout_changes_the_gradients_with_the_seed(session):
    """The seed reaches the kernel: another seed gives other gradients (and each matches its reference)."""
    case = DENSE[4]
    b, n, nkv, sq, skv, d, dtype, layout = case[:8]
    q, k, v, dout = _inputs(shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d), dtype)
    out, lse = attention_reference(q, k, v, dropout_p=0.1, seed=SEED)
    runs = [acl_fa.flash_attention_backward(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), dropout_p=0.1,
                                            seed=s, session=session)[2] for s in (SEED, SEED + 1)]
    assert not np.array_equal(runs[0], runs[1])


def test_key_padding_mask_skips_the_hidden_blocks(session):
    """A key-padding mask hiding the second half of the keys: the hidden blocks are neither loaded
    nor computed, so the executed cube MACs halve (within the visible half's own tiling)."""
    b, n, s, d = 1, 2, 512, 32
    q, k, v, dout = _inputs((b, n, s, d), (b, n, s, d), F16)
    out = np.zeros(q.shape, F16)
    lse = np.zeros((b, n, s), np.float32)
    macs = []
    for mask in (np.ones((b, 1, 1, s), bool), np.arange(s)[None, None, None, :] < s // 2):
        acl_fa.flash_attention_backward(dout, q, k, v, out, lse, attn_mask=mask, block_m=64, block_n=64,
                                        session=session)
        stats = last_launch(session.backend)
        assert stats["kernel"] == "flash_attention_grad_v2"
        macs.append(stats["cube_macs"])
    assert macs[1] / macs[0] == pytest.approx(0.5, abs=0.01), macs


def test_backward_dropout_needs_the_forward_seed(session):
    q, k, v, dout = _inputs((1, 2, 32, 16), (1, 2, 32, 16), F16)
    lse = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(InvalidArgumentError, match="seed"):
        acl_fa.flash_attention_backward(dout, q, k, v, q, lse, dropout_p=0.1, session=session)
    with pytest.raises(InvalidArgumentError, match="dropout_p"):
        acl_fa.flash_attention_backward(dout, q, k, v, q, lse, dropout_p=1.0, seed=1, session=session)
    with pytest.raises(InvalidArgumentError, match="attn_mask"):
        acl_fa.flash_attention_backward(dout, q, k, v, q, lse, attn_mask=np.ones((3, 5), bool), session=session)


REPRO_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np, acl_fa
    rng = np.random.default_rng(7)
    q, k, v, dout = (rng.standard_normal((2, 4 // h, 300, 32)).astype(np.float16) for h in (1, 2, 2, 1))
    out = rng.standard_normal(q.shape).astype(np.float16)
    lse = np.abs(rng.standard_normal((2, 4, 300))).astype(np.float32) + 3
    mask = rng.uniform(size=(2, 1, 300, 300)) > 0.2
    mask[..., 64:160] = False
    digests = []
    with acl_fa.Session() as s:
        for _ in range(int(sys.argv[1])):
            grads = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, causal=True, window=(200, -1),
                                                    attn_mask=mask, dropout_p=0.3, seed=99, offset=4,
                                                    block_m=16, block_n=32, session=s)
            digests.append(hashlib.sha256(b"".join(g.tobytes() for g in grads)).hexdigest())
    print(json.dumps(digests))
""")


def test_mask_and_dropout_are_bit_identical_across_threads_and_chips(sim_only):
    """Causal + window + mask + dropout, deterministic dQ: the same bits with 1 and 3 simulator
    threads, on repeats, and on a 20-core chip (40 K/V units of 300 query rows over 48 or 40 AIVs)."""
    digests = set()
    for soc, threads, repeats in (("Ascend910B2", 1, 2), ("Ascend910B2", 3, 1), ("Ascend910B3", 2, 1)):
        env = dict(__import__("os").environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS=str(threads),
                   ACL_FA_SIM_SOC=soc)
        result = subprocess.run([sys.executable, "-c", REPRO_SCRIPT, str(repeats)], env=env, capture_output=True,
                                text=True, timeout=600, check=True)
        digests |= set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert len(digests) == 1, f"{len(digests)} different results"


def test_mask_geometry_is_checked_by_the_tiling(session):
    """A device mask whose dims do not broadcast to [B, N, Sq, Skv] is refused by op_host, naming the dim."""
    from acl_fa.spec.problem import make_problem
    from acl_fa.spec.options import AttentionOptions
    from acl_fa.ops.backward_v2 import run_backward_v2
    from acl_fa.runtime.errors import AclError

    q, k, v, dout = _inputs((1, 2, 32, 16), (1, 2, 32, 16), F16)
    lse = np.zeros((1, 2, 32), np.float32)
    problem = make_problem(q, k, v)[0]
    for shape, message in (((3, 1, 32, 32), r"atten_mask batch dimension must be 1 or 1, got 3"),
                           ((1, 1, 32, 31), r"atten_mask must be rank 4 .* Skv = 32")):
        with pytest.raises(AclError, match=message):
            run_backward_v2(session, problem, AttentionOptions(mask_shape=shape), dout, q, k, v, q, lse,
                            np.zeros(shape, np.uint8), True)
