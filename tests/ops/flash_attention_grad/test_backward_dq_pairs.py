"""The deterministic dQ over K/V block pairs (docs/backward.md "Deterministic dQ over K/V block
pairs"): on a problem with enough pairs (>= 144 over all kv heads) the policy takes them, the
gradients meet the accuracy rule against the float64 reference, and the bits are the same on
repeats, simulator thread counts and chips with other core counts (the pairs are fixed by the
blocks, not by the cores); a problem with few pairs or a window keeps single parts. Pairs may be
dealt to the AIVs in rounds (docs/backward.md "Dealt pairs"): the same bits again."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import acl_fa
from acl_fa.plan.backward import backward_plan
from acl_fa.plan.forward import PlanOptions
from acl_fa.reference.accuracy import ULP
from acl_fa.reference.attention import attention_reference, attention_reference_backward
from acl_fa.spec.problem import problem_from_sizes

# B4 N8 S512 D32 with 16 x 16 blocks: 32 kv heads x 16 pairs = 512 pairs (summed as 256 groups of 4).
SIZES = dict(batch=4, num_heads=8, seq_q=512, head_dim=32, causal=True, block_m=16, block_n=16)


def _workspace(sizes, deterministic=True, **options) -> int:
    plan = backward_plan(problem_from_sizes(**sizes), "Ascend910B2", deterministic, PlanOptions(**options))
    return plan.workspace_bytes


def test_the_policy_takes_pairs_only_with_enough_of_them():
    """The pair sums show in the deterministic workspace (2 x groupSize x Sq x D x 4 B per AIV):
    with 512 pairs, against the same problem under a window (no pairs: the rows that see block
    2t + 1 are not among those of 2t); with 128 pairs (B1, under kGradDqGroupMinPairs = 144)
    neither has them."""
    pair_sums = 48 * 2 * 512 * 32 * 4
    assert _workspace(SIZES) - _workspace(SIZES, pre_tokens=100, next_tokens=0) == pair_sums
    few = dict(SIZES, batch=1)
    assert _workspace(few) == _workspace(few, pre_tokens=100, next_tokens=0)


def _scratch(sizes, deterministic) -> int:
    return backward_plan(problem_from_sizes(**sizes), "Ascend910B2", deterministic).ws_scratch_bytes


def test_n8_s4096_takes_pairs_dealt():
    """B1 N8 S4096 D128 causal has 152 pairs: contiguous ranges of them load the busiest of the
    48 AIVs 1.22x the mean, dealt in rounds 1.09x, so it now takes pairs (their two sums, 2 x Sq x
    D x 4 B, show in the scratch beside the two dQ part slots) and deals them; the atomic mode
    keeps its 296 units in contiguous ranges (1.12x: dealt units model slower)."""
    sizes = dict(batch=1, num_heads=8, seq_q=4096, head_dim=128, causal=True)
    det = backward_plan(problem_from_sizes(**sizes), "Ascend910B2", True)
    atomic = backward_plan(problem_from_sizes(**sizes), "Ascend910B2", False)
    assert det.units_dealt and not atomic.units_dealt and det.dq_group_blocks == 2
    n32 = backward_plan(problem_from_sizes(**dict(sizes, num_heads=32)), "Ascend910B2", True)
    assert n32.dq_group_blocks == 4 and n32.units_dealt  # 32 x 10 groups of 4
    assert det.imbalance < 1.09 and 1.1 < atomic.imbalance < 1.13, (det.imbalance, atomic.imbalance)
    assert det.unit_start[-1] == atomic.unit_start[-1] == det.total_units
    parts = 2 * det.panel_rows * 128 * 4
    assert det.ws_scratch_bytes - atomic.ws_scratch_bytes == parts + 2 * 4096 * 128 * 4
    # N4 (76 pairs) keeps single parts: only the part slots differ.
    n4 = dict(sizes, num_heads=4)
    assert _scratch(n4, True) - _scratch(n4, False) == parts


# S272 D32 with 16 x 16 blocks: 17 kv blocks per head (each head's last pair or group of 4 has one
# block). B1 N16: 16 x 9 = 144 pairs (16 x 5 = 80 groups of 4: too few); B2 N16: 32 x 5 = 160
# groups of 4. Both dealt (the atomic mode: contiguous units, a control).
ODD = dict(batch=1, num_heads=16, seq_q=272, head_dim=32, causal=True, block_m=16, block_n=16)
ODD4 = dict(ODD, batch=2)


@pytest.mark.parametrize("sizes, group", [(ODD, 2), (ODD4, 4)], ids=["pairs", "groups-of-4"])
@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "atomic"])
def test_dealt_pairs_with_an_odd_block_count_match_reference(session, deterministic, sizes, group):
    plan = backward_plan(problem_from_sizes(**sizes), "Ascend910B2", deterministic)
    assert plan.units_dealt == deterministic and plan.num_kv_blocks % group == 1
    assert plan.dq_group_blocks == (group if deterministic else 0)
    assert not deterministic or plan.ws_scratch_bytes - _scratch(sizes, False) > 2 * plan.panel_rows * 32 * 4
    rng = np.random.default_rng(5)
    shape = (sizes["batch"], sizes["num_heads"], sizes["seq_q"], sizes["head_dim"])
    q, k, v, dout = (rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(4))
    out, lse = attention_reference(q, k, v, causal=True)
    want = attention_reference_backward(dout, q, k, v, causal=True)
    naive = attention_reference_backward(dout, q, k, v, causal=True, work_dtype=np.float32, round_to=np.float16)
    got = acl_fa.flash_attention_backward(dout, q, k, v, out.astype(np.float16), lse.astype(np.float32), causal=True,
                                          block_m=16, block_n=16, deterministic=deterministic, session=session)
    _check(got, want, naive)


def _check(got, want, naive):
    for label, g, ref, same in zip(("dq", "dk", "dv"), got, want, naive):
        error = float(np.abs(g.astype(np.float64) - ref).max())
        naive_error = float(np.abs(same.astype(np.float16).astype(np.float64) - ref).max())
        tolerance = 2 * naive_error + ULP["float16"] * max(1.0, float(np.abs(ref).max()))
        assert error <= tolerance, f"{label}: max error {error:.3g} > {tolerance:.3g} (naive {naive_error:.3g})"


def test_pairs_match_reference(session):
    rng = np.random.default_rng(4)
    shape = (SIZES["batch"], SIZES["num_heads"], SIZES["seq_q"], SIZES["head_dim"])
    q, k, v, dout = (rng.standard_normal(shape, dtype=np.float32).astype(np.float16) for _ in range(4))
    out, lse = attention_reference(q, k, v, causal=True)
    want = attention_reference_backward(dout, q, k, v, causal=True)
    naive = attention_reference_backward(dout, q, k, v, causal=True, work_dtype=np.float32, round_to=np.float16)
    got = acl_fa.flash_attention_backward(dout, q, k, v, out.astype(np.float16), lse.astype(np.float32), causal=True,
                                          block_m=16, block_n=16, session=session)
    _check(got, want, naive)


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
