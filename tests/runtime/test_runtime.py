"""Runtime objects on the simulator: copies, streams and events, memory exhaustion, lifetimes,
fault injection at every call site of the driver, threads."""
from __future__ import annotations

import gc
import threading

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import acl_fa
from acl_fa.runtime.errors import AclError, AclMemoryError, ClosedObjectError, InvalidArgumentError
from acl_fa.runtime.session import live_counts
from acl_fa.runtime.tensor import Tensor

from conftest import run_python

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.int64]


def random_array(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-2**62, 2**62, size=shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


LAYOUTS = {
    "contiguous": lambda a: a,
    "fortran": np.asfortranarray,
    "strided": lambda a: a[::2, 1::3],
    "transposed": lambda a: a.transpose(1, 0, 2),
    "negative-stride": lambda a: a[::-1, :, ::-2],
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip(session, dtype, layout):
    rng = np.random.default_rng(7)
    source = LAYOUTS[layout](random_array(rng, (9, 13, 6), dtype))
    with session.upload(source) as buffer:
        assert buffer.nbytes == source.nbytes and buffer.shape == source.shape
        back = buffer.to_numpy()
    assert back.flags.c_contiguous
    assert same_bits(back, np.ascontiguousarray(source))


@st.composite
def host_arrays(draw):
    """Arrays of every device dtype, any shape (incl. 0-d and empty), any memory order."""
    name = draw(st.sampled_from(["float16", "bfloat16", "float32", "int64"]))
    bits = np.uint16 if name == "bfloat16" else np.dtype(name)  # bf16 drawn as raw bits
    array = draw(hnp.arrays(bits, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0,
                                                   max_side=9)))
    array = array.view(ml_dtypes.bfloat16) if name == "bfloat16" else array
    if array.ndim and draw(st.booleans()):
        array = array[::-1]
    return array.T if draw(st.booleans()) else array


@settings(max_examples=40, deadline=None)
@given(array=host_arrays())
def test_round_trip_any_shape(backend, array):
    with acl_fa.Session(backend=backend.name) as session:
        with session.upload(array) as buffer:
            assert same_bits(buffer.to_numpy(), np.ascontiguousarray(array))


def test_partial_copies_at_offsets(session):
    data = np.arange(64, dtype=np.float32)
    with session.alloc(512) as buffer:
        buffer.copy_from_host(data[:32], offset=0)
        buffer.copy_from_host(data[32:], offset=128)
        out = np.empty(32, np.float32)
        assert np.array_equal(buffer.copy_to_host(out, offset=128), data[32:])
        with pytest.raises(InvalidArgumentError, match="do not fit"):
            buffer.copy_from_host(data, offset=400)


def test_async_copies_on_two_streams_with_events(session):
    rng = np.random.default_rng(1)
    streams = [session.stream(), session.stream()]
    expected, results, times = [], [], []
    for stream in streams:
        data = rng.standard_normal(4096).astype(np.float32)
        staging_in, staging_out = session.alloc_host(data.nbytes), session.alloc_host(data.nbytes)
        staging_in.numpy(np.float32)[:] = data
        first, second = session.alloc(data.nbytes), session.alloc(data.nbytes)
        start, end = session.event(), session.event()
        start.record(stream)
        stream.copy(first, staging_in)       # H2D
        stream.copy(second, first)           # D2D
        stream.copy(staging_out, second)     # D2H
        end.record(stream)
        expected.append(data)
        results.append(staging_out)
        times.append((start, end))
    for stream, (start, end) in zip(streams, times):
        end.synchronize()
        stream.synchronize()
        elapsed = start.elapsed_ms(end)
        assert 0.0 <= elapsed < 60_000.0
    for data, staging_out in zip(expected, results):
        assert np.array_equal(staging_out.numpy(np.float32), data)
    # Everything above is released by the session fixture's close (checked there).


def test_elapsed_time_needs_timing_events(session):
    start, end = session.event(timing=False), session.event(timing=False)
    with pytest.raises(InvalidArgumentError, match="timing=True"):
        start.elapsed_ms(end)


def test_out_of_memory_is_207001_with_the_runtime_message(session, backend, sim_only):
    before = live_counts(backend)
    free, total = session.mem_info()
    assert 0 < free <= total
    with pytest.raises(AclMemoryError) as info:
        session.alloc(total + 1)
    exc = info.value
    assert isinstance(exc, MemoryError) and isinstance(exc, AclError)
    assert exc.code == 207001 and exc.name == "ACL_ERROR_RT_MEMORY_ALLOCATION"
    assert exc.api == "aclrtMalloc" and exc.message, "the runtime's message must be carried"
    assert live_counts(backend) == before


def test_exhausting_a_small_hbm(sim_only):
    """ACL_FA_SIM_HBM_BYTES set before load: allocations succeed until the capacity is used."""
    result = run_python("""
        import json
        import acl_fa
        from acl_fa.runtime.session import live_counts
        out = {}
        with acl_fa.Session(backend="sim") as s:
            free, total = s.mem_info()
            out["total"] = total
            kept = []
            try:
                while True:
                    kept.append(s.alloc(256 * 1024))
            except acl_fa.AclMemoryError as exc:
                out.update(code=exc.code, api=exc.api, message=exc.message, kept=len(kept))
            out["live_during"] = live_counts(s.backend)["deviceAllocations"]
            for b in kept:
                b.close()
            out["after_free"] = s.alloc(256 * 1024).nbytes
        out["live_after"] = live_counts(acl_fa.get_backend())
        print(json.dumps(out))
    """, ACL_FA_BACKEND="sim", ACL_FA_SIM_HBM_BYTES=4 * 1024 * 1024)
    assert result["total"] == 4 * 1024 * 1024
    assert result["code"] == 207001 and result["api"] == "aclrtMalloc" and result["message"]
    assert 1 <= result["kept"] < 16 and result["live_during"] == result["kept"]
    assert result["after_free"] == 256 * 1024
    assert all(v == 0 for v in result["live_after"].values()), result["live_after"]


def test_tensor_over_buffer(session, backend):
    rng = np.random.default_rng(3)
    data = random_array(rng, (4, 6, 8), np.float16)
    with session.upload(data) as buffer:
        with Tensor(buffer) as tensor:
            assert tensor.shape == (4, 6, 8) and tensor.strides == (48, 8, 1)
            assert same_bits(tensor.to_numpy(), data)
        # a strided view: every other row of the middle axis, offset by one plane
        view = Tensor(buffer, shape=(3, 3, 8), strides=(48, 16, 1), offset=48)
        assert same_bits(view.to_numpy(), np.ascontiguousarray(data[1:, ::2]))
        if backend.name == "sim":
            assert live_counts(backend)["tensors"] >= 1
        view.close()


@pytest.mark.parametrize("kwargs, message", [
    (dict(shape=(4, 6, 9)), "reaches element 215; the buffer holds 192"),
    (dict(shape=(4, 6, 8), offset=1), "reaches element 192"),
    (dict(shape=(2, 2), strides=(1,)), "differ in rank"),
    (dict(shape=(2, -2)), "must be >= 0"),
], ids=["too-big", "offset", "rank", "negative"])
def test_bad_tensor_rejected_before_device_work(session, backend, kwargs, message):
    with session.upload(np.zeros((4, 6, 8), np.float16)) as buffer:
        before = live_counts(backend) if backend.name == "sim" else None
        with pytest.raises(InvalidArgumentError, match=message):
            Tensor(buffer, **kwargs)
        if before is not None:
            assert live_counts(backend) == before


def test_close_is_idempotent_and_closed_objects_refuse_work(session):
    buffer = session.upload(np.ones(8, np.float32))
    buffer.close()
    buffer.close()
    assert buffer.closed
    with pytest.raises(ClosedObjectError):
        buffer.to_numpy()
    stream = session.stream()
    stream.close()
    with pytest.raises(ClosedObjectError):
        stream.synchronize()


def test_garbage_collection_frees_forgotten_objects(session, backend, sim_only):
    before = live_counts(backend)
    session.alloc(1024)
    session.stream()
    session.event()
    gc.collect()
    assert live_counts(backend) == before


def test_session_close_releases_all_children_in_order(backend, sim_only):
    baseline = live_counts(backend)
    session = acl_fa.Session(backend="sim")
    buffer = session.upload(np.zeros(16, np.float16))
    children = [buffer, Tensor(buffer), session.stream(), session.event(),
                session.alloc_host(64), session.alloc(32)]
    during = live_counts(backend)
    assert during["tensors"] == baseline["tensors"] + 1
    assert during["deviceAllocations"] == baseline["deviceAllocations"] + 2
    session.close()
    session.close()
    assert all(child.closed for child in children)
    assert live_counts(backend) == baseline
    with pytest.raises(ClosedObjectError):
        session.alloc(8)


def test_sessions_share_one_acl_init(backend, sim_only):
    baseline = live_counts(backend)
    with acl_fa.Session(backend="sim"), acl_fa.Session(backend="sim"):
        assert live_counts(backend)["initCount"] == max(baseline["initCount"], 1)
    assert live_counts(backend) == baseline


def test_two_threads_share_one_session(session, backend):
    errors, done = [], []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            stream = session.stream()
            for _ in range(20):
                data = rng.standard_normal((33, 17)).astype(np.float16)
                with session.upload(data) as buffer:
                    assert same_bits(buffer.to_numpy(), data)
                stream.synchronize()
            stream.close()
            done.append(seed)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(done) == [1, 2]


# ---- fault injection at every call site ---------------------------------------------------

def _prepared(session):
    """Objects the scenarios below operate on."""
    stream = session.stream()
    device = session.upload(np.arange(64, dtype=np.float32))
    host = session.alloc_host(device.nbytes)
    start, end = session.event(), session.event()
    start.record(stream)
    end.record(stream)
    stream.synchronize()
    return dict(stream=stream, device=device, host=host, start=start, end=end)


CALL_SITES = {
    "aclrtMalloc": lambda s, o: s.alloc(64),
    "aclrtMemcpy": lambda s, o: s.upload(np.ones(16, np.float16)),
    "aclrtMallocHost": lambda s, o: s.alloc_host(64),
    "aclrtCreateStream": lambda s, o: s.stream(),
    "aclrtMemcpyAsync": lambda s, o: o["stream"].copy(o["host"], o["device"]),
    "aclrtSynchronizeStreamWithTimeout": lambda s, o: o["stream"].synchronize(),
    "aclrtCreateEventWithFlag": lambda s, o: s.event(),
    "aclrtCreateEvent": lambda s, o: s.event(timing=False),
    "aclrtRecordEvent": lambda s, o: o["start"].record(o["stream"]),
    "aclrtSynchronizeEvent": lambda s, o: o["end"].synchronize(),
    "aclrtStreamWaitEvent": lambda s, o: o["stream"].wait(o["end"]),
    "aclrtEventElapsedTime": lambda s, o: o["start"].elapsed_ms(o["end"]),
    "aclCreateTensor": lambda s, o: Tensor(o["device"]),
    "aclrtGetMemInfo": lambda s, o: s.mem_info(),
    "aclrtSynchronizeDevice": lambda s, o: s.synchronize(),
}


@pytest.mark.parametrize("api", CALL_SITES)
def test_fault_at_call_site_leaks_nothing(backend, faults, api):
    baseline = live_counts(backend)
    with acl_fa.Session(backend="sim") as session:
        objects = _prepared(session)
        before = live_counts(backend)
        faults(f"{api}:1")
        with pytest.raises(AclError) as info:
            CALL_SITES[api](session, objects)
        faults("")
        assert info.value.api == api and info.value.code != 0
        assert info.value.message, "the injected fault's message must be carried"
        assert live_counts(backend) == before, "the failed operation left objects behind"
        # the session is still usable
        data = np.random.default_rng(0).standard_normal(100).astype(np.float32)
        with session.upload(data) as buffer:
            assert same_bits(buffer.to_numpy(), data)
    assert live_counts(backend) == baseline


def test_fault_when_a_thread_binds_the_device(session, faults):
    failures = []

    def work():
        try:
            session.alloc(64).close()
        except AclError as exc:
            failures.append(exc)
        session.alloc(64).close()  # the next try on this thread binds and works

    faults("aclrtSetDevice:1")
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert [e.api for e in failures] == ["aclrtSetDevice"]


SESSION_FAULT_SCRIPT = """
    import json
    import numpy as np
    import acl_fa
    from acl_fa.runtime.session import live_counts
    from acl_fa.runtime.tensor import Tensor
    backend = acl_fa.get_backend("sim")
    def arm(spec):
        backend.call("aclfaSimSetFaults", spec.encode())
    out = {{}}
    api, where = {api!r}, {where!r}
    if where == "open":
        arm(api + ":1")
        try:
            acl_fa.Session(backend="sim")
        except acl_fa.AclError as exc:
            out["raised"] = exc.api
    else:
        s = acl_fa.Session(backend="sim")
        buffer = s.upload(np.ones(8, np.float32))
        objects = [buffer, Tensor(buffer), s.stream(), s.event(), s.alloc_host(32)]
        arm(api + ":1")
        try:
            s.close()
        except acl_fa.AclError as exc:
            out["raised"] = exc.api
        out["children_closed"] = all(o.closed for o in objects)
    arm("")
    out["left"] = {{k: v for k, v in live_counts(backend).items() if v}}
    with acl_fa.Session(backend="sim") as s:  # a new session works
        out["usable"] = s.upload(np.arange(4.0)).to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    out["final"] = {{k: v for k, v in live_counts(backend).items() if v}}
    print(json.dumps(out))
"""

# api -> (where the fault strikes; what the failure leaves behind: at most the one object
# whose release failed; what is left after a further clean Session has come and gone)
SESSION_SITES = {
    "aclInit": ("open", {}, {}),
    "aclrtSetDevice": ("open", {}, {}),
    "aclDestroyTensor": ("close", {"tensors": 1}, {"tensors": 1}),
    "aclrtDestroyEvent": ("close", {"events": 1}, {"events": 1}),
    "aclrtSynchronizeStream": ("close", {}, {}),  # the stream is destroyed all the same
    "aclrtDestroyStream": ("close", {"streams": 1}, {"streams": 1}),
    "aclrtFreeHost": ("close", {"hostAllocations": 1}, {"hostAllocations": 1}),
    # the leaked buffer's bytes: its aclrtMalloc request (nbytes plus the 448 B of 512-B alignment
    # room, runtime.malloc_request) as the simulator counts it, 32-B rounded
    "aclrtFree": ("close", {"deviceAllocations": 1, "deviceBytes": 480},
                  {"deviceAllocations": 1, "deviceBytes": 480}),
    "aclrtResetDevice": ("close", {}, {}),  # aclFinalize, which still runs, releases the device
    # ACL stays initialized; the next Session's aclInit answers 100002 and, the init being
    # still ours, that Session's close finalizes it
    "aclFinalize": ("close", {"initCount": 1}, {}),
}


@pytest.mark.parametrize("api", SESSION_SITES)
def test_fault_when_opening_or_closing_a_session(sim_only, api):
    where, left, final = SESSION_SITES[api]
    result = run_python(SESSION_FAULT_SCRIPT.format(api=api, where=where), ACL_FA_BACKEND="sim")
    assert result["raised"] == api
    if where == "close":
        assert result["children_closed"]
    assert result["left"] == left, "only the object whose release failed may remain"
    assert result["usable"]
    assert result["final"] == final


def test_stream_wait_orders_work_across_streams_without_the_host(session, backend, sim_only):
    data = np.random.default_rng(2).standard_normal(1 << 18).astype(np.float32)
    producer, consumer = session.stream(), session.stream()
    staging_in, staging_out = session.alloc_host(data.nbytes), session.alloc_host(data.nbytes)
    staging_in.numpy(np.float32)[:] = data
    first, second = session.alloc(data.nbytes), session.alloc(data.nbytes)
    ready = session.event(timing=False)
    producer.copy(first, staging_in)
    ready.record(producer)
    consumer.wait(ready)                 # the device orders the next copies behind the H2D copy
    consumer.copy(second, first)
    consumer.copy(staging_out, second)
    consumer.synchronize()               # the host never waited for the producer
    assert np.array_equal(staging_out.numpy(np.float32), data)
    producer.synchronize()
    with pytest.raises(acl_fa.runtime.errors.InvalidTypeError, match="Stream.wait needs an Event"):
        consumer.wait(producer)
    with acl_fa.Session(backend="sim") as other:
        with pytest.raises(InvalidArgumentError, match="belongs to another Session"):
            consumer.wait(other.event())
