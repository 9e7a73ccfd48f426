"""The deterministic dQ over K/V block pairs (docs/backward.md "Deterministic dQ over K/V block
pairs"): on a problem with enough pairs (>= 384 over all kv heads) the policy takes them, the
gradients meet the accuracy rule against the float64 reference, and the bits are the same on
repeats, simulator thread counts and chips with other core counts (the pairs are fixed by the
blocks, not by the cores); a problem with few pairs or a window keeps single parts."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

import acl_fa
from acl_fa.plan.backward import backward_plan
from acl_fa.plan.forward import PlanOptions
from acl_fa.reference.accuracy import ULP
from acl_fa.reference.attention import attention_reference, attention_reference_backward
from acl_fa.spec.problem import problem_from_sizes

# B4 N8 S512 D32 with 16 x 16 blocks: 32 kv heads x 16 pairs = 512 pairs.
SIZES = dict(batch=4, num_heads=8, seq_q=512, head_dim=32, causal=True, block_m=16, block_n=16)


def _workspace(sizes, deterministic=True, **options) -> int:
    plan = backward_plan(problem_from_sizes(**sizes), "Ascend910B2", deterministic, PlanOptions(**options))
    return plan.workspace_bytes


def test_the_policy_takes_pairs_only_with_enough_of_them():
    """The pair sums show in the deterministic workspace (2 x groupSize x Sq x D x 4 B per AIV):
    with 512 pairs, against the same problem under a window (no pairs: the rows that see block
    2t + 1 are not among those of 2t); with 128 pairs (B1) neither has them."""
    pair_sums = 48 * 2 * 512 * 32 * 4
    assert _workspace(SIZES) - _workspace(SIZES, pre_tokens=100, next_tokens=0) == pair_sums
    few = dict(SIZES, batch=1)
    assert _workspace(few) == _workspace(few, pre_tokens=100, next_tokens=0)


def test_pairs_match_reference(session):
    rng = np.random.default_rng(4)
    shape = (SIZES["batch"], SIZES["num_heads"], SIZES["seq_q"], SIZES["head_dim"])
    q, k, v, dout = (rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(4))
    out, lse = attention_reference(q, k, v, causal=True)
    want = attention_reference_backward(dout, q, k, v, causal=True)
    naive = attention_reference_backward(dout, q, k, v, causal=True, work_dtype=np.float32, round_to=np.float16)
    got = acl_fa.flash_attention_backward(dout, q, k, v, out.astype(np.float16), lse.astype(np.float32), causal=True,
                                          block_m=16, block_n=16, session=session)
    for label, g, ref, same in zip(("dq", "dk", "dv"), got, want, naive):
        error = float(np.abs(g.astype(np.float64) - ref).max())
        naive_error = float(np.abs(same.astype(np.float16).astype(np.float64) - ref).max())
        tolerance = 2 * naive_error + ULP["float16"] * max(1.0, float(np.abs(ref).max()))
        assert error <= tolerance, f"{label}: max error {error:.3g} > {tolerance:.3g} (naive {naive_error:.3g})"


REPRO_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np, acl_fa
    rng = np.random.default_rng(9)
    q, k, v, dout = (rng.standard_normal((4, 8, 512, 32)).astype(np.float16) for _ in range(4))
    out = rng.standard_normal(q.shape).astype(np.float16)
    lse = np.abs(rng.standard_normal((4, 8, 512))).astype(np.float32) + 3
    digests = []
    with acl_fa.Session() as s:
        for _ in range(int(sys.argv[1])):
            grads = s.flash_attention_backward(dout, q, k, v, out, lse, causal=True, block_m=16, block_n=16)
            digests.append(hashlib.sha256(b"".join(g.tobytes() for g in grads)).hexdigest())
    print(json.dumps(digests))
""")


def test_pairs_are_bit_identical_across_threads_and_chips(sim_only):
    digests = set()
    for soc, threads, repeats in (("Ascend910B2", 1, 2), ("Ascend910B2", 3, 1), ("Ascend910B3", 2, 1)):
        env = dict(__import__("os").environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS=str(threads),
                   ACL_FA_SIM_SOC=soc)
        result = subprocess.run([sys.executable, "-c", REPRO_SCRIPT, str(repeats)], env=env, capture_output=True,
                                text=True, timeout=900, check=True)
        digests |= set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert len(digests) == 1, f"{len(digests)} different results"
