"""GM atomic add (SetAtomicAdd / SetAtomicNone), the SyncAll barrier, Matmul with A
transposed and enAtomic, and the IBSet / IBWait flags, through tests/kernels/cross_core.cpp."""
import sys
import pathlib

import numpy as np
import pytest

from conftest import TESTS, run_python

KERNELS = TESTS / "kernels"
import simlib  # noqa: E402

(SUM, WRONG_TYPE, SKIP_BARRIER, LATE_BARRIER, MATMUL_AT_B, SYNC_ALL_CUBE, IB_CHAIN, IB_MISSING_SET, IB_LATE_SET,
 IB_SET_TWICE, IB_BAD_BLOCK_IDX) = range(11)
BLOCKS = 6            # MIX 1:2 -> 12 AIVs
AIVS = 2 * BLOCKS


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def run(sim, op, x, n, b=None, out_elems=None, spin=0, mnk=(0, 0, 0), blocks=BLOCKS):
    out_elems = out_elems or 2 * n
    dx = sim.device(x)
    db = sim.device(b) if b is not None else sim.device(32)
    dout = sim.device(np.zeros(out_elems, np.float32))
    ws = sim.device(simlib.SYS_WORKSPACE)
    e = sim.err()
    rc = sim.k.aclfaSimTestCrossCore(op, dx, db, dout, ws, n, spin, *mnk, blocks, e, 4096)
    msg = sim.ffi.string(e).decode()
    return rc, msg, (sim.host(dout, (out_elems,), np.float32) if rc == 0 else None)


def order_sensitive_tiles(n):
    """Tiles whose float32 sum depends on the order of the adds (large and small terms mixed)."""
    r = np.random.default_rng(7)
    x = r.standard_normal((AIVS, n)).astype(np.float32) * np.float32(1e-3)
    x[::2] *= np.float32(1e7)
    return x


@pytest.mark.parametrize("threads", ["1", "3"])
def test_atomic_add_sums_every_core_and_is_visible_after_sync_all(sim, monkeypatch, threads):
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    n = 64
    x = order_sensitive_tiles(n)
    rc, msg, out = run(sim, SUM, x, n)
    assert rc == 0, msg
    exact = x.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(out[:n], exact, rtol=1e-5, atol=1e-2)
    np.testing.assert_array_equal(out[n:], out[:n])  # AIV 0 read the finished sum after the barrier
    s = sim.stats()
    assert s.total.atomicAddBytes == AIVS * n * 4
    assert s.total.syncAllCalls == AIVS


def test_atomic_add_order_varies_between_runs(sim, monkeypatch):
    """Even on one host thread the cores' order, and with it the float sum's bits, changes."""
    monkeypatch.setenv("ACL_FA_SIM_THREADS", "1")
    n = 64
    x = order_sensitive_tiles(n)
    results = set()
    for _ in range(12):
        rc, msg, out = run(sim, SUM, x, n)
        assert rc == 0, msg
        results.add(out[:n].tobytes())
    assert len(results) > 1


def test_spare_threads_are_parked_and_reused():
    """On one host thread each AIV that waits at SyncAll lends its place to a spare thread (11 for
    12 AIVs). The spares park when the launch ends and the next launches take them: the first
    launch leaves the process 11 threads more, and later launches add none. A spare parked for
    2 s (SpareThreads::kIdleSeconds) ends (waited for up to 120 s, for a loaded host: the wait ends
    as soon as they are gone, so only a spare that never ends costs the whole of it)."""
    result = run_python(f"""
        import json, os, sys, time
        sys.path.insert(0, {str(KERNELS)!r})
        import numpy as np
        import simlib
        sim = simlib.SimKernels()

        def launch():
            dx, db = sim.device(np.ones(({AIVS}, 8), np.float32)), sim.device(32)
            dout, ws = sim.device(np.zeros(16, np.float32)), sim.device(simlib.SYS_WORKSPACE)
            e = sim.err()
            rc = sim.k.aclfaSimTestCrossCore({SUM}, dx, db, dout, ws, 8, 0, 0, 0, 0, {BLOCKS}, e, 4096)
            assert rc == 0, sim.ffi.string(e).decode()
            sim.free_all()

        def threads():
            return set(os.listdir("/proc/self/task"))

        before = threads()
        launch()
        first = threads()
        added = set()
        for _ in range(30):
            launch()
            added |= threads() - first
        deadline = time.monotonic() + 120  # idle spares end after 2 s; a loaded host may take much longer
        while threads() - before and time.monotonic() < deadline:
            time.sleep(0.2)
        print(json.dumps({{"spares": len(first - before), "added": len(added), "left": len(threads() - before)}}))
    """, ACL_FA_SIM_THREADS="1")
    assert result["spares"] == AIVS - 1
    assert result["added"] == 0
    assert result["left"] == 0


def test_atomic_add_type_must_match_the_transfer(sim):
    rc, msg, _ = run(sim, WRONG_TYPE, order_sensitive_tiles(8), 8)
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'atomic type' violated" in msg and "SetAtomicAdd<int32_t>" in msg and "float" in msg


@pytest.mark.parametrize("threads", ["1", "4"])
def test_sync_all_a_core_never_reaches_is_a_hang_naming_it(sim, monkeypatch, threads):
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    rc, msg, _ = run(sim, SKIP_BARRIER, np.zeros((AIVS, 8), np.float32), 8)
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'SyncAll' violated" in msg and "hang" in msg
    assert f"AIV {AIVS - 1} (block {BLOCKS - 1}, sub-block 1)" in msg and "left the kernel" in msg
    assert "AIV 0 " not in msg.split("hang")[1]  # only the missing core is named


def test_sync_all_late_core_is_reported_after_the_time_limit(sim, monkeypatch):
    monkeypatch.setenv("ACL_FA_SIM_SYNC_TIMEOUT", "0.2")
    rc, msg, _ = run(sim, LATE_BARRIER, np.zeros((AIVS, 8), np.float32), 8, spin=10**9, blocks=1)
    assert rc == simlib.AICORE_EXCEPTION
    assert "not complete after 0.2" in msg and "AIV 1 (block 0, sub-block 1) never arrived" in msg


def test_sync_all_late_core_within_the_limit_passes(sim, monkeypatch):
    monkeypatch.setenv("ACL_FA_SIM_THREADS", "1")
    rc, msg, _ = run(sim, LATE_BARRIER, np.zeros((AIVS, 8), np.float32), 8, spin=10**5)
    assert rc == 0, msg
    assert sim.stats().total.syncAllCalls == AIVS


def test_sync_all_with_cube_cores_waits_for_the_matmul_servers(sim):
    """SyncAll<false> also waits for the AICs, which left after REGIST_MATMUL_OBJ: a hang."""
    rc, msg, _ = run(sim, SYNC_ALL_CUBE, np.zeros((AIVS, 8), np.float32), 8, blocks=1)
    assert rc == simlib.AICORE_EXCEPTION
    assert "SyncAll<false>" in msg and "AIC 0 left the kernel" in msg


@pytest.mark.parametrize("m,n,k", [(16, 32, 16), (40, 24, 33)])
def test_matmul_a_transposed_accumulates_atomically(sim, m, n, k):
    r = np.random.default_rng(m + n + k)
    a_t = r.standard_normal((AIVS, k, m)).astype(np.float16)   # A^T as stored, per AIV
    b = r.standard_normal((AIVS, k, n)).astype(np.float16)
    rc, msg, out = run(sim, MATMUL_AT_B, a_t, 0, b=b, out_elems=m * n, mnk=(m, n, k))
    assert rc == 0, msg
    want = np.einsum("akm,akn->mn", a_t.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out.reshape(m, n), want, rtol=1e-4, atol=1e-3)
    s = sim.stats()
    assert s.total.atomicAddBytes == AIVS * m * n * 4   # every AIV's C went through the atomic path
    pad = lambda v: -(-v // 16) * 16  # noqa: E731
    assert s.total.cubeMacs == AIVS * pad(m) * pad(n) * pad(k)


# ---- IBSet / IBWait ----------------------------------------------------------------------------

def flags():
    return np.zeros(AIVS * 8, np.int32)  # one 32-B flag per AIV, zeroed as the docs require


@pytest.mark.parametrize("threads", ["1", "2", "5"])
def test_ib_flags_order_the_adds_last_aiv_first(sim, monkeypatch, threads):
    """Each AIV adds its tile by read-add-write after the next AIV's IBSet: the float32 sum is
    the sequential one, AIV 11 first, bit for bit on any host thread count."""
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    n = 64
    x = order_sensitive_tiles(n)
    want = np.zeros(n, np.float32)
    for a in reversed(range(AIVS)):
        want = want + x[a]
    for _ in range(3):
        rc, msg, out = run(sim, IB_CHAIN, x, n, b=flags())
        assert rc == 0, msg
        np.testing.assert_array_equal(out[:n], want)
    s = sim.stats()
    assert s.total.interBlockFlagCalls == 2 * (AIVS - 1)   # one IBSet and one IBWait per hand-over
    assert s.total.scalarAccesses == 2 * 2 * (AIVS - 1)    # each call tests and writes ub[0]


@pytest.mark.parametrize("threads", ["1", "4"])
def test_ib_wait_for_a_flag_nobody_sets_is_a_hang_naming_the_core(sim, monkeypatch, threads):
    """Once every other core has left, the wait can never end: reported at once, not after the limit."""
    monkeypatch.setenv("ACL_FA_SIM_THREADS", threads)
    monkeypatch.setenv("ACL_FA_SIM_SYNC_TIMEOUT", "600")
    rc, msg, _ = run(sim, IB_MISSING_SET, np.zeros((AIVS, 8), np.float32), 8, b=flags())
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'IBWait' violated" in msg and "hang" in msg and "can never return" in msg
    assert "AIV 1 (block 0, sub-block 1) in IBWait(blockIdx 1, eventID 0)" in msg
    assert "AIV 0 " not in msg.split("waiting for a flag:")[1]   # only the waiting core is named


def test_ib_wait_beyond_the_time_limit_is_a_hang(sim, monkeypatch):
    monkeypatch.setenv("ACL_FA_SIM_SYNC_TIMEOUT", "0.2")
    rc, msg, _ = run(sim, IB_LATE_SET, np.zeros((AIVS, 8), np.float32), 8, b=flags(), spin=10**9, blocks=1)
    assert rc == simlib.AICORE_EXCEPTION
    assert "not returned after 0.2" in msg and "AIV 0 (block 0, sub-block 0) in IBWait(blockIdx 0, eventID 0)" in msg


def test_ib_wait_for_a_late_set_within_the_limit_passes(sim, monkeypatch):
    monkeypatch.setenv("ACL_FA_SIM_THREADS", "1")
    rc, msg, _ = run(sim, IB_LATE_SET, np.zeros((AIVS, 8), np.float32), 8, b=flags(), spin=10**5)
    assert rc == 0, msg
    assert sim.stats().total.interBlockFlagCalls == 2


def test_ib_set_on_a_flag_still_set_waits_and_hangs(sim):
    """IBSet waits until an IBWait consumed the flag: a second IBSet without one never returns."""
    rc, msg, _ = run(sim, IB_SET_TWICE, np.zeros((AIVS, 8), np.float32), 8, b=flags())
    assert rc == simlib.AICORE_EXCEPTION
    assert "rule 'IBSet' violated" in msg and "AIV 0 (block 0, sub-block 0) in IBSet(blockIdx 0, eventID 0)" in msg


def test_ib_flag_that_is_not_zeroed_first_makes_ib_set_wait(sim):
    rc, msg, _ = run(sim, IB_SET_TWICE, np.zeros((AIVS, 8), np.float32), 8, b=np.ones(AIVS * 8, np.int32))
    assert rc == simlib.AICORE_EXCEPTION and "hang" in msg and "IBSet(blockIdx 0, eventID 0)" in msg


def test_ib_block_idx_must_be_below_the_core_count(sim):
    rc, msg, _ = run(sim, IB_BAD_BLOCK_IDX, np.zeros((AIVS, 8), np.float32), 8, b=flags())
    assert rc == simlib.AICORE_EXCEPTION
    assert f"blockIdx must be in [0, {AIVS - 1}]" in msg and "GetBlockNum() * 2 with isAIVOnly = false" in msg


def _modeled_chain(sim, blocks):
    """IB_CHAIN with the instruction trace and the race rule on: (rc, message, modeled cycles)."""
    from acl_fa.plan import timing
    assert sim.engine.aclfaSimSetOpTrace(timing.TRACE_OPS | timing.TRACE_RACES) == 0
    try:
        rc, msg, _ = run(sim, IB_CHAIN, order_sensitive_tiles(64)[:2 * blocks], 64, b=flags(), blocks=blocks)
    finally:
        sim.engine.aclfaSimSetOpTrace(0)
    stats = sim.ffi.new("aclfaSimModelStats *")
    assert sim.engine.aclfaSimGetModelStats(stats) == 0
    return rc, msg, stats.cycles


def test_ib_hand_overs_are_ordering_edges_and_waits_of_the_timing_model(sim):
    """Each AIV reads `out`, which the previous AIV of the chain wrote on another core: without
    the IBSet -> IBWait edge the race rule would fail the launch. Each hand-over waits at least
    the cross-core flag latency, so the modeled time grows by that per AIV in the chain."""
    costs = sim.ffi.new("aclfaSimPipeCosts *")
    assert sim.engine.aclfaSimGetPipeCosts(sim.ffi.NULL, costs) == 0
    rc, msg, short = _modeled_chain(sim, 1)   # 2 AIVs: 1 hand-over
    assert rc == 0, msg
    rc, msg, long = _modeled_chain(sim, 6)    # 12 AIVs: 11 hand-overs
    assert rc == 0, msg
    assert long - short >= 10 * costs.syncAllCycles, (short, long, costs.syncAllCycles)
