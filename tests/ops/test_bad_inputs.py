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
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from conftest import CDEFS, run_python

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
    ("d-over-256", arr(1, 2, 32, 272), arr(1, 2, 48, 272), arr(1, 2, 48, 272), {}, InvalidArgumentError,
     ["D=272", "<= 256"]),
    ("d-over-256", arr(1, 1, 4, 272), arr(1, 1, 4, 272), arr(1, 1, 4, 272), {}, InvalidArgumentError,
     ["272", "256"]),
    ("float32-with-float16", arr(1, 2, 32, 16, dtype=np.float32), KV, KV, {}, InvalidTypeError,
     ["share one dtype", "float32", "float16"]),
    ("float64-all", *(arr(1, 1, 8, 16, dtype=np.float64),) * 3, {}, InvalidTypeError,
     ["q has dtype float64", "q.astype(np.float32)"]),
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
    ("block-n-over-limit", Q, KV, KV, {"block_n": 2048}, InvalidArgumentError, ["block_n", "1024"]),
    ("block-m-over-limit", Q, KV, KV, {"block_m": 4096}, InvalidArgumentError, ["block_m"]),
    ("unknown-backend", Q, KV, KV, {"backend": "cuda"}, InvalidArgumentError, ["backend", "npu", "sim"]),
    ("device-out-of-range", Q, KV, KV, {"device": 8}, InvalidArgumentError, ["device=8", "out of range"]),
    ("device-str", Q, KV, KV, {"device": "0"}, InvalidTypeError, ["device", "integer"]),
    ("device-beyond-int32", Q, KV, KV, {"device": 2**40}, InvalidArgumentError, ["device=1099511627776", "out of range"]),
    ("causal-int", Q, KV, KV, {"causal": 1}, InvalidTypeError, ["causal", "bool"]),
    ("scale-bool", Q, KV, KV, {"scale": True}, InvalidTypeError, ["scale", "real number"]),
    ("block-m-float", Q, KV, KV, {"block_m": 32.0}, InvalidTypeError, ["block_m", "integer"]),
    ("block-m-beyond-uint32", Q, KV, KV, {"block_m": 2**40}, InvalidArgumentError, ["block_m", "<= 4294967295"]),
    ("block-n-beyond-int64", Q, KV, KV, {"block_n": 2**70}, InvalidArgumentError, ["block_n", "<= 4294967295"]),
    ("num-heads-beyond-int64", Q, KV, KV, {"num_heads": 2**70}, InvalidArgumentError, ["num_heads", "<="]),
    ("return-lse-str", Q, KV, KV, {"return_lse": "yes"}, InvalidTypeError, ["return_lse", "bool"]),
    ("return-lse-int", Q, KV, KV, {"return_lse": 1}, InvalidTypeError, ["return_lse", "bool"]),
    ("masked-q", np.ma.masked_array(Q, mask=Q > 0), KV, KV, {}, InvalidTypeError, ["q", "MaskedArray", "mask"]),
    ("masked-v-no-mask", Q, KV, np.ma.masked_array(KV), {}, InvalidTypeError, ["v", "MaskedArray"]),
]

# Values equal to valid ones (1 == 1.0 == True) but of a refused type, and the valid value each
# one equals: refused in a fresh process and after the valid call alike.
EQUAL_BUT_REFUSED = [
    ({"causal": 1}, {"causal": True}, "causal"),
    ({"scale": True}, {"scale": 1.0}, "scale"),
    ({"scale": 1}, None, None),  # an int scale is a real number: accepted
    ({"num_heads": 2.0}, {"num_heads": 2}, "num_heads"),
    ({"num_kv_heads": 2.0}, {"num_kv_heads": 2}, "num_kv_heads"),
    ({"block_m": 32.0}, {"block_m": 32}, "block_m"),
    ({"block_n": np.float64(32)}, {"block_n": 32}, "block_n"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_refused_before_device_work(backend, case):
    _, q, k, v, options, exc_type, words = case
    before = acl_fa.runtime.session.live_counts(backend) if backend.name == "sim" else None
    with pytest.raises(exc_type) as info:
        acl_fa.flash_attention(q, k, v, **options)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"
    if before is not None and options.get("backend") != "cuda":
        after = acl_fa.runtime.session.live_counts(backend)
        assert after["deviceAllocations"] <= before["deviceAllocations"] or before["initCount"] == 0


@pytest.mark.parametrize("refused, valid, name", EQUAL_BUT_REFUSED, ids=[str(c[0]) for c in EQUAL_BUT_REFUSED])
def test_equal_valued_option_of_a_refused_type_is_refused_after_the_valid_call(session, refused, valid, name):
    q, k, v = (np.ones(x.shape, F16) for x in (Q, KV, KV))
    if valid is None:  # the accepted spelling gives the same result as the float one
        np.testing.assert_array_equal(session.flash_attention(q, k, v, **refused),
                                      session.flash_attention(q, k, v, scale=1.0))
        return
    for attempt in range(2):  # fresh, then after an equal-valued valid call filled the caches
        with pytest.raises(InvalidTypeError, match=name):
            session.flash_attention(q, k, v, **refused)
        session.flash_attention(q, k, v, **valid)


def test_session_device_beyond_the_host(backend):
    before = acl_fa.runtime.session.live_counts(backend) if backend.name == "sim" else None
    for device, words in ((8, "device=8 is out of range: this host has 8 devices"),
                          (2**40, "device=1099511627776 is out of range")):
        with pytest.raises(InvalidArgumentError, match=words):
            acl_fa.Session(device=device, backend=backend.name)
    if before is not None:
        assert acl_fa.runtime.session.live_counts(backend) == before


def test_table_is_large_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("argv,words", [
    (["run", "--seq", "64", "--heads", "3", "--kv-heads", "2", "--iters", "1", "--warmup", "0"], ["multiple"]),
    (["run", "--seq", "64", "--head-dim", "20", "--iters", "1"], ["D=20"]),
    (["run", "--seq", "64", "--block-m", "24"], ["block_m=24"]),
    (["run", "--seq", "0"], ["--seq"]),
    (["run", "--layout", "TND"], ["--layout"]),
    (["run", "--seq", "64", "--device", "99999999999"], ["device=99999999999 is out of range"]),
    (["run", "--seq", "64", "--block-m", "99999999999"], ["block_m", "4294967295"]),
    (["plan", "--block-m", "99999999999"], ["block_m must be < 2^32"]),
    (["plan", "--batch", str(2**31), "--heads", str(2**31), "--seq", "256", "--block-m", "64"],
     ["2147483648 * 2147483648 * 4 work items exceeds 2^32"]),
    (["plan", "--batch", str(2**64)], ["batch must be < 2^32"]),
])
def test_cli_refuses_bad_input(argv, words):
    result = CliRunner().invoke(main, argv)
    assert result.exit_code in (1, 2) and isinstance(result.exception, SystemExit), repr(result.exception)
    text = result.output
    assert "Traceback" not in text
    for word in words:
        assert word in text, text


# Every ACL/aclnn call of one Session's life on the flash_attention path, in order: open, a first
# call (builds buffers, tensors, executor, workspace, stream), a cached repeat call, close.
# (phase, api); a point "api:N" is the Nth call of api counted from the Session's creation.
# test_fault_points_are_every_call_of_the_path checks this list against a record of the calls.
PATH_CALLS = (
    [("open", "aclInit"), ("open", "aclrtGetDeviceCount"), ("open", "aclrtSetDevice")]
    + [("first", "aclrtGetMemInfo")]                                                       # room for it
    + [("first", api) for _ in range(5) for api in ("aclrtMalloc", "aclCreateTensor")]  # q k v out lse
    + [("first", api) for api in ("aclnnFlashAttentionGetWorkspaceSize", "aclSetAclOpExecutorRepeatable",
                                  "aclrtMalloc")]                                          # workspace
    + [("first", "aclrtMemcpy")] * 3 + [("first", "aclrtCreateStream"), ("first", "aclnnFlashAttention"),
                                       ("first", "aclrtSynchronizeStreamWithTimeout")] + [("first", "aclrtMemcpy")] * 2
    + [("repeat", "aclrtMemcpy")] * 3
    + [("repeat", "aclnnFlashAttention"), ("repeat", "aclrtSynchronizeStreamWithTimeout")]
    + [("repeat", "aclrtMemcpy")] * 2
    + [("close", "aclrtSynchronizeStreamWithTimeout")] * 2                  # drain the default and op streams
    + [("close", "aclDestroyAclOpExecutor")] + [("close", "aclDestroyTensor")] * 5
    + [("close", "aclrtSynchronizeStream"), ("close", "aclrtDestroyStream")] + [("close", "aclrtFree")] * 6
    + [("close", "aclrtResetDevice"), ("close", "aclFinalize")]
)


def _points(calls):
    seen: dict = {}
    points = []
    for phase, api in calls:
        seen[api] = seen.get(api, 0) + 1
        points.append((phase, f"{api}:{seen[api]}"))
    return points


FAULT_POINTS = _points(PATH_CALLS)

# The code each API's injected fault returns in the simulator (the code CANN gives for that
# failure class); aclCreateTensor returns NULL, which the checked call reports as 561103.
INJECTED_CODES = {
    "aclInit": 500001, "aclrtSetDevice": 507033, "aclrtMalloc": 207001, "aclCreateTensor": 561103,
    "aclrtGetMemInfo": 507000, "aclrtGetDeviceCount": 207004,
    "aclnnFlashAttentionGetWorkspaceSize": 561000, "aclSetAclOpExecutorRepeatable": 561000,
    "aclrtCreateStream": 207008, "aclrtMemcpy": 507899, "aclnnFlashAttention": 361001,
    "aclrtSynchronizeStream": 507015, "aclrtSynchronizeStreamWithTimeout": 507015, "aclDestroyAclOpExecutor": 561000, "aclDestroyTensor": 561000,
    "aclrtDestroyStream": 507000, "aclrtFree": 207002, "aclrtResetDevice": 507000, "aclFinalize": 500001,
}

# What a failed release at close leaves: the one object whose release failed (its handle is
# not retried -- a retried free could hit an address the runtime has handed out again).
# aclFinalize leaves ACL initialized; the next Session's close finalizes it.
RELEASE_LEFTOVERS = {
    "aclDestroyAclOpExecutor": {"executors": 1}, "aclDestroyTensor": {"tensors": 1},
    "aclrtDestroyStream": {"streams": 1}, "aclrtFree": {"deviceAllocations": 1}, "aclFinalize": {"initCount": 1},
}

# Runs the life of one Session once cleanly while recording every checked call, then once per
# fault point with that point armed; reports what each run raised and left behind.
FAULT_SCRIPT = r"""
    import json, pathlib, re
    import numpy as np, acl_fa
    from acl_fa.runtime.cdef_reader import read_cdefs
    from acl_fa.runtime.errors import AclError
    from acl_fa.runtime.session import live_counts
    backend = acl_fa.get_backend("sim")
    real_call = backend.call
    record, phase = [], ["none"]
    def recording_call(api, *args):
        if not api.startswith("aclfaSim"):  # the simulator's own extensions are not on the path
            record.append((phase[0], api))
        return real_call(api, *args)
    backend.call = recording_call
    def arm(spec):
        real_call("aclfaSimSetFaults", spec.encode())
    def counts():
        return {k: v for k, v in live_counts(backend).items() if k != "deviceBytes"}
    def delta(before):
        now = counts()
        return {k: now[k] - before[k] for k in now if now[k] != before[k]}
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(np.float16)
               for shape in [(1, 2, 40, 16), (1, 1, 56, 16), (1, 1, 56, 16)])
    def attend(session):
        return session.flash_attention(q, k, v, causal=True, return_lse=True)
    def bits(result):
        return [a.view(np.uint8).tobytes().hex() for a in result]
    def life(out):
        session = None
        phase[0] = "open"
        session = acl_fa.Session(backend="sim")
        out["session"] = session
        phase[0] = "first"
        first = attend(session)
        phase[0] = "repeat"
        repeat = attend(session)
        phase[0] = "close"
        session.close()
        phase[0] = "none"
        return first, repeat

    clean = {}
    first, repeat = life(clean)
    expected = bits(first)
    calls = list(record)
    result = {"calls": calls, "repeat_identical": bits(repeat) == expected, "points": {}}

    for n, (where, api) in enumerate(calls):
        spec = api + ":" + str(1 + sum(1 for _, a in calls[:n] if a == api))
        before = counts()
        out = {}
        arm(spec)
        try:
            life(out)
        except AclError as exc:
            out.update(raised=exc.api, code=exc.code, name=exc.name, message=exc.message, phase=phase[0])
        arm("")
        session = out.pop("session", None)
        if session is not None and not session.closed:  # fault inside a call: the session keeps working
            out["recovered"] = bits(attend(session)) == expected
            session.close()
        out["left"] = delta(before)
        with acl_fa.Session(backend="sim") as fresh:
            out["fresh"] = bits(attend(fresh)) == expected
        result["points"][spec] = out

    # No call of the path escapes the record: with every declared function armed one call past
    # the recorded count, the whole life runs cleanly (a hidden call would strike the fault).
    declared = sorted(set(re.findall(r"\b(acl\w+)\s*\(", read_cdefs(pathlib.Path(CDEFS_DIR)))))
    spec = ",".join(f"{api}:{1 + sum(1 for _, a in calls if a == api)}" for api in declared
                    if not api.startswith("aclfaSim"))
    before = counts()
    arm(spec)
    try:
        life({})
        result["beyond"] = "clean"
    except AclError as exc:
        result["beyond"] = str(exc)
    arm("")
    result["beyond_left"] = delta(before)
    result["declared"] = len(declared)
    print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def fault_run(backend):
    if backend.name != "sim":
        pytest.skip("needs the simulator's fault injection (backend sim)")
    return run_python(FAULT_SCRIPT.replace("CDEFS_DIR", repr(str(CDEFS))), ACL_FA_BACKEND="sim")


def test_fault_points_are_every_call_of_the_path(fault_run):
    """The fault points are exactly the calls the driver makes (recorded through the checked
    call path), and the simulator sees no call of any declared API beyond them."""
    recorded = [tuple(call) for call in fault_run["calls"]]
    assert recorded == PATH_CALLS, "the flash_attention path's calls changed: update PATH_CALLS"
    assert fault_run["repeat_identical"]
    assert fault_run["beyond"] == "clean", fault_run["beyond"]
    assert fault_run["beyond_left"] == {}
    assert fault_run["declared"] >= 40, "the cdefs were not read"
    assert len(FAULT_POINTS) == 50


@pytest.mark.parametrize("phase,spec", FAULT_POINTS, ids=[f"{p}-{s}" for p, s in FAULT_POINTS])
def test_fault_on_the_path_raises_and_leaks_nothing(fault_run, phase, spec):
    """Failing the call raises AclError with the injected code and the runtime's message in the
    phase that made it; the Session keeps working (faults inside a call); after close nothing
    is left but, for a failed release, the one object whose release failed; a new Session works."""
    api = spec.split(":")[0]
    out = fault_run["points"][spec]
    assert out.get("raised") == api, out
    assert out["phase"] == phase
    assert out["code"] == INJECTED_CODES[api] and out["name"] != "UNKNOWN", out
    assert f"injected fault (fault spec entry {spec})" in out["message"], out["message"]
    if phase in ("first", "repeat"):
        assert out["recovered"], "the session gave a different result after the fault"
    expected_left = RELEASE_LEFTOVERS.get(api, {}) if phase == "close" else {}
    assert out["left"] == expected_left, out["left"]
    assert out["fresh"]


@pytest.mark.parametrize("seqlens", [2**40, -(2**31) - 1, 2**70, np.int64(2**40)], ids=["2**40", "below", "2**70",
                                                                                      "np.int64"])
def test_decode_cache_seqlens_beyond_int32_is_named(session, seqlens):
    """An integer cache_seqlens that int32 cannot hold: InvalidArgumentError naming cache_seqlens
    and the int32 range (not numpy's OverflowError), before any device work."""
    q, cache = arr(1, 1, 2, 64), arr(1, 128, 2, 64)
    with pytest.raises(InvalidArgumentError, match=r"cache_seqlens=-?\d+ must fit int32 \(-2147483648 .. 2147483647\)"):
        session.flash_attention_with_kvcache(q, cache, cache, cache_seqlens=seqlens)


@pytest.mark.parametrize("read_only", ["k_cache", "v_cache"])
def test_decode_append_checks_both_caches_before_writing(session, read_only):
    """Appending k/v to numpy caches when one of them is read-only: refused naming it, and the
    other cache is left exactly as it was (no half-done append)."""
    rng = np.random.default_rng(6)
    caches = {"k_cache": np.zeros((1, 64, 2, 64), F16), "v_cache": np.zeros((1, 64, 2, 64), F16)}
    caches[read_only].flags.writeable = False
    k, v = (rng.standard_normal((1, 3, 2, 64)).astype(F16) for _ in range(2))
    with pytest.raises(InvalidArgumentError, match=f"{read_only} must be a writable C-contiguous array"):
        session.flash_attention_with_kvcache(arr(1, 1, 2, 64), caches["k_cache"], caches["v_cache"], k=k, v=v,
                                             cache_seqlens=5)
    for name, cache in caches.items():
        assert not cache.any(), f"{name} was written by a refused append"
