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
# The test-only helpers that test modules import by name: the engine's test kernels and their
# loader (kernels/simlib.py), the plans of loose sizes (kernels/sized_plans.py), and the ABI checker
# (abi/abi_check.py).
sys.path[:0] = [str(TESTS / "kernels"), str(TESTS / "abi")]

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
