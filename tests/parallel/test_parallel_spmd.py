"""One process per device: acl_fa.parallel.RankContext under `acl-fa launch`.

SPMD ring (2 and 4 processes) == the single-process ring bit for bit == the float64 reference
within the 2x-naive rule; `acl-fa run --parallel ulysses,ring --backward` under launch (the 2-D
plan's cliques from the launcher's, its checks on rank 0); ranks that disagree on shapes or hold the wrong rows are named by every
rank; an HCCL failure leaves each rank's Session usable; the launcher forwards rank-prefixed
output, fails with the first failing rank's code and stops the others, reports a rank that never
joins within its time limit, and refuses bad -n/--devices before starting anything.

Every process is a fresh one (loading HCCL makes 8 simulated devices the process default), and every
wait has a timeout.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = [sys.executable, "-m", "acl_fa", "launch"]


def _env(**extra):
    env = dict(os.environ, ACL_FA_BACKEND="sim", **{k: str(v) for k, v in extra.items()})
    for name in ("ACL_FA_SIM_DEVICE_COUNT", "ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE",
                 "ACL_FA_DEVICE", "ACL_FA_ROOT_INFO"):
        env.pop(name, None)
    return env


def _launch(n, code, *args, timeout=240, launch_timeout=None, **env):
    cmd = LAUNCH + ["-n", str(n), *args] + (["--timeout", str(launch_timeout)] if launch_timeout else [])
    cmd += ["--", sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(**env), cwd=ROOT)


# Each rank: its zigzag shard of the seeded inputs through RankContext, saved for the parent.
RANK = """
import os, sys, numpy as np
from acl_fa import parallel
out_dir, causal, layout = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
from acl_fa.spec.layouts import shape_of, to_bnsd, from_bnsd
B, N, NKV, S, D = 2, 4, 2, {S}, 32
rng = np.random.default_rng(11)
q, k, v = (rng.standard_normal(shape_of(layout, B, n, S, D)).astype(np.float16) for n in (N, NKV, NKV))
with parallel.RankContext.from_env() as ctx:
    rows = parallel.zigzag_chunks(S, ctx.size, causal)[ctx.rank]
    take = lambda x, n: from_bnsd(np.concatenate([to_bnsd(x, layout, n)[:, :, a:b] for a, b in rows], axis=2), layout)
    heads = dict(num_heads=N, num_kv_heads=NKV) if layout == "BSH" else {{}}
    out, lse = ctx.ring_attention(take(q, N), take(k, NKV), take(v, NKV), causal=causal, layout=layout, **heads)
    np.savez(os.path.join(out_dir, f"rank{{ctx.rank}}.npz"), out=out, lse=lse, rows=np.array(rows))
    print("rank", ctx.rank, "of", ctx.size, "device", ctx.device, "rows", rows)
"""

SINGLE = """
import sys, numpy as np
from acl_fa import parallel
from acl_fa.spec.layouts import shape_of
causal, layout, p, out = sys.argv[1] == "1", sys.argv[2], int(sys.argv[3]), sys.argv[4]
B, N, NKV, S, D = 2, 4, 2, {S}, 32
rng = np.random.default_rng(11)
q, k, v = (rng.standard_normal(shape_of(layout, B, n, S, D)).astype(np.float16) for n in (N, NKV, NKV))
heads = dict(num_heads=N, num_kv_heads=NKV) if layout == "BSH" else {{}}
o, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, layout=layout, **heads)
np.savez(out, out=o, lse=lse, q=q, k=k, v=v)
"""


@pytest.mark.parametrize("ranks, causal, layout, seq", [(2, True, "BNSD", 37), (4, True, "BSND", 45),
                                                        (4, False, "BSH", 30)])
def test_spmd_ring_equals_single_process_and_reference(tmp_path, ranks, causal, layout, seq):
    from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
    from acl_fa.spec.layouts import to_bnsd
    from acl_fa.reference.attention import attention_reference

    proc = subprocess.run(LAUNCH + ["-n", str(ranks), "--timeout", "200", "--", sys.executable, "-c",
                                    RANK.format(S=seq), str(tmp_path), str(int(causal)), layout],
                          capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(ranks):
        assert f"[rank {r}] rank {r} of {ranks} device {r}" in proc.stdout
    single = subprocess.run([sys.executable, "-c", SINGLE.format(S=seq), str(int(causal)), layout, str(ranks),
                             str(tmp_path / "single.npz")], capture_output=True, text=True, timeout=240, env=_env(),
                            cwd=ROOT)
    assert single.returncode == 0, single.stdout + single.stderr
    whole = np.load(tmp_path / "single.npz")
    n = 4
    got, got_lse = np.zeros_like(to_bnsd(whole["out"], layout, n)), np.zeros_like(whole["lse"])
    for r in range(ranks):
        part = np.load(tmp_path / f"rank{r}.npz")
        shard, at = to_bnsd(part["out"], layout, n), 0
        for a, b in part["rows"]:
            got[:, :, a:b], got_lse[:, :, a:b] = shard[:, :, at:at + b - a], part["lse"][:, :, at:at + b - a]
            at += b - a
    # The same ring in one process and in several: the same bits.
    assert np.array_equal(got, to_bnsd(whole["out"], layout, n)) and np.array_equal(got_lse, whole["lse"])
    heads = dict(num_heads=n, num_kv_heads=2) if layout == "BSH" else {}
    q, k, v = whole["q"], whole["k"], whole["v"]
    ref, ref_lse = attention_reference(q, k, v, causal=causal, layout=layout, **heads)
    naive = naive_same_precision(q, k, v, np.float16, causal=causal, scale=1 / np.sqrt(32), layout=layout,
                                 heads=list(range(n)), **heads)
    acc = check_accuracy(got, got_lse, to_bnsd(ref, layout, n), ref_lse, naive, "float16", list(range(n)))
    assert acc.ok and acc.lse_max_error < 1e-3, acc


def test_cli_run_under_launch_prints_the_whole_report_and_a_correct_check():
    proc = subprocess.run(LAUNCH + ["-n", "4", "--timeout", "200", "--", "acl-fa", "run", "--parallel", "ring",
                                    "--seq", "96", "--causal", "--heads", "2", "--kv-heads", "1", "--head-dim", "32"],
                          capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "[rank 0] acl-fa run --parallel ring: B=1 N=2 Nkv=1 S=96" in text
    assert "on devices [0, 1, 2, 3] (zigzag split)" in text
    # S=96 over 2P=8 chunks of 12 rows: every step but the last moves K and V of 2 chunks, 1 kv head, D=32, fp16
    for d in range(4):
        assert f"[rank 0]      {d}  " in text and "3072,3072,3072,0" in text
    assert "balance (max/mean FLOPs): 1.0000" in text and ": OK" in text, text
    assert "[rank 1] acl-fa run" not in text  # one rank prints the report


@pytest.mark.parametrize("ranks, mode, what", [
    (4, "ulysses,ring", "Ulysses groups of 2 devices (1 query heads per device), a ring across 2 groups"),
    (2, "ulysses", "backward (Ulysses: Q, K, V, O, dO to head shards"),
])
def test_cli_run_usp_and_ulysses_backward_under_launch_equal_the_reference(ranks, mode, what):
    """--parallel ulysses,ring|ulysses --backward, one process per device (USP: the group and ring
    cliques come from the launcher's clique): the forward check, the all-to-alls' bytes by the
    formula and the gradient checks, on rank 0 alone."""
    proc = subprocess.run(LAUNCH + ["-n", str(ranks), "--timeout", "200", "--", "acl-fa", "run", "--parallel", mode,
                                    "--backward", "--seq", "40", "--causal", "--heads", "2", "--kv-heads", "1",
                                    "--head-dim", "32"], capture_output=True, text=True, timeout=240, env=_env(),
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert f"[rank 0] acl-fa run --parallel {mode}: B=1 N=2 Nkv=1 S=40" in text and what in text, text
    assert "all-to-all bytes per link equal to the formula" in text, text
    for name in ("dq", "dk", "dv"):
        assert f"[rank 0] backward check {name} (kv head 0 and its query heads vs float64 backward" in text, text
    assert text.count(": OK") == 4 and "[rank 1] backward" not in text, text


DISAGREE = """
import numpy as np
from acl_fa import parallel
from acl_fa.runtime.errors import InvalidArgumentError
with parallel.RankContext.from_env() as ctx:
    r = ctx.rank
    heads = 4 if r == 2 else 2            # rank 2 disagrees on the heads
    rows = 10 if r == 1 else 8            # rank 1 holds the wrong number of rows
    q = np.zeros((1, heads, rows, 32), np.float16)
    try:
        ctx.ring_attention(q, q, q, causal=True); raise SystemExit("no error")
    except InvalidArgumentError as exc:
        print("refused:", exc)
    q = np.zeros((1, 2, rows, 32), np.float16)
    try:
        ctx.ring_attention(q, q, q, causal=True); raise SystemExit("no error")
    except InvalidArgumentError as exc:
        print("refused:", exc)
    # The refusals left the clique and the session usable: a correct call runs.
    q = np.random.default_rng(r).standard_normal((1, 2, 8, 32)).astype(np.float16)
    out, lse = ctx.ring_attention(q, q, q, causal=True)
    print("ok after refusals", out.shape)
"""


def test_ranks_that_disagree_are_named_by_every_rank():
    proc = _launch(3, DISAGREE, "--timeout", "200")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(3):
        assert (f"[rank {r}] refused: ring_attention: the ranks disagree on heads (ranks 0, 1: 2; rank 2: 4)"
                in proc.stdout), proc.stdout
        assert (f"[rank {r}] refused: the shards do not follow the zigzag split of S=26 over 3 ranks "
                "(acl_fa.parallel.zigzag_chunks): rank 0 holds 8, its share is 9; rank 1 holds 10, its share is 8; "
                "rank 2 holds 8, its share is 9") in proc.stdout, proc.stdout
        assert f"[rank {r}] ok after refusals (1, 2, 8, 32)" in proc.stdout


HCCL_FAILURE = """
import numpy as np, acl_fa
from acl_fa import parallel
from acl_fa.runtime.errors import HcclError, AclError
from acl_fa.runtime.session import live_counts
with parallel.RankContext.from_env() as ctx:
    q = np.random.default_rng(0).standard_normal((1, 2, 32, 32)).astype(np.float16)
    if ctx.rank == 0:
        ctx.session.backend.call("aclfaSimSetFaults", b"HcclBatchSendRecv:1")
    try:
        ctx.ring_attention(q, q, q, causal=True); raise SystemExit("no error")
    except (HcclError, AclError) as exc:
        print("failed:", type(exc).__name__, exc.code, exc.name, "|", exc)
    ctx.session.backend.call("aclfaSimSetFaults", b"")
    counts = live_counts(ctx.session.backend)
    assert counts["streams"] <= 1 and counts["events"] == 0, counts   # the op runner's stream stays
    out, lse = ctx.session.flash_attention(q, q, q, causal=True, return_lse=True)
    ref, _ = acl_fa.flash_attention(q, q, q, causal=True, return_lse=True)
    assert np.array_equal(out, ref)
    print("session usable")
"""


def test_an_hccl_failure_names_its_code_and_leaves_each_session_usable():
    proc = _launch(2, HCCL_FAILURE, "--timeout", "200", HCCL_EXEC_TIMEOUT=3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[rank 0] failed: HcclError" in proc.stdout and "HcclBatchSendRecv" in proc.stdout, proc.stdout
    assert "[rank 1] failed:" in proc.stdout and "HCCL_E_" in proc.stdout, proc.stdout
    assert "[rank 0] session usable" in proc.stdout and "[rank 1] session usable" in proc.stdout


def test_launch_stops_the_others_when_a_rank_fails():
    """Ranks 0 and 2 would sleep an hour: the launch ends within the test's time limit only if it
    stops them (no wall-clock bound of our own, which a loaded host could break)."""
    proc = _launch(3, """
        import os, sys, time
        print("hello from", os.environ["ACL_FA_RANK"], "of", os.environ["ACL_FA_WORLD_SIZE"], "device",
              os.environ["ACL_FA_DEVICE"], flush=True)
        if os.environ["ACL_FA_RANK"] == "1":
            time.sleep(0.5); sys.exit(3)
        time.sleep(3600)
    """, "--devices", "5,6,7")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    for r, d in enumerate((5, 6, 7)):
        assert f"[rank {r}] hello from {r} of 3 device {d}" in proc.stdout
    assert "acl-fa launch: rank 1 exited with code 3; stopping ranks 0, 2" in proc.stdout


def test_launch_reports_a_rank_that_never_joins():
    """Rank 1 never calls HcclCommInitRootInfo: rank 0's join ends by HCCL_CONNECT_TIMEOUT with the
    HCCL error, and the launch stops rank 1 and fails -- well inside the test's time limit. Rank 0
    times its own join (not the processes' start-up, which a loaded host stretches): 3 s, far
    below HCCL's default of 120 s."""
    proc = _launch(2, """
        import os, time
        from acl_fa import parallel
        if os.environ["ACL_FA_RANK"] == "1":
            time.sleep(3600)
        start = time.monotonic()
        try:
            parallel.RankContext.from_env()
        finally:
            print(f"join ended after {time.monotonic() - start:.1f} s", flush=True)
    """, HCCL_CONNECT_TIMEOUT=3)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    joined = float(proc.stdout.split("join ended after ")[1].split(" s")[0])
    assert 3 <= joined < 60, proc.stdout
    assert "HcclCommInitRootInfo" in proc.stdout and "HCCL_E_" in proc.stdout, proc.stdout
    assert "acl-fa launch: rank 0 exited with code 1; stopping ranks 1" in proc.stdout


def test_launch_timeout_names_the_ranks_still_running():
    proc = _launch(2, "import time; time.sleep(120)", launch_timeout=2)
    assert proc.returncode == 124, proc.stdout + proc.stderr
    assert "acl-fa launch: timeout after 2 s: ranks 0, 1 still running" in proc.stdout


@pytest.mark.parametrize("args, words", [
    (["-n", "2", "--devices", "0,0"], "--devices[1]=0 repeats --devices[0]"),
    (["-n", "3", "--devices", "0,1"], "--devices lists 2 devices for -n 3 ranks"),
    (["-n", "2", "--devices", "0,x"], "a comma-separated list of device ids"),
    (["-n", "0"], "0 is not in the range x>=1"),
])
def test_launch_refuses_bad_input_before_starting(args, words):
    proc = subprocess.run(LAUNCH + args + ["--", sys.executable, "-c", "print('started')"], capture_output=True,
                          text=True, timeout=60, env=_env(), cwd=ROOT)
    assert proc.returncode == 2 if "range" in words or "comma" in words else proc.returncode == 1, proc
    assert words in proc.stderr and "started" not in proc.stdout, proc.stderr


def test_rank_context_refuses_bad_ranks_and_devices():
    code = textwrap.dedent("""
        from acl_fa import parallel
        from acl_fa.parallel import hccl
        from acl_fa.runtime.errors import InvalidArgumentError
        root = hccl.root_info(hccl.use_hccl())
        for kwargs, words in [(dict(rank=2, size=2, root=root), "rank=2 must lie in [0, size=2)"),
                              (dict(rank=0, size=2, root=root, device=9), "devices[0]=9 is out of range"),
                              (dict(rank=0, size=2, root=b"x"), "root must be the 4108 bytes")]:
            try:
                parallel.RankContext.join(**kwargs); raise SystemExit(f"no error for {kwargs}")
            except InvalidArgumentError as exc:
                assert words in str(exc), (words, str(exc))
        try:
            parallel.RankContext.from_env(environ={}); raise SystemExit("no error")
        except InvalidArgumentError as exc:
            assert "ACL_FA_RANK, ACL_FA_WORLD_SIZE, ACL_FA_ROOT_INFO not set" in str(exc), exc
        # A rank outside its world: refused at once, naming both, instead of waiting for a root-info
        # file that no rank 0 of this world writes (ROOT_WAIT_SECONDS).
        import time
        for rank, size in (("5", "2"), ("-1", "2"), ("0", "0")):
            start = time.monotonic()
            env = dict(ACL_FA_RANK=rank, ACL_FA_WORLD_SIZE=size, ACL_FA_ROOT_INFO="/nonexistent/acl-fa-root")
            try:
                parallel.RankContext.from_env(environ=env); raise SystemExit(f"no error for {env}")
            except InvalidArgumentError as exc:
                assert f"ACL_FA_RANK={rank} must lie in [0, ACL_FA_WORLD_SIZE={size})" in str(exc), exc
            assert time.monotonic() - start < 30, time.monotonic() - start
        env = dict(ACL_FA_RANK="1", ACL_FA_WORLD_SIZE="2", ACL_FA_DEVICE="9", ACL_FA_ROOT_INFO="/nonexistent/r")
        start = time.monotonic()
        try:
            parallel.RankContext.from_env(environ=env); raise SystemExit(f"no error for {env}")
        except InvalidArgumentError as exc:
            assert "devices[0]=9 is out of range" in str(exc), exc
        assert time.monotonic() - start < 30, time.monotonic() - start
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env(),
                          cwd=ROOT)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


def test_parallel_run_defaults_to_one_head():
    """`acl-fa run --parallel` without --heads runs one head (the scale run's default, README)."""
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--parallel", "ring", "--devices", "2", "--seq", "32",
                           "--head-dim", "32"], capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "B=1 N=1 Nkv=1 S=32 D=32" in proc.stdout and ": OK" in proc.stdout, proc.stdout
