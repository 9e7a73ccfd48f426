"""The ring backward (acl_fa/parallel/ring_backward.py): parallel.ring_attention_backward == the float64
backward within the 2x-naive rule and close to the single-device op (causal zigzag and not, GQA, S
not divisible by P, 2/3/4/8 devices, layouts); one process per rank (acl-fa launch) == one process
bit for bit, with the bytes per exchange of K, V and the dK/dV accumulators and the d2h bytes of
just the final gradients; `acl-fa run --parallel ring --backward`, one process and under `acl-fa
launch`, and `--parallel ulysses|ulysses,ring --backward` in one process; an injected aclnnInplaceAdd failure; bad input refused before device work. Fresh
processes (HCCL makes 8 devices the process default), every wait with a timeout.
"""
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from conftest import run_checks_on_sim_devices, run_on_sim_devices, sim_devices_env

ROOT = Path(__file__).resolve().parents[2]


_env = sim_devices_env


def _python(code, *args, timeout=400):
    return run_on_sim_devices(code, timeout=timeout, argv=args)


TABLE = """
import sys
import numpy as np, acl_fa
from acl_fa import parallel
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
sys.path.insert(0, "tests/parallel")
from grad_cases import check_case, expect_refusal, grad_case

CASES = [  # devices, causal, layout, N, Nkv, S, dtype
    (2, False, "BNSD", 2, 2, 40, "float16"),
    (4, True, "BSND", 4, 2, 37, "float16"),
    (3, True, "BSH", 2, 1, 29, "float16"),
    (8, True, "BNSD", 2, 1, 70, "bfloat16"),
]
rng = np.random.default_rng(5)
for p, causal, layout, n, nkv, s, dtype in CASES:
    q, k, v, dout, heads, dt = grad_case(rng, layout, n, nkv, s, dtype)
    out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, layout=layout, **heads)
    grads = parallel.ring_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=causal,
                                             layout=layout, **heads)
    checks = check_case(grads, q, k, v, dout, causal, layout, n, nkv, dtype)
    single = acl_fa.flash_attention_backward(dout, q, k, v, out, lse, causal=causal, layout=layout, **heads)
    for c, g, one in zip(checks, grads, single):
        gap = np.abs(g.astype(np.float64) - one.astype(np.float64)).max()
        assert gap <= c.tolerance, (c.name, gap, c.tolerance)
    print("ok", p, causal, layout, dtype, [(c.name, round(c.max_error, 5), round(c.tolerance, 5)) for c in checks])

q = np.zeros((1, 2, 16, 32), np.float16)
lse = np.zeros((1, 2, 16), np.float32)
BAD = [
    (dict(devices=[0, 0]), (q, lse), InvalidArgumentError, "devices[1]=0 repeats devices[0]"),
    (dict(devices=[0, 1]), (q, lse[:, :, :8]), InvalidArgumentError, "lse has shape (1, 2, 8)"),
    (dict(devices=[0, 1]), (q.astype(np.float32), lse), InvalidTypeError, "out has dtype float32"),
    (dict(devices=list(range(8)), causal=True), (q[:, :, :15], lse[:, :, :15]), InvalidArgumentError,
     "S=15 cannot be split over 8 devices: the zigzag split needs S >= 2P = 16"),
]
for kwargs, (out, l), error, words in BAD:
    x = q[:, :, :out.shape[2]]
    expect_refusal(lambda: parallel.ring_attention_backward(x, x, x, x, out, l, **kwargs), error, words)
print("ok bad inputs")
"""


def test_ring_backward_matches_the_float64_backward_and_the_single_device_op():
    run_checks_on_sim_devices(TABLE, 5)


RANK = """
import os, sys, numpy as np
from acl_fa import parallel
out_dir, S = sys.argv[1], 45
rng = np.random.default_rng(2)
q = rng.standard_normal((1, 4, S, 32)).astype(np.float16)
k, v = (rng.standard_normal((1, 2, S, 32)).astype(np.float16) for _ in range(2))
dout = rng.standard_normal(q.shape).astype(np.float16)
with parallel.RankContext.from_env() as ctx:
    rows = parallel.zigzag_chunks(S, ctx.size, True)[ctx.rank]
    take = lambda x: np.concatenate([x[:, :, a:b] for a, b in rows], axis=2)
    out, lse = ctx.ring_attention(take(q), take(k), take(v), causal=True)
    dq, dk, dv = ctx.ring_attention_backward(take(dout), take(q), take(k), take(v), out, lse, causal=True)
    np.savez(os.path.join(out_dir, f"rank{ctx.rank}.npz"), dq=dq, dk=dk, dv=dv, rows=np.array(rows),
             sent=np.array(ctx.last_backward["bytes_per_step"]), d2h=ctx.last_backward["d2h_bytes"])
    print("rank", ctx.rank, "done")
"""

SINGLE = """
import sys, numpy as np
from acl_fa import parallel
p, path, S = int(sys.argv[1]), sys.argv[2], 45
rng = np.random.default_rng(2)
q = rng.standard_normal((1, 4, S, 32)).astype(np.float16)
k, v = (rng.standard_normal((1, 2, S, 32)).astype(np.float16) for _ in range(2))
dout = rng.standard_normal(q.shape).astype(np.float16)
out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=True)
dq, dk, dv = parallel.ring_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=True)
np.savez(path, dq=dq, dk=dk, dv=dv)
"""


def test_spmd_ring_backward_equals_one_process_and_counts_its_bytes(tmp_path):
    p = 4
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "launch", "-n", str(p), "--timeout", "200", "--",
                           sys.executable, "-c", RANK, str(tmp_path)], capture_output=True, text=True, timeout=240,
                          env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _python(SINGLE, p, tmp_path / "single.npz")
    whole = np.load(tmp_path / "single.npz")
    chunks = [[b - a for a, b in rr] for rr in __import__("acl_fa.parallel", fromlist=["x"]).zigzag_chunks(45, p, True)]
    for r in range(p):
        part = np.load(tmp_path / f"rank{r}.npz")
        rows = np.concatenate([np.arange(a, b) for a, b in part["rows"]])
        for name in ("dq", "dk", "dv"):
            assert np.array_equal(part[name], whole[name][:, :, rows]), (r, name)
        # Exchange t = 0 .. P: rank r sends K and V (fp16, 2 kv heads, D=32) of rank r - t's chunks
        # (t < P - 1) and the dK/dV accumulators (float32) of rank r - t + 1's, which step t - 1
        # completed (t >= 1).
        assert len(part["sent"]) == p + 1, part["sent"]
        for t, sent in enumerate(part["sent"]):
            kv = 2 * 2 * 32 * sum(chunks[(r - t) % p]) * 2 if t < p - 1 else 0
            acc = 2 * 2 * 32 * sum(chunks[(r - t + 1) % p]) * 4 if t >= 1 else 0
            assert sent == kv + acc, (r, t, part["sent"], kv + acc)
        # Read back: only the rank's final float32 dQ (4 heads), dK and dV (2 kv heads).
        n = sum(chunks[r])
        assert part["d2h"] == (4 + 2 + 2) * n * 32 * 4, (r, int(part["d2h"]))


def test_cli_run_parallel_ring_backward_checks_the_gradients_in_one_process_and_under_launch():
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--parallel", "ring", "--devices", "3", "--seq", "50",
                           "--causal", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--backward"],
                          capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("dq", "dk", "dv"):
        assert f"backward check {name} (kv head 0 and its query heads vs float64 backward, 2x-naive rule)" in proc.stdout
    assert proc.stdout.count(": OK") == 4, proc.stdout
    # One process per device: each rank runs its part of the ring backward; rank 0 prints the checks.
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "launch", "-n", "2", "--timeout", "200", "--",
                           sys.executable, "-m", "acl_fa", "run", "--parallel", "ring", "--seq", "50", "--causal", "--heads", "4",
                           "--kv-heads", "2", "--head-dim", "32", "--backward"], capture_output=True, text=True,
                          timeout=240, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("dq", "dk", "dv"):
        assert f"[rank 0] backward check {name} (kv head 0 and its query heads vs float64 backward" in proc.stdout
    assert proc.stdout.count(": OK") == 4 and "[rank 1] backward" not in proc.stdout, proc.stdout
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--parallel", "ulysses", "--devices", "2", "--seq",
                           "32", "--heads", "2", "--head-dim", "32", "--backward"], capture_output=True, text=True,
                          timeout=240, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bytes per link equal to the formula" in proc.stdout and proc.stdout.count(": OK") == 4, proc.stdout
    # 2-D: Ulysses groups of 2 (N=2), the ring backward across 2 groups; the all-to-alls' bytes by the formula
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--parallel", "ulysses,ring", "--devices", "4",
                           "--seq", "40", "--causal", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
                           "--backward"], capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ulysses groups of 2 devices (1 query heads per device), a ring across 2 groups" in proc.stdout
    assert "backward (USP: Ulysses in, the ring backward across the groups, Ulysses out)" in proc.stdout
    # member u -> its peer: B D itemsize (L_u (3 N/U + 2 Nkv_j) + L_j (N/U + 2 Nkv_u)) = 64 (10 * 5 + 10 * 3) bytes
    assert proc.stdout.count("5.0 KiB..5.0 KiB   equal") == 4, proc.stdout
    assert "all-to-all bytes per link equal to the formula" in proc.stdout and proc.stdout.count(": OK") == 4, \
        proc.stdout


FAULT = """
import numpy as np
from acl_fa import parallel
from acl_fa.runtime.errors import AclError
from acl_fa.runtime.loader import get_backend
from acl_fa.runtime.session import live_counts

rng = np.random.default_rng(4)
q = rng.standard_normal((1, 2, 48, 32)).astype(np.float16)
dout = rng.standard_normal(q.shape).astype(np.float16)
out, lse = parallel.ring_attention(q, q, q, devices=[0, 1], causal=True)
backend = get_backend()
# The add (phase two, phase one) and the device-side order of the streams (the step's adds wait for
# the exchange that brings the accumulators; the exchange waits for the previous step's adds).
for spec in (b"aclnnInplaceAdd:5", b"aclnnInplaceAddGetWorkspaceSize:2", b"aclrtStreamWaitEvent:3"):
    backend.call("aclfaSimSetFaults", spec)
    try:
        parallel.ring_attention_backward(dout, q, q, q, out, lse, devices=[0, 1], causal=True)
        raise SystemExit(f"no error for {spec}")
    except AclError as exc:
        api = spec.split(b":")[0].decode()
        assert exc.api == api and api in str(exc) and "injected" in str(exc), (spec, exc)
    backend.call("aclfaSimSetFaults", b"")
    counts = live_counts(backend)
    assert all(counts[k] == 0 for k in ("streams", "events", "deviceAllocations", "tensors", "executors", "scalars")), \
        counts
    print("failed as injected:", spec.decode())
grads = parallel.ring_attention_backward(dout, q, q, q, out, lse, devices=[0, 1], causal=True)
again = parallel.ring_attention_backward(dout, q, q, q, out, lse, devices=[0, 1], causal=True)
assert all(np.array_equal(a, b) for a, b in zip(grads, again))
print("ok fault")
"""


def test_a_failing_device_add_surfaces_with_its_api_and_leaves_nothing_behind():
    """aclnnInplaceAdd (phase two), its phase one and aclrtStreamWaitEvent fail as injected: an
    AclError naming the API on the rank that failed (its peer ends by HCCL_EXEC_TIMEOUT rather than hanging), every device
    object released, and the next ring backward gives the same result twice."""
    env = dict(_env(), HCCL_EXEC_TIMEOUT="10")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FAULT)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok fault" in proc.stdout and proc.stdout.count("failed as injected") == 3, proc.stdout


REPORT = """
import numpy as np
from acl_fa import parallel
from acl_fa.ops.backward import make_backward_problem
from acl_fa.spec.problem import make_problem

for p, causal, s in ((3, True, 50), (4, False, 37), (2, True, 64)):
    rng = np.random.default_rng(p)
    q = rng.standard_normal((1, 2, s, 32)).astype(np.float16)
    k, v = (rng.standard_normal((1, 1, s, 32)).astype(np.float16) for _ in range(2))
    dout = rng.standard_normal(q.shape).astype(np.float16)
    out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal)
    *grads, rep = parallel.ring_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=causal,
                                                   report=True)
    plain = parallel.ring_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=causal)
    for a, b in zip(grads, plain):
        assert np.array_equal(a, b)
    ranges = parallel.zigzag_chunks(s, p, causal)
    rows = [[b - a for a, b in rr] for rr in ranges]
    kv_row, acc_row = 1 * 32 * 2 * 2, 1 * 32 * 4 * 2  # K and V (fp16), dK and dV accumulators (fp32), per row
    link = rep.link
    for r in range(p):
        # Exchange t to r + 1: K/V of rank r - t (t < P - 1), accumulators of rank r - t + 1 (t >= 1).
        want = [(sum(rows[(r - t) % p]) * kv_row if t < p - 1 else 0)
                + (sum(rows[(r - t + 1) % p]) * acc_row if t >= 1 else 0) for t in range(p + 1)]
        assert rep.link_bytes_per_step[r] == want, (p, r, rep.link_bytes_per_step[r], want)
        sends = [2 * len(rows[r]) * ((t < p - 1) + (t >= 1)) for t in range(p + 1)]
        model = [link["latency_us"] * 1e-6 * n + b / (link["bandwidth_gbs"] * 1e9) for n, b in zip(sends, want)]
        assert np.allclose(rep.modeled_comm_seconds[r], model, rtol=1e-12), (rep.modeled_comm_seconds[r], model)
        assert rep.modeled_compute_seconds[r][-1] == 0.0 and min(rep.modeled_compute_seconds[r][:-1]) > 0
    # The ranks' FLOPs add up to the whole backward's (zigzag: the causal diagonal chunks are square).
    whole = make_backward_problem(make_problem(q, k, v, causal=causal)[0], dout, q, k, v, out, lse)[0].flops()
    assert sum(rep.flops) == whole, (sum(rep.flops), whole)
    if causal and s % (2 * p) == 0:  # equal chunks: the zigzag pairs give every rank the same work
        assert rep.balance == 1.0, rep.balance
    o = rep.overlap()
    assert 0 <= o["hidden_seconds"] <= min(o["comm_seconds"], o["compute_seconds"]) + 1e-15
print("ok")
"""


def test_ring_backward_report_counts_every_exchange_and_models_it():
    assert _python(REPORT).strip().endswith("ok")


def test_cli_backward_prints_the_exchanges_and_the_modeled_overlap():
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "run", "--parallel", "ring", "--devices", "2", "--seq", "64",
                           "--causal", "--heads", "2", "--kv-heads", "1", "--head-dim", "32", "--backward"],
                          capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # P = 2, chunks of 16 rows, Nkv = 1, D = 32: K/V 2 x 16 x 32 x 2 B x 2 = 4096; dK/dV float32 twice that.
    table = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"]) and "," in line]
    assert [row[3] for row in table[-2:]] == ["4096,8192,8192"] * 2, proc.stdout
    modeled = [line for line in lines if line.startswith("backward balance (max/mean FLOPs): 1.0000; modeled:")]
    assert len(modeled) == 1 and "hidden by overlap" in modeled[0], proc.stdout
