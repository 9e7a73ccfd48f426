"""`acl-fa run` and `acl-fa plan` with --window, --dropout, --mask-density and --varlen (CliRunner,
small problems): the V2 ops' report, its check against the float64 reference and the band's work."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from acl_fa.spec.options import AttentionOptions
from acl_fa.cli import main
from acl_fa.jobs.run_options import band_pairs


def _invoke(*args):
    return CliRunner().invoke(main, list(args))


def _ok(*args):
    result = _invoke(*args)
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.stdout


SMALL = ["--heads", "2", "--head-dim", "64", "--iters", "1", "--warmup", "0"]


@pytest.mark.parametrize("args", [
    ["--seq", "300", "--window", "40,0", "--causal"],
    ["--varlen", "200,37,5", "--causal", "--window", "30,-1"],
    ["--seq", "256", "--batch", "2", "--mask-density", "0.5", "--dropout", "0.1", "--seed", "3"],
    ["--varlen", "200,37,5", "--causal", "--window", "30,-1", "--dropout", "0.2"],
], ids=["window", "varlen", "mask-dropout", "varlen-dropout"])
def test_run_with_options_checks_against_the_reference(sim_only, args):
    data = json.loads(_ok("run", *args, *SMALL, "--json"))
    assert data["check"]["ok"] and data["check"]["max_error"] <= data["check"]["tolerance"]
    executed = data["simulator"]["cube_macs"]
    assert data["useful_macs"] <= executed < 2.5 * data["useful_macs"]   # the band, not the square
    text = _ok("run", *args, *SMALL)
    assert "op FlashAttentionV2" in text and ": OK" in text and "band pre_tokens=" in text


@pytest.mark.parametrize("args", [
    ["--varlen", "150,20", "--causal", "--window", "24,0"],
    ["--varlen", "150,20,7", "--causal", "--window", "40,-1", "--dropout", "0.1"],
    ["--seq", "160", "--causal", "--mask-density", "0.5", "--dropout", "0.2"],
], ids=["varlen-window", "varlen-window-dropout", "mask-dropout"])
def test_run_backward_with_options(sim_only, args):
    """The backward of every option the forward takes, checked against the float64 reference
    backward with the same window, mask and regenerated dropout mask."""
    text = _ok("run", *args, "--backward", *SMALL)
    assert text.count(": OK") == 4, text   # the forward and dq, dk, dv


@pytest.mark.parametrize("args,message", [
    (["--window", "5"], "expected 2 comma-separated integers"),
    (["--window", "-2,0"], "must be >= -1"),
    (["--varlen", "10,0"], "must be >= 1"),
    (["--varlen", "10", "--decode"], "do not combine"),
    (["--dropout", "1"], "--dropout"),
    (["--mask-density", "1.0"], "--mask-density"),
    (["--mask-density", "0.5", "--varlen", "10"], "does not combine with --varlen"),
], ids=["window-count", "window-low", "varlen-zero", "decode", "dropout-1", "density-1", "mask-varlen"])
def test_run_option_errors(args, message):
    result = _invoke("run", *args)
    # 2: click's usage errors; 1: acl-fa's refusal of the combination (reported_as_usage_errors)
    assert result.exit_code in (1, 2) and message in result.output, result.output


def test_plan_shows_the_band_work():
    text = _ok("plan", "--seq", "4096", "--window", "256,0", "--causal")
    useful = 32 * band_pairs(AttentionOptions(pre_tokens=256, next_tokens=0), 4096, 4096)
    assert "band pre_tokens=256 next_tokens=0" in text and f"band      {useful} visible" in text
    ratio = float(text.rsplit("(", 1)[1].split("x")[0])
    assert 1.0 <= ratio < 1.5
    text = _ok("plan", "--varlen", "4096,1000,17", "--causal")
    assert "TND" in text and "varlen (3 sequences" in text
    assert "--window/--dropout/--mask-density/--varlen plans are of the forward" in \
        _invoke("plan", "--varlen", "8", "--backward").output


def test_run_mask_density_hides_keys_and_dropout_reports_its_key(sim_only):
    """--mask-density 0.5 hides the last half of the keys: half the executed cube work of the
    same run without it; --dropout and --seed appear in the report."""
    base = ["--seq", "256", "--heads", "2", "--head-dim", "64", "--iters", "1", "--warmup", "0",
            "--block-m", "64", "--block-n", "64", "--json"]
    full = json.loads(_ok("run", "--dropout", "0.1", "--seed", "4", *base))
    half = json.loads(_ok("run", "--mask-density", "0.5", "--dropout", "0.1", "--seed", "4", *base))
    assert half["simulator"]["cube_macs"] * 2 == full["simulator"]["cube_macs"]
    assert half["check"]["ok"] and full["check"]["ok"]
    text = _ok("run", "--mask-density", "0.5", "--dropout", "0.1", "--seed", "4", *base[:-1])
    assert "mask [1, 1, 1, 256] uint8 (256 B on the device)" in text and "dropout p=0.1 seed=4" in text


def test_plan_shows_mask_and_dropout():
    text = _ok("plan", "--seq", "4096", "--mask-density", "0.5", "--dropout", "0.1")
    assert "mask [1, 1, 1, 4096] dropout" in text
    assert "maskBuf" in text and "philoxBuf" in text
    plain = _ok("plan", "--seq", "4096", "--window", "-1,-1")
    assert "maskBuf" not in plain and "philoxBuf" not in plain
    assert "Atlas A2/A3" in _invoke("plan", "--seq", "128", "--dropout", "0.1", "--soc", "Ascend310P3").output


def test_band_pairs():
    opts = AttentionOptions(pre_tokens=2, next_tokens=1)
    want = sum(1 for i in range(5) for j in range(7) if i + 2 - 2 <= j <= i + 2 + 1)
    assert band_pairs(opts, 5, 7) == want
    keys = [True, False, True, True, False, True, True]
    assert band_pairs(opts, 5, 7, key_visible=keys) == \
        sum(1 for i in range(5) for j in range(7) if i <= j <= i + 3 and keys[j])
    assert band_pairs(AttentionOptions(), 3, 4) == 12


def test_run_high_performance_launches_flash_attention_v4(sim_only):
    """--precision high_performance runs FlashAttentionV4's kernel (S in the input dtype: half the
    default's S bytes through GM), not V2's under V4's label."""
    args = ["run", "--seq", "256", "--causal", *SMALL, "--json"]
    default = json.loads(_ok(*args, "--precision", "high_precision"))
    fast = json.loads(_ok(*args, "--precision", "high_performance"))
    assert fast["check"]["ok"]
    assert fast["simulator"]["gm_bytes"] < default["simulator"]["gm_bytes"]
