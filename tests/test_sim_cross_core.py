"""GM atomic add (SetAtomicAdd / SetAtomicNone), the SyncAll barrier and Matmul with A
transposed and enAtomic, through tests/kernels/cross_core.cpp."""
import sys
import pathlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent / "kernels"))
import simlib  # noqa: E402

SUM, WRONG_TYPE, SKIP_BARRIER, LATE_BARRIER, MATMUL_AT_B, SYNC_ALL_CUBE = range(6)
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
