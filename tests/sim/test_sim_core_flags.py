"""CrossCoreSetFlag / CrossCoreWaitFlag: the counting of modes 0, 1 and 2, their rules, hangs, and
the flags as ordering edges of the race rule and waits of the timing model
(tests/kernels/core_flags.cpp)."""
import sys
import pathlib

import numpy as np
import pytest

import simlib  # noqa: E402

(AIC_AIV, AIV_PAIR, ALL_AIVS, NEVER_SET, BAD_ID, BAD_PIPE, BAD_MODE, MODE1_ON_AIC, OVERFLOW) = range(9)
SKIP_NONE, SKIP_AIC_WAIT, SKIP_AIV_WAIT = range(3)
N = 16


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def run(sim, op, blocks=3, skip=SKIP_NONE, spin=0, trace=0):
    """One launch of `op` on `blocks` MIX 1:2 blocks: (rc, message, x [2 blocks, N], out)."""
    aivs = 2 * blocks
    x = (np.arange(aivs * N, dtype=np.float32).reshape(aivs, N) + 1) * np.float32(0.5)
    dx = sim.device(x)
    dwork = sim.device(np.zeros(3 * blocks * N, np.float32))
    dout = sim.device(np.zeros(aivs * N, np.float32))
    e = sim.err()
    if trace:
        assert sim.engine.aclfaSimSetOpTrace(trace) == 0
    try:
        rc = sim.k.aclfaSimTestCoreFlags(op, dx, dwork, dout, N, spin, skip, blocks, e, 4096)
    finally:
        if trace:
            sim.engine.aclfaSimSetOpTrace(0)
    out = sim.host(dout, (aivs, N), np.float32) if rc == 0 else None
    return rc, sim.ffi.string(e).decode(), x, out


def expected(op, x):
    aivs = x.shape[0]
    if op == AIC_AIV:
        pair_sums = x[0::2] + x[1::2]
        return np.repeat(pair_sums, 2, axis=0)
    if op == AIV_PAIR:
        return x[np.arange(aivs) ^ 1]
    return x[(np.arange(aivs) + 1) % aivs]


@pytest.mark.parametrize("threads", ["1", "4"])
@pytest.mark.parametrize("op", [AIC_AIV, AIV_PAIR, ALL_AIVS], ids=["mode2-aic-aiv", "mode1-aiv-pair", "mode0-all-aivs"])
def test_flags_hand_data_between_cores(sim, monkeypatch, op, threads):
    """Each consumer reads GM another core wrote; the flags make it wait for the writer (one host
    thread runs the cores one after another, so without a real wait it would read zeros)."""
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    rc, msg, x, out = run(sim, op)
    assert rc == 0, msg
    np.testing.assert_array_equal(out, expected(op, x))


RACES = [
    (AIC_AIV, SKIP_AIC_WAIT, "GlobalTensor::GetValue"),   # the AIC reads the AIVs' copies unordered
    (AIC_AIV, SKIP_AIV_WAIT, "DataCopy"),                 # the AIVs read the AIC's sums unordered
    (AIV_PAIR, SKIP_AIV_WAIT, "DataCopy"),
    (ALL_AIVS, SKIP_AIV_WAIT, "DataCopy"),
]


@pytest.mark.parametrize("op,skip,reader", RACES, ids=["aic-no-wait", "aiv-no-wait", "pair-no-wait", "all-no-wait"])
def test_race_rule_sees_the_flags_as_edges_and_fires_without_the_wait(sim, op, skip, reader):
    from acl_fa.plan import timing
    rc, msg, x, out = run(sim, op, blocks=2, trace=timing.TRACE_OPS | timing.TRACE_RACES)
    assert rc == 0, msg
    np.testing.assert_array_equal(out, expected(op, x))
    # the side without its wait reads after a delay: the other side's write precedes it in the
    # model's time, yet nothing orders the two
    rc, msg, _, _ = run(sim, op, blocks=2, skip=skip, spin=100, trace=timing.TRACE_OPS | timing.TRACE_RACES)
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert "rule 'pipe race' violated" in msg and reader in msg, msg


def _modeled(sim, spin):
    from acl_fa.plan import timing
    rc, msg, _, _ = run(sim, AIC_AIV, blocks=1, spin=spin, trace=timing.TRACE_OPS)
    assert rc == 0, msg
    stats = sim.ffi.new("aclfaSimModelStats *")
    assert sim.engine.aclfaSimGetModelStats(stats) == 0
    return stats


def test_a_wait_lasts_until_the_set_plus_the_flag_latency_in_the_timing_model(sim):
    """The AIC spends `spin` scalar GM reads before its set; the AIVs' wait ends only after it,
    so they finish later by at least that time, and never before the AIC's set + the latency."""
    costs = sim.ffi.new("aclfaSimPipeCosts *")
    assert sim.engine.aclfaSimGetPipeCosts(sim.ffi.NULL, costs) == 0
    assert costs.crossCoreFlagCycles > 0
    short, long = _modeled(sim, 0), _modeled(sim, 200)
    assert long.aivEnd[0] - short.aivEnd[0] >= 200 * costs.scalarAccessCycles
    for s in (short, long):
        # AIV end >= AIC's last instruction (the set) + latency + the AIV's copy back out
        assert s.aivEnd[0] >= s.aicEnd[0] + costs.crossCoreFlagCycles, (s.aivEnd[0], s.aicEnd[0])
        assert s.aivEnd[1] >= s.aicEnd[0] + costs.crossCoreFlagCycles


RULES = [
    (BAD_ID, "CrossCoreSetFlag<2, PIPE_MTE3>(11): flagId must be in [0, 10]"),
    (BAD_PIPE, "CrossCoreSetFlag<2, PIPE_S>(1): the set's pipe must be"),
    (BAD_MODE, "CrossCoreSetFlag<3, PIPE_MTE3>(1): modeId must be 0, 1 or 2"),
    (MODE1_ON_AIC, "mode 1 synchronises the AIVs of an AI Core group; an AIC sets mode 0 or 2"),
    (OVERFLOW, "the counter of flagId 2 on AIV 0 (block 0, sub-block 0) already holds 16 sets"),
]


@pytest.mark.parametrize("op,text", RULES, ids=["flag-id", "pipe", "mode", "mode1-aic", "overflow"])
def test_rules_of_the_flags(sim, op, text):
    rc, msg, _, _ = run(sim, op, blocks=1)
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'CrossCoreSetFlag' violated" in msg and text in msg, msg


@pytest.mark.parametrize("threads", ["1", "4"])
def test_a_wait_nobody_can_end_is_a_hang_naming_the_core(sim, monkeypatch, threads):
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    monkeypatch.setenv("ACL_FA_SIM_SYNC_TIMEOUT", "600")
    rc, msg, _, _ = run(sim, NEVER_SET, blocks=2)
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'CrossCoreWaitFlag' violated" in msg and "can never return" in msg
    assert "AIV 1 (block 0, sub-block 1) in CrossCoreWaitFlag<2, PIPE_S>(2)" in msg
