"""CANN's builtin aclnnInplaceAdd as the simulator's libopapi.so gives it, and acl_fa.ops.device_add on top:
results bit-equal to numpy's float32 emulation of the promoted add (mixed float16/bfloat16/float32,
broadcast, strided views, alpha), the refusals the op documents, the GM traffic counters, and an
injected failure that leaves the Session usable.
"""
import ml_dtypes
import numpy as np
import pytest

from acl_fa import Session
from acl_fa.runtime.ffi import ffi
from acl_fa.ops.device_add import DeviceAdds
from acl_fa.runtime.device_array import DeviceArray
from acl_fa.runtime.dtypes import to_acl
from acl_fa.runtime.errors import AclError, InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.tensor import Tensor

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


@pytest.fixture(scope="module")
def session():
    with Session() as s:
        yield s


def _promoted(a, b):
    return a if a == b else F32


def _emulate(self_host, other_host, alpha):
    """selfRef + alpha * other in the promoted dtype, cast to selfRef's (each step rounded)."""
    t = _promoted(self_host.dtype, other_host.dtype)
    o = other_host.astype(np.float32)
    scaled = o if alpha == 1.0 else (np.float32(alpha) * o).astype(t).astype(np.float32)
    return (self_host.astype(np.float32) + scaled).astype(t).astype(self_host.dtype)


def _stats(session):
    stats = ffi.new("aclfaSimBuiltinOpStats *")
    session.call("aclfaSimGetBuiltinOpStats", session.device, stats)
    return {k: int(getattr(stats, k)) for k in ("calls", "elements", "gmReadBytes", "gmWriteBytes")}


def _raw_add(session, self_t, other_t, alpha_value, alpha_dtype=F32):
    """Phase one and two of aclnnInplaceAdd on the tensors, waited for."""
    value = ffi.new("float *", alpha_value) if alpha_dtype == F32 else ffi.new("uint16_t *", int(
        np.array(alpha_value, alpha_dtype).view(np.uint16)))
    alpha = session.call("aclCreateScalar", value, to_acl(alpha_dtype))
    size, handle = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    try:
        session.call("aclnnInplaceAddGetWorkspaceSize", self_t.handle, other_t.handle, alpha, size, handle)
    finally:
        session.call("aclDestroyScalar", alpha)
    assert size[0] == 0
    with session.stream() as stream:
        session.call("aclnnInplaceAdd", ffi.NULL, 0, handle[0], stream.handle)  # consumes the executor
        stream.synchronize()


CASES = [  # self dtype, other dtype, self shape, other shape, alpha
    (F32, F16, (3, 5, 32), (3, 5, 32), 1.0),
    (F32, BF16, (2, 64), (2, 64), 1.0),
    (F32, F32, (7, 16), (16,), -0.5),          # broadcast along the leading dim
    (F16, F16, (4, 32), (4, 1), 1.0),          # broadcast along the last dim, float16 math
    (BF16, F32, (3, 16), (3, 16), 2.0),        # float32 math cast to bfloat16
    (F16, BF16, (2, 8, 16), (8, 16), 1.0),     # float16 with bfloat16 promotes to float32
]


@pytest.mark.parametrize("self_dt, other_dt, self_shape, other_shape, alpha", CASES)
def test_inplace_add_equals_the_promoted_add(session, self_dt, other_dt, self_shape, other_shape, alpha):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(self_shape).astype(self_dt)
    b = rng.standard_normal(other_shape).astype(other_dt)
    with DeviceArray.from_host(session, a) as da, DeviceArray.from_host(session, b) as db:
        before = _stats(session)
        _raw_add(session, Tensor(da.buffer, shape=a.shape, dtype=a.dtype), Tensor(db.buffer, shape=b.shape,
                                                                                  dtype=b.dtype), alpha)
        got = da.numpy()
        after = _stats(session)
    want = _emulate(a, np.broadcast_to(b, a.shape), alpha)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (got, want)
    n = a.size
    assert {k: after[k] - before[k] for k in after} == {
        "calls": 1, "elements": n, "gmReadBytes": n * (a.itemsize + b.itemsize), "gmWriteBytes": n * a.itemsize}


def test_inplace_add_reads_and_writes_strided_views(session):
    """selfRef: every other column of a [4, 32] float32 buffer; other: a transposed float16 view."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float16)
    with DeviceArray.from_host(session, a) as da, DeviceArray.from_host(session, b) as db:
        _raw_add(session, Tensor(da.buffer, shape=(4, 16), dtype=F32, strides=(32, 2)),
                 Tensor(db.buffer, shape=(4, 16), dtype=F16, strides=(1, 4)), 1.0)
        got = da.numpy()
    want = a.copy()
    want[:, ::2] = a[:, ::2] + b.T.astype(np.float32)
    assert np.array_equal(got, want)


REFUSED = [  # self (shape, dtype), other (shape, dtype), alpha dtype, status, words
    (((4, 16), F32), ((3, 16), F32), F32, 161002, "other's dim 0 is 3, selfRef's 4: not broadcastable"),
    (((16,), F32), ((2, 16), F32), F32, 161002, "other has 2 dims, more than selfRef's 1"),
    (((4, 16), F32), ((4, 16), np.dtype(np.int32)), F32, 161002, "other has aclDataType 3"),
    (((4, 16), F32), ((4, 16), F32), np.dtype(np.int32), 161002, "alpha has aclDataType 3"),
]


@pytest.mark.parametrize("self_spec, other_spec, alpha_dt, status, words", REFUSED)
def test_inplace_add_refuses_what_the_op_documents(session, self_spec, other_spec, alpha_dt, status, words):
    (sa, da_t), (sb, db_t) = self_spec, other_spec
    with DeviceArray.empty(session, sa, F32) as da, DeviceArray.empty(session, (64,), F32) as db:
        self_t = Tensor(da.buffer, shape=sa, dtype=da_t)
        other_t = Tensor(db.buffer, shape=sb, dtype=db_t)
        alpha = session.call("aclCreateScalar", ffi.new("int32_t *", 1) if alpha_dt != F32 else ffi.new("float *", 1),
                             to_acl(alpha_dt))
        try:
            with pytest.raises(AclError) as err:
                session.call("aclnnInplaceAddGetWorkspaceSize", self_t.handle, other_t.handle, alpha,
                             ffi.new("uint64_t *"), ffi.new("aclOpExecutor **"))
            with pytest.raises(AclError, match="alpha is nullptr"):
                session.call("aclnnInplaceAddGetWorkspaceSize", self_t.handle, other_t.handle, ffi.NULL,
                             ffi.new("uint64_t *"), ffi.new("aclOpExecutor **"))
        finally:
            session.call("aclDestroyScalar", alpha)
            self_t.close()
            other_t.close()
    assert err.value.code == status and words in str(err.value), str(err.value)


def test_device_adds_checks_its_arrays_before_device_work(session):
    adds = DeviceAdds(session)
    with DeviceArray.empty(session, (4, 16), F32) as a, DeviceArray.empty(session, (4, 8), F32) as b, \
            DeviceArray.empty(session, (4, 16), np.int32) as c, session.stream() as stream:
        with pytest.raises(InvalidArgumentError, match=r"other has shape \(4, 8\); it must have self_ref's \(4, 16\)"):
            adds.enqueue(stream, a, b)
        with pytest.raises(InvalidTypeError, match="other must be float16, bfloat16 or float32, got int32"):
            adds.enqueue(stream, a, c)
        with pytest.raises(InvalidTypeError, match="self_ref must be a DeviceArray, got ndarray"):
            adds.enqueue(stream, np.zeros((4, 16), np.float32), a)
    adds.close()


def test_an_injected_add_failure_leaves_the_session_usable(session):
    """Phase two fails as injected with its API's name; the executor and session stay usable and
    the next add of the same arrays is right."""
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    b = np.ones((4, 16), np.float16)
    before = session.live_counts()  # process-wide: other tests' sessions may hold objects
    adds = DeviceAdds(session)
    try:
        with DeviceArray.from_host(session, a) as da, DeviceArray.from_host(session, b) as db, \
                session.stream() as stream:
            session.call("aclfaSimSetFaults", b"aclnnInplaceAdd:1")
            try:
                with pytest.raises(AclError) as err:
                    adds.enqueue(stream, da, db)
            finally:
                session.call("aclfaSimSetFaults", b"")
            assert err.value.api == "aclnnInplaceAdd" and "injected" in str(err.value), str(err.value)
            adds.enqueue(stream, da, db)
            stream.synchronize()
            assert np.array_equal(da.numpy(), a + 1)
    finally:
        adds.close()
    after = session.live_counts()
    assert all(after[k] == before[k] for k in ("executors", "tensors", "scalars", "deviceAllocations")), (before, after)
