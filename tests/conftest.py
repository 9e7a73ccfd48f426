"""Shared fixtures. The suite runs on backend "sim" unless ACL_FA_BACKEND says otherwise;
libraries come from ACL_FA_SIM_LIB_DIR when set (a dev build's lib/), else from the
installed package. Tests that need a real NPU carry @pytest.mark.npu and are skipped, with
the reason shown in the summary, when none is usable."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("ACL_FA_BACKEND", "sim")

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# The checkout's cffi declarations. An installed package's acl_fa/cdefs name headers of the source
# tree (sim/include, native/) that only a checkout has; the installed package itself uses the cffi
# module generated from them at build time. Tests that read declarations read these.
CDEFS = REPO / "acl_fa" / "cdefs"
# The test-only helpers that test modules import by name: the engine's test kernels and their
# loader (kernels/simlib.py), the plans of loose sizes (kernels/sized_plans.py), and the ABI checker
# (abi/abi_check.py). Appended last: the forward's test module (ops/flash_attention/
# test_flash_attention.py), whose cases and input makers tests of other parts reuse, so that those
# collect on their own too (`pytest tests/sim`), not only after tests/ops/flash_attention.
sys.path[:0] = [str(TESTS / "kernels"), str(TESTS / "abi")]
sys.path.append(str(TESTS / "ops" / "flash_attention"))

# Tests are grouped by the part of the tree they hold to account (tests/<concern>/...); each
# test carries its group's marker, so `pytest -m ops` or `-m "not parallel"` selects by concern.
CONCERNS = {
    "runtime": "the driver's runtime layer: loader, sessions, memory, errors, ABI (acl_fa/runtime)",
    "sim": "the CPU simulator itself: engine rules, counters, timing model, HCCL (sim/)",
    "spec": "what a call means: options, band rule, Philox (acl_fa/spec)",
    "reference": "the float64 references (acl_fa/reference)",
    "ops": "the operators end to end: op_host, op_kernel, the op-call path and the Python faces",
    "parallel": "sequence parallelism over HCCL (acl_fa/parallel)",
    "cli": "the command line and its jobs (acl_fa/cli, acl_fa/jobs)",
    "package": "packaging, build.sh, the README and docs, bench scripts",
}

import acl_fa  # noqa: E402  (after the backend default is set)
from acl_fa.runtime.session import live_counts  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "npu: needs a real Ascend NPU (skipped without one)")
    for name, what in CONCERNS.items():
        config.addinivalue_line("markers", f"{name}: {what}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        concern = Path(str(item.fspath)).resolve().relative_to(TESTS).parts[0]
        if concern in CONCERNS:
            item.add_marker(getattr(pytest.mark, concern))
    if os.environ.get("ACL_FA_BACKEND") == "npu":
        return
    skip = pytest.mark.skip(reason="needs a real Ascend NPU: run with ACL_FA_BACKEND=npu on one")
    for item in items:
        if "npu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def backend():
    return acl_fa.get_backend()


@pytest.fixture
def session(backend):
    """A fresh Session; after the test, every object it made must be gone."""
    before = live_counts(backend) if backend.name == "sim" else None
    with acl_fa.Session(backend=backend.name) as s:
        yield s
    if before is not None:
        assert live_counts(backend) == before, "the test leaked simulator objects"


@pytest.fixture
def sim_only(backend):
    if backend.name != "sim":
        pytest.skip("needs the simulator's extension functions (backend sim)")


@pytest.fixture
def faults(backend, sim_only):
    """faults("aclrtMalloc:1") arms the simulator's fault injection; cleared afterwards."""

    def arm(spec: str):
        backend.call("aclfaSimSetFaults", spec.encode())

    yield arm
    backend.call("aclfaSimSetFaults", b"")


# What a child of its own on the simulator's devices must not inherit: a device count (libhccl
# sets up 8), an injected fault, the rank of an SPMD launch.
NOT_INHERITED_BY_SIM_CHILDREN = ("ACL_FA_SIM_DEVICE_COUNT", "ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE",
                                 "ACL_FA_DEVICE", "ACL_FA_ROOT_INFO")


def sim_devices_env(**env) -> dict:
    """This process's environment for such a child: backend sim, `env` added (as strings)."""
    child_env = {**os.environ, "ACL_FA_BACKEND": "sim", **{k: str(v) for k, v in env.items()}}
    for name in NOT_INHERITED_BY_SIM_CHILDREN:
        child_env.pop(name, None)
    return child_env


def run_on_sim_devices(args, timeout: float = 300, argv=(), **env) -> str:
    """Runs a child on the simulator's devices (sim_devices_env(**env)) from the repository root:
    ``python -c args *argv`` when `args` is a string (dedented), else ``python *args``. A failing
    child fails the test with its output; returns its stdout."""
    child_env = sim_devices_env(**env)
    argv = ["-c", textwrap.dedent(args), *map(str, argv)] if isinstance(args, str) else list(args)
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=child_env,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def run_checks_on_sim_devices(script: str, oks: int, timeout: float = 600, **env) -> str:
    """run_on_sim_devices(script) for a child printing one "ok ..." line per check it passed:
    all `oks` of them must be there. Returns the child's stdout."""
    out = run_on_sim_devices(script, timeout=timeout, **env)
    assert out.count("ok ") == oks, out
    return out


def run_cli_on_sim_devices(*args: str) -> tuple[str, dict]:
    """`acl-fa run *args` in a child on the simulator's devices, as text and with --json:
    (the text, the JSON report)."""
    base = ["-m", "acl_fa", "run", *args]
    return run_on_sim_devices(base), json.loads(run_on_sim_devices(base + ["--json"]))


def run_python(code: str, timeout: float = 300, **env) -> dict:
    """Runs `code` in a fresh interpreter (same sys.path and env plus `env`); the code prints
    one JSON line last, returned parsed. A failing child fails the test with its stderr, and a
    child still running after `timeout` seconds (a hang) is killed and fails it too."""
    child_env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    # The child imports the acl_fa this process imported (installed or source tree), and runs
    # outside the repository so that its current directory cannot shadow it.
    package_root = str(Path(acl_fa.__file__).resolve().parents[1])
    child_env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in sys.path if p])
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=child_env, timeout=timeout, cwd=tempfile.gettempdir())
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"child printed nothing; stderr:\n{proc.stderr}"
    result = json.loads(lines[-1])
    result["_stderr"] = proc.stderr
    return result


def assert_reference_gradients(grads, g, q, k, v, eps: float = 1e-6, **kw) -> None:
    """(dq, dk, dv) = `grads` equal central finite differences of the loss
    sum(attention_reference(q, k, v, **kw)[0] * g) (float64 inputs, changed in place and restored);
    with kw["sinks"] (a float64 array), `grads` ends with dsinks, checked the same way."""
    import numpy as np

    def loss():
        return float((acl_fa.attention_reference(q, k, v, **kw)[0] * g).sum())

    tensors = (q, k, v) + ((kw["sinks"],) if kw.get("sinks") is not None else ())
    assert len(grads) == len(tensors)
    for x, grad in zip(tensors, grads):
        assert grad.shape == x.shape
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + eps
            up = loss()
            x[idx] = old - eps
            down = loss()
            x[idx] = old
            fd[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
