"""`acl-fa plan --device-memory`: the forward planned for a device of that much free memory
(docs/memory.md), through click's CliRunner."""
from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from acl_fa.cli import main

SMALL = ("--seq", "1024", "--heads", "8", "--head-dim", "64", "--soc", "Ascend910B2")


def run(*args):
    return CliRunner().invoke(main, ["plan", *SMALL, *args], catch_exceptions=False)


def _workspace(output: str) -> int:
    return int(re.search(r"^workspace (\d+) B", output, re.M)[1])


def test_plan_prints_the_smaller_workspace_that_fits():
    auto = run()
    fitted = run("--device-memory", "24MiB")
    assert auto.exit_code == 0 and fitted.exit_code == 0, fitted.output
    assert _workspace(auto.output) == 36.25 * 2**20
    assert _workspace(fitted.output) < 24 * 2**20 - 4227072  # beside 4.03 MiB of tensors
    fit = next(line for line in fitted.output.splitlines() if line.startswith("fit"))
    assert "the auto tiling (BLOCK_M=192 BLOCK_N=512) needs 40.3 MiB per call" in fit, fit
    assert re.search(r"modeled time \+\d+\.\d% \(the policy's analytic model, not measured\)", fit), fit


def test_plan_with_room_keeps_the_auto_tiling():
    result = run("--device-memory", str(64 << 20), "--json")
    assert result.exit_code == 0, result.output
    (plan,) = json.loads(result.output)
    assert (plan["block_m"], plan["block_n"], plan["workspace_bytes"]) == (192, 512, 38010880)


def test_plan_below_the_floor_names_it():
    result = run("--device-memory", "18MiB")
    assert result.exit_code == 1
    assert ("the forward needs at least 20.5 MiB per call, more than the 18.0 MiB of --device-memory: q, k, v, "
            "out, lse 4.0 MiB + the smallest tiling's workspace 16.5 MiB (BLOCK_M=32 BLOCK_N=16: the Ascend C "
            "library's system workspace 16.0 MiB + 24 AIC groups x 20.0 KiB of S and P.V slots)") in result.output


@pytest.mark.parametrize("value", ["lots", "-3MiB", "12XB"])
def test_bad_sizes_are_usage_errors(value):
    result = run("--device-memory", value)
    assert result.exit_code == 2 and "--device-memory" in result.output, result.output


def test_device_memory_plans_one_chip_forward_only():
    result = run("--device-memory", "24MiB", "--backward")
    assert result.exit_code == 2 and "--device-memory plans the forward on one chip" in result.output


def test_v2_plans_fit_too():
    """A varlen batch (FlashAttentionV2's plan) on 22 MiB: its own smaller tiling."""
    auto = run("--varlen", "300,724")
    fitted = run("--varlen", "300,724", "--device-memory", "22MiB")
    assert fitted.exit_code == 0, fitted.output
    assert _workspace(fitted.output) < _workspace(auto.output)
    assert "is the fastest that fits" in fitted.output
