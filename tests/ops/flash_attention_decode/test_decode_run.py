"""`acl-fa run --decode/--paged` and the decode measurement: a correct check, the cores all busy
and balanced, K/V read once per step, and only the new tokens crossing the host-device link."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.jobs import decode_run
from acl_fa.jobs.settings import JobSettings
from acl_fa.cli import main


@pytest.mark.parametrize("args", [
    ["--paged", "--block-size", "32", "--seq", "1", "--seq-kv", "300", "--batch", "3"],
    ["--decode", "--seq", "2", "--seq-kv", "100", "--dtype", "bfloat16", "--num-splits", "1"],
])
def test_run_decode_json(sim_only, args):
    result = CliRunner().invoke(main, ["run", *args, "--heads", "4", "--kv-heads", "2", "--head-dim", "64",
                                       "--steps", "2", "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    data = json.loads(result.stdout)
    assert data["check"]["ok"] and data["steps"] == 2 and len(data["kernel_ms"]) == 2
    assert data["copies"]["d2d"]["bytes"] == 2 * data["new_token_bytes"]  # appended on the device
    assert data["kv_read_over_cache"] <= 1.05


def test_run_paged_text_report(sim_only):
    result = CliRunner().invoke(main, ["run", "--paged", "--seq", "1", "--seq-kv", "64", "--heads", "2",
                                       "--head-dim", "32", "--steps", "1"])
    assert result.exit_code == 0, result.output
    for label in ("decode B=1", "paged, block_size 128", "kernel", "not NPU time", "AIC busy", "K/V read",
                  "host<->dev", "OK", "prefill     ", "prompt tokens", "modeled     ", "pipeline model"):
        assert label in result.stdout, label


def test_decode_step_uses_every_core_and_reads_kv_once(session, sim_only):
    """The issue's decode shape (N32 Nkv8 D128, one sequence) at 4096 cached tokens: every AIC has
    work, the busiest within 10% of the mean, and K/V are read 1.0x per step."""
    problem = decode_run.decode_problem(4096, num_heads=32, num_kv_heads=8, head_dim=128)
    report = decode_run.run_decode(session, problem, decode_run.DecodeSettings(block_size=128, steps=1, prefill=False),
                                   JobSettings(check=True))
    assert report.accuracy.ok
    assert report.cores["aic_busy"] == report.cores["aic"] == 24
    assert report.cores["max_over_mean"] <= 1.10
    assert report.kv_read_bytes <= 1.05 * report.kv_cache_bytes
    assert report.copies["h2d"]["bytes"] < report.kv_cache_bytes / 100


def test_bench_decode_rows(sim_only):
    result = CliRunner().invoke(main, ["bench", "--decode", "--paged", "--block-size", "16", "--seq-kv", "100,40",
                                       "--heads", "4", "--kv-heads", "1", "--head-dim", "32", "--steps", "1",
                                       "--json"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    rows = json.loads(result.stdout)
    assert [r["seq_kv"] for r in rows] == [100, 40]
    assert all(r["check"]["ok"] and r["kv_read_over_cache"] <= 1.05 for r in rows)
    assert all("torch_sdpa_ms" in r for r in rows)


@pytest.mark.parametrize("block_size", [None, 32])
def test_prefill_fills_the_cache_the_steps_read(session, sim_only, block_size):
    """The prefill (flash_attention over the prompt, its K/V copied into the cache on the device)
    leaves the cache the host fill would: the decode steps after it give the same result (the
    check is against the float64 reference over the same tokens); it is timed, and one step is
    modeled."""
    problem = decode_run.decode_problem(300, batch=2, num_heads=4, num_kv_heads=2, head_dim=64)
    settings = JobSettings(seed=4)
    filled = decode_run.run_decode(session, problem, decode_run.DecodeSettings(block_size, steps=2, prefill=True),
                                   settings)
    hosted = decode_run.run_decode(session, problem, decode_run.DecodeSettings(block_size, steps=2, prefill=False),
                                   settings)
    assert filled.accuracy.ok and hosted.accuracy.ok
    assert filled.accuracy.max_error == hosted.accuracy.max_error
    assert filled.prefill_ms > 0 and filled.prefill_kernel_ms > 0 and hosted.prefill_ms is None
    assert filled.prefill_tokens_per_s == pytest.approx(2 * 300 / (filled.prefill_ms / 1e3))
    assert filled.modeled_step_us > 0 and filled.modeled_tokens_per_s == pytest.approx(2 / (filled.modeled_step_us / 1e6))
    assert filled.copies == hosted.copies  # the steps move only the new tokens either way


def test_prefill_is_skipped_beyond_the_auto_limit_and_says_so(sim_only, monkeypatch):
    monkeypatch.setattr(decode_run, "PREFILL_AUTO_LIMIT", 4 * 100 * 100)
    args = ["run", "--decode", "--seq", "1", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--steps", "1"]
    small = CliRunner().invoke(main, args + ["--seq-kv", "100"])
    big = CliRunner().invoke(main, args + ["--seq-kv", "101"])
    forced = CliRunner().invoke(main, args + ["--seq-kv", "101", "--prefill"])
    assert small.exit_code == big.exit_code == forced.exit_code == 0, small.output + big.output + forced.output
    assert "prompt tokens" in small.stdout and "prompt tokens" in forced.stdout
    assert "prefill     not run: the cache was filled from the host" in big.stdout


def test_write_kv_cache_writes_through_the_block_table(session):
    rng = np.random.default_rng(9)
    table = np.array([[3, 0], [1, 2]], np.int32)
    cache = np.zeros((4, 16, 2, 32), np.float16)
    k_cache, v_cache = session.to_device(cache), session.to_device(cache)
    k = rng.standard_normal((2, 20, 2, 32)).astype(np.float16)
    try:
        acl_fa.ops.decode.write_kv_cache(k_cache, v_cache, k, 2 * k, cache_seqlens=np.array([5, 12], np.int32),
                                     block_table=table)
        rows_k = k_cache.numpy().reshape(-1, 2, 32)
        rows_v = v_cache.numpy().reshape(-1, 2, 32)
        for b, start in enumerate((5, 12)):
            for t in range(20):
                pos = start + t
                row = table[b, pos // 16] * 16 + pos % 16
                np.testing.assert_array_equal(rows_k[row], k[b, t])
                np.testing.assert_array_equal(rows_v[row], 2 * k[b, t])
        with pytest.raises(acl_fa.InvalidArgumentError, match="exceeds the block table's reach"):
            acl_fa.ops.decode.write_kv_cache(k_cache, v_cache, k, k, cache_seqlens=13, block_table=table)
        with pytest.raises(acl_fa.InvalidTypeError, match="k_cache must be a DeviceArray"):
            acl_fa.ops.decode.write_kv_cache(cache, v_cache, k, k, cache_seqlens=0, block_table=table)
    finally:
        k_cache.close()
        v_cache.close()
