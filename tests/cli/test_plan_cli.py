"""`acl-fa plan` through click's CliRunner; chip numbers from the simulator's catalogue."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from acl_fa.cli import main
from acl_fa.plan.forward import chip, chips

REQUIRED_CHIPS = ("Ascend910B2", "Ascend910B4", "Ascend910_93", "Ascend910A", "Ascend310P3")


def run(*args):
    return CliRunner().invoke(main, ["plan", *args], catch_exceptions=False)


def test_catalogue_has_the_chips_with_get_core_mem_size_numbers():
    names = [c.name for c in chips()]
    assert set(REQUIRED_CHIPS) <= set(names)
    b2 = chip("ascend910b2")
    assert (b2.ub_bytes, b2.l1_bytes, b2.aic_num, b2.aiv_num) == (196352, 524032, 24, 48)


def test_soc_all_prints_a_fitting_plan_per_chip():
    result = run("--seq", "4096", "--causal", "--soc", "all", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["chip"]["name"]: r for r in json.loads(result.output)}
    for name in REQUIRED_CHIPS:
        r = rows[name]
        assert r["block_m"] % 16 == 0 and r["block_n"] % 16 == 0
        assert all(line["bytes"] <= line["capacity"] for line in r["budget"]), name
    assert all(rows[name]["chip"]["has_kernel"] for name in REQUIRED_CHIPS)
    # The coupled chips plan per AI Core (all rows of a block, no user workspace), the MIX chips
    # per AIV (half the rows, a GM workspace for the cube <-> vector hand-off).
    for name in ("Ascend910A", "Ascend310P3"):
        assert rows[name]["sub_block_m"] == rows[name]["block_m"] and rows[name]["user_workspace_bytes"] == 0
    assert rows["Ascend910B2"]["sub_block_m"] * 2 == rows["Ascend910B2"]["block_m"]
    assert rows["Ascend910B2"]["user_workspace_bytes"] > 0
    table = run("--seq", "4096", "--causal", "--soc", "all").output
    assert all(name in table for name in REQUIRED_CHIPS)
    assert [line.split()[-1] for line in table.splitlines()[1:]] == ["yes"] * (len(table.splitlines()) - 1)


def test_single_chip_report():
    result = run("--seq", "4096", "--heads", "32", "--causal", "--soc", "Ascend910B2")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "BLOCK_M=" in out and "scoreQue" in out and "UB total per AIV" in out
    assert "24 of 24 AIC cores" in out and "max/mean 1.0" in out


def test_json_plan_matches_options():
    result = run("--seq", "97", "--seq-kv", "203", "--heads", "8", "--kv-heads", "2", "--head-dim", "64",
                 "--dtype", "bfloat16", "--layout", "BSH", "--block-m", "64", "--soc", "Ascend910B4", "--json")
    assert result.exit_code == 0, result.output
    (p,) = json.loads(result.output)  # always a list, one plan per chip
    assert (p["seq"], p["seq_kv"], p["kv_heads"], p["block_m"]) == (97, 203, 2, 64)
    assert p["workspace_bytes"] == p["system_workspace_bytes"] + p["user_workspace_bytes"]
    assert p["chip"]["name"] == "Ascend910B4"


@pytest.mark.parametrize("args, message", [
    (("--block-m", "256", "--block-n", "2048"), "block_n must be 0 (auto) or a multiple of 16 up to 1024"),
    (("--head-dim", "264"), "head_dim must be a multiple of 16 and at most 256"),  # 1..256 are planned padded
    (("--soc", "Ascend999"), "unknown SoC 'Ascend999'"),
])
def test_errors_are_reported(args, message):
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.output
