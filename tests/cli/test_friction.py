"""What a newcomer trips on, each as behaviour: option lists, errors before work, progress,
exit codes, device count, the module-level functions' device memory, dtype aliases, help texts
and report lines (click's CliRunner unless a fresh process is the point)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main, options
from acl_fa.jobs import bench as bench_module, profile as profile_module, run as run_module, sweep as sweep_module
from acl_fa.jobs.decode_run import format_decode_table
from acl_fa.parallel import launch as launch_module
from acl_fa.spec.problem import problem_from_sizes

from conftest import REPO, run_on_sim_devices, sim_devices_env

MiB = 1 << 20


def invoke(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


# ---- 1. bench --decode takes the cached lengths as a list ------------------------------------

def test_bench_decode_rows_come_from_the_seq_kv_list(sim_only):
    result = invoke("bench", "--decode", "--paged", "--block-size", "16", "--seq-kv", "64,32", "--seq", "2",
                    "--heads", "2", "--kv-heads", "1", "--head-dim", "32", "--steps", "1", "--json")
    assert result.exit_code == 0, result.output + repr(result.exception)
    rows = json.loads(result.stdout)
    assert [(r["seq_kv"], r["seq_q"]) for r in rows] == [(64, 2), (32, 2)]  # --seq: query tokens per step


@pytest.mark.parametrize("args, option", [
    (("bench", "--decode", "--seq", "1,2"), "--seq"),           # under --decode: one value, tokens per step
    (("bench", "--seq", "64", "--seq-kv", "64,128"), "--seq-kv"),  # the forward bench's rows are --seq
])
def test_bench_list_options_refused_where_one_value_is_meant(args, option):
    result = invoke(*args)
    assert result.exit_code == 2 and f"Invalid value for {option}:" in result.stderr and "Traceback" not in result.output


# ---- 2. one-line errors, before any work -------------------------------------------------------

@pytest.mark.parametrize("args, job", [
    (("profile", "--seq", "64", "--plot", "/nonexistent/dir/x.png"), (profile_module, "profile_job")),
    (("profile", "--seq", "64", "--trace", "/nonexistent/t.json"), (profile_module, "profile_job")),
    (("bench", "--seq", "64", "--plot", "/nonexistent/dir/x.png"), (bench_module, "run_bench")),
    (("plan", "--seq", "64", "--sweep", "--plot", "/nonexistent/dir/x.png"), (sweep_module, "sweep")),
])
def test_output_paths_are_checked_before_the_work(monkeypatch, args, job):
    ran = []
    monkeypatch.setattr(*job, lambda *a, **kw: ran.append(a))
    result = invoke(*args)
    assert result.exit_code == 2 and not ran, result.output
    assert "does not exist" in result.stderr and "/nonexistent" in result.stderr


def test_launch_of_a_missing_command_is_one_line(monkeypatch):
    started = []
    monkeypatch.setattr(launch_module, "launch", lambda *a, **kw: started.append(a))
    result = invoke("launch", "-n", "2", "--", "nosuchcmd")
    assert result.exit_code == 2 and not started
    assert result.stderr.strip().splitlines()[-1] == \
        "Error: COMMAND 'nosuchcmd' is not an executable file nor a command on PATH"


# ---- 3. the simulator's 8 devices, with or without libhccl loaded -----------------------------

def test_eight_devices_before_any_parallel_call(sim_only):
    out = run_on_sim_devices("""
        import sys
        import numpy as np, acl_fa
        q = np.random.default_rng(0).standard_normal((1, 1, 64, 64)).astype(np.float16)
        out = acl_fa.flash_attention(q, q, q, device=3)
        assert "acl_fa.parallel" not in sys.modules
        from acl_fa.runtime.loader import device_count
        print("ok", device_count(acl_fa.get_backend()), np.isfinite(out.astype(np.float32)).all())
    """)
    assert out.split() == ["ok", "8", "True"]
    result = invoke("run", "--seq", "64", "--heads", "1", "--iters", "1", "--warmup", "0", "--device", "7", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["check"]["ok"]


# ---- 4. the module-level functions' device memory ------------------------------------------

def test_module_level_cache_gives_way_and_clear_cache_releases_it(sim_only):
    """With a 96 MiB device, acl_fa.flash_attention on [1, 8, 2048, 128] (86 MiB per call with its
    256 x 1024 blocks) leaves its shape cached on the hidden process-wide session; another
    Session's call (16 MiB of system workspace) still fits in the 10 MiB left only because the
    idle cache gives way, and acl_fa.clear_cache() gives the device back."""
    out = run_on_sim_devices("""
        import numpy as np, acl_fa
        from acl_fa.ops import opcall
        rng = np.random.default_rng(0)
        q = rng.standard_normal((1, 8, 2048, 128)).astype(np.float16)
        acl_fa.flash_attention(q, q, q)
        (hidden,) = opcall.default_sessions()
        held = sum(r.cached_bytes() for r in hidden.__dict__["_op_runners"].values())
        assert held > 48 * 2**20, held          # the shape is cached: more than half the device
        with acl_fa.Session() as s:
            t = rng.standard_normal((1, 1, 64, 64)).astype(np.float16)
            s.flash_attention(t, t, t)          # before the fix: InsufficientMemoryError, 1.9 MiB free
        print("ok other session")
        acl_fa.flash_attention(q, q, q)
        free_before, total = hidden.mem_info()
        acl_fa.clear_cache()
        free_after, _ = hidden.mem_info()
        assert free_after - free_before >= held, (free_before, free_after, held)
        print("ok clear_cache", "clear_cache" in acl_fa.__all__)
    """, ACL_FA_SIM_HBM_BYTES=str(96 * MiB))
    assert out.split() == ["ok", "other", "session", "ok", "clear_cache", "True"]


# ---- 6. progress of the long jobs ------------------------------------------------------------

@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(options, "on_terminal", lambda: True)


def test_profile_reports_its_stages_on_a_terminal(sim_only, terminal):
    result = invoke("profile", "--seq", "128", "--heads", "1", "--head-dim", "64")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("acl-fa profile: [") and lines[0].endswith("random inputs")
    assert any("the launch on the simulator" in line for line in lines) and lines[-1].endswith("] done")


def test_plan_sweep_shows_progress_on_a_terminal(sim_only, terminal):
    result = invoke("plan", "--seq", "64", "--heads", "1", "--head-dim", "64", "--sweep")
    assert result.exit_code == 0, result.output
    assert "acl-fa plan --sweep" in result.stderr


def test_progress_stays_off_a_pipe(sim_only):
    result = invoke("profile", "--seq", "64", "--heads", "1", "--head-dim", "64")
    assert result.exit_code == 0 and result.stderr == ""


# ---- #28 item 4: the busiest cube, the capped trace, the whole-core plot ------------------------

@pytest.fixture(scope="module")
def profiled(sim_only_module):
    problem = problem_from_sizes(seq_q=512, num_heads=4, head_dim=64, causal=True)
    return profile_module.profile_job(problem)


@pytest.fixture(scope="module")
def sim_only_module(backend):
    if backend.name != "sim":
        pytest.skip("the simulator's model")


def test_profile_names_the_busiest_cube(profiled):
    core, busy = profiled.busiest_cube
    assert busy == pytest.approx(profiled.cube_busy.max()) and profiled.cube_busy[core] == busy
    # the same figure as the "pipe busy on the busiest core" line's aic.M
    assert busy == pytest.approx(profiled.summary["busy_fraction"]["aic.M"])
    line = next(l for l in profile_module.format_profile(profiled).splitlines() if l.startswith("cube busy"))
    assert f"{100 * busy:.0f}% on AIC {core}, the busiest cube" in line
    assert profiled.to_dict()["cube_busy"]["busiest_aic"] == core


def test_default_trace_keeps_whole_core_groups(profiled):
    full = profile_module.chrome_trace(profiled, None)
    n_ops = len(profiled.ops)
    capped = profile_module.chrome_trace(profiled, n_ops // 3)
    kept = capped["otherData"]
    assert full["otherData"]["ops_kept"] == n_ops and full["otherData"]["core_groups_kept"] > 1
    assert 0 < kept["ops_kept"] <= n_ops // 3 and kept["core_groups_kept"] < kept["core_groups"]
    groups = profile_module.core_groups(profiled.ops)
    # whole timelines: the kept groups' every op, nothing of the others
    assert kept["ops_kept"] == int(np.isin(groups, np.arange(kept["core_groups_kept"])).sum())
    x = [e for e in capped["traceEvents"] if e["ph"] == "X"]
    assert len(x) == kept["ops_kept"]
    tiny = profile_module.chrome_trace(profiled, 1)["otherData"]
    assert tiny["core_groups_kept"] == 1, "at least one group, whole"


def test_profile_plot_of_a_whole_core_with_a_legend(sim_only, tmp_path):
    pytest.importorskip("matplotlib")
    plot, trace = tmp_path / "core.png", tmp_path / "t.json"
    result = invoke("profile", "--seq", "256", "--heads", "2", "--head-dim", "64", "--causal", "--plot", str(plot),
                    "--plot-core", "1", "--trace", str(trace), "--trace-full")
    assert result.exit_code == 0, result.output
    assert plot.stat().st_size > 10000 and "trace written to" in result.stderr and "every core" in result.stderr
    assert invoke("profile", "--seq", "64", "--plot-core", "1").exit_code == 2  # --plot-core needs --plot
    beyond = invoke("profile", "--seq", "64", "--plot", str(plot), "--plot-core", "24")
    assert beyond.exit_code == 2 and "Ascend910B2 has AI Core groups 0..23" in beyond.stderr


def test_plot_legend_names_the_pipes():
    matplotlib = pytest.importorskip("matplotlib")
    import matplotlib.patches as patches

    assert matplotlib and [h.get_label() for h in profile_module.legend_handles(patches, ["M", "V"])] == \
        ["pipe V", "pipe M (cube)", "waiting (flag, Matmul, SyncAll)"]


# ---- 8. help texts say what each command does ------------------------------------------------

def _help(command):
    return " ".join(invoke(command, "--help").stdout.split())


def test_help_texts_fit_their_command():
    run_help, bench_help, plan_help = _help("run"), _help("bench"), _help("plan")
    assert "instead of the forward" not in run_help and "After the forward, the backward" in run_help
    assert "--dropout" not in bench_help.split("--seed", 1)[1].split("--", 1)[0]
    assert "--seed" not in plan_help, "plan has no --seed to key its dropout by"
    assert "(a comma list of cached lengths" in bench_help


def test_build_script_help_has_one_default_for_soc():
    text = subprocess.run(["bash", str(REPO / "build.sh"), "--help"], capture_output=True, text=True).stdout
    soc = text.split("--soc", 1)[1].split("--vendor", 1)[0]
    assert soc.count("default") == 1, soc


# ---- 9. aliases, exit codes, small report lines -----------------------------------------------

@pytest.mark.parametrize("alias, name", [("fp16", "float16"), ("BF16", "bfloat16"), ("fp32", "float32"),
                                         ("half", "float16")])
def test_dtype_aliases(alias, name):
    a = invoke("plan", "--seq", "128", "--dtype", alias, "--json")
    b = invoke("plan", "--seq", "128", "--dtype", name, "--json")
    assert a.exit_code == b.exit_code == 0, a.output
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_ctrl_c_exits_130(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_job", interrupted)
    result = invoke("run", "--seq", "64")
    assert result.exit_code == 130 and result.stderr.strip() == "Interrupted"


def test_usage_names_acl_fa_when_run_as_a_module():
    """Under `acl-fa launch` a command `acl-fa ...` runs as `python -m acl_fa ...`."""
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--no-such-option"], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.startswith("Usage: acl-fa run [OPTIONS]"), proc.stderr


def test_plan_budget_labels_are_whole(sim_only):
    result = invoke("plan", "--seq", "1", "--seq-kv", "4096", "--kv-heads", "8", "--paged")
    assert result.exit_code == 0, result.output
    assert "L0C one result [m,max(n,d)] fp32 " in result.stdout


def test_decode_table_without_torch_prints_no_nan():
    class Row:
        batch, heads, kv_heads, seq_kv, block_size, steps = 1, 4, 1, 64, None, 1
        median_kernel_ms, median_step_ms, tokens_per_s, prefill_ms = 1.5, 2.0, 500.0, None
        modeled_step_us = modeled_tokens_per_s = kv_read_bytes = cores = accuracy = None
        kv_cache_bytes = 1
        copies = {"h2d": {"bytes": 10}}

    text = format_decode_table([(Row(), None)])
    assert "nan" not in text and "torch is not installed" in text


def test_small_runs_name_their_flop_unit_and_workspace_figures(sim_only):
    assert run_module.format_flop(4.194e6) == "4.194 MFLOP"
    assert run_module.format_flop(137.44e9) == "137.4 GFLOP"
    result = invoke("run", "--seq", "64", "--heads", "1", "--iters", "1", "--warmup", "0")
    assert result.exit_code == 0, result.output
    assert "0.0 GFLOP" not in result.stdout and "MFLOP useful per call" in result.stdout
    memory = next(l for l in result.stdout.splitlines() if l.startswith("memory"))
    assert "workspace" in memory
    assert "workspace traffic" in result.stdout, "the GM-traffic figure says it is traffic, not memory"


def test_contiguous_decode_uploads_no_block_table(sim_only):
    result = invoke("run", "--decode", "--seq", "1", "--seq-kv", "64", "--heads", "2", "--kv-heads", "1",
                    "--head-dim", "32", "--steps", "1")
    assert result.exit_code == 0, result.output
    uploads = next(l for l in result.stdout.splitlines() if l.startswith("host<->dev"))
    assert "block table" not in uploads and "lengths" in uploads


def test_coupled_chip_refusal_names_the_cli_option(sim_only):
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--seq", "64", "--heads", "1", "--mask-density",
                           "0.5"], capture_output=True, text=True, cwd=REPO,
                          env=sim_devices_env(ACL_FA_SIM_SOC="Ascend310P3"))
    assert proc.returncode == 1
    assert proc.stderr.strip().startswith("Error: --mask-density: supported on Atlas A2/A3"), proc.stderr
    assert "atten_mask" not in proc.stderr
