"""The package's shape for a family of ops: the runtime knows no op, each op is one module over
the shared op-call path (acl_fa/ops/opcall.py), the public faces are assembled in acl_fa/api.py."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import acl_fa
from acl_fa.ops import forward as attention, opcall, routed
from acl_fa.ops import problem as problem_module
from acl_fa.spec import problem as spec_problem
from acl_fa.runtime.errors import InvalidArgumentError
from acl_fa.reference.attention import attention_reference

PACKAGE = Path(acl_fa.__file__).parent
OP_MODULES = {"ops.forward", "ops.forward_v2", "ops.backward", "ops.backward_v2", "ops.decode", "ops.varlen", "api"}
LOWER_LAYERS = ["runtime/session", "runtime/tensor", "ops/opcall", "runtime/loader", "runtime/errors",
                "runtime/dtypes"]


def _imported_modules(path: Path) -> set:
    """Dotted names (under acl_fa) of the modules `path` imports, anywhere in the file (lazy
    imports included); `from X import name` also counts X.name, which may be a module."""
    here = list(path.relative_to(PACKAGE).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[:len(here) - (node.level - 1)] + ([node.module] if node.module else [])
        elif (node.module or "").startswith("acl_fa"):
            base = node.module.split(".")[1:]
        else:
            continue
        module = ".".join(".".join(base).split("."))
        names.add(module)
        names.update(f"{module}.{alias.name}".lstrip(".") for alias in node.names)
    return names


@pytest.mark.parametrize("module", LOWER_LAYERS)
def test_lower_layers_import_no_op(module):
    imports = _imported_modules(PACKAGE / f"{module}.py")
    assert not imports & OP_MODULES, f"{module}.py imports {imports & OP_MODULES}"


def test_lower_layers_name_no_op():
    for module in ("runtime/session", "runtime/tensor", "ops/opcall"):
        code = "\n".join(line for line in (PACKAGE / f"{module}.py").read_text().splitlines()
                         if not line.lstrip().startswith("#"))
        body = ast.get_docstring(ast.parse(code)) or ""
        assert "flash_attention" not in code.replace(body, ""), f"{module}.py names an op"


def test_public_faces_unchanged():
    assert acl_fa.Session is acl_fa.api.Session
    assert issubclass(acl_fa.Session, acl_fa.DeviceSession)
    assert not hasattr(acl_fa.DeviceSession, "flash_attention")
    assert acl_fa.flash_attention is routed.flash_attention  # the forward face, routed (docs/decode.md)
    for name in ("Problem", "make_problem", "problem_from_sizes"):
        assert hasattr(spec_problem, name), name
    assert hasattr(problem_module, "check_plan")
    for name in ("runner_for", "default_session"):
        assert hasattr(attention, name), name


class _LseOnly(opcall.Op):
    """A second op over the same path: the forward's aclnn entries, only lse read back. It
    shows what an op supplies -- and that nothing else is needed."""

    name = "lse_only"
    inputs = ("q", "k", "v")
    outputs = ("lse",)
    workspace_api = attention.FLASH_ATTENTION.workspace_api
    launch_api = attention.FLASH_ATTENTION.launch_api

    def buffers(self, problem):
        return attention.FLASH_ATTENTION.buffers(problem)

    def workspace_args(self, problem, tensors):
        return attention.FLASH_ATTENTION.workspace_args(problem, tensors)


def test_a_second_op_reuses_the_path(session):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 48, 32)).astype(np.float16) for _ in range(3))
    problem, q, k, v = attention.make_problem(q, k, v, causal=True)
    runner = opcall.runner_for(session, _LseOnly())
    assert runner is opcall.runner_for(session, _LseOnly())  # one runner per session and op
    assert runner is not attention.runner_for(session)
    (lse,) = runner.run(problem, q, k, v)
    out, lse_fa = session.flash_attention(q, k, v, causal=True, return_lse=True)
    np.testing.assert_array_equal(lse, lse_fa)
    _, ref_lse = attention_reference(q, k, v, causal=True)
    np.testing.assert_allclose(lse, ref_lse, atol=2e-3)
    with runner.lock:
        prepared = runner.prepare(problem)
        assert set(prepared.buffers) == {"q", "k", "v", "out", "lse"}
        assert prepared.bytes_by_role()["outputs"] == problem.batch * problem.num_heads * problem.seq_q * 4
        with pytest.raises(InvalidArgumentError, match="takes 3 inputs"):
            prepared.upload(q, k)
    runner.close()


def test_a_cached_call_checks_its_session_once_not_per_acl_call(session, monkeypatch):
    """A repeated op call (3 uploads, launch, synchronize, read: 6 ACL calls) registers in flight
    once and does its process and device checks at its start, not per ACL call: no getpid()
    system call (the process id is renewed at fork), one _InFlight, no aclrtSetDevice; the copy
    counters still count every copy."""
    from acl_fa.runtime import session as runtime

    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 32, 16)).astype(np.float16) for _ in range(3))
    expected = session.flash_attention(q, k, v)
    counts = {"getpid": 0, "in_flight": 0, "set_device": 0}
    real_getpid, real_init, real_call = runtime.os.getpid, runtime._InFlight.__init__, session.backend.call

    def getpid():
        counts["getpid"] += 1
        return real_getpid()

    def in_flight_init(self, *args):
        counts["in_flight"] += 1
        real_init(self, *args)

    def call(api, *args):
        counts["set_device"] += api == "aclrtSetDevice"
        return real_call(api, *args)

    monkeypatch.setattr(runtime.os, "getpid", getpid)
    monkeypatch.setattr(runtime._InFlight, "__init__", in_flight_init)
    monkeypatch.setattr(session.backend, "call", call)
    before = session.copy_counters()
    np.testing.assert_array_equal(session.flash_attention(q, k, v), expected)
    after = session.copy_counters()
    assert counts == {"getpid": 0, "in_flight": 1, "set_device": 0}
    assert after["h2d"]["calls"] - before["h2d"]["calls"] == 3
    assert after["h2d"]["bytes"] - before["h2d"]["bytes"] == 3 * q.nbytes
    assert after["d2h"]["calls"] - before["d2h"]["calls"] == 1


def test_cached_bytes_are_a_running_total_that_never_hashes_the_keys(monkeypatch):
    """A Ctrl-C landing in a cache key's Python __hash__ while the cache's values were iterated
    came out as KeyError: CPython's OrderedDict values iterator looks each key up with
    PyDict_GetItem, which swallows the exception (test_lifecycle's interrupt test failed so about
    once in ten runs). cached_bytes is a running total kept with the cache; it equals what the
    cached calls hold through new shapes, hits, evictions and clear, and reading it hashes nothing."""
    rng = np.random.default_rng(0)

    def qkv(s):
        return [rng.standard_normal((1, 2, s, 16)).astype(np.float16) for _ in range(3)]

    with acl_fa.Session() as session:
        session.set_cache_limits(shapes=2)
        runner = attention.runner_for(session)

        def held():
            return sum(p.device_bytes() for p in list(runner._cache.values()))

        for s in (16, 32, 16, 48, 64):  # new shapes, a hit, then evictions of the oldest
            session.flash_attention(*qkv(s))
            assert runner.cached_bytes() == held() > 0
        assert len(runner._cache) == 2

        def interrupted(self):
            raise KeyboardInterrupt
        monkeypatch.setattr(attention.Problem, "__hash__", interrupted)
        assert runner.cached_bytes() == runner._held_bytes  # no key is hashed
        monkeypatch.undo()

        session.clear_cache()
        assert runner.cached_bytes() == 0 == held()
