"""Every bad input is refused before any device work, with the documented exception type and a
message naming the argument and the limit; faults on the flash_attention path surface as
AclError and leave nothing behind."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main
from acl_fa.errors import AclError, InvalidArgumentError, InvalidTypeError
from conftest import run_python

F16 = np.float16


def arr(*shape, dtype=F16):
    return np.zeros(shape, dtype=dtype)


Q = arr(1, 2, 32, 16)
KV = arr(1, 2, 48, 16)

# (id, q, k, v, options, exception type, words the message must contain)
CASES = [
    ("q-rank3-bnsd", arr(2, 32, 16), KV, KV, {}, InvalidArgumentError, ["q", "rank 4", "BNSD"]),
    ("k-rank5", Q, arr(1, 1, 2, 48, 16), KV, {}, InvalidArgumentError, ["k", "rank 4"]),
    ("v-rank2", Q, KV, arr(48, 16), {}, InvalidArgumentError, ["v", "rank 4"]),
    ("bsh-rank4", Q, KV, KV, {"layout": "BSH", "num_heads": 2}, InvalidArgumentError, ["rank 3", "BSH"]),
    ("batch-differs", Q, arr(2, 2, 48, 16), arr(2, 2, 48, 16), {}, InvalidArgumentError, ["batch"]),
    ("head-dim-differs", Q, arr(1, 2, 48, 32), arr(1, 2, 48, 32), {}, InvalidArgumentError, ["head dim"]),
    ("kv-shapes-differ", Q, KV, arr(1, 2, 40, 16), {}, InvalidArgumentError, ["same shape"]),
    ("heads-not-divisible", arr(1, 3, 32, 16), KV, KV, {}, InvalidArgumentError, ["multiple", "3", "2"]),
    ("d-not-multiple-16", arr(1, 2, 32, 20), arr(1, 2, 48, 20), arr(1, 2, 48, 20), {}, InvalidArgumentError,
     ["D=20", "multiple of 16"]),
    ("d-over-256", arr(1, 1, 4, 272), arr(1, 1, 4, 272), arr(1, 1, 4, 272), {}, InvalidArgumentError,
     ["272", "256"]),
    ("float32", arr(1, 2, 32, 16, dtype=np.float32), KV, KV, {}, InvalidTypeError, ["float32", "float16", "bfloat16"]),
    ("float64-all", *(arr(1, 1, 8, 16, dtype=np.float64),) * 3, {}, InvalidTypeError, ["float64", "supported"]),
    ("int32", arr(1, 1, 8, 16, dtype=np.int32), arr(1, 1, 8, 16), arr(1, 1, 8, 16), {}, InvalidTypeError, ["int32"]),
    ("mixed-dtypes", Q, KV.astype(ml_dtypes.bfloat16), KV, {}, InvalidTypeError, ["share one dtype"]),
    ("empty-batch", arr(0, 2, 32, 16), arr(0, 2, 48, 16), arr(0, 2, 48, 16), {}, InvalidArgumentError, ["empty"]),
    ("sq-zero", arr(1, 2, 0, 16), KV, KV, {}, InvalidArgumentError, ["q", "empty"]),
    ("skv-zero", Q, arr(1, 2, 0, 16), arr(1, 2, 0, 16), {}, InvalidArgumentError, ["k", "empty"]),
    ("string-input", "abc", KV, KV, {}, InvalidTypeError, ["q", "numpy array"]),
    ("none-input", Q, None, KV, {}, InvalidTypeError, ["k", "numpy array"]),
    ("object-array", np.array([[1, "a"]], dtype=object), KV, KV, {}, InvalidTypeError, ["q", "object"]),
    ("bad-layout", Q, KV, KV, {"layout": "SBH"}, InvalidArgumentError, ["layout", "BNSD", "BSND", "BSH"]),
    ("layout-not-str", Q, KV, KV, {"layout": 3}, InvalidArgumentError, ["layout"]),
    ("bsh-no-heads", arr(1, 32, 32), arr(1, 48, 32), arr(1, 48, 32), {"layout": "BSH"}, InvalidArgumentError,
     ["BSH", "num_heads"]),
    ("bsh-hidden-not-divisible", arr(1, 32, 48), arr(1, 48, 48), arr(1, 48, 48),
     {"layout": "BSH", "num_heads": 5}, InvalidArgumentError, ["48", "num_heads=5"]),
    ("bsh-kv-hidden", arr(1, 32, 64), arr(1, 48, 40), arr(1, 48, 40), {"layout": "BSH", "num_heads": 2},
     InvalidArgumentError, ["40", "head dim"]),
    ("num-heads-mismatch", Q, KV, KV, {"num_heads": 4}, InvalidArgumentError, ["num_heads=4"]),
    ("num-kv-heads-mismatch", Q, KV, KV, {"num_kv_heads": 1}, InvalidArgumentError, ["num_kv_heads=1"]),
    ("num-heads-zero", Q, KV, KV, {"num_heads": 0}, InvalidArgumentError, ["num_heads", ">= 1"]),
    ("num-heads-float", Q, KV, KV, {"num_heads": 2.0}, InvalidTypeError, ["num_heads", "integer"]),
    ("scale-zero", Q, KV, KV, {"scale": 0.0}, InvalidArgumentError, ["scale", "> 0"]),
    ("scale-negative", Q, KV, KV, {"scale": -1.0}, InvalidArgumentError, ["scale", "> 0"]),
    ("scale-nan", Q, KV, KV, {"scale": float("nan")}, InvalidArgumentError, ["scale", "finite"]),
    ("scale-inf", Q, KV, KV, {"scale": float("inf")}, InvalidArgumentError, ["scale", "finite"]),
    ("scale-str", Q, KV, KV, {"scale": "0.1"}, InvalidTypeError, ["scale", "real number"]),
    ("causal-str", Q, KV, KV, {"causal": "yes"}, InvalidTypeError, ["causal", "bool"]),
    ("block-m-not-16", Q, KV, KV, {"block_m": 24}, InvalidArgumentError, ["block_m=24", "multiple of 16"]),
    ("block-n-small", Q, KV, KV, {"block_n": 8}, InvalidArgumentError, ["block_n", ">= 16"]),
    ("block-m-negative", Q, KV, KV, {"block_m": -16}, InvalidArgumentError, ["block_m", ">= 16"]),
    ("block-n-bool", Q, KV, KV, {"block_n": True}, InvalidTypeError, ["block_n", "integer"]),
    ("block-too-big-for-ub", arr(1, 1, 512, 256), arr(1, 1, 512, 256), arr(1, 1, 512, 256),
     {"block_m": 256, "block_n": 512}, InvalidArgumentError, ["UB", "196352"]),
    ("block-m-over-limit", Q, KV, KV, {"block_m": 4096}, InvalidArgumentError, ["block_m"]),
    ("unknown-backend", Q, KV, KV, {"backend": "cuda"}, InvalidArgumentError, ["backend", "npu", "sim"]),
    ("device-out-of-range", Q, KV, KV, {"device": 7}, InvalidArgumentError, ["device=7", "out of range"]),
    ("device-str", Q, KV, KV, {"device": "0"}, InvalidTypeError, ["device", "integer"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_refused_before_device_work(backend, case):
    _, q, k, v, options, exc_type, words = case
    before = acl_fa.runtime.live_counts(backend) if backend.name == "sim" else None
    with pytest.raises(exc_type) as info:
        acl_fa.flash_attention(q, k, v, **options)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
    if before is not None and options.get("backend") != "cuda":
        after = acl_fa.runtime.live_counts(backend)
        assert after["deviceAllocations"] <= before["deviceAllocations"] or before["initCount"] == 0


def test_table_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("argv,words", [
    (["run", "--seq", "64", "--heads", "3", "--kv-heads", "2", "--iters", "1", "--warmup", "0"], ["multiple"]),
    (["run", "--seq", "64", "--head-dim", "20", "--iters", "1"], ["D=20"]),
    (["run", "--seq", "64", "--block-m", "24"], ["block_m=24"]),
    (["run", "--seq", "0"], ["--seq"]),
    (["run", "--layout", "TND"], ["--layout"]),
])
def test_cli_refuses_bad_input(argv, words):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code != 0
    text = result.output + (str(result.exception) if result.exception else "")
    for word in words:
        assert word in text, text


def test_out_of_memory_is_acl_memory_error_and_leaks_nothing(sim_only):
    """Inputs beyond the simulated HBM (64 MiB here): AclMemoryError 207001 with the runtime's
    message, nothing left allocated, and the session still works."""
    result = run_python("""
        import numpy as np, acl_fa
        from acl_fa.errors import AclMemoryError
        q = np.zeros((1, 8, 16384, 128), np.float16)       # 32 MiB each, 96 MiB for q, k, v
        with acl_fa.Session(backend="sim") as s:
            before = s.live_counts()["deviceAllocations"]
            try:
                s.flash_attention(q, q, q)
            except AclMemoryError as exc:
                assert exc.code == 207001 and isinstance(exc, MemoryError), exc
                assert "207001" in str(exc) and exc.message, exc
            else:
                raise SystemExit("no AclMemoryError")
            assert s.live_counts()["deviceAllocations"] == before
            small = np.ones((1, 1, 16, 16), np.float16)
            assert np.isfinite(s.flash_attention(small, small, small).astype(np.float32)).all()
        print('{"ok": true}')
    """, ACL_FA_SIM_HBM_BYTES=64 << 20)
    assert result["ok"]


# The ACL/aclnn call sites on the flash_attention path, in the order a first call makes them.
FAULT_POINTS = ["aclrtMalloc:1", "aclrtMalloc:3", "aclrtMalloc:6", "aclCreateTensor:1", "aclCreateTensor:5",
                "aclnnFlashAttentionGetWorkspaceSize:1", "aclSetAclOpExecutorRepeatable:1",
                "aclrtCreateStream:1", "aclrtMemcpy:1", "aclrtMemcpy:3", "aclnnFlashAttention:1",
                "aclrtSynchronizeStream:1", "aclrtMemcpy:4"]


@pytest.mark.parametrize("spec", FAULT_POINTS)
def test_fault_on_the_path_raises_and_leaks_nothing(backend, sim_only, faults, spec):
    q = np.random.default_rng(0).standard_normal((1, 2, 40, 16)).astype(F16)
    baseline = acl_fa.runtime.live_counts(backend)
    with acl_fa.Session(backend="sim") as session:
        faults(spec)
        with pytest.raises(AclError) as info:
            session.flash_attention(q, q, q, causal=True)
        assert info.value.api == spec.split(":")[0]
        assert info.value.message, "the runtime's message is carried"
        faults("")
        # The session keeps working after the fault.
        out = session.flash_attention(q, q, q, causal=True)
        ref, _ = acl_fa.attention_reference(q, q, q, causal=True)
        assert np.abs(out.astype(np.float64) - ref).max() < 5e-3
    assert acl_fa.runtime.live_counts(backend) == baseline
