"""FlashAttentionGradV2 (acl_fa.ops.backward_v2.run_backward_v2): sliding-window bands and
variable-length TND batches against a float64 reference, in both dQ modes; rows that see no
key; executed/useful cube MACs and core balance of a window; bad input.

Tolerance (flash-attention's rule, as tests/ops/flash_attention_grad/test_flash_attention_backward.py): the max error of
dq, dk, dv against float64 is at most twice the error of a naive backward in the input
precision (inputs in the dtype, fp32 arithmetic, P and dS rounded to the dtype before the
matmuls that read them, results in the dtype) plus one unit roundoff at the gradient's
magnitude. The reference is acl_fa.reference's (window and varlen), the band given as a window.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from acl_fa.reference.accuracy import ULP
from acl_fa.spec.problem import make_problem
from acl_fa.spec.band import UNBOUNDED
from acl_fa.spec.options import AttentionOptions
from acl_fa.ops.backward_v2 import run_backward_v2
from acl_fa.runtime.errors import AclError, InvalidArgumentError
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.reference.attention import (
    attention_reference, attention_reference_backward, attention_reference_varlen,
    attention_reference_varlen_backward)
from acl_fa.runtime.sim_stats import last_launch

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
U = UNBOUNDED


def _band_masked(sq, skv, pre, nxt):
    """[sq, skv] True where key j is outside row i's band (bottom-right aligned)."""
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    diag = skv - sq
    return ~((j >= i + diag - pre) & (j <= i + diag + nxt))


def _reference(q, k, v, dout, *, layout, n, nkv, pre, nxt, scale, cu_q=None, cu_kv=None, work=np.float64,
               round_to=None):
    """(out, lse, dq, dk, dv) of acl_fa.reference with the band as a window, laid out as the op's
    (lse [B, N, Sq] or [N, Tq]); gradients in `work`."""
    window = (-1 if pre == U else pre, -1 if nxt == U else nxt)
    grad_kw = dict(scale=scale, window=window, work_dtype=work, out_dtype=work, round_to=round_to)
    if cu_q is None:
        heads = dict(layout=layout, num_heads=n, num_kv_heads=nkv)
        out, lse = attention_reference(q, k, v, scale=scale, window=window, **heads)
        grads = attention_reference_backward(dout, q, k, v, **heads, **grad_kw)
    else:  # flash-attn's cu_seqlens: the leading 0, then the op's cumulative ends
        starts_q, starts_kv = (0,) + tuple(cu_q), (0,) + tuple(cu_kv)
        out, lse = attention_reference_varlen(q, k, v, starts_q, starts_kv, scale=scale, window=window)
        grads = attention_reference_varlen_backward(dout, q, k, v, starts_q, starts_kv, **grad_kw)
    return (out, lse, *grads)


def _inputs(q_shape, kv_shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (q_shape, kv_shape, kv_shape, q_shape))


def _run_and_check(session, q, k, v, dout, *, layout, n, nkv, pre, nxt, deterministic, cu_q=None, cu_kv=None,
                   block_m=None, block_n=None):
    dtype = q.dtype
    scale = 1.0 / math.sqrt(q.shape[-1] if layout != "BSH" else q.shape[-1] // n)
    kw = dict(layout=layout, n=n, nkv=nkv, pre=pre, nxt=nxt, scale=scale, cu_q=cu_q, cu_kv=cu_kv)
    out, lse, *want = _reference(q, k, v, dout, **kw)
    naive = _reference(q, k, v, dout, work=np.float32, round_to=dtype, **kw)[2:]
    if cu_q is None:
        problem = make_problem(q, k, v, layout=layout, num_heads=n, num_kv_heads=nkv, scale=scale, block_m=block_m,
                               block_n=block_n)[0]
    else:  # the forward's problem of one sequence: its scale, dtype and blocks are what the backward uses
        problem = make_problem(q[None], k[None], v[None], layout="BSND", scale=scale, block_m=block_m,
                               block_n=block_n)[0]
    options = AttentionOptions(pre_tokens=pre, next_tokens=nxt, cu_seqlens_q=cu_q, cu_seqlens_kv=cu_kv)
    grads = run_backward_v2(session, problem, options, dout, q, k, v, out.astype(dtype), lse.astype(np.float32),
                            None, deterministic)
    name = "bfloat16" if dtype == BF16 else "float16"
    for label, got, ref, same, x in zip(("dq", "dk", "dv"), grads, want, naive, (q, k, v)):
        assert got.shape == x.shape and got.dtype == x.dtype
        error = float(np.abs(got.astype(np.float64) - ref).max()) if ref.size else 0.0
        naive_error = float(np.abs(same.astype(dtype).astype(np.float64) - ref).max()) if ref.size else 0.0
        tolerance = 2 * naive_error + ULP[name] * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
        assert error <= tolerance, f"{label}: max error {error:.3g} > {tolerance:.3g} (naive {naive_error:.3g})"
    return grads, lse


# (B, N, Nkv, Sq, Skv, D, dtype, layout, pre, next, block_m, block_n)
DENSE = [
    (1, 2, 2, 300, 300, 64, F16, "BNSD", 64, 32, None, None),     # window alone
    (2, 4, 2, 257, 257, 32, BF16, "BSND", 128, 0, None, None),    # causal + window, GQA
    (1, 2, 1, 100, 333, 16, F16, "BNSD", 16, 0, None, None),      # Sq < Skv, MQA
    (1, 2, 2, 300, 100, 64, F16, "BNSD", 20, 0, None, None),      # Sq > Skv: 200 rows see nothing
    (1, 3, 1, 150, 150, 128, BF16, "BSH", 0, 0, None, None),      # the diagonal alone
    (1, 2, 2, 200, 200, 64, F16, "BNSD", 50, 7, 32, 64),          # user blocks
    (1, 2, 2, 130, 130, 16, F16, "BNSD", U, 0, None, None),       # causal through V2
    (1, 2, 2, 96, 160, 32, BF16, "BNSD", 5, 40, None, None),      # a window reaching ahead
]


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("case", DENSE, ids=lambda c: f"B{c[0]}N{c[1]}kv{c[2]}-Sq{c[3]}-Skv{c[4]}-D{c[5]}-"
                         f"{c[6]}-{c[7]}-w{c[8]},{c[9]}" + (f"-b{c[10]}x{c[11]}" if c[10] else ""))
def test_window_matches_reference(session, case, deterministic):
    b, n, nkv, sq, skv, d, dtype, layout, pre, nxt, bm, bn = case
    q, k, v, dout = _inputs(shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d), dtype)
    grads, lse = _run_and_check(session, q, k, v, dout, layout=layout, n=n, nkv=nkv, pre=pre, nxt=nxt,
                                deterministic=deterministic, block_m=bm, block_n=bn)
    blind = np.isneginf(lse)  # [B, N, Sq]: rows that see no key get dq exactly 0
    if blind.any():
        dq = to_bnsd(grads[0], layout, n)
        assert not dq[blind].any()


# (N, Nkv, D, dtype, query lengths, key lengths, pre, next)
VARLEN = [
    (2, 2, 64, F16, (200, 1, 77), (200, 1, 77), U, U),
    (4, 2, 32, BF16, (150, 17, 300), (160, 40, 300), 50, 0),     # varlen + causal + window, GQA
    (2, 1, 16, F16, (100, 64), (30, 64), U, 0),                   # sequence 0: 70 rows see nothing
    (2, 2, 32, F16, (0, 33, 5), (20, 33, 0), U, U),               # empty query / key sequences
]


@pytest.mark.parametrize("deterministic", [True, False], ids=["det", "atomic"])
@pytest.mark.parametrize("case", VARLEN, ids=lambda c: f"N{c[0]}kv{c[1]}-D{c[2]}-{c[3]}-q{c[4]}-kv{c[5]}-w{c[6]},{c[7]}")
def test_varlen_matches_reference(session, case, deterministic):
    n, nkv, d, dtype, lens_q, lens_kv, pre, nxt = case
    cu_q, cu_kv = tuple(np.cumsum(lens_q).tolist()), tuple(np.cumsum(lens_kv).tolist())
    q, k, v, dout = _inputs((cu_q[-1], n, d), (cu_kv[-1], nkv, d), dtype, seed=1)
    grads, lse = _run_and_check(session, q, k, v, dout, layout="TND", n=n, nkv=nkv, pre=pre, nxt=nxt,
                                deterministic=deterministic, cu_q=cu_q, cu_kv=cu_kv)
    blind = np.isneginf(lse).T  # [Tq, N]
    assert not grads[0][blind].any()


def _useful_macs(sq, skv, pre, nxt, heads, d):
    """5 matmuls (S, dP, dV, dK, dQ) x D per visible (query, key) pair."""
    return 5 * d * heads * int((~_band_masked(sq, skv, pre, nxt)).sum())


# Edges on the cube's 16-row fractals: 1.06; edges between them cost up to one fractal row at
# each edge of every key block's rows (cube MACs are counted on padded tiles): 1.12 for W = 257.
@pytest.mark.parametrize("pre, nxt, bound", [(256, 0, 1.10), (192, 64, 1.10), (200, 56, 1.13)])
def test_window_executes_the_band_and_balances_the_cores(session, pre, nxt, bound):
    """Executed cube MACs near the band's useful MACs (blocks outside the band never computed,
    every step trimmed to its rows that see the key block), the AIC cores' MACs within 1.10 of
    their mean."""
    n, s, d = 4, 2048, 64
    q, k, v, dout = _inputs((1, n, s, d), (1, n, s, d), F16)
    problem = make_problem(q, k, v)[0]
    out = np.zeros(q.shape, F16)
    lse = np.zeros((1, n, s), np.float32)
    options = AttentionOptions(pre_tokens=pre, next_tokens=nxt)
    run_backward_v2(session, problem, options, dout, q, k, v, out, lse, None, True)
    stats = last_launch(session.backend, per_core=True)
    assert stats["kernel"] == "flash_attention_grad_v2"
    ratio = stats["cube_macs"] / _useful_macs(s, s, pre, nxt, n, d)
    assert 1.0 <= ratio <= bound, ratio
    loads = [c["cube_macs"] for c in stats["aic"] if c["cube_macs"]]
    assert max(loads) / (sum(loads) / len(loads)) <= 1.10, loads


def test_varlen_balances_sequences_of_very_different_lengths(session):
    """A long causal sequence next to short ones: the cores' executed MACs within 1.15 of their mean
    (with enough heads that the largest unit, a key block of the long sequence, is below a
    core's share)."""
    n, d = 16, 32
    lens = (1500, 100, 17, 400)
    cu = tuple(np.cumsum(lens).tolist())
    q, k, v, dout = _inputs((cu[-1], n, d), (cu[-1], n, d), F16)
    problem = make_problem(q[None], k[None], v[None], layout="BSND")[0]
    out = np.zeros(q.shape, F16)
    lse = np.zeros((n, cu[-1]), np.float32)
    options = AttentionOptions(next_tokens=0, cu_seqlens_q=cu, cu_seqlens_kv=cu)
    run_backward_v2(session, problem, options, dout, q, k, v, out, lse, None, True)
    stats = last_launch(session.backend, per_core=True)
    useful = sum(_useful_macs(s, s, U, 0, n, d) for s in lens)
    # the diagonal's half key block weighs more in short sequences (1.11 here)
    assert stats["cube_macs"] / useful <= 1.12
    loads = [c["cube_macs"] for c in stats["aic"] if c["cube_macs"]]
    assert max(loads) / (sum(loads) / len(loads)) <= 1.15, loads


def _small(layout="BNSD"):
    q, k, v, dout = _inputs((1, 2, 32, 16), (1, 2, 32, 16), F16)
    return make_problem(q, k, v)[0], q, k, v, dout


def test_bad_input_is_refused_before_device_work(session):
    problem, q, k, v, dout = _small()
    lse = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(InvalidArgumentError, match="attn_mask"):
        run_backward_v2(session, problem, AttentionOptions(), dout, q, k, v, q, lse, np.zeros((1, 1, 32, 32), np.uint8),
                        True)
    with pytest.raises(InvalidArgumentError, match=r"lse has shape \(2, 32\); it must be \[B, N, Sq\]"):
        run_backward_v2(session, problem, AttentionOptions(), dout, q, k, v, q, lse[0], None, True)
    tq = np.zeros((32, 2, 16), F16)
    with pytest.raises(InvalidArgumentError, match=r"it must be \[N, Tq\] = \[2, 32\]"):
        run_backward_v2(session, problem, AttentionOptions(cu_seqlens_q=(10, 32), cu_seqlens_kv=(10, 32)),
                        tq, tq, tq, tq, tq, np.zeros((32, 2), np.float32), None, True)


def test_empty_band_is_refused_by_the_tiling(session):
    problem, q, k, v, dout = _small()
    lse = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(AclError, match="pre_tokens \\+ next_tokens must be >= 0"):
        run_backward_v2(session, problem, AttentionOptions(pre_tokens=-3, next_tokens=1), dout, q, k, v, q, lse, None,
                        True)


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np, acl_fa
    from acl_fa.spec.problem import make_problem
    from acl_fa.spec.options import AttentionOptions
    from acl_fa.ops.backward_v2 import run_backward_v2
    rng = np.random.default_rng(7)
    cu = (300, 317, 700)  # three sequences, a band reaching across key blocks of every core
    q, k, v, dout = (rng.standard_normal((700, h, 32)).astype(np.float16) for h in (4, 2, 2, 4))
    out = rng.standard_normal(q.shape).astype(np.float16)
    lse = np.abs(rng.standard_normal((4, 700))).astype(np.float32) + 3
    problem = make_problem(q[None], k[None], v[None], layout="BSND", block_m=32, block_n=32)[0]
    options = AttentionOptions(pre_tokens=90, next_tokens=5, cu_seqlens_q=cu, cu_seqlens_kv=cu)
    with acl_fa.Session() as s:
        digests = []
        for _ in range(int(sys.argv[1])):
            grads = run_backward_v2(s, problem, options, dout, q, k, v, out, lse, None, True)
            digests.append(hashlib.sha256(b"".join(g.tobytes() for g in grads)).hexdigest())
    print(json.dumps(digests))
""")


def test_deterministic_mode_is_bit_identical_across_threads(sim_only):
    """Window + varlen, deterministic dQ: the same bits with 1, 2 and 3 simulator threads and on
    repeats (the fixed summation order holds with the band's walks and the trimmed steps)."""
    digests = set()
    for threads, repeats in ((1, 3), (2, 1), (3, 1)):
        env = dict(os.environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS=str(threads))
        result = subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT, str(repeats)], env=env,
                                capture_output=True, text=True, timeout=600, check=True)
        digests |= set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert len(digests) == 1, f"{len(digests)} different results"
