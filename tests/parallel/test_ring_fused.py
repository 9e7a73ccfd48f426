"""ring_attention(..., fused=True): the RingAttention op's kernel exchanges K/V through the
kernel-side HCCL client (AlltoAllV) while it computes (docs/hccl.md, "Communication fused into the
kernel"). On simulated Ascend910_93 devices (the kernel-side AlltoAllV is Atlas A3's): equal to the
float64 reference within the 2x-naive rule and to the stream ring's result within the same rule,
causal and not, GQA, float16 and bfloat16; K and V bytes per link per step from the link counters;
refused on Atlas A2 (Ascend910B2) and for S not a multiple of P before any device work; under
RankContext (threads) as under the one-call face.

Each check runs in a fresh process (the simulated chip is chosen when the libraries load).
"""
import subprocess
import sys

from conftest import REPO, run_checks_on_sim_devices, run_on_sim_devices, sim_devices_env

A3 = dict(ACL_FA_SIM_SOC="Ascend910_93")

CHECK = """
import numpy as np, ml_dtypes
from acl_fa import parallel
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference

# devices, causal, N, Nkv, S (a multiple of the devices), dtype
CASES = [
    (2, False, 2, 2, 64, "float16"),
    (4, True, 2, 1, 96, "float16"),
    (3, True, 2, 2, 48, "bfloat16"),
    (4, False, 4, 2, 128, "bfloat16"),
]
rng = np.random.default_rng(11)
for p, causal, n, nkv, s, dtype in CASES:
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    d = 32
    q = rng.standard_normal((1, n, s, d)).astype(dt)
    k = rng.standard_normal((1, nkv, s, d)).astype(dt)
    v = rng.standard_normal((1, nkv, s, d)).astype(dt)
    out, lse, rep = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, report=True, fused=True)
    assert out.shape == q.shape and out.dtype == dt and lse.shape == (1, n, s)
    ref_out, ref_lse = attention_reference(q, k, v, causal=causal)
    naive = naive_same_precision(q, k, v, dt, causal=causal, scale=1 / np.sqrt(d), layout="BNSD", heads=list(range(n)))
    acc = check_accuracy(out, lse, ref_out, ref_lse, naive, dtype, list(range(n)))
    assert acc.ok and acc.lse_max_error < 1e-3, (p, causal, dtype, acc)
    # The stream ring's result, held to the same rule (both against the reference).
    s_out, s_lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal)
    acc_stream = check_accuracy(s_out, s_lse, ref_out, ref_lse, naive, dtype, list(range(n)))
    assert acc_stream.ok, acc_stream
    diff = np.abs(out.astype(np.float64) - s_out.astype(np.float64)).max()
    assert diff <= 2 * acc.tolerance, (diff, acc.tolerance)
    # Each step but the last, rank r sends the K and V chunk it holds (S / P rows) to rank r + 1.
    chunk = 2 * nkv * (s // p) * d * dt.itemsize
    for r in range(p):
        assert rep.link_bytes_per_step[r] == [chunk] * (p - 1) + [0], (r, rep.link_bytes_per_step[r], chunk)
    print("ok", p, causal, n, nkv, dtype, acc.max_error / acc.tolerance, diff)
"""


def test_fused_ring_matches_the_reference_and_the_stream_ring():
    run_checks_on_sim_devices(CHECK, 4, **A3)


RANKS = """
import threading
import numpy as np
from acl_fa import parallel
from acl_fa.parallel.clique import device_clique
from acl_fa.reference.attention import attention_reference
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision

# RankContext.ring_attention(fused=True) on threads, each rank passing its contiguous rows.
p, s, n, d = 4, 64, 2, 32
rng = np.random.default_rng(5)
q, k, v = (rng.standard_normal((1, n, s, d)).astype(np.float16) for _ in range(3))
rows = s // p
outs = [None] * p
with device_clique(list(range(p)), "sim") as (sessions, comms):
    ctxs = [parallel.RankContext(se, c) for se, c in zip(sessions, comms)]
    def rank(r):
        sl = slice(r * rows, (r + 1) * rows)
        outs[r] = ctxs[r].ring_attention(q[:, :, sl], k[:, :, sl], v[:, :, sl], causal=True, fused=True)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(p)]
    for t in threads: t.start()
    for t in threads: t.join(300)
out = np.concatenate([o for o, _ in outs], axis=2)
lse = np.concatenate([l for _, l in outs], axis=2)
ref_out, ref_lse = attention_reference(q, k, v, causal=True)
naive = naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(d), layout="BNSD", heads=[0, 1])
acc = check_accuracy(out, lse, ref_out, ref_lse, naive, "float16", [0, 1])
assert acc.ok, acc
print("ok ranks", acc.max_error / acc.tolerance)
"""


def test_fused_ring_under_rank_contexts():
    run_checks_on_sim_devices(RANKS, 1, **A3)


REFUSED = """
import numpy as np
from acl_fa import parallel
from acl_fa.runtime.errors import InvalidArgumentError

q = np.zeros((1, 2, 64, 32), np.float16)
cases = [
    (dict(devices=[0, 1, 2], fused=True), "S=64 is not a multiple of the 3 devices"),
    (dict(devices=[0, 1], fused=True, accumulate="int16"), "the fused ring accumulates in float32"),
]
import os
if os.environ["ACL_FA_SIM_SOC"] == "Ascend910B2":
    cases = [(dict(devices=[0, 1], fused=True), "Atlas A3 (ascend910_93) only")]
for kwargs, words in cases:
    try:
        parallel.ring_attention(q, q, q, **kwargs); raise SystemExit(f"no error for {kwargs}")
    except InvalidArgumentError as exc:
        assert words in str(exc), (words, str(exc))
    print("ok", words)
"""


def test_fused_ring_refuses_what_it_cannot_run():
    run_checks_on_sim_devices(REFUSED, 2, **A3)
    run_checks_on_sim_devices(REFUSED, 1, ACL_FA_SIM_SOC="Ascend910B2")


def test_cli_run_parallel_ring_fused_in_one_process_and_under_launch():
    """`acl-fa run --parallel ring --fused` (threads) and under `acl-fa launch -n 4` (one process per
    device): the report says fused, every link carries K and V of S / P rows per step, the check
    against the float64 reference passes."""
    args = ["--parallel", "ring", "--fused", "--seq", "96", "--causal", "--heads", "2", "--kv-heads", "1",
            "--head-dim", "32"]
    # S=96 over 4 devices: 24 rows, 1 kv head, D=32, fp16, K and V: 3072 B per step but the last.
    text = run_on_sim_devices(["-m", "acl_fa", "run", *args, "--devices", "4"], **A3)
    assert "fused: one RingAttention launch per step" in text and "(zigzag split)" not in text, text
    assert "3072,3072,3072,0" in text and ": OK" in text, text
    env = sim_devices_env(**A3)  # (without any rank variables of this process: NOT_INHERITED_BY_SIM_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "launch", "-n", "4", "--timeout", "200", "--", "acl-fa",
                           "run", *args], capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[rank 0] acl-fa run --parallel ring: B=1 N=2 Nkv=1 S=96" in proc.stdout, proc.stdout
    assert "fused: one RingAttention launch per step" in proc.stdout and "3072,3072,3072,0" in proc.stdout
    assert ": OK" in proc.stdout, proc.stdout
