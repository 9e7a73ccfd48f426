"""DeviceArray: Session.to_device / Session.empty, used in place by the ops (no host copy), and
the session's copy counters that show it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from conftest import run_python


def test_round_trip_and_attributes(session):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::-1]  # any layout goes in
    d = session.to_device(x)
    assert isinstance(d, acl_fa.DeviceArray)
    assert d.shape == (2, 3, 4) and d.dtype == np.float32 and d.nbytes == 96 and d.layout == "C"
    np.testing.assert_array_equal(d.numpy(), x)
    e = session.empty((5,), ml_dtypes.bfloat16)
    assert e.shape == (5,) and e.dtype == np.dtype(ml_dtypes.bfloat16)
    d.close()
    d.close()  # idempotent
    assert d.closed
    with pytest.raises(acl_fa.ClosedObjectError):
        d.numpy()
    e.close()


def test_no_implicit_host_copy(session):
    d = session.to_device(np.zeros(4, np.float16))
    with pytest.raises(acl_fa.InvalidTypeError, match=r"\.numpy\(\)"):
        np.asarray(d)
    d.close()


@pytest.mark.parametrize("bad,error", [((2, -1), acl_fa.InvalidArgumentError), ("3", acl_fa.InvalidTypeError),
                                       ((2.0,), acl_fa.InvalidTypeError)])
def test_empty_refuses_bad_shapes(session, bad, error):
    with pytest.raises(error):
        session.empty(bad, np.float16)


def test_forward_reads_device_arrays_in_place(session):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 64, 32)).astype(np.float16) for _ in range(3))
    expected = session.flash_attention(q, k, v, causal=True)
    dq, dk, dv = (session.to_device(x) for x in (q, k, v))
    before = session.copy_counters()
    out = session.flash_attention(dq, dk, dv, causal=True)
    after = session.copy_counters()
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))
    assert after["h2d"]["bytes"] == before["h2d"]["bytes"]  # nothing uploaded
    assert after["d2h"]["bytes"] - before["d2h"]["bytes"] == out.nbytes
    for x in (dq, dk, dv):
        x.close()


def test_forward_refuses_arrays_of_another_session(session, backend):
    x = np.zeros((1, 1, 16, 16), np.float16)
    with acl_fa.Session(backend=backend.name) as other:
        foreign = other.to_device(x)
        with pytest.raises(acl_fa.InvalidArgumentError, match="another Session"):
            session.flash_attention(foreign, x, x)


def test_empty_refuses_a_size_that_wraps(session):
    """2**65 elements: counted in int64 the size wraps to 0 B; refused naming the shape instead."""
    with pytest.raises(acl_fa.InvalidArgumentError, match=r"shape \(4294967296, 4294967296, 2\) of float16 has "
                       r"36893488147419103232 elements"):
        session.empty((2**32, 2**32, 2), np.float16)
    with pytest.raises(acl_fa.InvalidArgumentError, match="beyond the 9223372036854775295 B one device allocation"):
        session.empty((2**62,), np.float32)  # 2**64 bytes
    with pytest.raises(acl_fa.InvalidArgumentError, match="nbytes=18446744073709551616 is beyond"):
        session.alloc(2**64)  # not cffi's OverflowError
    assert session.empty((0, 2**40), np.float16).nbytes == 0  # an empty array is no overflow


def test_close_waits_for_a_call_that_reads_the_array(sim_only):
    """DeviceArray.close() while another thread's call reads it: the memory is freed only after
    that call ended (its output right, no error); a call that begins after close() refuses it."""
    result = run_python("""
        import json, threading, time
        import numpy as np, acl_fa
        rng = np.random.default_rng(4)
        q, k, v = (rng.standard_normal((1, 2, 256, 64)).astype(np.float16) for _ in range(3))
        with acl_fa.Session(backend="sim") as s:
            expected = s.flash_attention(q, k, v)
            dq, dk, dv = (s.to_device(x) for x in (q, k, v))
            launched, outcome = threading.Event(), {}
            real = s.backend.call
            def call(api, *args):  # the launch of the other thread's call lingers before it runs
                if api == "aclnnFlashAttention" and threading.current_thread().name == "reader":
                    launched.set()
                    time.sleep(0.5)
                return real(api, *args)
            s.backend.call = call
            def read():
                try:
                    out = s.flash_attention(dq, dk, dv)
                    outcome["equal"] = bool(np.array_equal(out.view(np.uint16), expected.view(np.uint16)))
                except Exception as exc:
                    outcome["error"] = repr(exc)
                outcome["ended"] = time.monotonic()
            reader = threading.Thread(target=read, name="reader")
            reader.start()
            launched.wait(60)
            dk.close()
            closed = time.monotonic()
            reader.join()
            try:
                s.flash_attention(q, dk, v)
                refused = ""
            except acl_fa.ClosedObjectError as exc:
                refused = str(exc)
            dq.close(); dv.close()
        print(json.dumps(dict(outcome, closed_after_call=closed >= outcome["ended"], refused=refused)))
    """)
    assert "error" not in result and result["equal"], result
    assert result["closed_after_call"], result
    assert "k is a closed DeviceArray" in result["refused"], result


def test_backward_takes_a_device_array_lse(session):
    """lse as a DeviceArray (as every other array may be) gives the numpy lse's gradients."""
    rng = np.random.default_rng(5)
    q, k, v, dout = (rng.standard_normal((1, 2, 64, 32)).astype(np.float16) for _ in range(4))
    out, lse = session.flash_attention(q, k, v, causal=True, return_lse=True)
    expected = session.flash_attention_backward(dout, q, k, v, out, lse, causal=True)
    with session.to_device(lse) as lse_dev, session.to_device(out) as out_dev:
        got = session.flash_attention_backward(dout, q, k, v, out_dev, lse_dev, causal=True)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_close_inside_a_call_does_not_wait_for_the_calls_that_wait_for_it(sim_only):
    """Two threads appending to DeviceArray caches on one Session: each call stages k/v in a
    temporary DeviceArray and closes it while it holds the op runner's lock, which the other
    thread's call waits for -- that close must not wait for the other call (no deadlock)."""
    result = run_python("""
        import json, threading
        import numpy as np, acl_fa
        with acl_fa.Session(backend="sim") as s:
            caches = [(s.empty((1, 256, 2, 64), np.float16), s.empty((1, 256, 2, 64), np.float16)) for _ in range(2)]
            q, k = np.zeros((1, 1, 2, 64), np.float16), np.ones((1, 1, 2, 64), np.float16)
            done = []
            def work(i):
                for step in range(20):
                    s.flash_attention_with_kvcache(q, *caches[i], k=k, v=k, cache_seqlens=step)
                done.append(i)
            threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            ended = sorted(done)
            if ended == [0, 1]:
                for pair in caches:
                    for c in pair:
                        c.close()
        print(json.dumps({"ended": ended}))
    """, timeout=300)
    assert result["ended"] == [0, 1], result
