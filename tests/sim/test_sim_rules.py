"""Each hardware rule the kernel engine enforces, broken once by the probe kernel
(tests/kernels/probe.cpp): the launch fails with ACL_ERROR_RT_AICORE_EXCEPTION and a
message naming the rule, the core and the API."""
import sys
import pathlib

import numpy as np
import pytest

import simlib  # noqa: E402


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


CASES = [
    (100, "UB capacity", "TPipe::InitBuffer", "204800 B"),
    (101, "DataCopy length alignment", "DataCopy", "28 B is not a multiple of 32 B"),
    (102, "32-byte UB alignment", "Exp", "not 32-byte aligned"),
    (103, "queue state", "TQue::DeQue", "queue is empty"),
    (104, "queue state", "TQue::EnQue", "queue depth 1 exceeded"),
    (105, "queue state", "TQue::FreeTensor", "freed twice"),
    (106, "event pairing", "WaitFlag", "was not set"),
    (107, "event pairing", "kernel end", "never waited for"),
    (108, "GM bounds", "DataCopy", "leaves the GlobalTensor's buffer"),
    (109, "GM allocation", "GlobalTensor::SetGlobalBuffer", "not inside any live device allocation"),
    (110, "LocalTensor bounds", "LocalTensor::GetValue", "index 64 outside"),
    (111, "kernel type", "KERNEL_TASK_TYPE_DEFAULT", "declares type 5 but was launched as type 0"),
    (113, "integer overflow", "Muls", "65535 and 65535 give 4294836225"),
    (114, "shift amount", "ShiftRight", "scalarValue 33 is outside [0, 32]"),
    (115, "Compares mode", "Compares", "int32_t supports only CMPMODE::EQ"),
    (116, "Gather offset", "Gather", "byte offset 256 is not aligned to the element or outside src's 256 bytes"),
]


@pytest.mark.parametrize("mode,detail", [
    (1, "element 5: byte offset 6 is not aligned to the element or outside src's 256 bytes"),
    (2, "element 0: byte offset 2 is not aligned to the element or outside src's 256 bytes"),
], ids=["first-of-two", "base-address"])
def test_gather_names_the_first_bad_offset(sim, mode, detail):
    # The engine checks a Gather's offsets in one pass (their maximum, the low bits of
    # srcBaseAddr + offset) and names the first bad element only when that pass finds one.
    rc, msg, _ = sim.probe(116, np.ones(64, np.float32), param=float(mode))
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert f"rule 'Gather offset' violated on AIV 0 in Gather: {detail}" in msg, msg


@pytest.mark.parametrize("op,rule,api,detail", CASES, ids=[c[1] + "/" + c[2] for c in CASES])
def test_violation(sim, op, rule, api, detail):
    rc, msg, _ = sim.probe(op, np.ones(64, np.float32))
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert f"rule '{rule}' violated on AIV 0 in {api}: " in msg, msg
    assert detail in msg, msg


def _cube(**over):
    c = dict(baseM=64, baseN=128, baseK=64, stepM=1, stepN=1, stepKa=2, stepKb=2, depthA1=2, depthB1=2,
             dbL0A=2, dbL0B=2, dbL0C=1)
    c.update(over)
    return np.array(list(c.values()), np.int32)


@pytest.mark.parametrize("over,rule", [
    (dict(baseM=128, baseN=256, dbL0C=1), "L0C capacity"),       # 128*256*4 = 128 KiB fits; with db 2 not
    (dict(baseM=128, baseN=256, dbL0C=2), "L0C capacity"),
    (dict(baseM=256, baseK=128, dbL0A=1), "L0A capacity"),        # 256*128*2 = 64 KiB ... x1 fits
    (dict(baseM=256, baseK=128, dbL0A=2), "L0A capacity"),
    (dict(baseM=128, baseN=256, baseK=128, stepKa=4, stepKb=4, depthA1=8, depthB1=8, dbL0A=1, dbL0B=1), "L1 capacity"),
    (dict(baseM=24), "Matmul tiling"),
], ids=["l0c-fits", "l0c", "l0a-fits", "l0a", "l1", "base-not-16"])
def test_matmul_tiling_checked(sim, over, rule):
    m, n, k = 16, 64, 64
    a = sim.device(np.zeros((m, k), np.float16))
    b = sim.device(np.zeros((n, k), np.float16))
    out = sim.device(m * n * 4)
    ws = sim.device(simlib.SYS_WORKSPACE + 2 * 16 * n * 4)
    e = sim.err()
    cube = _cube(**over)
    rc = sim.k.aclfaSimTestMmSoftmax(a, b, out, ws, m, n, k, 8, 1, sim.ffi.from_buffer("int32_t[]", cube), e, 4096)
    msg = sim.ffi.string(e).decode()
    l0c = over.get("baseM", 64) * over.get("baseN", 128) * 4 * (2 if over.get("dbL0C", 1) >= 2 else 1)
    l0a = over.get("baseM", 64) * over.get("baseK", 64) * 2 * (2 if over.get("dbL0A", 2) >= 2 else 1)
    fits = {"L0C capacity": l0c <= 131072, "L0A capacity": l0a <= 65536}.get(rule, False)
    if fits:
        assert rc == 0, msg
    else:
        assert rc == simlib.AICORE_EXCEPTION
        assert f"rule '{rule}' violated" in msg, msg


def test_other_cores_stop_after_a_violation(sim):
    """A failing launch reports exactly one (the first) violation."""
    rc, msg, _ = sim.probe(105, np.ones(64, np.float32))
    assert rc == simlib.AICORE_EXCEPTION and msg.count("violated") == 1
