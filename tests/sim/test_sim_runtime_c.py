"""Low-level tests of the simulator's runtime and nnopbase libraries through cffi ABI mode,
below the Python driver: exact codes and messages of the C API. Each test runs in a fresh
process (the runtime's state is per process) via `run_snippet`.

Libraries: ACL_FA_SIM_LIB_DIR (a dev build's lib/), else the installed package's.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lib_dir():
    env = os.environ.get("ACL_FA_SIM_LIB_DIR")
    if env:
        return Path(env)
    try:
        import acl_fa
    except ImportError:
        return None
    return Path(acl_fa.__file__).parent / "_sim" / "lib"


LIB_DIR = _lib_dir()
pytestmark = pytest.mark.skipif(LIB_DIR is None or not (LIB_DIR / "libascendcl.so").is_file(),
                                reason="simulator libraries not built (set ACL_FA_SIM_LIB_DIR)")

PRELUDE = f"""
import cffi, numpy as np
from acl_fa.runtime.cdef_reader import read_cdef
ffi = cffi.FFI()
for n in ["acl_rt.h", "aclnn_base.h", "acl_fa_sim.h"]:
    ffi.cdef(read_cdef({str(ROOT / "acl_fa" / "cdefs")!r} + "/" + n))
rt = ffi.dlopen({str(LIB_DIR / "libacl_rt.so")!r})
nn = ffi.dlopen({str(LIB_DIR / "libnnopbase.so")!r})
def msg():
    m = rt.aclGetRecentErrMsg()
    return None if m == ffi.NULL else ffi.string(m).decode()
def live():
    c = ffi.new("aclfaSimLiveCounts*"); assert rt.aclfaSimGetLiveCounts(c) == 0; return c
"""


def run_snippet(code, timeout=120, helpers="", **env):
    """Runs PRELUDE + `helpers` + `code` in a new interpreter; a hang past `timeout` seconds
    fails the test."""
    full_env = dict(os.environ, **env)
    source = PRELUDE + helpers + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_init_refcount_and_finalize():
    run_snippet("""
        assert rt.aclrtSetDevice(0) == rt.ACL_ERROR_UNINITIALIZE and "aclInit" in msg()
        assert rt.aclInit(ffi.NULL) == 0
        assert rt.aclInit(ffi.NULL) == rt.ACL_ERROR_REPEAT_INITIALIZE
        assert live().initCount == 2
        ref = ffi.new("uint64_t*")
        assert rt.aclFinalizeReference(ref) == 0 and ref[0] == 1
        assert rt.aclFinalize() == 0 and live().initCount == 0
        assert rt.aclFinalize() == rt.ACL_ERROR_REPEAT_FINALIZE
    """)


def test_error_message_is_returned_once():
    run_snippet("""
        assert msg() is None
        rt.aclrtMalloc(ffi.NULL, 10, 0)
        first = msg()
        assert "aclrtMalloc: devPtr is NULL" in first
        assert msg() is None
    """)


def test_memcpy_kind_rules_and_round_trip():
    run_snippet("""
        rt.aclInit(ffi.NULL); assert rt.aclrtSetDevice(0) == 0
        p = ffi.new("void**"); assert rt.aclrtMalloc(p, 1000, 0) == 0
        assert int(ffi.cast("uintptr_t", p[0])) % 64 == 0
        a = np.random.rand(125).astype(np.float64); b = np.zeros_like(a)
        # host pointer where a device pointer is required
        assert rt.aclrtMemcpy(ffi.from_buffer(b), 1000, ffi.from_buffer(a), 1000, rt.ACL_MEMCPY_HOST_TO_DEVICE) \
            == rt.ACL_ERROR_RT_PARAM_INVALID and "dst" in msg()
        # device pointer where a host pointer is required
        assert rt.aclrtMemcpy(p[0], 1000, ffi.from_buffer(a), 1000, rt.ACL_MEMCPY_DEVICE_TO_HOST) \
            == rt.ACL_ERROR_RT_PARAM_INVALID and "host pointer" in msg()
        assert rt.aclrtMemcpy(p[0], 999, ffi.from_buffer(a), 1000, 1) == rt.ACL_ERROR_INVALID_PARAM
        assert "destMax" in msg()
        assert rt.aclrtMemcpy(p[0], 2000, ffi.from_buffer(a), 1001, 1) == rt.ACL_ERROR_RT_PARAM_INVALID
        assert "past the end" in msg()
        assert rt.aclrtMemcpy(p[0], 1000, ffi.from_buffer(a), 1000, rt.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert rt.aclrtMemcpy(ffi.from_buffer(b), 1000, p[0], 1000, rt.ACL_MEMCPY_DEFAULT) == 0
        assert (a == b).all()
        assert rt.aclrtFree(p[0]) == 0 and rt.aclrtFree(p[0]) == rt.ACL_ERROR_RT_PARAM_INVALID
        assert live().deviceAllocations == 0
    """)


def test_guard_overwrite_is_reported_on_free():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        p = ffi.new("void**"); rt.aclrtMalloc(p, 100, 0)
        raw = ffi.cast("unsigned char*", p[0])
        raw[100 + 28 + 32] = 0  # past round32(100) + 32 padding: in the tail guard
        assert rt.aclrtFree(p[0]) == rt.ACL_ERROR_RT_MEMORY_FREE and "overwritten" in msg()
        assert live().deviceAllocations == 0
    """)


def test_out_of_memory_message_and_accounting():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        free, total = ffi.new("size_t*"), ffi.new("size_t*")
        assert rt.aclrtGetMemInfo(rt.ACL_HBM_MEM, free, total) == 0 and total[0] == 4096
        p = ffi.new("void**"); assert rt.aclrtMalloc(p, 4000, 0) == 0
        q = ffi.new("void**")
        assert rt.aclrtMalloc(q, 100, 0) == rt.ACL_ERROR_RT_MEMORY_ALLOCATION
        text = msg(); assert "requested 100 bytes" in text and "of 4096 bytes" in text, text
        assert live().deviceAllocations == 1
        rt.aclrtFree(p[0]); assert rt.aclrtGetMemInfo(rt.ACL_HBM_MEM, free, total) == 0 and free[0] == 4096
    """, ACL_FA_SIM_HBM_BYTES="4096")


def test_async_copies_events_and_elapsed_time():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        s = ffi.new("aclrtStream*"); assert rt.aclrtCreateStream(s) == 0
        start, end = ffi.new("aclrtEvent*"), ffi.new("aclrtEvent*")
        rt.aclrtCreateEvent(start); rt.aclrtCreateEvent(end)
        ms = ffi.new("float*")
        assert rt.aclrtEventElapsedTime(ms, start[0], end[0]) == rt.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
        n = 1 << 22
        a = np.random.rand(n // 8); b = np.zeros_like(a)
        p = ffi.new("void**"); rt.aclrtMalloc(p, n, 0)
        rt.aclrtRecordEvent(start[0], s[0])
        rt.aclrtMemcpyAsync(p[0], n, ffi.from_buffer(a), n, 1, s[0])
        rt.aclrtMemcpyAsync(ffi.from_buffer(b), n, p[0], n, 2, s[0])
        rt.aclrtRecordEvent(end[0], s[0])
        assert rt.aclrtSynchronizeEvent(end[0]) == 0
        st = ffi.new("aclrtEventRecordedStatus*"); rt.aclrtQueryEventStatus(end[0], st)
        assert st[0] == rt.ACL_EVENT_RECORDED_STATUS_COMPLETE
        assert rt.aclrtEventElapsedTime(ms, start[0], end[0]) == 0 and ms[0] >= 0
        assert (a == b).all()
        rt.aclrtFree(p[0]); rt.aclrtDestroyEvent(start[0]); rt.aclrtDestroyEvent(end[0])
        assert rt.aclrtDestroyStream(s[0]) == 0
        c = live(); assert (c.streams, c.events, c.deviceAllocations) == (0, 0, 0)
        assert rt.aclrtResetDevice(0) == 0 and live().devicesSet == 0
    """)


STREAM_TASKS = """
import threading, time
order = []
def host_task(name, seconds=0.0):
    @ffi.callback("int(void *, char *, size_t)")
    def run(user, buf, n):
        time.sleep(seconds); order.append(name); return 0
    host_task.keep.append(run)
    return run
host_task.keep = []
def stream():
    s = ffi.new("aclrtStream*"); assert rt.aclrtCreateStream(s) == 0; return s[0]
def event():
    e = ffi.new("aclrtEvent*"); assert rt.aclrtCreateEvent(e) == 0; return e[0]
"""


def test_stream_wait_event_orders_streams_on_the_device():
    """A stream's tasks after aclrtStreamWaitEvent run only after the tasks before the record,
    without the host waiting; several streams may wait for one record; a later record of the
    same event does not hold back a wait issued before it."""
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        a, b, c = stream(), stream(), stream()
        done = event()
        assert rt.aclfaSimStreamEnqueue(a, b"slow", host_task("a", 0.3), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtRecordEvent(done, a) == 0
        for s, name in ((b, "b"), (c, "c")):
            assert rt.aclrtStreamWaitEvent(s, done) == 0
            assert rt.aclfaSimStreamEnqueue(s, name.encode(), host_task(name), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStream(b) == 0 and rt.aclrtSynchronizeStream(c) == 0
        assert order[0] == "a" and sorted(order[1:]) == ["b", "c"], order
        # Re-recorded behind a blocked task: a wait issued before that record is already satisfied.
        gate = threading.Event()
        @ffi.callback("int(void *, char *, size_t)")
        def blocked(user, buf, n):
            gate.wait(30); order.append("late"); return 0
        assert rt.aclfaSimStreamEnqueue(a, b"blocked", blocked, ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtStreamWaitEvent(b, done) == 0
        assert rt.aclrtRecordEvent(done, a) == 0
        assert rt.aclfaSimStreamEnqueue(b, b"b2", host_task("b2"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(b, 5000) == 0 and order[-1] == "b2"
        # A wait issued after that record holds the stream until the blocked task ran.
        assert rt.aclrtStreamWaitEvent(b, done) == 0
        assert rt.aclfaSimStreamEnqueue(b, b"b3", host_task("b3"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(b, 200) == rt.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        gate.set()
        assert rt.aclrtSynchronizeStream(b) == 0 and order[-2:] == ["late", "b3"], order
        # A failed task does not hold a waiting stream for ever: the record behind it still
        # completes; the failure is the failed stream's to report.
        @ffi.callback("int(void *, char *, size_t)")
        def failing(user, buf, n):
            ffi.memmove(buf, b"boom\\0", 5); return rt.ACL_ERROR_RT_AICORE_EXCEPTION
        assert rt.aclfaSimStreamEnqueue(a, b"failing", failing, ffi.NULL, ffi.NULL) == 0
        assert rt.aclfaSimStreamEnqueue(a, b"discarded", host_task("discarded"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtRecordEvent(done, a) == 0
        assert rt.aclrtStreamWaitEvent(b, done) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(b, 5000) == 0
        assert rt.aclrtSynchronizeStream(a) == rt.ACL_ERROR_RT_AICORE_EXCEPTION and "discarded" not in order
        for s in (a, b, c):
            assert rt.aclrtDestroyStream(s) == 0
        assert rt.aclrtDestroyEvent(done) == 0 and live().events == 0
    """, helpers=STREAM_TASKS)


def test_stream_wait_for_an_event_never_recorded():
    """The wait holds the stream until the event's first record (from any stream or thread);
    aclrtSetOpWaitTimeout bounds it (ACL_ERROR_RT_WAIT_TIMEOUT at the next synchronize, the
    stream usable afterwards); destroying the event or the stream ends a hopeless wait."""
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        a, b = stream(), stream()
        never = event()
        assert rt.aclrtStreamWaitEvent(b, never) == 0
        assert rt.aclfaSimStreamEnqueue(b, b"after", host_task("after"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(b, 200) == rt.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert order == []
        assert rt.aclrtRecordEvent(never, a) == 0
        assert rt.aclrtSynchronizeStream(b) == 0 and order == ["after"]

        assert rt.aclrtSetOpWaitTimeout(1) == 0
        other = event()
        start = time.monotonic()
        assert rt.aclrtStreamWaitEvent(b, other) == 0
        assert rt.aclfaSimStreamEnqueue(b, b"skipped", host_task("skipped"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStream(b) == rt.ACL_ERROR_RT_WAIT_TIMEOUT
        text = msg(); assert "aclrtStreamWaitEvent" in text and "aclrtSetOpWaitTimeout = 1 s" in text, text
        # Not before its 1 s; the upper bound only tells a timeout from a wait that never ends, with
        # room for a loaded host (a 2-core machine at load 10-17 stretches every wait).
        assert 0.9 <= time.monotonic() - start < 60 and "skipped" not in order
        assert rt.aclrtSetOpWaitTimeout(0) == 0
        assert rt.aclfaSimStreamEnqueue(b, b"again", host_task("again"), ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStream(b) == 0 and order[-1] == "again"

        assert rt.aclrtStreamWaitEvent(b, other) == 0
        assert rt.aclrtDestroyEvent(other) == 0
        assert rt.aclrtSynchronizeStream(b) == rt.ACL_ERROR_RT_PARAM_INVALID
        assert "destroyed while the stream waited" in msg()
        assert rt.aclrtStreamWaitEvent(b, other) == rt.ACL_ERROR_RT_PARAM_INVALID and "not a live event" in msg()
        assert rt.aclrtStreamWaitEvent(b, ffi.NULL) == rt.ACL_ERROR_INVALID_PARAM

        c = stream()
        assert rt.aclrtStreamWaitEvent(c, event()) == 0
        assert rt.aclrtDestroyStream(c) == 0  # returns: the wait gives up when its stream goes
        for s in (a, b):
            assert rt.aclrtDestroyStream(s) == 0
    """, helpers=STREAM_TASKS, timeout=60)


def test_task_error_is_reported_by_the_next_synchronize():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        ran = []
        @ffi.callback("int(void *, char *, size_t)")
        def failing(user, buf, n):
            ran.append(1); text = b"boom at core 3"; ffi.memmove(buf, text + b"\\0", len(text) + 1)
            return rt.ACL_ERROR_RT_AICORE_EXCEPTION
        assert rt.aclfaSimStreamEnqueue(ffi.NULL, b"my_kernel", failing, ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStream(ffi.NULL) == rt.ACL_ERROR_RT_AICORE_EXCEPTION
        text = msg(); assert "my_kernel: boom at core 3" in text, text
        assert rt.aclrtSynchronizeStream(ffi.NULL) == 0 and ran == [1]
    """)


def test_fault_injection_fails_the_nth_call_once():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        p = ffi.new("void**")
        assert rt.aclrtMalloc(p, 64, 0) == 0; rt.aclrtFree(p[0])
        assert rt.aclrtMalloc(p, 64, 0) == rt.ACL_ERROR_RT_MEMORY_ALLOCATION
        assert "aclrtMalloc: injected fault" in msg()
        assert rt.aclrtMalloc(p, 64, 0) == 0; rt.aclrtFree(p[0])
        assert nn.aclCreateTensor(ffi.NULL, 0, 1, ffi.NULL, 0, 2, ffi.NULL, 0, ffi.NULL) == ffi.NULL
        assert "aclCreateTensor: injected fault" in msg()
        assert rt.aclfaSimSetFaults(b"nonsense") == rt.ACL_ERROR_INVALID_PARAM
        assert rt.aclfaSimSetFaults(ffi.NULL) == 0
    """, ACL_FA_SIM_FAIL="aclrtMalloc:2,aclCreateTensor:1")


def test_devices_threads_and_soc():
    run_snippet("""
        import threading
        rt.aclInit(ffi.NULL)
        count = ffi.new("uint32_t*"); rt.aclrtGetDeviceCount(count); assert count[0] == 2
        assert rt.aclrtSetDevice(2) == rt.ACL_ERROR_RT_INVALID_DEVICEID
        assert ffi.string(rt.aclrtGetSocName()) == b"Ascend910B4"
        v = ffi.new("int64_t*"); rt.aclGetDeviceCapability(0, rt.ACL_DEVICE_INFO_AI_CORE_NUM, v); assert v[0] == 20
        rt.aclrtSetDevice(1)
        seen = []
        def worker():
            d = ffi.new("int32_t*")
            seen.append(rt.aclrtGetDevice(d))  # a new thread has no device bound
            rt.aclrtSetDevice(0); rt.aclrtGetDevice(d); seen.append(d[0]); rt.aclrtResetDevice(0)
        t = threading.Thread(target=worker); t.start(); t.join()
        assert seen == [rt.ACL_ERROR_RT_CONTEXT_NULL, 0]
        d = ffi.new("int32_t*"); rt.aclrtGetDevice(d); assert d[0] == 1
        assert live().devicesSet == 1
    """, ACL_FA_SIM_DEVICE_COUNT="2", ACL_FA_SIM_SOC="ascend910b4")


def test_nnopbase_validation_and_accounting():
    run_snippet("""
        dims = ffi.new("int64_t[]", [2, 4])
        assert nn.aclCreateTensor(ffi.NULL, 2, 1, ffi.NULL, 0, 2, dims, 2, ffi.NULL) == ffi.NULL
        assert "viewDims is NULL" in msg()
        assert nn.aclCreateTensor(dims, 2, 5, ffi.NULL, 0, 2, dims, 2, ffi.NULL) == ffi.NULL
        assert "dataType 5" in msg()
        assert nn.aclCreateTensor(dims, 2, 1, ffi.NULL, 0, 99, dims, 2, ffi.NULL) == ffi.NULL
        t = nn.aclCreateTensor(dims, 2, rt.ACL_BF16, ffi.NULL, 0, rt.ACL_FORMAT_ND, dims, 2, ffi.NULL)
        arr = nn.aclCreateIntArray(dims, 2); s = nn.aclCreateScalar(ffi.new("float*", 1.5), rt.ACL_FLOAT)
        c = live(); assert (c.tensors, c.intArrays, c.scalars) == (1, 1, 1)
        assert nn.aclDestroyTensor(t) == 0 and nn.aclDestroyTensor(t) == rt.ACLNN_ERR_PARAM_INVALID
        assert nn.aclDestroyTensor(ffi.NULL) == 0
        nn.aclDestroyIntArray(arr); nn.aclDestroyScalar(s)
        c = live(); assert (c.tensors, c.intArrays, c.scalars) == (0, 0, 0)
    """)


# ---- aclrtSynchronizeStreamWithTimeout ------------------------------------------------------

SLOW_TASK = """
import threading, time
release = threading.Event()
@ffi.callback("int(void *, char *, size_t)")
def blocked(user, buf, n):  # a kernel that runs until the test lets it end
    release.wait(30)
    return 0
"""


def test_synchronize_with_timeout_times_out_then_completes():
    run_snippet(helpers=SLOW_TASK, code="""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        s = ffi.new("aclrtStream*"); assert rt.aclrtCreateStream(s) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(s[0], 0) == 0  # nothing queued
        assert rt.aclfaSimStreamEnqueue(s[0], b"long_kernel", blocked, ffi.NULL, ffi.NULL) == 0
        t0 = time.monotonic()
        assert rt.aclrtSynchronizeStreamWithTimeout(s[0], 100) == rt.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        waited = time.monotonic() - t0
        assert 0.09 <= waited < 20, waited  # the blocked task holds the stream 30 s: a timeout, with room for load
        text = msg(); assert "aclrtSynchronizeStreamWithTimeout: 1 task(s)" in text and "100 ms" in text, text
        assert rt.aclrtSynchronizeStreamWithTimeout(s[0], 0) == rt.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        release.set()
        assert rt.aclrtSynchronizeStreamWithTimeout(s[0], -1) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(s[0], -2) == rt.ACL_ERROR_INVALID_PARAM
        assert "timeout -2 is invalid" in msg()
        assert rt.aclrtSynchronizeStreamWithTimeout(ffi.cast("void*", 0x1234), 10) == rt.ACL_ERROR_RT_PARAM_INVALID
        assert rt.aclrtDestroyStream(s[0]) == 0
    """)


def test_synchronize_with_timeout_reports_a_failed_task_once():
    run_snippet("""
        rt.aclInit(ffi.NULL); rt.aclrtSetDevice(0)
        @ffi.callback("int(void *, char *, size_t)")
        def failing(user, buf, n):
            return rt.ACL_ERROR_RT_AICORE_EXCEPTION
        assert rt.aclfaSimStreamEnqueue(ffi.NULL, b"bad_kernel", failing, ffi.NULL, ffi.NULL) == 0
        assert rt.aclrtSynchronizeStreamWithTimeout(ffi.NULL, 5000) == rt.ACL_ERROR_RT_AICORE_EXCEPTION
        assert "bad_kernel" in msg()
        assert rt.aclrtSynchronizeStreamWithTimeout(ffi.NULL, 5000) == 0
    """)


# ---- fork -----------------------------------------------------------------------------------
# A forked child has only the forking thread. The runtime (stream workers, registries), the
# engine (worker pool) and nnopbase (live sets) must start afresh there: the parent's handles
# are invalid in the child, a new aclInit works, and nothing the child does touches the parent.

FORK = f"""
import os, sys, time
sys.path[:0] = [{str(ROOT / "tests" / "kernels")!r}, {str(ROOT / "tests")!r}]
import simlib
from forked import in_child

def scale_add(sim, cores=8, tile=256):
    x = np.arange(cores * tile, dtype=np.float32); y = np.ones_like(x)
    dx, dy, dz = sim.device(x), sim.device(y), sim.device(x.nbytes)
    e = sim.err()
    assert sim.k.aclfaSimTestVecScaleAdd(dx, dy, dz, tile, 1, 2.0, cores, e, 4096) == 0, ffi.string(e)
    assert (sim.host(dz, x.shape, np.float32) == (x + y) * 2).all()
    sim.free_all()
"""


def test_forked_child_starts_afresh_and_the_parent_is_untouched():
    run_snippet(helpers=FORK, code="""
        sim = simlib.SimKernels()          # aclInit + aclrtSetDevice(0) in this process
        sk, srt = sim.ffi, sim.rt
        scale_add(sim)                     # starts the engine's worker pool
        s = sk.new("aclrtStream*"); assert srt.aclrtCreateStream(s) == 0
        p = sk.new("void**"); assert srt.aclrtMalloc(p, 4096, 0) == 0
        ev = sk.new("aclrtEvent*"); assert srt.aclrtCreateEvent(ev) == 0
        host = np.arange(1024, dtype=np.float32)
        assert srt.aclrtMemcpyAsync(p[0], 4096, sk.from_buffer(host), 4096, 1, s[0]) == 0
        assert srt.aclrtRecordEvent(ev[0], s[0]) == 0 and srt.aclrtSynchronizeStream(s[0]) == 0

        def child():
            c = sk.new("aclfaSimLiveCounts*"); srt.aclfaSimGetLiveCounts(c)
            assert (c.initCount, c.devicesSet, c.streams, c.events, c.deviceAllocations) == (0, 0, 0, 0, 0)
            # inherited handles are invalid here, and never waited on
            assert srt.aclrtSynchronizeStream(s[0]) == srt.ACL_ERROR_RT_CONTEXT_NULL
            assert srt.aclrtSetDevice(0) == srt.ACL_ERROR_UNINITIALIZE
            assert srt.aclInit(sk.NULL) == 0 and srt.aclrtSetDevice(0) == 0
            assert srt.aclrtSynchronizeStream(s[0]) == srt.ACL_ERROR_RT_PARAM_INVALID
            assert srt.aclrtDestroyStream(s[0]) == srt.ACL_ERROR_RT_PARAM_INVALID
            assert srt.aclrtSynchronizeEvent(ev[0]) == srt.ACL_ERROR_RT_PARAM_INVALID
            assert srt.aclrtFree(p[0]) == srt.ACL_ERROR_RT_PARAM_INVALID
            out = np.empty(1024, np.float32)
            assert srt.aclrtMemcpy(sk.from_buffer(out), 4096, p[0], 4096, 2) == srt.ACL_ERROR_RT_PARAM_INVALID
            # the child's own objects work: streams, copies, events, kernels on a new pool
            s2 = sk.new("aclrtStream*"); assert srt.aclrtCreateStream(s2) == 0
            q = sk.new("void**"); assert srt.aclrtMalloc(q, 4096, 0) == 0
            assert srt.aclrtMemcpyAsync(q[0], 4096, sk.from_buffer(host), 4096, 1, s2[0]) == 0
            assert srt.aclrtMemcpyAsync(sk.from_buffer(out), 4096, q[0], 4096, 2, s2[0]) == 0
            assert srt.aclrtSynchronizeStream(s2[0]) == 0 and (out == host).all()
            scale_add(sim)
            assert srt.aclrtFree(q[0]) == 0 and srt.aclrtDestroyStream(s2[0]) == 0
            assert srt.aclrtResetDevice(0) == 0 and srt.aclFinalize() == 0
            c = sk.new("aclfaSimLiveCounts*"); srt.aclfaSimGetLiveCounts(c)
            assert (c.initCount, c.devicesSet, c.streams, c.deviceAllocations, c.deviceBytes) == (0, 0, 0, 0, 0)

        in_child(child)
        in_child(child)                    # a second child of the same parent too
        # the parent's objects and pool are as they were
        out = np.empty(1024, np.float32)
        assert srt.aclrtMemcpyAsync(sk.from_buffer(out), 4096, p[0], 4096, 2, s[0]) == 0
        assert srt.aclrtSynchronizeStream(s[0]) == 0 and (out == host).all()
        scale_add(sim)
        assert srt.aclrtDestroyEvent(ev[0]) == 0 and srt.aclrtFree(p[0]) == 0
        assert srt.aclrtDestroyStream(s[0]) == 0
        c = live(); assert (c.streams, c.events, c.deviceAllocations) == (0, 0, 0)
    """, timeout=180, ACL_FA_SIM_THREADS="4")


def test_fork_while_other_threads_launch_and_synchronize():
    """Forks while a parent thread keeps kernels and stream work going: the child never
    inherits a lock held by a thread it does not have, and its launches run on its own pool."""
    run_snippet(helpers=FORK, code="""
        import threading
        sim = simlib.SimKernels()
        sk, srt = sim.ffi, sim.rt
        # cffi's ABI mode resolves a library function on its first use under a Python lock
        # (FFI._lock); a fork while the busy thread holds it would leave the child that lock
        # held forever -- a hang of the test, not of the runtime. Every function and type both
        # sides use is resolved here, and the busy thread has gone round once before any fork,
        # so what the forks race with is the runtime's own C-level work.
        scale_add(sim)
        for name in ("aclInit", "aclFinalize", "aclrtSetDevice", "aclrtResetDevice", "aclrtCreateStream",
                     "aclrtDestroyStream", "aclrtMalloc", "aclrtFree", "aclrtMemcpyAsync", "aclrtSynchronizeStream"):
            getattr(srt, name)
        for ctype in ("aclrtStream*", "void**"):
            sk.new(ctype)
        stop = threading.Event(); warm = threading.Event(); errors = []
        def busy():
            try:
                srt.aclrtSetDevice(0)
                s = sk.new("aclrtStream*"); assert srt.aclrtCreateStream(s) == 0
                p = sk.new("void**"); assert srt.aclrtMalloc(p, 1 << 16, 0) == 0
                host = np.zeros(1 << 14, np.float32)
                while not stop.is_set():
                    scale_add(sim)
                    assert srt.aclrtMemcpyAsync(p[0], 1 << 16, sk.from_buffer(host), 1 << 16, 1, s[0]) == 0
                    assert srt.aclrtSynchronizeStream(s[0]) == 0
                    if not warm.is_set():
                        warm.set()
                srt.aclrtFree(p[0]); srt.aclrtDestroyStream(s[0]); srt.aclrtResetDevice(0)
            except BaseException as exc:
                errors.append(exc)
        def child():
            assert srt.aclInit(sk.NULL) == 0 and srt.aclrtSetDevice(0) == 0
            scale_add(sim)
            q = sk.new("void**"); assert srt.aclrtMalloc(q, 64, 0) == 0 and srt.aclrtFree(q[0]) == 0
            assert srt.aclrtSynchronizeStream(sk.NULL) == 0
            assert srt.aclFinalize() == 0
        t = threading.Thread(target=busy); t.start()
        assert warm.wait(60), errors
        for _ in range(12):
            time.sleep(0.02)
            in_child(child)
        stop.set(); t.join()
        assert not errors, errors
    """, timeout=180, ACL_FA_SIM_THREADS="4")
