"""The tiling policy (op_host/tiling_policy.cpp) through its C ABI (libaclfa_plan.so).

Chip limits are the docs/cann-facts.md#chips numbers as GetCoreMemSize answers them (910B-class
UB/L1 minus the 256 B reserve) and the L2 rate GetCoreMemBw answers (docs/chips.md), given
explicitly so that the policy is tested on its own.
"""
from __future__ import annotations

import dataclasses

import pytest

from acl_fa.plan.forward import ChipLimits, PlanError
from sized_plans import plan

KIB = 1024
ASCEND910, ASCEND910B, ASCEND310P = 0, 1, 2  # platform_ascendc::SocVersion
CHIPS = {
    "Ascend910B2": ChipLimits("Ascend910B2", "ascend910b", 2201, 24, 48, 196352, 524032, 64 * KIB, 64 * KIB, 128 * KIB,
                              ASCEND910B, 110),
    "Ascend910B4": ChipLimits("Ascend910B4", "ascend910b", 2201, 20, 40, 196352, 524032, 64 * KIB, 64 * KIB, 128 * KIB,
                              ASCEND910B, 110),
    "Ascend910_93": ChipLimits("Ascend910_93", "ascend910_93", 2201, 24, 48, 196352, 524032, 64 * KIB, 64 * KIB,
                               128 * KIB, ASCEND910B, 110),
    "Ascend910A": ChipLimits("Ascend910A", "ascend910", 1001, 32, 0, 256 * KIB, 1024 * KIB, 64 * KIB, 64 * KIB,
                             256 * KIB, ASCEND910, 110),
    "Ascend310P3": ChipLimits("Ascend310P3", "ascend310p", 2002, 8, 7, 256 * KIB, 1024 * KIB, 64 * KIB, 64 * KIB,
                              256 * KIB, ASCEND310P, 114),
}
COUPLED = ("Ascend910A", "Ascend310P3")


def ub_lines(p):
    """The kernel's per-vector-unit InitBuffer list: the lines before the totals."""
    return p.budget[:next(i for i, b in enumerate(p.budget) if b.name.startswith("UB total"))]


def ub_total(p):
    return next(b for b in p.budget if b.name.startswith("UB total"))


def expected_ub(block_m, block_n, d, coupled, t=2, ub=196352):
    """The kernel's InitBuffer sizes (op_kernel/flash_attention_tiling.h), summed: per AIV
    (blockM / 2 rows) on the MIX path, per AI Core (blockM rows, plus the Matmul API's
    ND <-> NZ workspace) on the coupled path; no probQue for fp32 on the MIX path, and there
    with n >= d no pvQue (P.V in scoreQue's buffer) and, with a probQue, no outQue (O in it);
    no foldBuf there when P's rows hold the fold's (n * t >= 256: it folds into probQue's buffer).
    On the MIX path the S / P tiles (and P.V / O queues, fold) hold c rows, the largest multiple
    of 8 up to m that fits `ub`, and S and P have two buffers each (the next chunk's S loads and the
    previous chunk's P stores while the vector unit works on this one); acc and the per-row
    vectors hold all m."""
    m, n = (block_m if coupled else block_m // 2), block_n
    a32 = lambda x: (x + 31) // 32 * 32  # noqa: E731

    def total(c):
        has_prob = coupled or t == 2
        buffers = 1 if coupled else 2
        prob = buffers * c * n * t if has_prob else 0
        share = not coupled and n >= d
        pv = 0 if share else c * d * 4
        out = 0 if share and has_prob else c * d * t
        fold = 0 if not coupled and t == 2 and n * t >= 256 else c * 64 * 4
        bytes_ = (buffers * c * n * 4 + prob + pv + out + m * d * 4
                  + 7 * a32(m * 4) + a32(m * 4) + fold + m * 8 * 4)
        if coupled:
            bytes_ += 2 * max(m * d * t, n * d * t, m * n * 4, m * n * t, m * d * 4)
        return bytes_

    if coupled:
        return total(m)
    return next((total(c) for c in range(m, 0, -8) if total(c) <= ub), total(8))


def fits(chip, block_m, block_n, **kw):
    try:
        plan(soc=chip, block_m=block_m, block_n=block_n, **kw)
    except PlanError:
        return False
    return True


CASES = [
    dict(seq=4096, heads=32, causal=True),
    dict(seq=4096, heads=32, head_dim=64),
    dict(seq=1, heads=1, head_dim=16),
    dict(seq=17, seq_kv=97, heads=3, head_dim=48),
    dict(seq=97, seq_kv=1, heads=2, causal=True),
    dict(seq=4097, heads=4, kv_heads=2, head_dim=256, causal=True),
    dict(seq=113, seq_kv=203, batch=2, heads=8, kv_heads=1, head_dim=128, dtype="bfloat16", layout="BSH"),
    dict(seq=1023, seq_kv=1024, heads=16, head_dim=80, layout="BSND", causal=True),
]


@pytest.mark.parametrize("soc", list(CHIPS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_plan_fits_and_is_consistent(soc, case):
    chip = CHIPS[soc]
    coupled = soc in COUPLED
    if coupled and case.get("dtype") == "bfloat16":
        case = dict(case, dtype="float16")  # no bfloat16 there (test_dtypes_the_chip_lacks_are_refused)
    p = plan(soc=chip, **case)
    assert p.block_m % 16 == 0 and p.block_n % 16 == 0
    assert p.sub_block_m == (p.block_m if coupled else p.block_m // 2)
    for line in p.budget:
        assert line.bytes <= line.capacity, (soc, line)
    assert ub_total(p).bytes == sum(b.bytes for b in ub_lines(p))
    assert ub_total(p).bytes == expected_ub(p.block_m, p.block_n, case.get("head_dim", 128), coupled)
    # Core ranges: contiguous, cover every item, no empty core, at most the AIC count.
    starts = p.core_item_start
    assert starts[0] == 0 and starts[-1] == p.total_items
    assert all(a < b for a, b in zip(starts, starts[1:]))
    assert p.used_core_num == len(starts) - 1 <= min(chip.aic_num, 64)
    assert p.num_q_blocks == -(-case["seq"] // p.block_m)
    if coupled:  # S, P and P.V never leave the AI Core
        assert p.user_workspace_bytes == 0 and p.ws_bytes_per_core == 0
        return
    # Workspace: 512-B aligned regions in header order, slots of a whole item's rows shared by
    # the group's two AIVs (one slice per AIC group): two S slots [block_m, block_n] fp32 and
    # two P.V slots [block_m, head_dim] fp32, double-buffered (P.V of block j-1 runs while block
    # j is softmaxed). P has no region: each AIV writes it over the S rows it read.
    def align512(v):
        return -(-v // 512) * 512
    assert p.ws_score_offset == 0 and p.ws_prob_offset == p.ws_score_offset
    assert p.ws_pv_offset == align512(2 * p.block_m * p.block_n * 4)
    assert p.ws_bytes_per_core == p.ws_pv_offset + align512(2 * p.block_m * case.get("head_dim", 128) * 4)
    assert p.user_workspace_bytes == p.used_core_num * p.ws_bytes_per_core


@pytest.mark.parametrize("soc", [name for name, c in CHIPS.items() if c.soc_version != 1])
@pytest.mark.parametrize("head_dim", [16, 64, 128, 192, 256])
def test_largest_block_m_is_chosen(soc, head_dim):
    """On the coupled path no larger blockM (step 32) fits with the reference blockN of 128 (the
    MIX path chooses by modeled cost instead: tests/ops/flash_attention/test_block_cost.py)."""
    chip = CHIPS[soc]
    p = plan(soc=chip, seq=8192, heads=8, head_dim=head_dim)
    if p.block_m + 32 <= 256:
        assert not fits(chip, p.block_m + 32, 128, seq=8192, heads=8, head_dim=head_dim)
    # ... and blockN is the largest that fits with that blockM.
    if p.block_n + 16 <= 512:
        assert not fits(chip, p.block_m, p.block_n + 16, seq=8192, heads=8, head_dim=head_dim)


def test_plans_follow_the_queried_buffers():
    """The coupled chips' AI Core holds all rows of a block (no split over 2 AIVs) in a larger
    UB; the MIX chips' AIV holds half of a block: blocks differ where the buffers differ, and
    a chip with more UB of the same kind gets larger blocks."""
    mix = plan(soc=CHIPS["Ascend910B2"], seq=8192, heads=8)
    coupled = plan(soc=CHIPS["Ascend310P3"], seq=8192, heads=8)
    assert (mix.block_m, mix.block_n) != (coupled.block_m, coupled.block_n)
    assert coupled.sub_block_m == coupled.block_m and mix.sub_block_m * 2 == mix.block_m
    bigger = dataclasses.replace(CHIPS["Ascend310P3"], name="Big310P", ub_bytes=512 * KIB)
    assert plan(soc=bigger, seq=8192, heads=8).block_m > coupled.block_m


def test_blocks_capped_by_sequence():
    p = plan(soc=CHIPS["Ascend910B2"], seq=1, seq_kv=1, heads=1, head_dim=64)
    assert (p.block_m, p.block_n) == (32, 16)
    assert p.num_q_blocks == 1 and p.num_kv_blocks == 1 and p.used_core_num == 1


def test_causal_balance_b1_n32_s4096_on_24_aic():
    p = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=32, causal=True)
    assert p.q_zigzag and p.used_core_num == 24
    assert p.imbalance <= 1.05, p


def test_causal_skips_blocks_above_the_diagonal():
    # Fixed blocks: the share of skipped blocks depends on how many K/V blocks a row has (with
    # the auto 160 x 1024 only four), not on the skipping this checks.
    causal = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=32, causal=True, block_m=128, block_n=256)
    full = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=32, block_m=causal.block_m, block_n=causal.block_n)
    assert causal.total_work < 0.6 * full.total_work
    assert full.total_work == full.total_items * full.num_kv_blocks


def test_user_blocks_that_fit_are_kept():
    p = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=32, block_m=64, block_n=128)
    assert (p.block_m, p.block_n) == (64, 128)
    p = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=32, block_m=64)
    assert p.block_m == 64 and p.block_n > 128


@pytest.mark.parametrize("kw, message", [
    (dict(block_m=24), "block_m must be 0 (auto) or a multiple of 16 up to 256, got 24"),
    (dict(block_n=1040), "block_n must be 0 (auto) or a multiple of 16 up to 1024, got 1040"),
    (dict(head_dim=264), "head_dim must be a multiple of 16 and at most 256, got 264"),  # 1..256 are padded
    (dict(head_dim=272), "head_dim must be a multiple of 16 and at most 256, got 272"),
    (dict(heads=6, kv_heads=4), "num_heads (6) must be a multiple of num_kv_heads (4)"),
    (dict(seq=0), "seq_q must be >= 1, got 0"),
    (dict(layout="SBH"), "layout must be one of BNSD, BSND, BSH, got 'SBH'"),
])
def test_rejections_name_the_rule(kw, message):
    args = dict(seq=4096, heads=32, head_dim=128, soc=CHIPS["Ascend910B2"])
    args.update(kw)
    with pytest.raises(PlanError) as info:
        plan(**args)
    assert message in str(info.value)


def test_l1_limit_is_reported():
    tiny_l1 = ChipLimits("TinyL1", "ascend910b", 2201, 24, 48, 196352, 64 * KIB, 64 * KIB, 64 * KIB, 128 * KIB,
                         ASCEND910B)
    with pytest.raises(PlanError, match=r"of L1 per AIC .*TinyL1 has 65536 B"):
        plan(soc=tiny_l1, seq=4096, heads=8, block_m=128, block_n=224)


def test_tiling_key_bits():
    b2 = CHIPS["Ascend910B2"]
    assert plan(soc=b2, seq=4096, heads=1, block_m=128, block_n=128).tiling_key == 0
    p = plan(soc=b2, seq=4097, seq_kv=4000, heads=1, causal=True, dtype="bfloat16", layout="BSH",
             block_m=128, block_n=128)
    # bf16 | causal | layout BSND (BSH runs that path) << 2 | Sq tail | Skv tail
    assert p.tiling_key == 1 | 2 | (1 << 2) | 16 | 32
    assert plan(soc=b2, seq=128, heads=1, layout="BSND", block_m=128, block_n=128).tiling_key == 1 << 2


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("dtype, message", [
    ("bfloat16", "dtype bfloat16 is not supported on {soc}: its AI Core has no bfloat16 (use float16)"),
    ("float32", "dtype float32 is not supported on {soc}: its cube takes float16 operands only, not float32 "
                "(use float16)"),
])
def test_dtypes_the_chip_lacks_are_refused(soc, dtype, message):
    with pytest.raises(PlanError) as info:
        plan(soc=CHIPS[soc], seq=128, heads=1, dtype=dtype)
    assert message.format(soc=soc) in str(info.value)


@pytest.mark.parametrize("soc", COUPLED)
def test_coupled_rejection_names_the_ai_core_budget(soc):
    with pytest.raises(PlanError) as info:
        plan(soc=CHIPS[soc], seq=4096, heads=1, block_m=256, block_n=512)
    assert f"of UB per AI Core (largest line: " in str(info.value) and f"{soc} has 262144 B" in str(info.value)


# MIX path (910B2, fp16, D128): blocks the whole-result L0C line (96 x 384 x 4 B > 128 KiB) or the
# separate P.V / O queues and fold buffer (96 x 512, 128 x 320, 128 x 384: UB) refused; the Matmul
# tiling writes C to GM one base tile at a time and, with n >= d, P.V and O take the S and P
# buffers, and the row reductions fold into P's. S and P have two buffers each (a chunk's load and
# the previous chunk's store overlap the vector work), so from 96 x 384 the S and P tiles hold
# c < m rows (row chunks): 96 x 384 in chunks of 32 rows, 128 x 320 of 40, 128 x 512 of 24, with
# acc [m, 128] fp32 resident.
@pytest.mark.parametrize("block_m, block_n, chunk, ub", [
    (96, 384, 32, 175104),
    (96, 512, 24, 175104),
    (128, 320, 40, 190464),
    (128, 384, 32, 184320),
    (128, 448, 24, 165888),
    (128, 512, 24, 184320),
    (64, 96, 32, None),    # n < d: pvQue and outQue of their own, and n * 2 < 256: a foldBuf
])
def test_mix_blocks_share_tiles_and_budget_l0c_by_base_tile(block_m, block_n, chunk, ub):
    b2 = CHIPS["Ascend910B2"]
    p = plan(soc=b2, seq=4096, heads=8, block_m=block_m, block_n=block_n)
    lines = {b.name: b.bytes for b in p.budget}
    assert lines["scoreQue S 2 x [c,n] fp32"] == 2 * chunk * block_n * 4
    assert lines["accBuf acc [m,d] fp32"] == block_m // 2 * 512
    if block_n >= 128:
        assert lines["pvQue PV in scoreQue"] == 0 and lines["outQue O in probQue"] == 0
        assert lines["foldBuf in probQue"] == 0
        assert ub_total(p).bytes == ub
    else:
        assert lines["pvQue PV [c,d] fp32"] == chunk * 128 * 4 and lines["outQue O [c,d] T"] == chunk * 128 * 2
        assert lines["foldBuf [c,64] fp32"] == chunk * 64 * 4
    assert lines["L0C QK base tile fp32"] == min(block_m, 128) * min(block_n, 256) * 4 <= b2.l0c_bytes


def test_ub_limit_is_the_resident_rows():
    """With row chunks the S and P tiles shrink to 8 rows before a block is refused: what does not
    fit is the state every AIV keeps for all its rows (acc [m, d] fp32 first)."""
    small = dataclasses.replace(CHIPS["Ascend910B2"], name="SmallUb", ub_bytes=64 * KIB)
    assert fits(small, 128, 128, seq=4096, heads=8)
    with pytest.raises(PlanError, match=r"needs \d+ B of UB per AIV \(largest line: accBuf acc \[m,d\] fp32, "
                                        r"65536 B\); SmallUb has 65536 B"):
        plan(soc=small, seq=4096, heads=8, block_m=256, block_n=128)


def test_float32_budgets_four_byte_tiles():
    b2 = CHIPS["Ascend910B2"]
    half = plan(soc=b2, seq=4096, heads=8, block_m=128, block_n=128)
    single = plan(soc=b2, seq=4096, heads=8, block_m=128, block_n=128, dtype="float32")
    l1 = lambda p: next(b for b in p.budget if b.name.startswith("L1")).bytes  # noqa: E731
    assert l1(single) == 2 * l1(half)  # 4-byte operands
    auto = plan(soc=b2, seq=4096, heads=8, dtype="float32")
    assert ub_total(auto).bytes == expected_ub(auto.block_m, auto.block_n, 128, False, t=4)
    assert next(b for b in auto.budget if b.name.startswith("probQue")).bytes == 0  # P stays fp32


def test_unknown_soc_version_is_refused():
    odd = dataclasses.replace(CHIPS["Ascend910B2"], name="Odd", soc_version=3)
    with pytest.raises(PlanError, match="Odd: SocVersion 3 is not one the operator is built for"):
        plan(soc=odd, seq=128, heads=1)


def test_coupled_tiling_key_bits():
    p = plan(soc=CHIPS["Ascend310P3"], seq=4096, heads=1, block_m=64, block_n=128)
    assert p.tiling_key == 1 << 7  # coupled path, float16, no tails
    f = plan(soc=CHIPS["Ascend910B2"], seq=4096, heads=1, block_m=64, block_n=128, dtype="float32")
    assert f.tiling_key == 1 << 6  # float32 on the MIX path
