"""DeviceArray: Session.to_device / Session.empty, used in place by the ops (no host copy), and
the session's copy counters that show it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa


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
