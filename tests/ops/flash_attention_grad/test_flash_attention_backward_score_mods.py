"""FlashAttentionGradV3: the backward of soft-capping, ALiBi and attention sinks
(acl_fa.flash_attention_backward / flash_attention_varlen_backward with softcap=, alibi_slopes=,
sinks=; docs/attention_options.md "Score modifiers"), each alone and together, causal and not,
GQA, varlen, against the float64 reference backward (acl_fa.reference.attention, which
implements each modifier independently); dsinks; the same bits on repeats, thread counts and
chips; bad input.

Tolerance (flash-attention's rule, as test_flash_attention_backward_options.py): the max error of
dq, dk, dv (and dsinks) against float64 is at most twice the error of a naive backward in the
input precision (fp32 arithmetic, P and dS rounded to the dtype) plus one unit roundoff at the
gradient's magnitude. O and LSE come from the float64 reference forward with the same modifiers
(the LSE includes the sinks, as the forward's does).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import ULP
from acl_fa.reference.attention import (
    attention_reference, attention_reference_backward, attention_reference_varlen,
    attention_reference_varlen_backward)
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.sim_stats import last_launch
from acl_fa.spec.layouts import shape_of

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


def _inputs(q_shape, kv_shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (q_shape, kv_shape, kv_shape, q_shape))


def _modifiers(kind: str, b: int, n: int, seed: int) -> dict:
    """The modifier kwargs of a case: 'cap' softcap, 'alibi' [N] slopes, 'alibiBN' [B, N] slopes,
    'sinks' per-head logits; '+' joins them. Softcap 1.5 bends the scores (about N(0, 2) here)
    hard; slopes as ALiBi's geometric series; sinks around the row maxima, so the sink's weight
    is large."""
    rng = np.random.default_rng(seed + 17)
    mods = {}
    for part in kind.split("+"):
        if part == "cap":
            mods["softcap"] = 1.5
        elif part == "alibi":
            mods["alibi_slopes"] = (2.0 ** (-8.0 * np.arange(1, n + 1) / n) * 0.5).astype(np.float32)
        elif part == "alibiBN":
            mods["alibi_slopes"] = rng.uniform(0.01, 0.3, size=(b, n)).astype(np.float32)
        elif part == "sinks":
            mods["sinks"] = rng.uniform(-1.0, 3.0, size=n).astype(np.float32)
        else:
            raise AssertionError(part)
    return mods


def _check(got, want, naive, dtype, labels=("dq", "dk", "dv", "dsinks")):
    name = "bfloat16" if dtype == BF16 else "float16"
    assert len(got) == len(want)
    for label, g, ref, same in zip(labels, got, want, naive):
        error = float(np.abs(g.astype(np.float64) - ref).max())
        rounded = same if label == "dsinks" else same.astype(dtype)
        naive_error = float(np.abs(rounded.astype(np.float64) - ref).max())
        tolerance = 2 * naive_error + ULP[name] * max(1.0, float(np.abs(ref).max()))
        assert error <= tolerance, f"{label}: max error {error:.3g} > {tolerance:.3g} (naive {naive_error:.3g})"


def _dense(session, case, deterministic=True, seed=0):
    b, n, nkv, sq, skv, d, dtype, layout, causal, kind = case
    q, k, v, dout = _inputs(shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d), dtype, seed)
    heads = dict(layout=layout, num_heads=n, num_kv_heads=nkv, causal=causal)
    mods = _modifiers(kind, b, n, seed)
    out, lse = attention_reference(q, k, v, **heads, **mods)
    want = attention_reference_backward(dout, q, k, v, **heads, **mods)
    naive = attention_reference_backward(dout, q, k, v, **heads, **mods, work_dtype=np.float32, round_to=dtype)
    got = acl_fa.flash_attention_backward(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), **heads, **mods,
                                          deterministic=deterministic, session=session)
    assert len(got) == (4 if "sinks" in mods else 3)
    for g, x in zip(got, (q, k, v)):
        assert g.shape == x.shape and g.dtype == x.dtype
    if "sinks" in mods:
        assert got[3].shape == (n,) and got[3].dtype == np.float32
    _check(got, want, naive, dtype)
    return got


# (B, N, Nkv, Sq, Skv, D, dtype, layout, causal, modifiers)
DENSE = [
    (1, 2, 2, 150, 200, 32, F16, "BNSD", False, "cap"),
    (1, 2, 2, 200, 200, 32, BF16, "BNSD", True, "cap"),
    (2, 2, 2, 130, 170, 32, F16, "BNSD", False, "alibi"),
    (2, 4, 2, 160, 100, 32, BF16, "BSND", True, "alibiBN"),      # GQA, Sq > Skv (bottom-right)
    (1, 3, 3, 140, 140, 16, F16, "BNSD", False, "sinks"),
    (2, 4, 1, 150, 150, 32, F16, "BSH", True, "sinks"),          # MQA
    (2, 4, 2, 200, 260, 64, F16, "BNSD", True, "cap+alibiBN+sinks"),
    (1, 2, 2, 300, 300, 32, BF16, "BSND", False, "cap+alibi+sinks"),
]


def _ids(c):
    return f"B{c[0]}N{c[1]}kv{c[2]}-Sq{c[3]}-Skv{c[4]}-D{c[5]}-{c[6]}-{c[7]}" + ("-causal" if c[8] else "") + f"-{c[9]}"


@pytest.mark.parametrize("case", DENSE, ids=_ids)
def test_score_modifiers_match_reference(session, case):
    _dense(session, case)
    assert last_launch(session.backend)["kernel"] == "flash_attention_grad_v3"


@pytest.mark.parametrize("case", [DENSE[6]], ids=_ids)
def test_atomic_dq_mode_with_modifiers_matches_reference(session, case):
    _dense(session, case, deterministic=False, seed=2)


def test_modifiers_change_the_gradients(session):
    """softcap and ALiBi reach the kernel: the gradients differ from the plain backward's for the
    same LSE. Sinks enter P only through the forward's LSE, so for the same LSE dq, dk, dv are the
    plain backward's bit for bit and only dsinks is added."""
    b, n, sq, d, dtype = 1, 2, 96, 32, F16
    q, k, v, dout = _inputs((b, n, sq, d), (b, n, sq, d), dtype)
    out, lse = attention_reference(q, k, v, causal=True)
    args = (dout, q, k, v, out.astype(dtype), lse.astype(np.float32))
    plain = acl_fa.flash_attention_backward(*args, causal=True, session=session)
    for mods in (dict(softcap=1.5), dict(alibi_slopes=np.full(n, 0.2, np.float32))):
        got = acl_fa.flash_attention_backward(*args, causal=True, session=session, **mods)
        assert len(got) == 3
        assert not np.array_equal(got[0], plain[0]) and not np.array_equal(got[1], plain[1]), mods
    got = acl_fa.flash_attention_backward(*args, causal=True, session=session, sinks=np.zeros(n, np.float32))
    assert len(got) == 4 and all(np.array_equal(g, p) for g, p in zip(got[:3], plain))
    assert np.all(got[3] != 0)


# (N, Nkv, D, dtype, query lengths, key lengths, causal, modifiers)
VARLEN = [
    (4, 2, 32, F16, (150, 17, 300), (160, 40, 300), True, "cap+alibiBN+sinks"),
    (2, 2, 16, BF16, (64, 0, 90), (64, 30, 120), False, "alibi+sinks"),
]


@pytest.mark.parametrize("case", VARLEN, ids=lambda c: f"N{c[0]}kv{c[1]}-D{c[2]}-{c[3]}-q{c[4]}-kv{c[5]}-{c[7]}")
def test_varlen_modifiers_match_reference(session, case):
    n, nkv, d, dtype, lens_q, lens_kv, causal, kind = case
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int64)
    cu_kv = np.concatenate([[0], np.cumsum(lens_kv)]).astype(np.int64)
    q, k, v, dout = _inputs((cu_q[-1], n, d), (cu_kv[-1], nkv, d), dtype, seed=3)
    mods = _modifiers(kind, len(lens_q), n, 3)
    out, lse = attention_reference_varlen(q, k, v, cu_q, cu_kv, causal=causal, **mods)
    want = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_kv, causal=causal, **mods)
    naive = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_kv, causal=causal, **mods,
                                                work_dtype=np.float32, round_to=dtype)
    got = acl_fa.flash_attention_varlen_backward(dout, q, k, v, out.astype(dtype), lse.astype(np.float32), cu_q,
                                                 cu_kv, causal=causal, **mods, session=session)
    _check(got, want, naive, dtype)


REPRO_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np, acl_fa
    rng = np.random.default_rng(7)
    q, k, v, dout = (rng.standard_normal((2, 4 // h, 300, 32)).astype(np.float16) for h in (1, 2, 2, 1))
    out = rng.standard_normal(q.shape).astype(np.float16)
    lse = np.abs(rng.standard_normal((2, 4, 300))).astype(np.float32) + 3
    slopes = rng.uniform(0.01, 0.3, size=(2, 4)).astype(np.float32)
    sinks = rng.standard_normal(4).astype(np.float32)
    digests = []
    with acl_fa.Session() as s:
        for _ in range(int(sys.argv[1])):
            grads = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, causal=True, softcap=2.0,
                                                    alibi_slopes=slopes, sinks=sinks, block_m=16, block_n=32,
                                                    session=s)
            digests.append(hashlib.sha256(b"".join(g.tobytes() for g in grads)).hexdigest())
    print(json.dumps(digests))
""")


def test_modifiers_are_bit_identical_across_threads_and_chips(sim_only):
    """Softcap + ALiBi + sinks, deterministic dQ and dsinks: the same bits with 1 and 3 simulator
    threads, on repeats, and on a 20-core chip (48 or 40 AIVs)."""
    digests = set()
    for soc, threads, repeats in (("Ascend910B2", 1, 2), ("Ascend910B2", 3, 1), ("Ascend910B3", 2, 1)):
        env = dict(__import__("os").environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS=str(threads),
                   ACL_FA_SIM_SOC=soc)
        result = subprocess.run([sys.executable, "-c", REPRO_SCRIPT, str(repeats)], env=env, capture_output=True,
                                text=True, timeout=600, check=True)
        digests |= set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert len(digests) == 1, f"{len(digests)} different results"


BAD = [
    (dict(alibi_slopes=np.ones(3, np.float32)), InvalidArgumentError, r"alibi_slopes must have shape \(num_heads,\)"),
    (dict(alibi_slopes=np.ones((2, 2), np.float32)), InvalidArgumentError, r"\(batch, num_heads\) = \(1, 2\)"),
    (dict(alibi_slopes=np.array([1.0, np.nan], np.float32)), InvalidArgumentError, "alibi_slopes must be finite"),
    (dict(alibi_slopes=np.ones(2, np.int32)), InvalidTypeError, "alibi_slopes must hold floating-point"),
    (dict(sinks=np.ones((1, 2), np.float32)), InvalidArgumentError, r"sinks must have shape \(num_heads,\)"),
    (dict(sinks=np.array([np.inf, 0], np.float32)), InvalidArgumentError, "sinks must be finite"),
    (dict(softcap=-1.0), InvalidArgumentError, "softcap must be a finite number >= 0"),
    (dict(softcap="2"), InvalidTypeError, "softcap must be a real number"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD, ids=lambda x: str(x)[:40])
def test_bad_modifiers_are_refused_before_device_work(session, kwargs, error, message):
    q, k, v, dout = _inputs((1, 2, 32, 16), (1, 2, 32, 16), F16)
    lse = np.zeros((1, 2, 32), np.float32)
    with pytest.raises(error, match=message):
        acl_fa.flash_attention_backward(dout, q, k, v, q, lse, session=session, **kwargs)
    cu = np.array([0, 32], np.int64)
    with pytest.raises(error, match=message):
        acl_fa.flash_attention_varlen_backward(dout[0].transpose(1, 0, 2), q[0].transpose(1, 0, 2),
                                               k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2),
                                               q[0].transpose(1, 0, 2), lse[0], cu, cu, session=session, **kwargs)


COUPLED_SCRIPT = textwrap.dedent("""
    import numpy as np, acl_fa
    from acl_fa.runtime.errors import AclError
    q = np.ones((1, 2, 32, 16), np.float16)
    lse = np.zeros((1, 2, 32), np.float32)
    try:
        acl_fa.flash_attention_backward(q, q, q, q, q, lse, softcap=2.0, sinks=np.zeros(2, np.float32))
    except AclError as err:
        print(str(err))
""")


@pytest.mark.parametrize("soc, arch", [("Ascend310P3", "ascend310p"), ("Ascend910A", "ascend910")])
def test_coupled_chips_refuse_naming_the_chip(sim_only, soc, arch):
    """FlashAttentionGradV3 is built for the A2/A3 chips only (as V1 and V2: the backward has no
    coupled-core path): the call fails in phase one naming the op and the chip."""
    env = dict(__import__("os").environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    result = subprocess.run([sys.executable, "-c", COUPLED_SCRIPT], env=env, capture_output=True, text=True,
                            timeout=300, check=True)
    assert f"the FlashAttentionGradV3 op has no kernel for {soc} ({arch})" in result.stdout, result.stdout
