"""`acl-fa run`, the main job, through the CLI (CliRunner) on small problems."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from acl_fa.cli import main


def _run(*args):
    result = CliRunner().invoke(main, ["run", *args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.stdout  # the progress bar goes to stderr


@pytest.mark.parametrize("args", [
    ["--seq", "200", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--causal"],
    ["--seq", "97", "--seq-kv", "300", "--heads", "2", "--dtype", "bfloat16", "--layout", "BSH"],
])
def test_run_json_report(sim_only, args):
    data = json.loads(_run(*args, "--iters", "2", "--warmup", "0", "--json"))
    assert data["backend"] == "sim" and data["soc"] == "Ascend910B2"
    assert data["check"]["ok"] and data["check"]["max_error"] <= data["check"]["tolerance"]
    assert len(data["time"]["all_ms"]) == 2 and data["time"]["tflops"] > 0
    assert data["tiling"]["block_m"] % 16 == 0 and data["tiling"]["cores"] >= 1
    assert data["device_bytes"]["intermediate"] < data["standard_attention_intermediate_bytes"] * 64
    sim = data["simulator"]
    assert sim["scalar_accesses"] == 0, "no per-element scalar work in the kernel"
    traffic = sim["gm_trace_by_tensor"]
    p = data["problem"]
    out_bytes = p["batch"] * p["heads"] * p["seq"] * p["head_dim"] * 2
    assert traffic["out"] == {"read": 0, "write": out_bytes}
    assert traffic["lse"] == {"read": 0, "write": p["batch"] * p["heads"] * p["seq"] * 4}
    assert traffic["other"] == {"read": 0, "write": 0}, "every GM access is inside a known tensor"
    assert traffic["k"]["read"] == traffic["v"]["read"] > 0
    assert 0 < sim["modeled_hbm_bytes"] <= data["gm_traffic"]["flash_attention_bytes"]


def test_kv_passes_follow_the_blocks(sim_only):
    """Not causal: K and V stream once per query block (one QK and one P.V per K/V block serve
    both AIVs of the group; it was once per AIV half, twice these bytes)."""
    data = json.loads(_run("--seq", "512", "--heads", "2", "--head-dim", "64", "--block-m", "64",
                           "--iters", "1", "--warmup", "0", "--no-check", "--json"))
    traffic = data["simulator"]["gm_trace_by_tensor"]
    k_bytes = 2 * 512 * 64 * 2
    query_blocks = 512 // 64
    assert traffic["k"]["read"] == query_blocks * k_bytes


def test_run_text_report_labels(sim_only):
    text = _run("--seq", "128", "--heads", "2", "--iters", "1", "--warmup", "0")
    assert "kernel wall time on the CPU simulator (not NPU time)" in text
    assert "modeled, not measured" in text
    assert "standard attention would hold" in text
    assert "x these intermediates" in text and "x the whole workspace" in text
    assert ": OK" in text


def test_strided_layouts_report_the_bytes_they_read(sim_only):
    """BSND and BSH read the same elements as BNSD (one head's rows, strided): the same bytes per
    tensor, the L2 model sees the same access bytes, and no tensor exceeds the GM total."""
    reports = {}
    for layout in ("BNSD", "BSND", "BSH"):
        reports[layout] = json.loads(_run("--seq", "384", "--heads", "8", "--kv-heads", "4", "--head-dim", "64",
                                          "--causal", "--layout", layout, "--block-m", "64",
                                          "--iters", "1", "--warmup", "0", "--no-check", "--json"))
    traffic = {layout: r["simulator"]["gm_trace_by_tensor"] for layout, r in reports.items()}
    assert traffic["BSND"] == traffic["BNSD"] == traffic["BSH"]
    for r in reports.values():
        sim = r["simulator"]
        assert sum(t["read"] + t["write"] for t in sim["gm_trace_by_tensor"].values()) <= sim["gm_bytes"]
        assert sim["l2_access_bytes"] == reports["BNSD"]["simulator"]["l2_access_bytes"]
        assert sim["modeled_hbm_bytes"] <= 1.5 * reports["BNSD"]["simulator"]["modeled_hbm_bytes"]
