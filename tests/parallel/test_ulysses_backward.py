"""Ulysses backward (acl_fa.parallel.ulysses_attention_backward, issue 32 item 3): the gradients of
head shards against the float64 backward by the 2x-naive rule (split and replicated key/value
heads, S not a multiple of P, every layout), its all-to-all bytes per link equal to
ulysses_backward_link_bytes (docs/hccl.md's formula) by the simulated HCCL's counters, and bad
arguments refused before any device work. One fresh process (8 default simulated devices)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import run_checks_on_sim_devices

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import numpy as np
from acl_fa import parallel
from acl_fa.parallel.ulysses_backward import ulysses_backward_link_bytes
from acl_fa.runtime.errors import InvalidArgumentError
sys.path.insert(0, "tests/parallel")
from grad_cases import check_case, expect_refusal, grad_case

CASES = [  # devices, causal, layout, N, Nkv, S, dtype
    (2, True, "BNSD", 4, 2, 37, "float16"),     # split kv heads, S odd
    (4, False, "BSND", 4, 2, 30, "float16"),    # each kv head replicated to 2 ranks
    (2, True, "BSH", 2, 2, 24, "bfloat16"),
]
rng = np.random.default_rng(3)
for p, causal, layout, n, nkv, s, dtype in CASES:
    q, k, v, dout, heads, dt = grad_case(rng, layout, n, nkv, s, dtype)
    out, lse = parallel.ulysses_attention(q, k, v, devices=list(range(p)), causal=causal, layout=layout, **heads)
    *grads, rep = parallel.ulysses_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), causal=causal,
                                                      layout=layout, report=True, **heads)
    checks = check_case(grads, q, k, v, dout, causal, layout, n, nkv, dtype)
    kv_per_rank = len(rep.kv_heads[0])
    assert rep.link_bytes == ulysses_backward_link_bytes(s, p, 1, n, kv_per_rank, 32, dt.itemsize) == \\
        rep.analytic_link_bytes, (rep.link_bytes, rep.analytic_link_bytes)
    assert all(f > 0 for f in rep.flops)
    print("ok", p, causal, layout, dtype, rep.link_bytes[0][1], [(c.name, round(c.max_error, 5)) for c in checks])

q = np.zeros((1, 4, 16, 32), np.float16)
lse = np.zeros((1, 4, 16), np.float32)
for kwargs, args, words in [
    (dict(devices=[0, 1, 2]), (q, lse), "N=4 query heads are not divisible by 3 devices"),
    (dict(devices=[0, 1]), (q, lse[:, :, :8]), "lse has shape (1, 4, 8)"),
]:
    expect_refusal(lambda: parallel.ulysses_attention_backward(q, q, q, q, args[0], args[1], **kwargs),
                   InvalidArgumentError, words)
print("ok refused")
"""


def test_ulysses_backward_gradients_bytes_and_refusals():
    run_checks_on_sim_devices(SCRIPT, 4)


RANK = """
import os, sys, numpy as np
from acl_fa import parallel
from acl_fa.parallel.clique import split_bounds
B, N, NKV, S, D = 1, 4, 1, 37, 32
rng = np.random.default_rng(9)
q = rng.standard_normal((B, N, S, D)).astype(np.float16)
k, v = (rng.standard_normal((B, NKV, S, D)).astype(np.float16) for _ in range(2))
dout = rng.standard_normal(q.shape).astype(np.float16)
with parallel.RankContext.from_env() as ctx:
    a, b = split_bounds(S, ctx.size)[ctx.rank]
    mine = lambda x: np.ascontiguousarray(x[:, :, a:b])
    out, lse = ctx.ulysses_attention(mine(q), mine(k), mine(v), causal=True)
    dq, dk, dv = ctx.ulysses_attention_backward(mine(dout), mine(q), mine(k), mine(v), out, lse, causal=True)
    np.savez(os.path.join(sys.argv[1], f"rank{ctx.rank}.npz"), out=out, lse=lse, dq=dq, dk=dk, dv=dv, a=a, b=b)
    if ctx.rank == 0:
        whole_out, whole_lse = parallel.ulysses_attention(q, k, v, devices=[2, 3], causal=True)
        grads = parallel.ulysses_attention_backward(dout, q, k, v, whole_out, whole_lse, devices=[2, 3], causal=True)
        np.savez(os.path.join(sys.argv[1], "single.npz"), q=q, k=k, v=v, dout=dout, out=whole_out, lse=whole_lse,
                 dq=grads[0], dk=grads[1], dv=grads[2])
"""


def test_ulysses_forward_and_backward_one_process_per_rank_equal_the_threads_and_the_reference(tmp_path):
    """Under acl-fa launch (2 ranks, the key/value head replicated to both): every rank's rows of
    out, dq, dk, dv and its heads' LSE equal the one-process run bit for bit, which the float64
    backward checks by the 2x-naive rule."""
    import numpy as np

    from acl_fa.reference.accuracy import check_gradients

    env = dict(os.environ, ACL_FA_BACKEND="sim")
    for name in ("ACL_FA_SIM_DEVICE_COUNT", "ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "acl_fa", "launch", "-n", "2", "--timeout", "500", "--",
                           sys.executable, "-c", textwrap.dedent(RANK), str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    one = np.load(tmp_path / "single.npz")
    for r in range(2):
        part = np.load(tmp_path / f"rank{r}.npz")
        a, b = int(part["a"]), int(part["b"])
        for name in ("out", "dq", "dk", "dv"):
            assert np.array_equal(part[name], one[name][:, :, a:b]), (r, name)
        assert np.array_equal(part["lse"], one["lse"][:, 2 * r:2 * r + 2]), r
    checks = check_gradients((one["dq"], one["dk"], one["dv"]), (one["q"], one["k"], one["v"], one["dout"]),
                             causal=True, scale=1 / np.sqrt(32), layout="BNSD", num_heads=4, num_kv_heads=1,
                             dtype_name="float16")
    assert all(c.ok for c in checks), checks
