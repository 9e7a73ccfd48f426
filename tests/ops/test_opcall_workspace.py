"""OpRunner.prepare(workspace=...): a call run on the caller's workspace and on DeviceArrays for
every role holds no device memory in the op cache (what lets ring attention keep one workspace
for all its calls, acl_fa/parallel/ring.py); a workspace smaller than the call needs is refused before
the call is built, naming both sizes; OpRunner.discard drops the cached calls bound to given arrays."""
from __future__ import annotations

import numpy as np
import pytest

import acl_fa
from acl_fa.ops import forward as attention
from acl_fa.runtime.device_array import DeviceArray
from acl_fa.runtime.errors import InvalidArgumentError


def _arrays(session, seed=0):
    rng = np.random.default_rng(seed)
    host = [rng.standard_normal((1, 2, 64, 32)).astype(np.float16) for _ in range(3)]
    dev = [session.to_device(x) for x in host]
    out, lse = DeviceArray.empty(session, (1, 2, 64, 32), np.float16), DeviceArray.empty(session, (1, 2, 64), np.float32)
    return host, dev, out, lse


def test_a_call_on_the_callers_workspace_and_arrays_holds_nothing_in_the_cache():
    with acl_fa.Session() as session:
        host, (q, k, v), out, lse = _arrays(session)
        runner = attention.runner_for(session)
        problem, *_ = attention.make_problem(q, k, v, causal=True)
        need = runner.workspace_bytes(problem)
        assert need > 0
        workspace = DeviceArray.empty(session, (need,), np.uint8)
        free_before = session.mem_info()[0]
        with session.in_flight(), runner.lock:
            prepared = runner.prepare(problem, runner.bound_inputs((q, k, v)) | {"out": out, "lse": lse},
                                      workspace=workspace)
            assert session.mem_info()[0] == free_before  # nothing allocated for the call
            assert prepared.device_bytes() == 0 and runner.cached_bytes() == 0
            assert prepared.workspace is workspace.buffer and not prepared.owns_workspace
            runner.launch(prepared, runner.stream)
            runner.stream.synchronize()
        want_out, want_lse = acl_fa.flash_attention(*host, causal=True, return_lse=True, session=session)
        np.testing.assert_array_equal(out.numpy(), want_out)
        np.testing.assert_array_equal(lse.numpy(), want_lse)
        with runner.lock:
            runner.discard([workspace])
            assert all(p is not prepared for p in runner._cache.values())
        with session.in_flight(), runner.lock:  # cached again; dropped through a bound output this time
            again = runner.prepare(problem, runner.bound_inputs((q, k, v)) | {"out": out, "lse": lse},
                                   workspace=workspace)
            assert any(p is again for p in runner._cache.values())
            runner.discard([lse])
            assert all(p is not again for p in runner._cache.values())
        assert not workspace.closed  # the cache closed its executor and tensors, not the caller's memory
        workspace.close()


def test_a_workspace_too_small_is_refused_naming_both_sizes():
    with acl_fa.Session() as session:
        _, (q, k, v), out, lse = _arrays(session)
        runner = attention.runner_for(session)
        problem, *_ = attention.make_problem(q, k, v)
        need = runner.workspace_bytes(problem)
        small = DeviceArray.empty(session, (need - 32,), np.uint8)
        with session.in_flight(), runner.lock, pytest.raises(InvalidArgumentError) as err:
            runner.prepare(problem, runner.bound_inputs((q, k, v)) | {"out": out, "lse": lse}, workspace=small)
        assert f"the workspace given is {need - 32} B; this call needs {need} B" in str(err.value)
        assert runner.cached_bytes() == 0 and not runner._cache


def test_a_cached_call_never_launches_on_a_workspace_the_caller_closed():
    """The cache resolves its own buffers' addresses once per problem, but a caller's workspace is
    the caller's to close: its address is looked up at every launch, so a closed one is refused
    (ClosedObjectError) instead of handing the kernel memory that may belong to someone else."""
    from acl_fa.runtime.errors import ClosedObjectError

    with acl_fa.Session() as session:
        _, (q, k, v), out, lse = _arrays(session)
        runner = attention.runner_for(session)
        problem, *_ = attention.make_problem(q, k, v, causal=True)
        workspace = DeviceArray.empty(session, (runner.workspace_bytes(problem),), np.uint8)
        with session.in_flight(), runner.lock:
            prepared = runner.prepare(problem, runner.bound_inputs((q, k, v)) | {"out": out, "lse": lse},
                                      workspace=workspace)
            runner.launch(prepared, runner.stream)
            runner.stream.synchronize()
            workspace.close()
            with pytest.raises(ClosedObjectError):
                runner.launch(prepared, runner.stream)
