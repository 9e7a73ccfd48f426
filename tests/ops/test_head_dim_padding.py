"""Any head dim 1..256: the forward, varlen and backward pad D to the cube's multiple of 16 on the
device (zeroed buffers filled row by row with aclrtMemcpy2d, outputs read back the same way) and
keep the scale 1/sqrt(D) of the caller's D. Checked against the float64 reference under the
2x-naive rule (acl_fa.reference.accuracy), forward and backward; the copies counted (the caller's
bytes only: no padded host copy); the simulator's aclrtMemcpy2d rules."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.ops.routed import last_route
from acl_fa.reference.accuracy import check_accuracy, check_gradients, naive_same_precision
from acl_fa.reference.attention import attention_reference_varlen, attention_reference_varlen_backward
from acl_fa.runtime.errors import AclError
from acl_fa.runtime.ffi import ffi
from acl_fa.runtime.session import ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_HOST_TO_DEVICE, live_counts
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.plan import forward as planmod
from acl_fa.spec.problem import make_problem, sized_problem

F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
NAMES = {F16: "float16", BF16: "bfloat16", F32: "float32"}


def _inputs(layout, b, n, nkv, sq, skv, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    qs, kvs = shape_of(layout, b, n, sq, d), shape_of(layout, b, nkv, skv, d)
    return tuple(rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (qs, kvs, kvs, qs))


# id, D, dtype, layout, (B, N, Nkv, Sq, Skv), options: the head dims, each dtype, every
# layout, GQA, the V1 op (no options) and the V2 one (window, dropout).
CASES = [
    ("d1", 1, F16, "BNSD", (1, 2, 2, 33, 40), {}),
    ("d8-causal", 8, BF16, "BSND", (2, 2, 1, 40, 40), dict(causal=True)),
    ("d40-gqa", 40, F16, "BSND", (1, 4, 2, 48, 64), dict(causal=True)),
    ("d59-window", 59, F16, "BNSD", (1, 2, 2, 70, 70), dict(window=(16, 4))),
    ("d80-bsh", 80, BF16, "BSH", (1, 2, 2, 37, 50), {}),
    ("d96-dropout", 96, F16, "BNSD", (1, 2, 2, 40, 40), dict(dropout_p=0.2, seed=7)),
    ("d111", 111, BF16, "BNSD", (1, 2, 1, 50, 33), dict(causal=True)),
    ("d200", 200, F16, "BSND", (1, 2, 2, 40, 40), {}),
    ("d256", 256, BF16, "BSND", (1, 2, 1, 40, 48), dict(causal=True)),
    ("d256-f32", 256, F32, "BNSD", (1, 1, 1, 32, 40), {}),
    ("d59-f32", 59, F32, "BSND", (1, 2, 2, 30, 30), dict(causal=True)),
]


@pytest.mark.parametrize("d,dtype,layout,dims,opts", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_forward_and_backward_of_any_head_dim_match_the_reference(d, dtype, layout, dims, opts):
    b, n, nkv, sq, skv = dims
    q, k, v, dout = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    heads = dict(num_heads=n, num_kv_heads=nkv)
    out, lse = acl_fa.flash_attention(q, k, v, layout=layout, return_lse=True, **heads, **opts)[:2]
    assert out.shape == q.shape and out.dtype == q.dtype
    ref_kw = {"causal": False, **dict(scale=1 / np.sqrt(d), layout=layout, heads=list(range(n)), **heads, **opts)}
    ref, ref_lse = acl_fa.attention_reference(q, k, v, **ref_kw)
    naive = naive_same_precision(q, k, v, dtype, **ref_kw)
    acc = check_accuracy(to_bnsd(out, layout, n).astype(np.float64), lse, to_bnsd(ref, layout, n), ref_lse, naive,
                         NAMES[dtype], list(range(n)))
    assert acc.ok, acc
    assert acc.lse_max_error < 1e-3
    if dtype == F32:
        return  # the backward takes float16 / bfloat16 only (FlashAttentionGrad's dtype combinations)
    grads = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, layout=layout, **heads, **opts)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    ref_kw.pop("heads")
    for check in check_gradients(grads, (q, k, v, dout), dtype_name=NAMES[dtype], **ref_kw):
        assert check.ok, check


@pytest.mark.parametrize("d", [24, 72])
def test_varlen_forward_and_backward_of_a_padded_head_dim(d):
    lq, lk, n, nkv = [30, 1, 45], [40, 9, 45], 4, 2
    cu_q, cu_k = np.cumsum([0] + lq).astype(np.int32), np.cumsum([0] + lk).astype(np.int32)
    rng = np.random.default_rng(d)
    q, dout = (rng.standard_normal((cu_q[-1], n, d), dtype=np.float32).astype(F16) for _ in range(2))
    k, v = (rng.standard_normal((cu_k[-1], nkv, d), dtype=np.float32).astype(F16) for _ in range(2))
    out, lse = acl_fa.flash_attention_varlen(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    ref, ref_lse = attention_reference_varlen(q, k, v, cu_q, cu_k, causal=True)
    naive, _ = attention_reference_varlen(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), cu_q, cu_k,
                                          causal=True, out_dtype=F16)
    bound = max(2 * float(np.abs(naive.astype(np.float64) - ref).max()), 2**-10 * max(1.0, float(np.abs(ref).max())))
    assert float(np.abs(out.astype(np.float64) - ref).max()) <= bound + 2**-10
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    grads = acl_fa.flash_attention_varlen_backward(dout, q, k, v, out, lse, cu_q, cu_k, causal=True)
    ref_g = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_k, causal=True)
    naive_g = attention_reference_varlen_backward(dout, q, k, v, cu_q, cu_k, causal=True, work_dtype=np.float32,
                                                  round_to=F16)
    for got, want, same in zip(grads, ref_g, naive_g):
        err, naive_err = (float(np.abs(x.astype(np.float64) - want).max()) for x in (got, same.astype(F16)))
        assert err <= 2 * naive_err + 2**-10 * max(1.0, float(np.abs(want).max())), (err, naive_err)


def test_padding_copies_only_the_callers_bytes_and_never_routes_to_decode():
    """One H2D transfer per input of exactly the caller's bytes (the padding is a device memset,
    not a padded host copy), and a decode-shaped padded call stays on the general forward."""
    session = acl_fa.Session()
    try:
        q, k, v, _ = _inputs("BSND", 1, 8, 1, 1, 2048, 59, F16)
        session.flash_attention(q, k, v, layout="BSND")  # builds and caches the padded buffers
        before = session.copy_counters()
        out = session.flash_attention(q, k, v, layout="BSND")
        after = session.copy_counters()
        h2d = {key: after["h2d"][key] - before["h2d"][key] for key in ("calls", "bytes")}
        assert h2d == {"calls": 3, "bytes": q.nbytes + k.nbytes + v.nbytes}
        assert after["d2d"] == before["d2d"]
        route = last_route(session)
        assert not route.decode and "head dim 59" in route.reason
        ref, _ = acl_fa.attention_reference(q, k, v, layout="BSND")
        assert np.abs(out.astype(np.float64) - ref).max() < 2e-3
    finally:
        session.close()


def _problem(d, **kw):
    q = np.zeros((1, 64, 4 * d), F16)
    return make_problem(q, q, q, layout="BSH", num_heads=4, **kw)[0]


def test_the_problem_keeps_the_callers_head_dim_and_scale():
    p = _problem(59, pad_head_dim=True)
    assert (p.head_dim, p.user_head_dim, p.padded) == (64, 59, True)
    assert p.q_shape == (1, 64, 4 * 64) and p.scale == pytest.approx(59 ** -0.5)
    assert p.flops() == 4 * 4 * 59 * 64 * 64  # useful work: the caller's D
    with pytest.raises(acl_fa.InvalidArgumentError, match="multiple of 16"):
        _problem(59)  # ops that do not pad keep the rule
    with pytest.raises(acl_fa.InvalidArgumentError, match="<= 256"):
        _problem(257, pad_head_dim=True)
    plan = planmod.plan(sized_problem(seq_q=256, num_heads=2, head_dim=59, causal=True), "Ascend910B2")
    assert (plan.head_dim, plan.given_head_dim) == (64, 59)
    assert plan.padding_macs_fraction == pytest.approx(64 / 59 - 1)
    assert plan.padding_bytes == 2 * 2 * 2 * 256 * (64 - 59) * 2  # q, out, k, v of 2 heads, fp16
    assert "head dim 59 padded to D=64" in planmod.format_plan(plan)


def test_a_padded_head_dim_refuses_device_arrays_before_device_work():
    session = acl_fa.Session()
    try:
        q, k, v, _ = _inputs("BNSD", 1, 2, 2, 32, 32, 40, F16)
        dq = session.to_device(q)
        before = live_counts(session.backend)
        with pytest.raises(acl_fa.InvalidArgumentError, match="head dim 40"):
            session.flash_attention(dq, k, v)
        assert live_counts(session.backend) == before
    finally:
        session.close()


def test_simulated_memcpy2d_follows_the_runtime_rules():
    """aclrtMemcpy2d (docs/compat.md "Any head dim"): H2D / D2H only, width <= both
    pitches, the device extent inside one allocation; rows land at their pitch."""
    session = acl_fa.Session()
    try:
        buf = session.alloc(4 * 16)
        host = np.arange(12, dtype=np.uint8).reshape(4, 3)
        session.call("aclrtMemset", buf.ptr, 64, 0, 64)
        session.call("aclrtMemcpy2d", buf.ptr, 16, ffi.from_buffer(host), 3, 3, 4, ACL_MEMCPY_HOST_TO_DEVICE)
        back = buf.to_numpy((4, 16), np.uint8)
        assert np.array_equal(back[:, :3], host) and not back[:, 3:].any()
        for args, words in [((16, 3, 17, 4, ACL_MEMCPY_HOST_TO_DEVICE), "width"),
                            ((1 << 20, 3, 3, 4, ACL_MEMCPY_HOST_TO_DEVICE), "past the end"),
                            ((16, 3, 3, 4, ACL_MEMCPY_DEVICE_TO_DEVICE), "not supported")]:
            with pytest.raises(AclError, match=words):
                session.call("aclrtMemcpy2d", buf.ptr, args[0], ffi.from_buffer(host), *args[1:])
    finally:
        session.close()
