"""Device memory on the op-call path: the check against aclrtGetMemInfo before device work, the
per-op cache capped in problems and bytes, eviction when a new shape does not fit beside the
cached ones, one retry after an out-of-memory allocation, Session.clear_cache()."""
from __future__ import annotations

import re

import numpy as np
import pytest

import acl_fa
from acl_fa.ops import forward as attention, opcall
from acl_fa.runtime.errors import AclMemoryError, InsufficientMemoryError, InvalidArgumentError, InvalidTypeError
from conftest import run_python


def _inputs(seq, heads=2, dim=64):
    q = np.random.default_rng(seq).standard_normal((1, heads, seq, dim)).astype(np.float16)
    return q, q.copy(), q.copy()


def test_needs_more_than_free_is_refused_before_device_work(sim_only):
    """96 MiB of q, k, v on a 64 MiB device: InsufficientMemoryError (a MemoryError) saying what
    is needed and what is free, with no allocation attempted; the session still works."""
    result = run_python("""
        import json
        import numpy as np, acl_fa
        q = np.zeros((1, 8, 16384, 128), np.float16)       # 32 MiB each
        with acl_fa.Session(backend="sim") as s:
            calls = []
            real = s.backend.call
            s.backend.call = lambda api, *args: (calls.append(api), real(api, *args))[1]
            before = s.live_counts()["deviceAllocations"]
            try:
                s.flash_attention(q, q, q)
            except acl_fa.InsufficientMemoryError as exc:
                error = dict(text=str(exc), memory=isinstance(exc, MemoryError), where=exc.where,
                             needed=exc.needed, free=exc.free)
            after = s.live_counts()["deviceAllocations"]
            mallocs = calls.count("aclrtMalloc")
            small = np.ones((1, 1, 16, 16), np.float16)
            works = bool(np.isfinite(s.flash_attention(small, small, small).astype(np.float32)).all())
        print(json.dumps(dict(error=error, mallocs=mallocs, leaked=after - before,
                              works=works)))
    """, ACL_FA_SIM_HBM_BYTES=64 << 20)
    error = result["error"]
    assert error["memory"] and error["where"] == "device"
    assert error["needed"] > error["free"] == 64 << 20
    assert "flash_attention needs 198.5 MiB of device memory" in error["text"], error  # workspace 70.0 MiB
    assert "the device has 64.0 MiB free of 64.0 MiB" in error["text"], error
    assert result["mallocs"] == 0 and result["leaked"] == 0 and result["works"]


@pytest.mark.parametrize("limits", [{}, {"nbytes": 1 << 40}], ids=["default-limits", "no-byte-cap"])
def test_shape_that_fits_alone_works_beside_four_cached(sim_only, limits):
    """Each small shape holds ~16.2 MiB (mostly the 16 MiB system workspace); three cached ones
    leave ~11 MiB of a 60 MiB device free, less than a new one needs: the cache gives way."""
    result = run_python(f"""
        import json
        import numpy as np, acl_fa
        from acl_fa.ops import forward as attention
        with acl_fa.Session(backend="sim") as s:
            s.set_cache_limits(**{limits!r})
            for seq in (32, 48, 64, 80, 96):
                q = np.ones((1, 2, seq, 64), np.float16)
                out = s.flash_attention(q, q, q)
            runner = attention.runner_for(s)
            print(json.dumps(dict(ok=bool(np.isfinite(out.astype(np.float32)).all()),
                                  cached=len(runner._cache), held=runner.cached_bytes(),
                                  free=s.mem_info()[0])))
    """, ACL_FA_SIM_HBM_BYTES=60 << 20)
    assert result["ok"] and 1 <= result["cached"] < 5
    assert result["held"] <= 60 << 20


def test_out_of_memory_allocation_evicts_and_retries_once(session, faults):
    runner = attention.runner_for(session)
    for seq in (32, 48):
        session.flash_attention(*_inputs(seq))
    assert len(runner._cache) == 2
    faults("aclrtMalloc:1")  # the new shape's first allocation fails for memory
    q, k, v = _inputs(64)
    out = session.flash_attention(q, k, v)
    np.testing.assert_array_equal(out, session.flash_attention(q, k, v))
    assert list(runner._cache) == [attention.make_problem(q, k, v)[0]]
    # a failure again after the retry is the caller's: AclMemoryError, nothing kept
    session.flash_attention(*_inputs(32))
    before = session.live_counts()
    faults("aclrtMalloc:1,aclrtMalloc:6")
    with pytest.raises(AclMemoryError) as info:
        session.flash_attention(*_inputs(80))
    assert info.value.code == 207001 and not runner._cache
    assert session.live_counts()["deviceAllocations"] < before["deviceAllocations"]


def test_cache_caps_in_shapes_and_bytes(session):
    runner = attention.runner_for(session)
    session.set_cache_limits(shapes=3)
    for seq in (32, 48, 64, 80):
        session.flash_attention(*_inputs(seq))
    assert len(runner._cache) == 3
    one = next(iter(runner._cache.values())).device_bytes()
    session.set_cache_limits(nbytes=int(2.5 * one))
    for seq in (96, 112):
        session.flash_attention(*_inputs(seq))
    assert len(runner._cache) == 2 and runner.cached_bytes() <= int(2.5 * one)
    session.set_cache_limits(nbytes=0)  # the problem just built always stays
    session.flash_attention(*_inputs(128))
    assert len(runner._cache) == 1


def test_clear_cache_releases_device_state(session):
    baseline = session.live_counts()
    q, k, v = _inputs(48)
    first = session.flash_attention(q, k, v)
    assert session.live_counts()["deviceAllocations"] > baseline["deviceAllocations"]
    session.clear_cache()
    counts = session.live_counts()
    assert counts["deviceAllocations"] == baseline["deviceAllocations"]
    assert counts["tensors"] == baseline["tensors"] and counts["executors"] == baseline["executors"]
    np.testing.assert_array_equal(session.flash_attention(q, k, v), first)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"shapes": 0}, InvalidArgumentError, "shapes must be >= 1"),
    ({"shapes": 2.0}, InvalidTypeError, "shapes must be an integer"),
    ({"nbytes": -1}, InvalidArgumentError, "nbytes must be >= 0"),
    ({"nbytes": True}, InvalidTypeError, "nbytes must be an integer"),
])
def test_cache_limits_are_validated(session, kwargs, error, words):
    with pytest.raises(error, match=words):
        session.set_cache_limits(**kwargs)


def test_insufficient_memory_error_pickles():
    import pickle

    exc = pickle.loads(pickle.dumps(InsufficientMemoryError("needs 2 GiB", "host", 2 << 30, 1 << 30)))
    assert isinstance(exc, MemoryError) and (exc.where, exc.needed, exc.free) == ("host", 2 << 30, 1 << 30)
    assert str(exc) == "needs 2 GiB"


# ---- acl-fa plan / run: device and host memory ---------------------------------------------

def test_plan_shows_the_device_memory_of_a_call():
    from click.testing import CliRunner

    from acl_fa.cli import main
    from sized_plans import plan

    p = plan(seq=1000, seq_kv=3000, batch=2, heads=8, kv_heads=2, head_dim=64, dtype="bfloat16")
    q, kv = 2 * 8 * 1000 * 64 * 2, 2 * 2 * 3000 * 64 * 2
    assert p.tensor_bytes == 2 * q + 2 * kv + 2 * 8 * 1000 * 4
    assert p.device_bytes == p.tensor_bytes + p.workspace_bytes
    args = ["plan", "--seq", "1000", "--seq-kv", "3000", "--batch", "2", "--heads", "8", "--kv-heads", "2",
            "--head-dim", "64", "--dtype", "bfloat16"]
    text = CliRunner().invoke(main, args).output
    assert f"memory    {p.device_bytes} B" in text and f"q, k, v, out, lse {p.tensor_bytes} B" in text
    import json
    data = json.loads(CliRunner().invoke(main, args + ["--json"]).output)
    data = data[0] if isinstance(data, list) else data
    assert (data["device_bytes"], data["tensor_bytes"]) == (p.device_bytes, p.tensor_bytes)


def test_available_bytes_reads_meminfo(tmp_path, monkeypatch):
    from acl_fa.runtime import hostmem

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683656 kB\nMemFree: 1 kB\nMemAvailable:   1000 kB\n")
    monkeypatch.setattr(hostmem, "MEMINFO", str(meminfo))
    assert hostmem.available_bytes() == 1000 * 1024
    with pytest.raises(InsufficientMemoryError, match=r"x: 1.0 MiB of host memory needed, this host has 1000.0 KiB"):
        hostmem.check_host_memory(1 << 20, "x")
    hostmem.check_host_memory(1000 * 1024, "x")


def test_run_beyond_host_memory_is_one_line(sim_only, monkeypatch):
    """acl-fa run --seq 3000000 (137.7 GiB of host arrays): one line naming host memory, before
    numpy allocates anything."""
    from click.testing import CliRunner

    from acl_fa.runtime import hostmem
    from acl_fa.cli import main

    monkeypatch.setattr(hostmem, "available_bytes", lambda: 16 << 30)
    result = CliRunner().invoke(main, ["run", "--seq", "3000000"])
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if line.startswith("Error")]
    assert lines == ["Error: the random inputs and outputs of B=1 N=32 Nkv=32 Sq=3000000 Skv=3000000 D=128 "
                     "float16: 137.7 GiB of host memory needed, this host has 16.0 GiB available (MemAvailable)"]
    assert "Traceback" not in result.output


def test_backward_counts_its_workspace_before_device_work(sim_only):
    """The backward's inputs and gradients take ~1.3 MiB and its workspace 26-35 MiB (16 MiB of
    system workspace, the dQ accumulator, row norms, per-core panel slots: docs/backward.md): on a 12 MiB device the pre-check refuses
    it with InsufficientMemoryError, no aclrtMalloc made -- dense (V1 and V2 entries) and varlen."""
    result = run_python("""
        import json
        import numpy as np, acl_fa
        rng = np.random.default_rng(1)
        q = rng.standard_normal((1, 2, 512, 64)).astype(np.float16)
        out, lse = acl_fa.attention_reference(q, q, q, causal=True)
        out, lse = out.astype(np.float16), lse.astype(np.float32)
        t = np.ascontiguousarray(q[0].transpose(1, 0, 2))             # [512, 2, 64] TND
        cu = np.array([0, 100, 512], np.int32)
        t_out = np.ascontiguousarray(out[0].transpose(1, 0, 2))
        t_lse = np.concatenate([acl_fa.attention_reference(t[a:b][None].transpose(0, 2, 1, 3),
                                                           t[a:b][None].transpose(0, 2, 1, 3),
                                                           t[a:b][None].transpose(0, 2, 1, 3), causal=True)[1][0]
                                for a, b in ((0, 100), (100, 512))], axis=1).astype(np.float32)
        calls = {
            "backward": lambda s: s.flash_attention_backward(q, q, q, q, out, lse, causal=True),
            "backward-window": lambda s: s.flash_attention_backward(q, q, q, q, out, lse, causal=True,
                                                                    window=(100, 0)),
            "varlen-backward": lambda s: s.flash_attention_varlen_backward(t, t, t, t, t_out, t_lse, cu, cu,
                                                                           causal=True),
        }
        got = {}
        with acl_fa.Session(backend="sim") as s:
            names = []
            real = s.backend.call
            s.backend.call = lambda api, *args: (names.append(api), real(api, *args))[1]
            for name, call in calls.items():
                del names[:]
                try:
                    call(s)
                    got[name] = "no error"
                except acl_fa.InsufficientMemoryError as exc:
                    got[name] = dict(text=str(exc), mallocs=names.count("aclrtMalloc"))
                except Exception as exc:
                    got[name] = repr(exc)
        print(json.dumps(got))
    """, ACL_FA_SIM_HBM_BYTES=12 << 20)
    for name in ("backward", "backward-window", "varlen-backward"):
        error = result[name]
        assert isinstance(error, dict), (name, error)
        assert error["mallocs"] == 0, (name, error)
        # the backward's smallest tiling (docs/memory.md) named after the workspace it still needs
        counted = re.search(r"workspace (\d+\.\d) MiB( at its smallest tiling: [^;]*)?\); the device has 12\.0 MiB free",
                            error["text"])
        assert counted and 16.0 < float(counted[1]) < 40.0, (name, error)  # the 16 MiB system part and more


def test_decode_refused_for_memory_appends_nothing_to_numpy_caches(sim_only):
    """A decode call with k/v to append into numpy caches, refused by the memory check (16 MiB of
    caches on a 12 MiB device): InsufficientMemoryError, and both caches as they were."""
    result = run_python("""
        import json
        import numpy as np, acl_fa
        k_cache, v_cache = (np.zeros((1, 4096, 8, 128), np.float16) for _ in range(2))
        k = v = np.ones((1, 2, 8, 128), np.float16)
        q = np.zeros((1, 1, 8, 128), np.float16)
        with acl_fa.Session(backend="sim") as s:
            try:
                s.flash_attention_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=10)
                error = "no error"
            except acl_fa.InsufficientMemoryError as exc:
                error = str(exc)
        print(json.dumps(dict(error=error, written=bool(k_cache.any() or v_cache.any()))))
    """, ACL_FA_SIM_HBM_BYTES=12 << 20)
    assert "the device has 12.0 MiB free" in result["error"], result
    assert not result["written"], result
