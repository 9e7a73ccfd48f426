"""The backward's tiling policy (through libaclfa_plan.so), `acl-fa plan --backward` and
`acl-fa run --backward` (CliRunner, small problems), and the backward's refusals of bad input."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.plan import forward as planmod
from sized_plans import backward_plan
from acl_fa.cli import main
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError

A2_A3 = ("ascend910b", "ascend910_93")


@pytest.mark.parametrize("head_dim", [16, 64, 128, 192, 256])
@pytest.mark.parametrize("deterministic", [True, False])
def test_every_a2_a3_chip_fits(head_dim, deterministic):
    for chip in planmod.chips():
        if chip.short_soc not in A2_A3:
            continue
        p = backward_plan(seq=4096, heads=32, head_dim=head_dim, causal=True, deterministic=deterministic, soc=chip)
        ub = next(b for b in p.budget if b.name.startswith("UB total"))
        assert ub.bytes <= chip.ub_bytes and all(b.bytes <= b.capacity for b in p.budget)
        assert p.aiv_num <= chip.aiv_num and p.unit_start[0] == 0 and p.unit_start[-1] == p.total_units
        # Deterministic plans here split over K/V block pairs (608 >= 144: docs/backward.md
        # "Deterministic dQ over K/V block pairs"), dealt in rounds ("Dealt work"): 1.0 on 48 AIVs
        # (contiguous ranges of pairs: 1.054).
        assert p.imbalance <= (1.02 if deterministic else 1.05), (chip.name, p.imbalance)


def test_units_cover_every_kv_block_once_and_dq_memory_does_not_depend_on_the_split():
    p = backward_plan(seq=1000, seq_kv=700, heads=8, kv_heads=2, head_dim=64, causal=True, soc="Ascend910B4")
    starts = p.unit_start
    assert starts == sorted(starts) and starts[-1] == 2 * p.num_kv_blocks
    # both modes: one [B, N, Sq, D] accumulator (fp32, or int32 fixed point when deterministic, the same bytes);
    # deterministic adds ||dO_r||_1 [B, N, Sq] fp32, the AIVs' K / V maxima (2 x 32 B each) and a dQ part
    # [2][panel, D] fp32 per AIV's scratch -- none of it depends on which AIV runs which unit
    atomic = backward_plan(seq=1000, seq_kv=700, heads=8, kv_heads=2, head_dim=64, causal=True, deterministic=False,
                       soc="Ascend910B4")
    assert p.ws_dq_bytes == atomic.ws_dq_bytes == 8 * 1000 * 64 * 4
    assert p.panel_rows == atomic.panel_rows and p.panel_rows % p.block_m == 0 and p.aiv_num == atomic.aiv_num
    align = lambda n: -(-n // 512) * 512  # noqa: E731
    assert p.user_workspace_bytes - atomic.user_workspace_bytes == (
        align(8 * 1000 * 4) + align(2 * p.aiv_num * 32) + p.aiv_num * align(2 * p.panel_rows * 64 * 4))
    assert (p.tiling_key & 0x10) and not (atomic.tiling_key & 0x10)


def test_a_user_block_that_does_not_fit_names_the_buffer():
    with pytest.raises(planmod.PlanError, match=r"backward block_m=128, block_n=256 .* needs \d+ B of UB per AIV "
                                                r"\(largest line: scoreBuf"):
        backward_plan(seq=4096, heads=2, head_dim=128, block_m=128, block_n=256)


def test_plan_backward_soc_all():
    result = CliRunner().invoke(main, ["plan", "--backward", "--causal", "--soc", "all"])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()[1:]}
    for chip in planmod.chips():
        if chip.short_soc in A2_A3:
            assert "rejected" not in rows[chip.name] and rows[chip.name].endswith("yes")


def test_plan_backward_json():
    result = CliRunner().invoke(main, ["plan", "--backward", "--atomic", "--seq", "512", "--json"])
    assert result.exit_code == 0, result.output
    (data,) = json.loads(result.output)  # plan --json is always a list, one plan per chip
    assert data["deterministic"] is False and data["block_m"] % 16 == 0 and data["workspace_bytes"] > 0


def test_run_backward_json(sim_only):
    result = CliRunner().invoke(main, ["run", "--backward", "--seq", "200", "--heads", "4", "--kv-heads", "2",
                                       "--head-dim", "64", "--causal", "--iters", "1", "--warmup", "0", "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    data = json.loads(result.stdout)
    assert data["forward"]["check"]["ok"]
    bwd = data["backward"]
    assert [c["name"] for c in bwd["check"]] == ["dq", "dk", "dv"] and all(c["ok"] for c in bwd["check"])
    sim = bwd["simulator"]
    # no per-element scalar work and no core waiting for another: the deterministic dQ's only scalar reads are
    # each AIV's two of the K / V maxima (its fixed-point scale's inputs)
    assert sim["inter_block_flag_calls"] == 0
    assert sim["scalar_accesses"] == 2 * bwd["tiling"]["aivs"]
    assert sim["sync_all_calls"] == 2 * bwd["tiling"]["aivs"]  # two barriers, every AIV of the launch
    assert sim["cube_macs"] >= bwd["useful_macs"]


def test_run_backward_text(sim_only):
    result = CliRunner().invoke(main, ["run", "--backward", "--atomic", "--seq", "130", "--heads", "2",
                                       "--head-dim", "32", "--iters", "1", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    assert "backward" in result.stdout and "atomic dQ adds" in result.stdout
    assert result.stdout.count(": OK") == 4  # forward check + dq, dk, dv


F16 = np.float16
Q = np.zeros((1, 2, 32, 16), F16)
KV = np.zeros((1, 1, 48, 16), F16)
LSE = np.zeros((1, 2, 32), np.float32)

# (id, dout, out, lse, options, exception, words in the message)
BAD = [
    ("dout-shape", np.zeros((1, 2, 31, 16), F16), Q, LSE, {}, InvalidArgumentError, ["dout", "(1, 2, 31, 16)", "q's shape"]),
    ("out-dtype", Q, Q.astype(np.float32), LSE, {}, InvalidTypeError, ["out", "float32", "q's dtype"]),
    ("lse-dtype", Q, Q, LSE.astype(np.float16), {}, InvalidTypeError, ["lse", "float16", "float32"]),
    ("lse-shape", Q, Q, np.zeros((1, 2, 31), np.float32), {}, InvalidArgumentError, ["lse", "[B, N, Sq]", "[1, 2, 32]"]),
    ("lse-bsnd-shape", Q, Q, np.zeros((1, 32, 2), np.float32), {}, InvalidArgumentError, ["lse", "(1, 32, 2)"]),
    ("lse-neg-inf-seen-row", Q, Q, np.where(np.arange(32) == 5, -np.inf, 0).astype(np.float32)[None, None].repeat(2, 1),
     {}, InvalidArgumentError, ["lse[0, 0, 5]", "-inf", "sees keys"]),
    ("lse-nan", Q, Q, np.full((1, 2, 32), np.nan, np.float32), {}, InvalidArgumentError, ["lse[0, 0, 0]", "nan"]),
    ("deterministic-type", Q, Q, LSE, {"deterministic": 1}, InvalidTypeError, ["deterministic", "bool"]),
    ("block-not-16", Q, Q, LSE, {"block_m": 40}, InvalidArgumentError, ["block_m=40", "multiple of 16"]),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_before_device_work(case):
    _, dout, out, lse, options, exc, words = case
    with pytest.raises(exc) as info:
        acl_fa.flash_attention_backward(dout, Q, KV, KV, out, lse, backend="no-such-backend", **options)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_rows_without_keys_may_have_neg_inf_lse(session):
    # causal with Sq > Skv: rows 0..15 see no key; their -inf LSE is what the forward gives.
    q = np.random.default_rng(0).standard_normal((1, 1, 32, 16)).astype(F16)
    k = np.random.default_rng(1).standard_normal((1, 1, 16, 16)).astype(F16)
    out, lse = session.flash_attention(q, k, k, causal=True, return_lse=True)
    assert np.isneginf(lse[0, 0, :16]).all()
    dq, _, _ = session.flash_attention_backward(q, q, k, k, out, lse, causal=True)
    assert np.all(dq[0, 0, :16] == 0)


def test_user_block_too_big_is_refused_before_device_work(session, sim_only):
    q = np.zeros((1, 2, 64, 128), F16)
    lse = np.zeros((1, 2, 64), np.float32)
    before = session.live_counts()["deviceAllocations"]
    with pytest.raises(InvalidArgumentError, match="needs .* B of UB per AIV"):
        session.flash_attention_backward(q, q, q, q, q, lse, block_m=128, block_n=256)
    assert session.live_counts()["deviceAllocations"] == before


def test_bench_backward_json(sim_only):
    result = CliRunner().invoke(main, ["bench", "--backward", "--seq", "128,256", "--heads", "2", "--head-dim", "32",
                                       "--causal", "--iters", "1", "--warmup", "0", "--no-torch", "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    data = json.loads(result.stdout)
    assert [r["seq"] for r in data["rows"]] == [128, 256]
    for r in data["rows"]:
        assert r["flash_ms"] > 0 and r["standard_ms"] > 0 and r["torch_ms"] is None
        assert r["standard_intermediate_bytes"] == 3 * 2 * r["seq"] ** 2 * 2  # S, P, dS in float16
        assert r["executed_macs"] >= r["useful_macs"] > 0
