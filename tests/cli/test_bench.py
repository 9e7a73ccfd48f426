"""`acl-fa bench` and its models: the L2 model on hand-made traces (exact LRU hits, misses and
HBM bytes against an independent Python replay), the L2 model over a real launch's trace, the
roofline arithmetic, numpy standard attention against the float64 reference, and the CLI's
JSON through CliRunner (fields present, ratios consistent). No timing assertions."""
from __future__ import annotations

import collections
import json

import numpy as np
import pytest
from click.testing import CliRunner

from acl_fa.plan import l2model
from acl_fa.runtime import sim_stats
from acl_fa.runtime.ffi import ffi
from acl_fa.ops.forward import runner_for
from acl_fa.spec.problem import make_problem
from acl_fa.jobs.bench import standard_attention_numpy
from acl_fa.cli import main
from acl_fa.runtime.errors import AclError
from acl_fa.spec.layouts import to_bnsd
from acl_fa.reference.attention import attention_reference
from acl_fa.plan.roofline import ChipPeaks, chip_peaks, roofline
from acl_fa.jobs.run import random_inputs

LINE = 512


def replay_lru(records, l2_bytes, line_bytes) -> dict:
    """The model's documented policy, one line at a time in Python (small traces only)."""
    cache = collections.OrderedDict()  # line -> dirty, most recent last
    out = dict(access_bytes=0, line_accesses=0, line_hits=0, line_misses=0, hbm_read_bytes=0, hbm_write_bytes=0)
    seen = set()
    capacity = l2_bytes // line_bytes
    for addr, nbytes, _core, is_write in records:
        if nbytes == 0:
            continue
        out["access_bytes"] += nbytes
        end = addr + nbytes
        for line in range(addr // line_bytes, (end - 1) // line_bytes + 1):
            whole = addr <= line * line_bytes and end >= (line + 1) * line_bytes
            out["line_accesses"] += 1
            seen.add(line)
            if line in cache:
                out["line_hits"] += 1
                cache.move_to_end(line)
                cache[line] = cache[line] or bool(is_write)
                continue
            out["line_misses"] += 1
            if not (is_write and whole):
                out["hbm_read_bytes"] += line_bytes
            if len(cache) == capacity:
                _, dirty = cache.popitem(last=False)
                out["hbm_write_bytes"] += line_bytes if dirty else 0
            cache[line] = bool(is_write)
    flush = sum(line_bytes for dirty in cache.values() if dirty)
    out.update(hbm_flush_bytes=flush, hbm_write_bytes=out["hbm_write_bytes"] + flush, distinct_lines=len(seen))
    return out


def fields(stats: l2model.L2Stats) -> dict:
    return {k: getattr(stats, k) for k in ("access_bytes", "line_accesses", "line_hits", "line_misses",
                                           "hbm_read_bytes", "hbm_write_bytes", "hbm_flush_bytes", "distinct_lines")}


A, B, C = 0, LINE, 2 * LINE  # three lines


@pytest.mark.parametrize("records, expected", [
    # two-line cache: A B A C B -> C evicts B (least recent), B then evicts A
    ([(A, LINE, 0, 0), (B, LINE, 0, 0), (A, LINE, 0, 0), (C, LINE, 0, 0), (B, LINE, 0, 0)],
     dict(line_hits=1, line_misses=4, distinct_lines=3, hbm_read_bytes=4 * LINE, hbm_write_bytes=0)),
    # a whole-line write miss allocates without a fill; evicted dirty -> one write-back
    ([(A, LINE, 0, 1), (B, LINE, 0, 0), (C, LINE, 0, 0)],
     dict(line_hits=0, line_misses=3, hbm_read_bytes=2 * LINE, hbm_write_bytes=LINE, hbm_flush_bytes=0)),
    # a partial write miss fills the line; still dirty at the end -> flushed
    ([(A + 8, 100, 0, 1)], dict(line_misses=1, hbm_read_bytes=LINE, hbm_write_bytes=LINE, hbm_flush_bytes=LINE)),
    # one record over three lines (bytes 500..1099), then a hit on its middle line
    ([(500, 600, 3, 0), (LINE + 4, 4, 3, 0)],
     dict(access_bytes=604, line_accesses=4, line_hits=1, line_misses=3, hbm_read_bytes=3 * LINE)),
    # a write hit makes a clean line dirty: written back when evicted
    ([(A, 64, 0, 0), (A, 64, 0, 1), (B, LINE, 0, 0), (C, LINE, 0, 0)],
     dict(line_hits=1, line_misses=3, hbm_read_bytes=3 * LINE, hbm_write_bytes=LINE, hbm_flush_bytes=0)),
    ([], dict(line_accesses=0, hbm_read_bytes=0, hbm_write_bytes=0)),
], ids=["lru-order", "write-back", "partial-write-fill", "multi-line-record", "write-hit-dirty", "empty"])
def test_l2_model_hand_made_traces(backend, sim_only, records, expected):
    stats = l2model.model_records(backend, records, 2 * LINE, LINE)
    got = fields(stats)
    assert {k: got[k] for k in expected} == expected
    assert got == replay_lru(records, 2 * LINE, LINE)
    assert stats.hbm_bytes == stats.hbm_read_bytes + stats.hbm_write_bytes


@pytest.mark.parametrize("l2_lines", [1, 7, 64, 4096])
def test_l2_model_matches_python_replay_on_random_traces(backend, sim_only, l2_lines):
    rng = np.random.default_rng(l2_lines)
    n = 3000
    records = list(zip(rng.integers(0, 200 * 128, n) * 4, rng.integers(0, 3 * 128, n), rng.integers(0, 48, n),
                       rng.integers(0, 2, n)))
    records = [tuple(int(x) for x in r) for r in records]
    stats = l2model.model_records(backend, records, l2_lines * 128, 128)
    assert fields(stats) == replay_lru(records, l2_lines * 128, 128)


def test_interleave_by_core_spreads_each_core_over_the_common_axis():
    # core 7 has 4 records, core 1000 has 2: positions 1/8 3/8 5/8 7/8 and 1/4 3/4
    records = np.array([(i, 1, 7, 0) for i in range(4)] + [(100 + i, 1, 1000, 1) for i in range(2)],
                       dtype=l2model.TRACE_DTYPE)
    got = l2model.interleave_by_core(records)
    assert got["addr"].tolist() == [0, 100, 1, 2, 101, 3]
    assert sorted(got.tolist()) == sorted(records.tolist())
    assert len(l2model.interleave_by_core(records[:0])) == 0


def test_interleave_keeps_an_aic_and_its_aivs_in_recorded_order():
    # AIV 0, AIC 0 (1000), AIV 1 form one group (2 AIV per AIC); AIV 2 is the next group's
    records = np.array([(1, 1, 0, 1), (2, 1, 1000, 0), (3, 1, 1, 0), (9, 1, 2, 0)], dtype=l2model.TRACE_DTYPE)
    got = l2model.interleave_by_core(records, aiv_per_aic=2)["addr"].tolist()
    assert got == [1, 2, 9, 3]  # group 0 at 1/6 1/2 5/6, group 1 at 1/2 (ties: recorded order)
    # one AIV per AIC: AIV 1 and AIV 2 are groups of their own
    assert l2model.interleave_by_core(records, aiv_per_aic=1)["addr"].tolist() == [1, 3, 9, 2]


def test_concurrent_order_sees_the_cores_working_sets_together(backend, sim_only):
    # two cores each re-read their own line; in launch order each pair hits, interleaved
    # through a one-line cache they evict each other
    records = [(0, LINE, 0, 0), (0, LINE, 0, 0), (LINE, LINE, 2, 0), (LINE, LINE, 2, 0)]  # AIC 0 and AIC 1
    assert l2model.model_records(backend, records, LINE, LINE).line_hits == 2
    mixed = l2model.interleave_by_core(np.array(records, dtype=l2model.TRACE_DTYPE))
    assert l2model.model_records(backend, mixed, LINE, LINE).line_hits == 0


def test_l2_model_rejects_bad_geometry(backend, sim_only):
    with pytest.raises(ValueError, match="line_bytes"):
        l2model.model_records(backend, [(0, 8, 0, 0)], 256, 512)
    backend.load_op_library()
    out = ffi.new("aclfaSimL2Stats *")
    with pytest.raises(AclError):
        backend.call("aclfaSimModelL2", 1024, 0, ffi.NULL, 0, out)


def test_l2_model_over_a_launch_trace(session, sim_only):
    shells = [np.empty((1, 2, 200, 64), np.float16) for _ in range(3)]
    problem, *_ = make_problem(*shells, causal=True)
    q, k, v = random_inputs(problem)
    runner = runner_for(session)
    try:
        with l2model.gm_trace(session.backend):
            runner.run(problem, q, k, v)
            counters = sim_stats.last_launch(session.backend)
            big = l2model.model_trace(session.backend, 1 << 30, LINE)
            tiny = l2model.model_trace(session.backend, 4 * LINE, LINE)
            mixed = l2model.model_trace(session.backend, 1 << 30, LINE, order="concurrent")
            with pytest.raises(ValueError, match="order"):
                l2model.model_trace(session.backend, 1 << 30, LINE, order="random")
    finally:
        runner.close()
    # the trace holds each Matmul operand's span once per call; the counters also count the
    # re-reads between tile passes, so the two byte totals differ but both are non-zero
    assert big.records > 0 and big.access_bytes > 0 and counters["gm_bytes"] > 0
    # nothing is evicted from a 1 GiB cache: every write-back is the final flush
    assert big.hbm_write_bytes == big.hbm_flush_bytes
    assert big.line_misses == big.distinct_lines == tiny.distinct_lines
    q_k_v = 3 * q.nbytes
    assert big.hbm_read_bytes >= q_k_v and big.hbm_write_bytes >= q.nbytes  # Q, K, V in; O out
    assert tiny.hbm_bytes >= big.hbm_bytes and tiny.line_misses > big.line_misses
    # without evictions the order changes nothing but which touch of a line comes first
    assert (mixed.records, mixed.line_accesses, mixed.distinct_lines) == (big.records, big.line_accesses,
                                                                           big.distinct_lines)


PEAKS = ChipPeaks("T", aic_num=2, aiv_num=4, clock_hz=1e9, cube_macs_per_s=1e12, vector_elems_per_s=1e11,
                  hbm_bytes_per_s=1e10, l2_bytes=1 << 20, l2_line_bytes=128)


@pytest.mark.parametrize("macs, elems, hbm, bound, seconds", [
    (2e12, 1e11, 1e10, "cube", 2.0),
    (1e12, 3e11, 1e10, "vector", 3.0),
    (1e12, 1e11, 5e10, "hbm", 5.0),
])
def test_roofline_arithmetic(macs, elems, hbm, bound, seconds):
    r = roofline(PEAKS, int(macs), int(elems), int(hbm))
    assert (r.cube_s, r.vector_s, r.hbm_s) == pytest.approx((macs / 1e12, elems / 1e11, hbm / 1e10))
    assert r.bound == bound and r.time_s == pytest.approx(seconds)
    assert "modeled" in r.to_dict()["label"]


def test_roofline_rejects_negative_counts():
    with pytest.raises(ValueError, match="hbm_bytes"):
        roofline(PEAKS, 1, 1, -1)


def test_chip_peaks_from_the_catalogue():
    p = chip_peaks("Ascend910B2")
    assert (p.aic_num, p.aiv_num, p.l2_bytes) == (24, 48, 192 << 20)
    assert p.cube_macs_per_s == pytest.approx(353.9e12 / 2)
    assert p.vector_elems_per_s == pytest.approx(48 * 1.8e9 * 64)
    assert p.hbm_bytes_per_s == pytest.approx(1.5e12)
    coupled = chip_peaks("Ascend310P3")
    assert coupled.aiv_num == 8 + 7  # AI Cores' vector units plus the vector cores


@pytest.mark.parametrize("causal, nkv, layout", [(False, 4, "BNSD"), (True, 2, "BSND"), (True, 1, "BSH")])
def test_standard_attention_numpy_matches_reference(causal, nkv, layout):
    shape = {"BNSD": lambda n: (2, n, 33, 32), "BSND": lambda n: (2, 33, n, 32), "BSH": lambda n: (2, 33, n * 32)}
    q = np.random.default_rng(0).standard_normal(shape[layout](4)).astype(np.float16)
    k, v = (np.random.default_rng(s).standard_normal(shape[layout](nkv)).astype(np.float16) for s in (1, 2))
    problem, *_ = make_problem(q, k, v, causal=causal, layout=layout, num_heads=4, num_kv_heads=nkv)
    got = standard_attention_numpy(problem, q, k, v)
    ref, _ = attention_reference(q, k, v, causal=causal, layout=layout, num_heads=4, num_kv_heads=nkv,
                                 out_dtype=np.float64)
    np.testing.assert_allclose(got, to_bnsd(ref, layout, 4), atol=2e-5, rtol=1e-4)


def bench_json(*args):
    result = CliRunner().invoke(main, ["bench", "--backend", "sim", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_bench_cli_json_fields_and_ratios(sim_only):
    report = bench_json("--seq", "64,128", "--iters", "1", "--heads", "2", "--causal", "--json")
    assert report["backend"] == "sim" and "not NPU time" in report["time_labels"]["flash"]
    assert "numpy" in report["time_labels"]["standard"] and "modeled" in report["roofline_label"]
    assert [r["seq"] for r in report["rows"]] == [64, 128]
    for row in report["rows"]:
        fa, std, ratios = row["flash"], row["standard"], row["ratios"]
        assert ratios["time"] == pytest.approx(std["median_ms"] / fa["median_ms"])
        assert ratios["intermediate_memory"] == pytest.approx(std["intermediate_bytes"] / fa["intermediate_bytes"])
        # The op also asks for the library's system workspace (16 MiB on 910B): both ratios are reported.
        assert fa["workspace_bytes"] == fa["intermediate_bytes"] + 16 * 1024 * 1024
        assert ratios["intermediate_memory_whole_workspace"] == pytest.approx(
            std["intermediate_bytes"] / fa["workspace_bytes"])
        assert ratios["gm_traffic"] == pytest.approx(std["gm_bytes"] / fa["gm_bytes"])
        assert std["intermediate_bytes"] == 2 * 2 * row["seq"] ** 2 * 2  # S and P, 2 heads, fp16
        l2 = row["l2_model"]
        assert l2["line_hits"] + l2["line_misses"] == l2["line_accesses"]
        assert ratios["modeled_hbm_over_compulsory"] == pytest.approx(l2["hbm_bytes"] / row["compulsory_bytes"])
        mixed = row["l2_model_concurrent"]
        assert ratios["modeled_hbm_concurrent_over_compulsory"] == pytest.approx(
            mixed["hbm_bytes"] / row["compulsory_bytes"])
        assert mixed["line_accesses"] == l2["line_accesses"]
        assert ratios["executed_over_useful_macs"] == pytest.approx(fa["executed_macs"] / fa["useful_macs"])
        assert ratios["executed_over_useful_macs"] >= 1.0   # the kernel cannot do less than the useful work
        assert ratios["core_max_over_mean_macs"] >= 1.0
        roof = row["roofline"]
        assert roof["time_s"] == max(roof["cube_s"], roof["vector_s"], roof["hbm_s"])
        assert roof["bound"] in ("cube", "vector", "hbm")
        # The pipeline model's time: never below the roofline bound, TFLOP/s of the useful work at it.
        model = row["modeled_time"]
        assert "modeled" in model["label"] and model["time_s"] >= roof["time_s"]
        assert model["tflops"] == pytest.approx(2 * fa["useful_macs"] / model["time_s"] / 1e12)
    # the useful MACs follow the causal triangle: 2 matmuls * D (128) * visible pairs * heads
    assert report["rows"][0]["flash"]["useful_macs"] == 2 * 128 * (64 * 65 // 2) * 2


def test_bench_cli_text_labels_and_no_l2(sim_only):
    result = CliRunner().invoke(main, ["bench", "--backend", "sim", "--seq", "64", "--iters", "1", "--heads", "1",
                                       "--no-l2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "not NPU time" in result.stdout and "modeled" in result.stdout and "speed-up" in result.stdout
    report = bench_json("--seq", "64", "--iters", "1", "--heads", "1", "--no-l2", "--json")
    assert report["rows"][0]["l2_model"] is None and report["rows"][0]["l2_model_concurrent"] is None
    assert report["rows"][0]["roofline"]["hbm_bytes_source"].startswith("raw GM")
    assert report["rows"][0]["modeled_time"] is None  # the model runs with the traced launch


@pytest.mark.parametrize("seq", ["64,x", "0", ","])
def test_bench_cli_rejects_bad_lengths(seq):
    result = CliRunner().invoke(main, ["bench", "--seq", seq])
    assert result.exit_code == 2 and "--seq" in result.output


@pytest.mark.parametrize("args, message", [
    (["--head-dim", "100"], "head dim D=100 must be a multiple of 16"),
    (["--heads", "3", "--kv-heads", "2"], "query heads 3 must be a multiple of key/value heads 2"),
])
def test_bench_cli_refuses_bad_problems_before_running(sim_only, args, message):
    result = CliRunner().invoke(main, ["bench", "--backend", "sim", "--seq", "64", *args])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_bench_plot_writes_a_png(sim_only, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    bench_json("--seq", "64,128", "--iters", "1", "--heads", "1", "--json", "--plot", str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
