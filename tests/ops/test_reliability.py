"""Reliability of flash_attention (issue 8): threads and Sessions give the serial results bit for
bit; a 1,000-call soak keeps RSS and live objects flat; the simulator's worker-thread count does
not change a bit; an oversized block forced past validation is stopped by the UB capacity rule;
numerics hold over random small problems (hypothesis), large magnitudes and masked rows."""
from __future__ import annotations

import pathlib
import sys
import threading

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import acl_fa
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.spec.layouts import to_bnsd
from acl_fa.runtime.session import live_counts

from conftest import run_python

import simlib  # noqa: E402

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)

# Mixed tiny problems: (q shape, kv shape, options). Five shapes, one more than a Session caches
# (opcall.CACHED_SHAPES), so the threads also evict and rebuild device state.
PROBLEMS = [
    ((1, 2, 40, 16), (1, 2, 56, 16), dict(causal=True)),
    ((2, 4, 33, 32), (2, 2, 33, 32), dict()),                                      # GQA
    ((1, 17, 3, 16), (1, 70, 1, 16), dict(layout="BSND", causal=True)),            # MQA, Sq < Skv
    ((1, 24, 64), (1, 24, 64), dict(layout="BSH", num_heads=2, scale=0.5)),
    ((1, 1, 65, 48), (1, 1, 9, 48), dict(causal=True)),                            # masked rows
]


def _inputs(index: int, dtype=F16):
    q_shape, kv_shape, options = PROBLEMS[index]
    rng = np.random.default_rng(index)
    q, k, v = (rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (q_shape, kv_shape, kv_shape))
    return q, k, v, options


def _bits(out, lse) -> bytes:
    return out.view(np.uint16).tobytes() + lse.view(np.uint32).tobytes()


@pytest.fixture(scope="module")
def serial():
    """The bits of every problem, computed one call at a time on a Session of its own."""
    with acl_fa.Session(backend=acl_fa.get_backend().name) as session:
        results = []
        for i in range(len(PROBLEMS)):
            q, k, v, options = _inputs(i)
            results.append(_bits(*session.flash_attention(q, k, v, return_lse=True, **options)))
    return results


THREADS, CALLS = 4, 50


def _hammer(get_session, serial, acl_errors=None) -> list:
    """THREADS threads x CALLS calls, thread t starting at problem t; returns mismatches/errors.
    With `acl_errors` (a list), an AclError of a call is appended there and the thread goes on."""
    problems = [_inputs(i) for i in range(len(PROBLEMS))]
    failures: list = []
    start = threading.Barrier(THREADS)

    def work(t):
        try:
            with get_session(t) as session:
                start.wait()
                for c in range(CALLS):
                    i = (t + c) % len(PROBLEMS)
                    q, k, v, options = problems[i]
                    try:
                        got = _bits(*session.flash_attention(q, k, v, return_lse=True, **options))
                    except acl_fa.AclError as exc:
                        if acl_errors is None:
                            raise
                        acl_errors.append(exc)
                        continue
                    if got != serial[i]:
                        failures.append(f"thread {t} call {c} problem {i}: bits differ from the serial run")
        except BaseException as exc:  # reported by the main thread
            failures.append(f"thread {t}: {exc!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


class _Borrowed:
    """A shared Session lent to a thread (`with` does not close it)."""

    def __init__(self, session):
        self.session = session

    def __enter__(self):
        return self.session

    def __exit__(self, *exc_info):
        return False


def test_threads_on_one_session_match_serial_bits(session, serial):
    failures = _hammer(lambda t: _Borrowed(session), serial)
    assert not failures, "\n".join(failures[:5])


def test_threads_on_separate_sessions_match_serial_bits(backend, serial):
    before = live_counts(backend) if backend.name == "sim" else None
    failures = _hammer(lambda t: acl_fa.Session(backend=backend.name), serial)
    assert not failures, "\n".join(failures[:5])
    if before is not None:
        assert live_counts(backend) == before, "the sessions left objects behind"


# (fault spec, the entry that surfaces). The 9th aclrtMalloc is inside the second shape's build,
# with one shape cached: out of memory there empties the cache and builds once more, so a lone
# fault is absorbed and a second one on the retry's first allocation surfaces.
@pytest.mark.parametrize("spec, surfaces", [
    ("aclnnFlashAttention:77", "aclnnFlashAttention:77"), ("aclrtMemcpy:150", "aclrtMemcpy:150"),
    ("aclrtMalloc:9,aclrtMalloc:10", "aclrtMalloc:10"), ("aclrtMalloc:9", None),
    ("aclrtSynchronizeStreamWithTimeout:3", "aclrtSynchronizeStreamWithTimeout:3")])
def test_fault_amid_threads_fails_one_call_only(backend, faults, serial, spec, surfaces):
    """A fault striking one call while 4 threads share a Session: that call raises AclError, every
    other call returns the serial bits, and closing leaves nothing behind."""
    before = live_counts(backend)
    with acl_fa.Session(backend="sim") as session:
        errors: list = []
        faults(spec)
        failures = _hammer(lambda t: _Borrowed(session), serial, acl_errors=errors)
        faults("")
    assert not failures, "\n".join(failures[:5])
    if surfaces is None:
        assert errors == []
    else:
        assert [e.api for e in errors] == [surfaces.split(":")[0]], errors
        assert f"fault spec entry {surfaces}" in errors[0].message
    assert live_counts(backend) == before


def test_soak_1000_calls_rss_and_live_objects_flat(sim_only):
    """1,000 calls after a 100-call warm-up, in two halves of 500. Each call makes 33 KiB of
    fresh output arrays, so a per-call host leak of them would add >= 16 MiB in each half. The
    allocator's arenas and numpy's caches may still settle in the first half (seen: 4.3 MB on a
    loaded machine), so the first half may grow by up to 8 MiB and the second, where a leak grows
    as much as in the first, by less than 4 MiB. Device objects must not grow at all."""
    result = run_python("""
        import json, numpy as np, acl_fa
        def rss_bytes():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, 2, 128, 64)).astype(np.float16) for _ in range(3))
        with acl_fa.Session(backend="sim") as s:
            for _ in range(100):
                first = s.flash_attention(q, k, v, causal=True, return_lse=True)
            live_before, rss_before = s.live_counts(), rss_bytes()
            same = True
            rss = [rss_before]
            for _ in range(2):
                for _ in range(500):
                    out, lse = s.flash_attention(q, k, v, causal=True, return_lse=True)
                    same = same and np.array_equal(out.view(np.uint16), first[0].view(np.uint16))
                rss.append(rss_bytes())
            live_after = s.live_counts()
        left = {k: n for k, n in acl_fa.runtime.session.live_counts(acl_fa.get_backend("sim")).items() if n}
        print(json.dumps(dict(growth=[b - a for a, b in zip(rss, rss[1:])], live_before=live_before,
                              live_after=live_after, left=left, same=same)))
    """, ACL_FA_BACKEND="sim")
    assert result["same"], "outputs changed during the soak"
    assert result["live_after"] == result["live_before"]
    assert result["left"] == {}, "objects left after close"
    first_half, second_half = result["growth"]
    assert first_half < 8 << 20, f"RSS grew by {first_half} bytes over calls 1-500"
    assert second_half < 4 << 20, f"RSS grew by {second_half} bytes over calls 501-1,000"


THREAD_SCRIPT = """
    import hashlib, json, ml_dtypes, numpy as np, acl_fa
    rng = np.random.default_rng(5)
    cases = [((2, 4, 200, 64), (2, 2, 333, 64), dict(causal=True)),
             ((1, 3, 97, 128), (1, 1, 97, 128), dict(block_m=32, block_n=64)),
             ((1, 130, 2, 32), (1, 70, 2, 32), dict(layout="BSND", causal=True))]
    digest = hashlib.sha256()
    with acl_fa.Session(backend="sim") as s:
        for dtype in (np.float16, ml_dtypes.bfloat16):
            for q_shape, kv_shape, options in cases:
                q, k, v = (rng.standard_normal(x, dtype=np.float32).astype(dtype)
                           for x in (q_shape, kv_shape, kv_shape))
                out, lse = s.flash_attention(q, k, v, return_lse=True, **options)
                digest.update(out.view(np.uint16).tobytes() + lse.view(np.uint32).tobytes())
    print(json.dumps({"digest": digest.hexdigest()}))
"""


def test_outputs_bit_identical_across_simulator_thread_counts(sim_only):
    digests = {n: run_python(THREAD_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS=n)["digest"]
               for n in (1, 2, 3)}
    assert len(set(digests.values())) == 1, digests


def _first_acl_error(**env) -> dict:
    """One tiny flash_attention call in a child with `env`: {"raised": api or None, "code", "message"}."""
    return run_python("""
        import json, numpy as np, acl_fa
        q = np.ones((1, 1, 16, 16), np.float16)
        with acl_fa.Session(backend="sim") as s:
            try:
                s.flash_attention(q, q, q)
                print(json.dumps({"raised": None}))
            except acl_fa.AclError as exc:
                print(json.dumps({"raised": exc.api, "code": exc.code, "message": exc.message}))
    """, **env)


def test_bad_thread_count_is_refused_by_name(sim_only):
    result = _first_acl_error(ACL_FA_BACKEND="sim", ACL_FA_SIM_THREADS="zero")
    assert result["raised"] == "aclrtSynchronizeStreamWithTimeout" and result["code"] == 100000
    assert 'ACL_FA_SIM_THREADS="zero" must be an integer from 1 to 1024' in result["message"]


# The kernel's UB buffers need about m * (6n + 12d) bytes for m = blockM / 2 rows: 1024 query rows
# per block (m = 512, n = 128, d = 64: 786432 B of score, prob, pv, out and acc tiles alone) are
# four times the 196352 B of the simulated Ascend910B2's UB.
UB_SCRIPT = """
    import json, os, numpy as np, acl_fa
    from acl_fa.sim_stats import last_launch
    backend = acl_fa.get_backend("sim")
    def left():
        return {k: n for k, n in acl_fa.runtime.session.live_counts(backend).items() if n}
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 300, 64)).astype(np.float16) for _ in range(3))
    out = {}
    with acl_fa.Session(backend="sim") as s:
        try:
            s.flash_attention(q, k, v)
        except acl_fa.AclError as exc:
            out.update(api=exc.api, code=exc.code, name=exc.name, message=exc.message, text=str(exc))
            out["gm_write_bytes"] = last_launch(backend)["gm_write_bytes"]
    out["left"] = left()
    # The same process with the hook off: the op works (the failure was the block, not the state).
    del os.environ["ACL_FA_SIM_TEST_FORCE_BLOCK_M"]
    with acl_fa.Session(backend="sim") as s:
        result, lse = s.flash_attention(q, k, v, return_lse=True)
        ref, _ = acl_fa.attention_reference(q, k, v)
        out["after_error"] = float(np.abs(result.astype(np.float64) - ref).max())
    out["final"] = left()
    print(json.dumps(out))
"""


@pytest.fixture
def hook_library(sim_only):
    """The ACL_FA_SIM_TEST_FORCE_BLOCK_M hook lives in a test-only library (tests/sim_hooks/), never
    installed with the package: built here on first use, and named to the child by ACL_FA_SIM_TEST_HOOKS."""
    return str(simlib.hook_library())


def test_oversized_block_forced_past_validation_is_stopped_by_the_ub_rule(hook_library):
    """ACL_FA_SIM_TEST_FORCE_BLOCK_M (a test-only hook of the simulator's op API, outside
    op_host/op_kernel) rewrites the tiling after TilingFunc; the launch must fail in Init, before
    the kernel writes a byte of GM: at the first TPipe::InitBuffer past UB capacity, or -- cores
    start in a varying order, as on the chip -- on a core whose workspace slice the forced
    block pushes past the workspace allocation."""
    result = run_python(UB_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_TEST_FORCE_BLOCK_M=1024,
                        ACL_FA_SIM_TEST_HOOKS=hook_library)
    assert result.get("code") == 507015 and result["name"] == "ACL_ERROR_RT_AICORE_EXCEPTION", result
    assert result["api"] == "aclrtSynchronizeStreamWithTimeout"  # kernel faults surface at the sync, as on the chip
    message = result["message"]
    ub_rule = ("rule 'UB capacity'", "violated on AIV", "in TPipe::InitBuffer", "196352")
    gm_rule = ("rule 'GM allocation'", "violated on AIV", "in GlobalTensor::SetGlobalBuffer", "runs past the end")
    assert all(w in message for w in ub_rule) or all(w in message for w in gm_rule), message
    assert result["gm_write_bytes"] == 0, "the kernel wrote GM before the UB rule stopped it"
    assert result["left"] == {} and result["final"] == {}
    assert result["after_error"] < 5e-3


def test_forced_block_that_fits_runs_correctly(hook_library):
    """Control for the test above: the hook itself keeps the tiling consistent (a forced block
    that fits gives the right answer), so the failure there is the block's size alone."""
    result = run_python("""
        import json, numpy as np, acl_fa
        from acl_fa.sim_stats import last_launch
        rng = np.random.default_rng(1)
        q, k, v = (rng.standard_normal((1, 8, 300, 64)).astype(np.float16) for _ in range(3))
        from sized_plans import plan
        rng = np.random.default_rng(1)
        q, k, v = (rng.standard_normal((1, 8, 300, 64)).astype(np.float16) for _ in range(3))
        chosen = plan(batch=1, heads=8, kv_heads=8, seq=300, seq_kv=300, head_dim=64, dtype="float16",
                      layout="BNSD", causal=True, block_m=0, block_n=0, soc="Ascend910B2")
        forced = plan(batch=1, heads=8, kv_heads=8, seq=300, seq_kv=300, head_dim=64, dtype="float16",
                      layout="BNSD", causal=True, block_m=32, block_n=chosen.block_n, soc="Ascend910B2")
        with acl_fa.Session(backend="sim") as s:
            out = s.flash_attention(q, k, v, causal=True)
            ub = last_launch(s.backend)["ub_high_water"]
        ref, _ = acl_fa.attention_reference(q, k, v, causal=True)
        budget = {line.name: line.bytes for line in forced.budget}["UB total per AIV"]
        print(json.dumps({"error": float(np.abs(out.astype(np.float64) - ref).max()), "ub": ub,
                          "chosen_block_m": chosen.block_m, "forced_budget": budget}))
    """, ACL_FA_BACKEND="sim", ACL_FA_SIM_TEST_FORCE_BLOCK_M=32, ACL_FA_SIM_TEST_HOOKS=hook_library)
    assert result["chosen_block_m"] != 32, "pick a problem whose tiling chooses another block_m"
    assert result["ub"] == result["forced_budget"], "the kernel did not run with the forced block"
    assert result["error"] < 5e-3


def test_forced_block_hook_refuses_a_bad_value(hook_library):
    result = _first_acl_error(ACL_FA_BACKEND="sim", ACL_FA_SIM_TEST_FORCE_BLOCK_M=100, ACL_FA_SIM_TEST_HOOKS=hook_library)
    assert result["raised"] == "aclnnFlashAttentionGetWorkspaceSize" and result["code"] == 161002
    assert 'ACL_FA_SIM_TEST_FORCE_BLOCK_M="100" must be a multiple of 16' in result["message"]


# ---- numerics ----------------------------------------------------------------------------------

def _layout_shapes(layout, b, n, nkv, sq, skv, d):
    if layout == "BNSD":
        return (b, n, sq, d), (b, nkv, skv, d)
    if layout == "BSND":
        return (b, sq, n, d), (b, skv, nkv, d)
    return (b, sq, n * d), (b, skv, nkv * d)


@st.composite
def problems(draw):
    nkv = draw(st.integers(1, 2))
    return dict(b=draw(st.integers(1, 2)), n=nkv * draw(st.integers(1, 3)), nkv=nkv,
                sq=draw(st.integers(1, 80)), skv=draw(st.integers(1, 80)), d=draw(st.sampled_from([16, 32, 48, 64])),
                dtype=draw(st.sampled_from([F16, BF16])), layout=draw(st.sampled_from(["BNSD", "BSND", "BSH"])),
                causal=draw(st.booleans()), seed=draw(st.integers(0, 2**32 - 1)))


@settings(max_examples=40, deadline=None)
@given(p=problems())
def test_random_problems_match_the_reference(backend, p):
    """Accuracy by acl_fa.reference.accuracy's rule (<= 2x a same-precision naive attention, with a floor);
    rows that see no key give 0 and LSE -inf; a second run gives the same bits."""
    b, n, nkv, sq, skv, d, dtype, layout, causal = (p[key] for key in
                                                     ("b", "n", "nkv", "sq", "skv", "d", "dtype", "layout", "causal"))
    rng = np.random.default_rng(p["seed"])
    q_shape, kv_shape = _layout_shapes(layout, b, n, nkv, sq, skv, d)
    q, k, v = (rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in (q_shape, kv_shape, kv_shape))
    options = dict(causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv)
    with acl_fa.Session(backend=backend.name) as session:
        out, lse = session.flash_attention(q, k, v, return_lse=True, **options)
        again, lse_again = session.flash_attention(q, k, v, return_lse=True, **options)
    assert _bits(out, lse) == _bits(again, lse_again), "two runs differ"
    heads = list(range(n))
    kwargs = dict(scale=1.0 / np.sqrt(d), heads=heads, **options)
    ref, ref_lse = acl_fa.attention_reference(q, k, v, **kwargs)
    naive = naive_same_precision(q, k, v, dtype, **kwargs)
    acc = check_accuracy(to_bnsd(out, layout, n).astype(np.float64), lse, to_bnsd(ref, layout, n), ref_lse, naive,
                         "bfloat16" if dtype == BF16 else "float16", heads)
    assert acc.ok, f"max error {acc.max_error:.3g} > tolerance {acc.tolerance:.3g} (naive {acc.naive_error:.3g})"
    blind = max(0, sq - skv) if causal else 0  # rows i with i + Skv - Sq < 0 see no key
    out_bnsd = to_bnsd(out, layout, n).astype(np.float32)
    assert np.all(out_bnsd[:, :, :blind] == 0)
    assert np.all(np.isneginf(lse[:, :, :blind]))
    assert np.all(np.isfinite(lse[:, :, blind:]))
    assert acc.lse_max_error < 1e-3, f"LSE error {acc.lse_max_error}"


@settings(max_examples=15, deadline=None)
@given(sq=st.integers(1, 96), skv=st.integers(1, 96), causal=st.booleans(),
       scale=st.floats(0.5, 8.0), magnitude=st.floats(1e3, 6e4), seed=st.integers(0, 2**32 - 1))
def test_large_fp16_magnitudes_stay_finite_and_accurate(backend, sq, skv, causal, scale, magnitude, seed):
    """fp16 inputs up to 6e4 with large scales: a naive fp16 attention overflows its scores, the
    kernel's fp32 softmax must not. Bound: 4 units of fp16 roundoff at the output's magnitude."""
    rng = np.random.default_rng(seed)
    q = np.clip(rng.standard_normal((1, 2, sq, 32)) * magnitude / 8, -6e4, 6e4).astype(F16)
    k = np.clip(rng.standard_normal((1, 2, skv, 32)) * magnitude / 8, -6e4, 6e4).astype(F16)
    v = rng.uniform(-magnitude, magnitude, (1, 2, skv, 32)).astype(F16)
    with acl_fa.Session(backend=backend.name) as session:
        out, lse = session.flash_attention(q, k, v, scale=scale, causal=causal, return_lse=True)
    ref, ref_lse = acl_fa.attention_reference(q, k, v, scale=scale, causal=causal)
    seen = np.isfinite(ref_lse)
    assert np.all(np.isfinite(out.astype(np.float32)))
    assert np.array_equal(np.isneginf(lse), ~seen)
    error = np.abs(out.astype(np.float64) - ref).max()
    bound = 4 * 2.0 ** -10 * max(np.abs(ref).max(), 2.0 ** -14)
    assert error <= bound, f"max error {error:.4g} > {bound:.4g}"
    # LSE: fp32 rounding of each score (a D-term dot product of exact fp16 products) plus that
    # of the log-sum-exp itself.
    dot_bound = scale * np.einsum("bhsd,bhtd->bhst", np.abs(q.astype(np.float64)), np.abs(k.astype(np.float64)))
    lse_bound = (32 + 2) * 2.0 ** -24 * dot_bound.max(axis=-1) + 2.0 ** -20 * np.abs(np.where(seen, ref_lse, 0)) + 1e-5
    assert np.all(np.abs(lse[seen] - ref_lse[seen]) <= lse_bound[seen])
