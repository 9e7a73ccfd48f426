"""Ranks started by existing launchers (Open MPI's mpirun, a torchrun-style environment set by hand)
and simulated clusters from HCCL rank tables (issue 32 items 1, 2, 5).

- `mpirun -n 4 acl-fa run --parallel ring` is one ring of 4 ranks (one report, its check OK), not
  four independent rings; the same command with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by hand
  (root info over the TCP store) too, with Ulysses and its backward; `mpirun -n 4 ... --parallel
  ulysses,ring --backward` is one 2-D plan (groups of 2, a ring across 2 groups) and its backward.
- A rank table of 2 servers x 2 devices (device ids repeat across servers), ranks started by mpirun
  as two process groups ("hosts", ACL_FA_SIM_HOST): HcclCommInitClusterInfo, HcclBroadcast, scale-out
  links between the servers and HCCS within, and ring attention equal to the float64 reference.
- A rank table that disagrees with the launcher is refused before any device work; a "host" that
  drops mid-run ends the other ranks in bounded time with an error naming the rank and the host.

Every process is a fresh one and every wait has a generous bound (a loaded 2-core machine).
"""
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from acl_fa.parallel.rank_table import write_rank_table

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_VARS = ("ACL_FA_SIM_DEVICE_COUNT", "ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE", "ACL_FA_DEVICE",
                 "ACL_FA_ROOT_INFO", "ACL_FA_SIM_HOST", "RANK_TABLE_FILE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                 "MASTER_ADDR", "MASTER_PORT")
RUN = ["-m", "acl_fa", "run", "--parallel", "ring", "--seq", "96", "--causal", "--heads", "2", "--kv-heads", "1",
       "--head-dim", "32"]


def _env(**extra):
    env = dict(os.environ, ACL_FA_BACKEND="sim", HCCL_CONNECT_TIMEOUT="90", **{k: str(v) for k, v in extra.items()})
    for name in LAUNCHER_VARS:
        if name not in extra:
            env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _mpirun():
    path = shutil.which("mpirun")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have mpirun (.ci/run installs openmpi-bin)")
        pytest.skip("mpirun not installed (apt-get install openmpi-bin)")
    return [path, "--allow-run-as-root", "--oversubscribe"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mpirun_starts_one_ring_not_four():
    proc = subprocess.run(_mpirun() + ["-n", "4", sys.executable, *RUN], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert text.count("acl-fa run --parallel ring: B=1 N=2 Nkv=1 S=96") == 1, text  # one rank prints the one report
    assert "on devices [0, 1, 2, 3] (zigzag split)" in text and ": OK" in text, text


def test_mpirun_runs_the_usp_backward():
    """mpirun -n 4 --parallel ulysses,ring --backward: groups of 2, a ring across 2 groups, its cliques
    made from the launcher's; forward and gradient checks and the all-to-all bytes on one report."""
    usp = [a if a != "ring" else "ulysses,ring" for a in RUN] + ["--backward"]
    proc = subprocess.run(_mpirun() + ["-n", "4", sys.executable, *usp], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert text.count("acl-fa run --parallel ulysses,ring: B=1 N=2 Nkv=1 S=96") == 1, text
    assert "a ring across 2 groups" in text and "all-to-all bytes per link equal to the formula" in text, text
    assert text.count(": OK") == 4, text


def test_torchrun_style_environment_set_by_hand_meets_over_tcp_and_runs_ulysses():
    port = _free_port()
    ulysses = [a if a != "ring" else "ulysses" for a in RUN] + ["--backward"]
    procs = [subprocess.Popen([sys.executable, *ulysses], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=ROOT, env=_env(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r, MASTER_ADDR="127.0.0.1",
                                                 MASTER_PORT=port))
             for r in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    text = outs[0]
    assert "acl-fa run --parallel ulysses: B=1 N=2 Nkv=1 S=96" in text and "on devices [0, 1]" in text, text
    # every link's bytes equal the all-to-all formula (docs/hccl.md), read from the link counters
    assert text.count("   equal  ") == 2 and ": OK" in text, text
    # and the backward under the same launcher: its all-to-alls by the formula, every gradient checked
    assert "all-to-all bytes per link equal to the formula" in text and text.count(": OK") == 4, text
    assert "acl-fa run --parallel" not in outs[1]


# One rank of a simulated cluster: joins from the launcher's environment and the rank table,
# broadcasts, reads the link kinds, runs ring attention on its zigzag rows and saves them.
CLUSTER_RANK = """
import os, sys, numpy as np
from acl_fa import parallel
from acl_fa.spec.layouts import to_bnsd
out_dir = sys.argv[1]
B, N, S, D = 1, 2, 64, 32
rng = np.random.default_rng(5)
q, k, v = (rng.standard_normal((B, N, S, D)).astype(np.float16) for _ in range(3))
with parallel.RankContext.from_env() as ctx:
    s, st = ctx.session, ctx.session.stream()
    buf = s.upload(np.arange(1000, dtype=np.float32) * (1 if ctx.rank == 2 else 0))
    ctx.comm.broadcast(buf, 1000, np.float32, 2, st)
    ctx.comm.barrier(st)  # every rank's broadcast done before any reads the counters (a barrier moves 0 bytes)
    st.synchronize()
    assert np.array_equal(buf.to_numpy((1000,), np.float32), np.arange(1000, dtype=np.float32))
    kinds = [ctx.comm.link_stats(2, j)["kind"] for j in range(4)]
    sent = [ctx.comm.link_stats(2, j)["bytes"] for j in range(4)]
    rows = parallel.zigzag_chunks(S, ctx.size, True)[ctx.rank]
    take = lambda x: np.concatenate([x[:, :, a:b] for a, b in rows], axis=2)
    out, lse = ctx.ring_attention(take(q), take(k), take(v), causal=True)
    np.savez(os.path.join(out_dir, f"rank{ctx.rank}.npz"), out=out, lse=lse, rows=np.array(rows), q=q, k=k, v=v)
    print(f"rank {ctx.rank} device {ctx.device} host {os.environ['ACL_FA_SIM_HOST']} kinds {kinds} sent {sent}")
"""


def _hosts(path, script, *argv, ranks=(2, 2)):
    """mpirun's MPMD form: one application context per simulated host, its ranks' ACL_FA_SIM_HOST
    that host's server id in the rank table at `path`."""
    cmd = _mpirun()
    for h, n in enumerate(ranks):
        cmd += ([":"] if h else []) + ["-n", str(n), "-x", f"ACL_FA_SIM_HOST=10.0.0.{h + 1}", "-x",
                                       f"RANK_TABLE_FILE={path}", sys.executable, "-c", script, *argv]
    return cmd


def test_rank_table_cluster_of_two_hosts_under_mpirun(tmp_path):
    from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
    from acl_fa.reference.attention import attention_reference

    table = str(tmp_path / "rank_table.json")
    write_rank_table(table, [2, 2])
    proc = subprocess.run(_hosts(table, CLUSTER_RANK, str(tmp_path)), capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r, (device, host) in enumerate([(0, 1), (1, 1), (0, 2), (1, 2)]):  # device ids repeat across the servers
        assert f"rank {r} device {device} host 10.0.0.{host} kinds ['RoCE', 'RoCE', 'HCCS', 'HCCS']" in proc.stdout
    assert "sent [4000, 4000, 0, 4000]" in proc.stdout  # the broadcast's bytes from root 2, read by every rank
    parts = [np.load(tmp_path / f"rank{r}.npz") for r in range(4)]
    q, k, v = parts[0]["q"], parts[0]["k"], parts[0]["v"]
    got, got_lse = np.zeros_like(q), np.zeros(q.shape[:3], np.float32)
    for part in parts:
        at = 0
        for a, b in part["rows"]:
            got[:, :, a:b], got_lse[:, :, a:b] = part["out"][:, :, at:at + b - a], part["lse"][:, :, at:at + b - a]
            at += b - a
    ref, ref_lse = attention_reference(q, k, v, causal=True)
    naive = naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(32), layout="BNSD",
                                 heads=[0, 1])
    acc = check_accuracy(got, got_lse, ref, ref_lse, naive, "float16", [0, 1])
    assert acc.ok, acc


def test_rank_table_that_disagrees_with_the_launcher_is_refused_before_device_work(tmp_path):
    table = str(tmp_path / "rank_table.json")
    write_rank_table(table, [2, 2])
    start = time.monotonic()
    # Rank 0 of what Open MPI's mpirun -n 3 sets (the variables by hand: one process shows the refusal).
    proc = subprocess.run([sys.executable, *RUN], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=_env(RANK_TABLE_FILE=table, OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=3,
                                   OMPI_COMM_WORLD_LOCAL_RANK=0, PMIX_NAMESPACE="test"))
    assert proc.returncode != 0
    assert f"rank table {table} lists 4 ranks but the launcher started 3 (OMPI_COMM_WORLD_RANK=0, " \
           "OMPI_COMM_WORLD_SIZE=3, OMPI_COMM_WORLD_LOCAL_RANK=0): the rank table and the launcher disagree" \
           in proc.stderr, proc.stdout + proc.stderr
    assert time.monotonic() - start < 120  # no HCCL_CONNECT_TIMEOUT wait


# The ranks of host 10.0.0.2 leave after a barrier that follows the first all-gather: every rank has
# then finished that all-gather (a rank enters the barrier only after it), so the others' failure is
# a mid-run one, in the barrier or the all-gathers after it.
HOST_DROP = """
import os, sys, numpy as np
from acl_fa import parallel
with parallel.RankContext.from_env() as ctx:
    s, st = ctx.session, ctx.session.stream()
    x = s.upload(np.ones(256, np.float32))
    y = s.alloc(4 * 256 * ctx.size)
    ctx.comm.all_gather(x, y, 256, np.float32, st)
    st.synchronize()
    if os.environ["ACL_FA_SIM_HOST"] == "10.0.0.2":
        try:
            ctx.comm.barrier(st)
            st.synchronize()
        finally:
            os._exit(17)  # the whole host drops
    try:
        ctx.comm.barrier(st)
        for _ in range(3):
            ctx.comm.all_gather(x, y, 256, np.float32, st)
        st.synchronize()
    except Exception as exc:
        print("rank", ctx.rank, "failed:", exc, flush=True)
        sys.exit(3)
    print("rank", ctx.rank, "no error", flush=True)
"""


def test_a_host_that_drops_ends_the_other_ranks_naming_rank_and_host(tmp_path):
    table = str(tmp_path / "rank_table.json")
    write_rank_table(table, [2, 2])
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOST_DROP)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                              env=_env(RANK=r, WORLD_SIZE=4, LOCAL_RANK=r % 2, RANK_TABLE_FILE=table,
                                       ACL_FA_SIM_HOST=f"10.0.0.{r // 2 + 1}", HCCL_EXEC_TIMEOUT=600))
             for r in range(4)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [3, 3, 17, 17], outs
    for r in (0, 1):
        assert f"rank {r} failed:" in outs[r] and "exited while this call waited for it" in outs[r], outs[r]
        assert any(f"rank {d} (pid " in outs[r] and ", host 10.0.0.2)" in outs[r] for d in (2, 3)), outs[r]
    assert time.monotonic() - start < 240  # far below HCCL_EXEC_TIMEOUT=600: ended by the peers' exit
