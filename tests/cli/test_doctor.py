"""`acl-fa doctor` through click's CliRunner, and in a fresh interpreter for load failures."""
from __future__ import annotations


import pytest
from click.testing import CliRunner

from acl_fa.cli import main

from conftest import run_python


@pytest.fixture
def sim(backend):
    if backend.name != "sim":
        pytest.skip("reports the simulator")
    return backend


def test_doctor_reports_the_simulator_and_where_it_came_from(sim):
    result = CliRunner().invoke(main, ["doctor", "--backend", "sim"],
                                env={"ACL_FA_SIM_SOC": "Ascend910B2", "ASCEND_RT_VISIBLE_DEVICES": "0"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "  backend: sim\n" in out
    assert f"  runtime: {sim.runtime_path}\n" in out
    assert f"  nnopbase: {sim.nnopbase_path}\n" in out
    assert f"{sim.runtime_path}: loaded" in out  # in the list of paths tried
    assert "  device count: 8\n" in out  # the simulator's 8 devices, as the README says
    assert "  SoC: Ascend910B2\n" in out
    assert "GiB free of" in out
    assert "  simulated chip: Ascend910B2: 24 AIC / 48 AIV" in out
    assert "  ACL_FA_SIM_SOC: Ascend910B2\n" in out and "  ASCEND_RT_VISIBLE_DEVICES: 0\n" in out
    assert "version: ACL 1." in out


def test_doctor_reports_a_bad_device_without_crashing(sim):
    result = CliRunner().invoke(main, ["doctor", "--backend", "sim", "--device", "8"])
    assert result.exit_code == 0, result.output
    assert "session: failed: device=8 is out of range: this host has 8 devices" in result.output


def test_doctor_explains_a_backend_that_does_not_load(tmp_path):
    missing = tmp_path / "no-libs"
    result = run_python("""
        import json
        from click.testing import CliRunner
        from acl_fa.cli import main
        result = CliRunner().invoke(main, ["doctor"])
        print(json.dumps({"code": result.exit_code, "output": result.output}))
    """, ACL_FA_BACKEND="sim", ACL_FA_SIM_LIB_DIR=missing)
    assert result["code"] == 1
    out = result["output"]
    assert "  requested: sim\n" in out
    assert "error: backend sim: no loadable runtime" in out
    assert f"    runtime: {missing / 'libacl_rt.so'}: not found\n" in out
    assert f"    runtime: {missing / 'libascendcl.so'}: not found\n" in out
    assert f"  ACL_FA_SIM_LIB_DIR: {missing}\n" in out
