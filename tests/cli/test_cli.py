"""The command line's consistency: option spellings, environment variables, error lines,
--version, output shapes, nothing on stderr but what is meant (click's CliRunner)."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main


def invoke(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def test_layout_and_dtype_any_case(sim_only):
    a = invoke("plan", "--seq", "128", "--layout", "bsnd", "--dtype", "BFloat16", "--json")
    b = invoke("plan", "--seq", "128", "--layout", "BSND", "--dtype", "bfloat16", "--json")
    assert a.exit_code == b.exit_code == 0, a.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    assert json.loads(a.stdout)[0]["layout"] == "BSND"


def test_run_device_out_of_range_says_what_python_says(sim_only):
    result = invoke("run", "--seq", "64", "--device", "9")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: device=9 is out of range: this host has 8 devices"]
    with pytest.raises(acl_fa.InvalidArgumentError, match="device=9 is out of range: this host has 8 devices"):
        acl_fa.Session(device=9)


@pytest.mark.parametrize("short, chip", [("ascend910b", "Ascend910B1"), ("ASCEND910_93", "Ascend910_93")])
def test_plan_soc_takes_the_short_names_it_prints(short, chip):
    result = invoke("plan", "--seq", "256", "--soc", short)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"chip      {chip} ({short.lower()})")
    bad = invoke("plan", "--soc", "ascend999")
    assert bad.exit_code == 1 and "short names: ascend910b" in bad.stderr


def test_plan_json_is_always_a_list():
    one = json.loads(invoke("plan", "--seq", "256", "--soc", "Ascend910B4", "--json").stdout)
    every = json.loads(invoke("plan", "--seq", "256", "--soc", "all", "--json").stdout)
    assert isinstance(one, list) and len(one) == 1 and one[0]["chip"]["name"] == "Ascend910B4"
    assert isinstance(every, list) and len(every) > 1


def _options(command):
    return [p for p in main.commands[command].params if isinstance(p, click.Option) and p.name != "help"]


def test_one_environment_variable_per_option():
    """Every option of run, plan, bench and profile reads ACL_FA_<OPTION>, the same name in each."""
    for command in ("run", "plan", "bench", "profile"):
        for option in _options(command):
            long = max(option.opts, key=len).lstrip("-").split("/")[0]
            assert option.envvar == "ACL_FA_" + long.upper().replace("-", "_"), (command, option.opts)


def test_environment_variables_reach_the_options(sim_only):
    env = {"ACL_FA_SEQ": "256", "ACL_FA_HEADS": "4", "ACL_FA_SOC": "Ascend910B4", "ACL_FA_LAYOUT": "bsh"}
    (p,) = json.loads(invoke("plan", "--json", env=env).stdout)
    assert (p["seq"], p["heads"], p["chip"]["name"], p["layout"]) == (256, 4, "Ascend910B4", "BSH")


def test_global_options_after_the_subcommand(sim_only):
    before = invoke("-v", "plan", "--seq", "128")
    after = invoke("plan", "--seq", "128", "-v")
    assert before.exit_code == after.exit_code == 0, after.output
    assert before.stdout == after.stdout
    assert invoke("doctor", "--verbose", "--backend", "sim").exit_code == 0


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"acl-fa, version {acl_fa.__version__}"
    assert acl_fa.__version__ and acl_fa.__version__[0].isdigit()


def test_no_stray_label_on_stderr_when_not_a_terminal(sim_only):
    result = invoke("run", "--seq", "64", "--heads", "1", "--iters", "1", "--warmup", "0", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    json.loads(result.stdout)


def test_plot_without_matplotlib_fails_before_the_benchmark(sim_only, monkeypatch):
    import importlib.util
    import sys

    from acl_fa.jobs import bench

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    ran = []
    monkeypatch.setattr(bench, "run_bench", lambda **kw: ran.append(kw))
    result = invoke("bench", "--seq", "64", "--plot", "out.png")
    assert result.exit_code == 2 and not ran
    assert f"{sys.executable} -m pip install matplotlib" in result.stderr
