"""The tiling policy's analytic block cost (op_host/block_cost.h) and the auto blocks it picks.

The cost is a closed form of the pipeline model (docs/timing_model.md), so three things are
checked: its constants are the model's cost table, it tracks the full event model on a grid of
blocks within the error recorded in bench/RESULTS.md, and the policy's auto blocks are the
fitting candidate of least analytic cost (and model close to the fastest candidate).
"""
from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np
import pytest

from acl_fa.plan import forward as plan_module
import sized_plans
from acl_fa.plan import timing

from test_flash_attention import _inputs

ROOT = pathlib.Path(__file__).resolve().parents[3]

# StepCosts member -> aclfaSimPipeCosts member of the same quantity (the GM rates come from the
# chip: test_gm_rates_are_the_models).
SHARED_COSTS = ("vectorIssueCycles", "vectorRepeatCycles", "vectorExpRepeatCycles", "cubeFractalCycles",
                "mte1BytesPerCycle", "fixpipeBytesPerCycle", "mte2LatencyCycles",
                "mte3LatencyCycles", "fixpipeLatencyCycles", "matmulRequestCycles", "flagLatencyCycles",
                "crossCoreFlagCycles", "corePortWriteBytesPerCycle", "mte3BytesPerCycle")


def _step_costs() -> dict:
    text = (ROOT / "op_host" / "common" / "block_cost.h").read_text()
    # The header's integer constants, which some defaults name.
    constants = {name: int(value) for name, value in re.findall(r"constexpr uint64_t (\w+) = (\d+);", text)}
    body = text[text.index("struct StepCosts"):]
    body = body[:body.index("};")]
    values = {}
    for name, expr in re.findall(r"double (\w+) = ([^;]+);", body):
        values[name] = eval(expr, {"__builtins__": {}}, constants)  # literals, / and those constants only
    return values


def test_step_costs_are_the_models_cost_table(session, sim_only):
    policy = _step_costs()
    model = timing.pipe_costs(session.backend, "Ascend910B2")
    for name in SHARED_COSTS:
        assert policy[name] == pytest.approx(model[name]), name


MIX_CHIPS = ("Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910_93")


@pytest.mark.parametrize("soc", MIX_CHIPS)
def test_gm_rates_are_the_models(session, sim_only, soc):
    """The policy's GM rates (StepCostsOf: the L2 rate GetCoreMemBw answers, times the AI Cores for
    the chip) are the model's port and chip rates -- no chip-name special case."""
    limits = plan_module.chip(soc)
    model = timing.pipe_costs(session.backend, soc)
    assert limits.l2_bytes_per_cycle == model["corePortBytesPerCycle"] == 110
    assert limits.aic_num * limits.l2_bytes_per_cycle == model["gmBytesPerCycle"]


def test_analytic_cost_follows_the_l2_rate():
    """A GM-bound launch costs more at half the L2 rate; a chip that reports no rate (0) leaves GM
    out of the cost, as if unbounded."""
    sizes = dict(seq=4096, heads=8, causal=True, block_m=96, block_n=192)
    b2 = plan_module.chip("Ascend910B2")
    at = {rate: sized_plans.analytic_cycles(soc=dataclasses.replace(b2, l2_bytes_per_cycle=rate), **sizes)
          for rate in (0, 55, 110, 10**9)}
    assert at[55] > at[110] > at[0]
    assert at[0] == pytest.approx(at[10**9], rel=1e-6)


SIZES = dict(seq=1024, heads=4, head_dim=128)
GRID = ((32, 128), (64, 64), (64, 256), (96, 320), (128, 128), (128, 192))


def _modeled_seconds(session, bm, bn, causal):
    q, k, v = _inputs("BNSD", 1, SIZES["heads"], SIZES["heads"], SIZES["seq"], SIZES["seq"], SIZES["head_dim"],
                      np.float16)
    with timing.op_trace(session.backend):
        session.flash_attention(q, k, v, causal=causal, block_m=bm, block_n=bn)
    return timing.last_model(session.backend).seconds


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_analytic_cost_tracks_the_event_model(session, sim_only, causal):
    clock_hz = timing.pipe_costs(session.backend)["clockMHz"] * 1e6
    soc = session.soc_name()
    errors = []
    for bm, bn in GRID:
        analytic = sized_plans.analytic_cycles(soc=soc, block_m=bm, block_n=bn, causal=causal, **SIZES) / clock_hz
        errors.append(analytic / _modeled_seconds(session, bm, bn, causal) - 1)
    worst = max(abs(e) for e in errors)
    # bench/RESULTS.md records 10.8% largest at B1 N8 S4096; small launches carry more fixed cost
    # (here up to 15%, median 7-10%, with the per-item pipeline fill in the closed form).
    assert worst <= 0.20, [f"{b}: {e:+.2f}" for b, e in zip(GRID, errors)]
    assert float(np.median(np.abs(errors))) <= 0.12, errors


def _causal_waste(sizes, bm, bn):
    """Executed / visible (query, key) pairs of a causal launch with (bm, bn); 1 when not causal.
    A query block's last K/V block stops at its last visible key (the kernel's QK and P.V do)."""
    sq, skv = sizes["seq"], sizes.get("seq_kv", sizes["seq"])
    if not sizes.get("causal"):
        return 1.0
    visible = sum(max(0, i + skv - sq + 1) for i in range(sq))
    executed = 0
    for row0 in range(0, sq, bm):
        last_key = min(row0 + bm, sq) - 1 + skv - sq
        executed += (min(row0 + bm, sq) - row0) * (0 if last_key < 0 else min(last_key + 1, skv))
    return executed / visible


@pytest.mark.parametrize("sizes", [
    dict(seq=4096, heads=32, causal=True),
    dict(seq=1024, heads=8),
    dict(seq=2048, heads=8, head_dim=256),
    dict(seq=100, seq_kv=300, heads=2),
    dict(seq=8192, heads=4, head_dim=64, causal=True, dtype="bfloat16"),
])
def test_auto_blocks_minimize_the_analytic_cost(sizes):
    """The auto blocks have the least analytic cost among the fitting candidates that keep a
    causal launch's cube work within 1.05x of the visible pairs', unless a candidate over that
    cap is more than 1.10x cheaper: then the least cost of all (docs/timing_model.md)."""
    soc = "Ascend910B2"
    chosen = sized_plans.plan(soc=soc, **sizes)
    best = sized_plans.analytic_cycles(soc=soc, block_m=chosen.block_m, block_n=chosen.block_n, **sizes)
    seq_kv = sizes.get("seq_kv", sizes["seq"])
    costs = {}  # (bm, bn) -> (analytic cost, within the cap)
    for bm in range(32, 257, 32):
        for bn in sorted({*range(64, 513, 64), min(-(-seq_kv // 16) * 16, 512)}):
            try:
                sized_plans.plan(soc=soc, block_m=bm, block_n=bn, **sizes)
            except plan_module.PlanError:
                continue
            costs[bm, bn] = (sized_plans.analytic_cycles(soc=soc, block_m=bm, block_n=bn, **sizes),
                             _causal_waste(sizes, bm, bn) <= 1.05)
    cheapest = min(cost for cost, _ in costs.values())
    within = [cost for cost, efficient in costs.values() if efficient]
    if within and min(within) <= 1.10 * cheapest:
        assert _causal_waste(sizes, chosen.block_m, chosen.block_n) <= 1.05
        assert best <= min(within) * (1 + 1e-12), (chosen.block_m, chosen.block_n)
    else:
        assert best <= cheapest * (1 + 1e-12), (chosen.block_m, chosen.block_n)


def test_auto_blocks_model_close_to_the_fastest_candidate(session, sim_only):
    from acl_fa.jobs.sweep import analytic_error, sweep
    from acl_fa.spec.problem import problem_from_sizes

    rows = sweep(problem_from_sizes(seq_q=1024, num_heads=4, causal=True), block_ms=(32, 64, 96, 128), block_ns=(64, 128, 256, 320))
    err = analytic_error(rows)
    assert [r for r in rows if r.chosen], "the policy's choice is swept too"
    assert err["choice_vs_best"] <= 0.10, err
