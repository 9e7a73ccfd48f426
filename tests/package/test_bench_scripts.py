"""The benchmark scripts whose outputs bench/RESULTS.md records still run, at small sizes.

bench/regenerate.sh re-runs them at full size by hand; a script broken by a library change
(l2_sensitivity.py asked the L2 model for the "modeled" order without tracing the launch, and
failed, until this test) would otherwise be found only then. Each runs as its own process, as
regenerate.sh runs it, with this process's environment (ACL_FA_SIM_LIB_DIR passes through).
Scripts that need torch or a development build's test kernels are left to regenerate.sh.
"""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# script, small arguments, a line its output must contain (what the RESULTS section quotes)
SCRIPTS = [
    ("l2_sensitivity.py", ["--seq", "256", "--heads", "2", "--l2-mib", "1,2"], "modeled HBM, modeled order"),
    ("window_work.py", ["--seq", "1024", "--heads", "1", "--window", "64,0", "--runs", "1"], "executed / useful"),
    ("mask_dropout_work.py", ["--seq", "512", "--heads", "1", "--runs", "1"], "Simulator time with dropout"),
    ("work_efficiency.py", ["--seq", "512", "--heads", "2", "--runs", "1"], "executed / useful"),
    ("backward_options.py", ["--seq", "512", "--heads", "1", "--repeat", "1"], "dropout_time_ratio"),
    ("backward_window.py", ["--seq", "1024", "--heads", "1", "--window", "64,0"], "causal_over_window_time"),
    ("backward_rss.py", ["--seq", "512", "--heads", "1"], "rss_over_held"),
    ("backward_third_step.py", ["--seq", "256", "--heads", "2", "--relieve"], "over_atomic"),
    ("fa_model.py", ["--seqs", "1024"], "1024"),
    ("block_choice.py", ["--shapes", "1x1024"], "1024"),
    ("host_lane_rate.py", ["--lanes", "64"], "overflow-checked lanes / ns"),
    ("head_dim_padding.py", ["--seq", "128", "--heads", "1", "--dims", "59"], "59 -> 64"),
]


@pytest.mark.parametrize("script, args, expected", SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_bench_script_runs(script, args, expected):
    env = dict(os.environ)
    env.setdefault("ACL_FA_BACKEND", "sim")
    # This tree's acl_fa (as the rest of the suite imports it), not an installed one of another
    # version: the test is that the scripts still run against the library beside them.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"bench/{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert expected in proc.stdout, f"bench/{script} printed no {expected!r}:\n{proc.stdout[-2000:]}"
