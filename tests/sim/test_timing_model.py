"""The pipeline timing model (acl_fa.plan.timing, sim/src/engine/timing.cpp) and the pipe-race rule.

Invariants of the model on the operator: no pipe overlaps itself, an instruction starts only
after what its queue hand-off waits for, the modeled time is at least the roofline bound and grows
with the work, and it is identical for any number of host threads. The race rule fires on a
kernel with a SetFlag/WaitFlag pair removed (tests/sim/test_sim_races.py) and on none of the
operator's table cases.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from acl_fa.plan import timing
from acl_fa.plan.roofline import chip_peaks, roofline
from acl_fa.runtime.sim_stats import last_launch

from test_flash_attention import CASES, _case_id, _inputs

PIPE = {name: i for i, name in enumerate(timing.PIPES)}


def _modeled(session, seq, heads=1, d=128, causal=False, races=False):
    q, k, v = _inputs("BNSD", 1, heads, heads, seq, seq, d, np.float16)
    with timing.op_trace(session.backend, races=races):
        session.flash_attention(q, k, v, causal=causal)
    return timing.last_model(session.backend)


@pytest.fixture
def schedule(session, sim_only):
    model = _modeled(session, 512, heads=2, d=64, causal=True)
    ops, names = timing.modeled_ops(session.backend)
    return model, ops, names


def test_no_pipe_overlaps_itself(schedule):
    _, ops, _ = schedule
    busy = ops[ops["kind"] != 1]  # instructions and cube job stages (stalls are not work)
    for core in np.unique(busy["core"]):
        for pipe in range(len(timing.PIPES)):
            mine = busy[(busy["core"] == core) & (busy["pipe"] == pipe)]
            if len(mine) < 2:
                continue
            mine = np.sort(mine, order="start")
            overlap = mine["start"][1:] - mine["end"][:-1]
            assert overlap.min() >= -1e-6, f"core {core} pipe {timing.PIPES[pipe]} overlaps itself"


def test_queue_hand_offs_are_waited_for(schedule):
    # The kernel dequeues every GM->UB copy (VECIN: MTE2 -> V) before its vector work and
    # enqueues every vector result (VECOUT: V -> MTE3) before its UB->GM copy, so on each AIV a
    # vector instruction starts after all earlier MTE2 copies end, an MTE3 copy after all
    # earlier vector instructions end.
    _, ops, _ = schedule
    work = ops[(ops["kind"] == 0) & (ops["core"] < 1000)]
    checked = 0
    for core in np.unique(work["core"]):
        mine = np.sort(work[work["core"] == core], order="seq")
        for later, earlier in ((PIPE["V"], PIPE["MTE2"]), (PIPE["MTE3"], PIPE["V"])):
            done = np.maximum.accumulate(np.where(mine["pipe"] == earlier, mine["end"], 0.0))
            after = np.concatenate([[0.0], done[:-1]])  # ends of strictly earlier instructions
            sel = mine["pipe"] == later
            assert (mine["start"][sel] >= after[sel] - 1e-6).all(), f"AIV {core}: a hand-off was not waited for"
            checked += int(sel.sum())
    assert checked > 100


def test_time_is_at_least_the_roofline(session, sim_only):
    for causal in (False, True):
        model = _modeled(session, 1024, heads=4, causal=causal)
        stats = last_launch(session.backend)
        compulsory = 4 * 4 * 1024 * 128 * 2  # q, k, v, out once
        bound = roofline(chip_peaks(model.chip), stats["cube_macs"], stats["vector_elems"], compulsory)
        assert model.seconds >= bound.time_s, (model.seconds, bound.to_dict())


def test_time_grows_with_work(session, sim_only):
    times = [_modeled(session, s).cycles for s in (256, 512, 1024)]
    assert times[0] < times[1] < times[2], times
    heads = [_modeled(session, 512, heads=h, d=64).cycles for h in (6, 12, 24)]  # more items per core
    assert heads[0] < heads[1] < heads[2], heads


def test_same_model_for_any_host_thread_count(session, sim_only, monkeypatch):
    results = []
    for threads in ("1", "3"):
        monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
        model = _modeled(session, 300, heads=3, d=64, causal=True)
        ops, _ = timing.modeled_ops(session.backend)
        results.append((model.cycles, model.aiv_busy.tobytes(), ops[["start", "end", "core", "pipe", "seq"]].tobytes()))
    assert results[0] == results[1]


def test_remodel_with_a_slower_vector_unit_is_slower(session, sim_only):
    model = _modeled(session, 512, heads=2)
    costs = timing.pipe_costs(session.backend)
    again = timing.remodel(session.backend, costs)
    assert again.cycles == pytest.approx(model.cycles, rel=1e-12)
    slower = timing.remodel(session.backend, dict(costs, vectorRepeatCycles=costs["vectorRepeatCycles"] * 4))
    assert slower.cycles > model.cycles


def test_every_cost_has_a_source(session, sim_only):
    fields = timing.cost_fields(session.backend)
    assert [name for name, _ in fields] == list(timing.pipe_costs(session.backend))
    assert all(source for _, source in fields)
    assert {"vectorRepeatCycles", "cubeFractalCycles", "clockMHz"} <= {n for n, s in fields if s != "assumed"}


# ---- the race rule ------------------------------------------------------------------------

SMALL = [c for c in CASES if c[0] * c[1] * c[3] * c[4] <= 1 << 22]


@pytest.mark.parametrize("case", SMALL, ids=[_case_id(c) for c in SMALL])
def test_operator_has_no_race(session, sim_only, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal = case
    q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    with timing.op_trace(session.backend, races=True):
        session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv)
    assert timing.last_model(session.backend).races_checked


def test_solo_rows_narrow_band_has_no_race(session, sim_only):
    """A narrow band runs each AIV's own QK and P.V (plan.solo_rows, no pair meetings): its P
    reaches GM before its P.V request by the kernel's MTE3 -> S wait alone."""
    from sized_plans import plan

    assert plan(seq=512, heads=2, head_dim=64, soc=session.soc_name(), pre_tokens=24, next_tokens=0).solo_rows
    q, k, v = _inputs("BNSD", 1, 2, 2, 512, 512, 64, "float16")
    with timing.op_trace(session.backend, races=True):
        session.flash_attention(q, k, v, causal=True, window=(24, 0))
    assert timing.last_model(session.backend).races_checked
    # Varlen, where a group's two solo AIVs reach items of different lengths at their own pace
    # (each keeps a fixed half of the group's slots).
    lens = np.array([40, 7, 100, 23, 64, 9])
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((int(cu[-1]), 2, 64)).astype(np.float16) for _ in range(3))
    with timing.op_trace(session.backend, races=True):
        session.flash_attention_varlen(q, k, v, cu, cu, causal=True, window=(24, 0))
    assert timing.last_model(session.backend).races_checked


def test_hidden_blocks_parity_clash_has_no_race(session, sim_only):
    """Key blocks the mask hides are skipped, so consecutive computed blocks (0 -> 2) may share a
    slot: S_2 goes into the slot P_0 lives in (P is written over S's rows). The issuer requests
    QK_2 after P_0 . V_0, and the AIC serves them in order, so the rule stays silent; a kernel
    that requested QK_2 first would make P_0 . V_0 read S_2's bytes with no ordering edge."""
    rng = np.random.default_rng(21)
    q, k, v = (rng.standard_normal((1, 2, n, 64)).astype(np.float16) for n in (96, 448, 448))
    mask = np.zeros((1, 1, 1, 448), dtype=bool)
    for block in (0, 2, 5, 6):
        mask[..., block * 64:(block + 1) * 64] = True
    with timing.op_trace(session.backend, races=True):
        session.flash_attention(q, k, v, attn_mask=mask, block_m=32, block_n=64)
    assert timing.last_model(session.backend).races_checked


# ---- outputs: acl-fa run and acl-fa profile ----------------------------------------------

def test_run_reports_modeled_time(sim_only):
    from click.testing import CliRunner

    from acl_fa.cli import main

    result = CliRunner().invoke(main, ["run", "--seq", "256", "--heads", "2", "--causal", "--iters", "1",
                                       "--warmup", "0"])
    assert result.exit_code == 0, result.output
    line = next(l for l in result.stdout.splitlines() if l.startswith("modeled"))
    assert " us on Ascend910B2 at 1800 MHz, " in line and "TFLOP/s" in line and "not a measurement" in line
    assert "simulator (not NPU time)" in result.stdout


def test_profile_writes_trace_and_plot(sim_only, tmp_path):
    import json

    from click.testing import CliRunner

    from acl_fa.cli import main

    trace, plot = tmp_path / "t.json", tmp_path / "t.png"
    result = CliRunner().invoke(main, ["profile", "--seq", "300", "--heads", "2", "--head-dim", "64", "--causal",
                                       "--trace", str(trace), "--plot", str(plot), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["modeled_time"]
    assert report["time_s"] > 0 and report["critical"] in report["busy_fraction"] | {"hbm": 0}
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"AIC 0", "AIV 0", "AIV 1"} <= names
    tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    assert len(tracks) > 3 * 4
    assert any(e["ph"] == "X" and e["name"].startswith("wait: ") for e in events), "flag waits are visible"
    assert plot.stat().st_size > 10000


def test_plan_sweep_models_each_fitting_candidate(sim_only):
    from acl_fa.jobs.sweep import format_sweep, sweep
    from acl_fa.spec.problem import problem_from_sizes

    rows = sweep(problem_from_sizes(seq_q=256, num_heads=2, head_dim=64, causal=True), block_ms=(32, 64, 512), block_ns=(64, 128))
    timed = [r for r in rows if r.time_s is not None]
    grid = {(32, 64), (32, 128), (64, 64), (64, 128)}
    chosen = [(r.block_m, r.block_n) for r in timed if r.chosen]
    assert len(chosen) == 1, "the policy's own choice is swept, in the grid or after it"
    assert {(r.block_m, r.block_n) for r in timed} == grid | set(chosen)
    assert all(r.time_s > 0 and r.analytic_s > 0 and r.tflops > 0 and r.critical for r in timed)
    refused = [r for r in rows if r.time_s is None]
    assert [(r.block_m, r.block_n) for r in refused] == [(512, 64), (512, 128)] and all(r.refused for r in refused)
    assert "| 32 | 64 |" in format_sweep(rows, "t")


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910B2"])
def test_modeled_gm_trace_holds_only_gm(sim_only, soc):
    """The model's GM accesses are the launch's GM accesses, byte for byte: on the coupled chips
    the P.V matmul reads P from UB and writes to UB, which is no GM traffic (it was counted as GM
    before, at UB addresses)."""
    from conftest import run_python

    result = run_python("""
        import json, numpy as np, acl_fa
        from acl_fa.plan import l2model, timing
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(3))
        with acl_fa.Session(backend="sim") as s:
            with l2model.gm_trace(s.backend), timing.op_trace(s.backend):
                s.flash_attention(q, k, v, causal=True)
                launch = l2model.model_trace(s.backend, 1 << 20, 128, order="launch")
                modeled = l2model.model_trace(s.backend, 1 << 20, 128, order="modeled")
        print(json.dumps({"launch": launch.access_bytes, "modeled": modeled.access_bytes}))
    """, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    assert result["modeled"] == result["launch"] > 0, result


def test_queries_before_any_modeled_launch_say_what_to_do(sim_only):
    """In a process that modeled no launch, each query of the last model names the API and
    op_trace instead of a bare ACL_ERROR_FAILURE (a fresh process: this one has modeled some)."""
    code = """
import acl_fa
from acl_fa.plan import l2model, timing
from acl_fa.runtime.errors import InvalidArgumentError
with acl_fa.Session(backend="sim") as s:
    calls = [lambda: timing.last_model(s.backend), lambda: timing.modeled_ops(s.backend),
             lambda: timing.modeled_gm_trace(s.backend),
             lambda: timing.remodel(s.backend, timing.pipe_costs(s.backend)),
             lambda: l2model.model_trace(s.backend, 1 << 20, 512, order="modeled")]
    for call in calls:
        try:
            call()
        except InvalidArgumentError as err:
            assert "op_trace" in str(err) and "aclfaSim" in str(err), str(err)
        else:
            raise AssertionError("no error")
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_traced_launch_memory_per_instruction(sim_only):
    """A traced launch holds its instruction trace (until the next one) and the modeled GM order,
    not a schedule nobody asked for or UB ranges the race rule is off for: the peak RSS it adds
    stays near the 40 B of a trace entry per instruction. (It was about 420 B per instruction,
    6.5 GiB at `acl-fa run --seq 32768 --causal --heads 8`, against the 2 GiB goal of
    bench/RESULTS.md's peak RSS row.)"""
    code = """
import json, resource, acl_fa
from acl_fa.plan import timing
from acl_fa.ops.forward import runner_for
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.jobs.run import random_inputs
problem = problem_from_sizes(seq_q=16384, num_heads=1, head_dim=128, causal=True)
q, k, v = random_inputs(problem)
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with acl_fa.Session(backend="sim") as s:
    runner = runner_for(s)
    runner.run(problem, q, k, v)
    before = peak()
    with timing.op_trace(s.backend):
        runner.run(problem, q, k, v)
    ops = timing.last_model(s.backend).ops
    added = peak() - before
    timing.modeled_ops(s.backend)  # the schedule, made when asked for
print(json.dumps({"ops": ops, "added": added}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ops"] > 200_000, result
    assert result["added"] / result["ops"] < 120, result  # bytes of peak RSS per traced instruction
