"""The timing model's ranges (docs/timing_model.md "Calibration and ranges"): the L2 rates scaled
together up to 5 x HBM, and all assumed cycle costs scaled together (profile --sensitivity)."""
from __future__ import annotations

import numpy as np
import pytest

from acl_fa.jobs.profile import JOINT, sensitivity
from acl_fa.plan import timing
from acl_fa.plan.roofline import chip_peaks


def test_l2_rate_scale_reaches_five_times_hbm(session):
    costs = timing.pipe_costs(session.backend, "Ascend910B2")
    scale = timing.l2_rate_scale(costs)
    assert scale == pytest.approx(5 * 1500e9 / (24 * 110 * 1800e6))  # 7.5 TB/s over the derived 4.75
    fast = timing.with_l2_rates(costs, scale)
    assert fast["gmBytesPerCycle"] * costs["clockMHz"] * 1e6 == pytest.approx(7.5e12)
    changed = {name for name in costs if fast[name] != costs[name]}
    assert changed == set(timing.L2_RATE_FIELDS)


def test_joint_latency_scales_only_assumed_cycle_costs(session):
    fields = timing.cost_fields(session.backend)
    costs = timing.pipe_costs(session.backend)
    half = timing.joint_latency_costs(fields, costs, 0.5)
    source = dict(fields)
    for name, value in costs.items():
        assumed_cycles = source[name].startswith("assumed") and name.endswith("Cycles")
        assert half[name] == (value * 0.5 if assumed_cycles else value), name
    assert half["mte2LatencyCycles"] == costs["mte2LatencyCycles"] / 2
    assert half["vectorRepeatCycles"] == costs["vectorRepeatCycles"]  # sourced


def test_calibrated_costs(session):
    fields, costs = timing.cost_fields(session.backend), timing.pipe_costs(session.backend)
    cal = timing.calibrated_costs(fields, costs)
    scale = timing.l2_rate_scale(costs)
    for name in timing.L2_RATE_FIELDS:
        assert cal[name] == pytest.approx(costs[name] * scale)
    assert cal["mte2LatencyCycles"] == pytest.approx(costs["mte2LatencyCycles"] * timing.CALIBRATED_CYCLE_SCALE)
    assert cal["cubeFractalCycles"] == costs["cubeFractalCycles"]  # sourced: never calibrated


def test_summary_range_and_joint_sensitivity(session):
    q = np.random.default_rng(1).standard_normal((1, 2, 512, 64)).astype(np.float16)
    with timing.op_trace(session.backend):
        session.flash_attention(q, q, q, causal=True)
        model = timing.last_model(session.backend)
    s = timing.summary(model, 1.0, None, chip_peaks(model.chip), rates_of=session.backend)
    fast, nominal = s["range_s"]
    assert fast <= nominal == s["time_s"]
    assert s["l2_rate_range_bytes_per_s"][1] == pytest.approx(7.5e12)
    assert any("range" in line and "calibrated" in line for line in timing.format_summary(s))
    rows = sensitivity(session.backend)
    assert rows[0][0] == JOINT and rows[0][1] <= 0 <= rows[0][2]
    assert len(rows) > 1 and all(name != JOINT for name, _, _ in rows[1:])
