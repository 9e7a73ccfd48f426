"""The chips' memory rates (docs/chips.md "Memory rates"): the catalogue's [AICoreMemoryRates]
of CANN 8.1.RC1's platform files, what GetCoreMemBw answers from them (the tiling reads it), and
the timing model's GM costs built from them (docs/timing_model.md, cost table).
"""
from __future__ import annotations

import numpy as np
import pytest

from acl_fa.plan import forward as plan_module
from acl_fa.plan import timing
from acl_fa.plan.forward import _catalogue_lib

from test_flash_attention import _inputs

# Bytes per cycle per AI Core: ddr, l2, l2 read, l2 write, L1 -> L0A, L1 -> L0B, L0C -> UB, UB -> L2.
INI_910B = (32, 110, 110, 86, 512, 256, 256, 64)
RATES = {
    "Ascend910B1": INI_910B,   # data/platform_config/Ascend910B1.ini
    "Ascend910B2": INI_910B,   # Ascend910B2.ini
    "Ascend910B3": INI_910B,   # Ascend910B3.ini
    "Ascend910B4": INI_910B,   # Ascend910B4.ini
    "Ascend910_93": INI_910B,  # Ascend910_9391.ini
    "Ascend910A": INI_910B,    # no platform file in CANN 8.1.RC1: the 910B's, assumed
    "Ascend310P3": (17, 114, 114, 114, 512, 256, 512, 114),  # Ascend310P3.ini
}
FIELDS = ("ddrRate", "l2Rate", "l2ReadRate", "l2WriteRate", "l1ToL0aRate", "l1ToL0bRate", "l0cToUbRate",
          "ubToL2Rate")


def _catalogue_row(name):
    lib = _catalogue_lib()
    for i in range(lib.aclfaSimGetChipCount()):
        row = lib.aclfaSimGetChipAt(i)
        if plan_module.ffi.string(row.name).decode() == name:
            return row
    raise AssertionError(f"{name} is not in the catalogue")


@pytest.mark.parametrize("soc", sorted(RATES))
def test_catalogue_holds_the_platform_files_rates(soc):
    row = _catalogue_row(soc)
    assert tuple(int(getattr(row, f)) for f in FIELDS) == RATES[soc]


@pytest.mark.parametrize("soc", sorted(RATES))
def test_tiling_sees_the_l2_rate(soc):
    """GetCoreMemBw(L2) is l2_rate; the policy's limits carry it (plan.chip mirrors ReadChipBuffers)."""
    assert plan_module.chip(soc).l2_bytes_per_cycle == RATES[soc][1]


@pytest.mark.parametrize("soc", sorted(RATES))
def test_model_gm_costs_come_from_the_rates(session, sim_only, soc):
    ddr, l2, l2_read, l2_write, _, l1_to_l0b, _, ub_to_l2 = RATES[soc]
    costs = timing.pipe_costs(session.backend, soc)
    aic = plan_module.chip(soc).aic_num
    assert costs["corePortBytesPerCycle"] == l2 == l2_read
    assert costs["corePortWriteBytesPerCycle"] == l2_write
    assert costs["mte3BytesPerCycle"] == ub_to_l2
    assert costs["mte1BytesPerCycle"] == l1_to_l0b
    assert costs["gmBytesPerCycle"] == aic * l2  # derived: every AI Core at its L2 rate


def test_sourced_rates_leave_the_assumed_list_and_the_derived_one_stays(session, sim_only):
    sources = dict(timing.cost_fields(session.backend))
    for field in ("corePortBytesPerCycle", "corePortWriteBytesPerCycle", "mte3BytesPerCycle", "mte1BytesPerCycle"):
        assert not sources[field].startswith(("assumed", "derived")), field
    assert sources["gmBytesPerCycle"].startswith("derived")


def test_writes_are_slower_than_reads_in_the_model(session, sim_only):
    """MTE3 (UB -> GM) at ub_to_l2_rate: halving that rate slows an MTE3-carrying launch and
    leaves the read port alone; an unbounded rate never slows it."""
    q, k, v = _inputs("BNSD", 1, 2, 2, 512, 512, 128, np.float16)
    with timing.op_trace(session.backend):
        session.flash_attention(q, k, v)
    base_costs = timing.pipe_costs(session.backend)
    base = timing.remodel(session.backend, base_costs).cycles
    slow = timing.remodel(session.backend, dict(base_costs, mte3BytesPerCycle=base_costs["mte3BytesPerCycle"] / 4))
    fast = timing.remodel(session.backend, dict(base_costs, mte3BytesPerCycle=1e12))
    assert slow.cycles > base >= fast.cycles
