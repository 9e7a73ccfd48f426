"""The pipe-race rule (Rule 3) on the test kernels: a read whose last writer ran on another pipe
with no ordering edge fails the launch when the instruction trace checks races."""
import pathlib
import sys

import numpy as np
import pytest

from acl_fa.plan import timing

import simlib  # noqa: E402

PROBE_EXP, PROBE_BAD_RACE_NO_FLAG = 0, 112


@pytest.fixture(scope="module")
def kernels():
    s = simlib.SimKernels()
    yield s
    s.engine.aclfaSimSetOpTrace(0)
    s.close()


def test_race_rule_fires_on_a_removed_flag_pair(kernels):
    x = np.linspace(0.5, 1.5, 64, dtype=np.float32)
    rc, msg, _ = kernels.probe(PROBE_BAD_RACE_NO_FLAG, x)
    assert rc == 0, msg  # without the trace nothing sees the race
    assert kernels.engine.aclfaSimSetOpTrace(timing.TRACE_OPS | timing.TRACE_RACES) == 0
    try:
        rc, msg, out = kernels.probe(PROBE_EXP, x)
        assert rc == 0, msg
        rc, msg, _ = kernels.probe(PROBE_BAD_RACE_NO_FLAG, x)
    finally:
        kernels.engine.aclfaSimSetOpTrace(0)
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert "rule 'pipe race' violated on AIV 0 in DataCopyPad: DataCopyPad (instruction" in msg, msg
    assert ", pipe MTE3) reads UB [" in msg and "last written by Exp (instruction" in msg and ", pipe V)" in msg, msg


def test_matmul_test_kernel_has_no_race(kernels):
    m, n, k = 16, 128, 64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    cube = np.array([16, 128, 64, 1, 1, 1, 1, 1, 1, 1, 1, 1], np.int32)
    da, db, dout = kernels.device(a), kernels.device(b), kernels.device(m * n * 4)
    ws = kernels.device(simlib.SYS_WORKSPACE + m * n * 4)
    e = kernels.err()
    assert kernels.engine.aclfaSimSetOpTrace(timing.TRACE_OPS | timing.TRACE_RACES) == 0
    try:
        rc = kernels.k.aclfaSimTestMmSoftmax(da, db, dout, ws, m, n, k, 8, 1,
                                             kernels.ffi.from_buffer("int32_t[]", cube), e, 4096)
    finally:
        kernels.engine.aclfaSimSetOpTrace(0)
    assert rc == 0, kernels.ffi.string(e).decode()
