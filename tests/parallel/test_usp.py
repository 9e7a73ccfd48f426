"""2-D sequence parallelism (acl_fa.parallel.usp_attention, issue 32 item 3): Ulysses groups inside,
a ring across them; N = 32 heads on 48 devices (U = 16, R = 3; 8 key/value heads replicated over
the groups' members) equal to the float64 reference by the 2x-naive rule, forward and backward
(usp_attention_backward: gradients by the 2x-naive rule, the all-to-alls' bytes per link equal to
docs/hccl.md's formula by the link counters); smaller grids (split and replicated key/value heads,
U = P with no ring, every layout, bfloat16); the group plan and each rank's rows; a head count
the group size does not divide refused before any device work; an injected all-to-all failure in
the backward raised by name with nothing left behind; one process per rank (usp.rank_usp_attention,
under acl-fa launch) equal to the threads bit for bit, a wrong lse on one rank refused by all."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import run_checks_on_sim_devices, run_on_sim_devices
from acl_fa.parallel.usp import default_ulysses_size, usp_groups, usp_plan

ROOT = Path(__file__).resolve().parents[2]


def test_group_plan():
    assert default_ulysses_size(48, 32, 8) == 16 and default_ulysses_size(6, 4, 2) == 2
    assert default_ulysses_size(8, 3, 3) == 1  # no group size divides both: the ring alone
    ugroups, rings = usp_groups(6, 3)
    assert ugroups == [[0, 1, 2], [3, 4, 5]] and rings == [[0, 3], [1, 4], [2, 5]]
    # S=40 causal over R=2 ring positions (zigzag chunks of 10: position 0 holds 0..9 and 30..39) of U=2
    # members each: member 1 of group 0 holds the second half of its position's rows, 30..39.
    plan = usp_plan(40, 4, 2, 1, 2, True)
    assert plan.chunks == [[(0, 10), (30, 40)], [(10, 20), (20, 30)]] and plan.local == [[(0, 10), (10, 20)]] * 2
    assert [plan.ranges(r) for r in range(4)] == [[(0, 10)], [(30, 40)], [(10, 20)], [(20, 30)]]
    plan = usp_plan(30, 2, 2, 2, 2, False)  # U = P: one group, no ring
    assert plan.rings == 1 and [plan.ranges(r) for r in range(2)] == [[(0, 15)], [(15, 30)]]


SCRIPT = """
import numpy as np
from acl_fa.parallel.usp import usp_attention, usp_attention_backward
from acl_fa.reference.accuracy import check_accuracy, check_gradients, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.runtime.errors import InvalidArgumentError
B, N, NKV, S, D = 1, 32, 8, 96, 32
rng = np.random.default_rng(7)
q = rng.standard_normal((B, N, S, D)).astype(np.float16)
k, v = (rng.standard_normal((B, NKV, S, D)).astype(np.float16) for _ in range(2))
out, lse = usp_attention(q, k, v, devices=list(range(48)), causal=True)
heads = list(range(N))
ref, ref_lse = attention_reference(q, k, v, causal=True)
naive = naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(D), layout="BNSD", heads=heads)
acc = check_accuracy(out, lse, ref, ref_lse, naive, "float16", heads)
assert acc.ok, acc
print("ok 48 devices", acc.max_error, acc.tolerance)
dout = rng.standard_normal(q.shape).astype(np.float16)
*grads, rep = usp_attention_backward(dout, q, k, v, out, lse, devices=list(range(48)), causal=True, report=True)
assert (rep.ulysses, rep.rings) == (16, 3) and rep.link_bytes == rep.analytic_link_bytes, rep
checks = check_gradients(grads, (q, k, v, dout), causal=True, scale=1 / np.sqrt(D), layout="BNSD", num_heads=N,
                         num_kv_heads=NKV, dtype_name="float16")
assert all(c.ok for c in checks), checks
print("ok 48 devices backward", [(c.name, c.max_error, c.tolerance) for c in checks])
try:
    usp_attention(q[:, :6], k[:, :6], v[:, :6], devices=list(range(8)), ulysses=4, causal=True)
    raise SystemExit("no error")
except InvalidArgumentError as exc:
    assert "N=6 query heads are not divisible by 4 devices" in str(exc), exc
print("ok refused")
"""


def test_n32_on_48_devices_matches_the_reference_forward_and_backward():
    env = dict(os.environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_DEVICE_COUNT="48")
    for name in ("ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True, timeout=900,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok ") == 3, proc.stdout


GRADS = """
import sys
import numpy as np
from acl_fa.parallel.usp import usp_attention, usp_attention_backward
from acl_fa.parallel.ulysses_backward import ulysses_backward_link_bytes
from acl_fa.runtime.errors import InvalidArgumentError
sys.path.insert(0, "tests/parallel")
from grad_cases import check_case, expect_refusal, grad_case
CASES = [  # devices, ulysses, causal, layout, N, Nkv, S, dtype
    (4, 2, True, "BNSD", 4, 4, 40, "float16"),   # split kv heads, a ring of 2 groups
    (4, 2, False, "BSND", 4, 1, 30, "float16"),  # one kv head replicated to both members
    (4, 4, True, "BSH", 4, 2, 24, "bfloat16"),   # U = P: no ring
]
rng = np.random.default_rng(3)
for p, u, causal, layout, n, nkv, s, dtype in CASES:
    q, k, v, dout, heads, dt = grad_case(rng, layout, n, nkv, s, dtype)
    out, lse = usp_attention(q, k, v, devices=list(range(p)), ulysses=u, causal=causal, layout=layout, **heads)
    *grads, rep = usp_attention_backward(dout, q, k, v, out, lse, devices=list(range(p)), ulysses=u, causal=causal,
                                         layout=layout, report=True, **heads)
    checks = check_case(grads, q, k, v, dout, causal, layout, n, nkv, dtype)
    # group g's all-to-alls: the Ulysses backward's bytes over its L_g rows and U ranks (here L_g = S / R)
    kv_per_member = max(1, nkv // u)  # split, or one replicated head
    per_group = ulysses_backward_link_bytes(s * u // p, u, 1, n, kv_per_member, 32, dt.itemsize)
    assert rep.link_bytes == rep.analytic_link_bytes == per_group * (p // u), (rep.link_bytes, per_group)
    print("ok", p, u, causal, layout, dtype, [(c.name, round(c.max_error, 5)) for c in checks])
q = np.zeros((1, 4, 16, 32), np.float16)
expect_refusal(lambda: usp_attention_backward(q, q, q, q, q, np.zeros((1, 4, 16), np.float32), devices=[0, 1, 2, 3],
                                              ulysses=3), InvalidArgumentError,
               "ulysses=3 must be a group size dividing the 4 devices")
print("ok refused")
"""


def test_backward_matches_the_reference_and_the_all_to_all_formula():
    run_checks_on_sim_devices(GRADS, 4)


FAILURE = """
import numpy as np
from acl_fa.parallel.usp import usp_attention, usp_attention_backward
from acl_fa.runtime.errors import AclError
from acl_fa.runtime.session import live_counts
from acl_fa.runtime.loader import get_backend

rng = np.random.default_rng(5)
q = rng.standard_normal((1, 2, 32, 32)).astype(np.float16)
backend = get_backend()
out, lse = usp_attention(q, q, q, devices=[0, 1, 2, 3], ulysses=2, causal=True)
for fault in ("HcclAlltoAllV:7",):  # a Ulysses round (the ring's own failures: test_parallel_backward.py)
    backend.call("aclfaSimSetFaults", fault.encode())
    try:
        usp_attention_backward(q, q, q, q, out, lse, devices=[0, 1, 2, 3], ulysses=2, causal=True)
        raise SystemExit("no error")
    except AclError as exc:
        assert exc.api == fault.split(":")[0], (fault, exc)
    backend.call("aclfaSimSetFaults", b"")
    counts = live_counts(backend)
    assert counts["streams"] == 0 and counts["events"] == 0 and counts["deviceAllocations"] == 0, counts
    print("ok", fault)
dq, dk, dv = usp_attention_backward(q, q, q, q, out, lse, devices=[0, 1, 2, 3], ulysses=2, causal=True)
assert np.isfinite(dq.astype(np.float32)).all()
print("ok after failures")
"""


def test_a_failed_call_in_the_backward_surfaces_by_name_and_leaves_nothing_behind():
    """An injected failure of a Ulysses all-to-all in the USP backward is the error raised (the peers
    end by HCCL_EXEC_TIMEOUT); every stream, event and device allocation is released, and the next
    run works."""
    run_checks_on_sim_devices(FAILURE, 2, timeout=300, HCCL_EXEC_TIMEOUT="3")


RANK = """
import sys, numpy as np
from acl_fa import parallel
from acl_fa.parallel import usp
from acl_fa.runtime.errors import InvalidArgumentError
S, N, NKV, D = 40, 4, 2, 32
rng = np.random.default_rng(1)
q, k, v, dout = (rng.standard_normal((1, n, S, D)).astype(np.float16) for n in (N, NKV, NKV, N))
with parallel.RankContext.from_env() as ctx:
    plan = usp.usp_plan(S, ctx.size, N, NKV, 2, True)
    rows = [plan.rows_of(x, ctx.rank) for x in (q, k, v, dout)]
    out, lse = usp.rank_usp_attention(ctx, *rows[:3], ulysses=2, causal=True)
    try:  # one rank's lse one row short: every rank refuses alike, before its cliques are made
        usp.rank_usp_attention_backward(ctx, rows[3], *rows[:3], out, lse[:, :, :-1] if ctx.rank == 1 else lse,
                                        ulysses=2, causal=True)
        raise SystemExit("no error")
    except InvalidArgumentError as exc:
        assert "rank 1: (1, 2, 19), not (1, 2, 20)" in str(exc), exc
    dq, dk, dv, sent = usp.rank_usp_attention_backward(ctx, rows[3], *rows[:3], out, lse, ulysses=2, causal=True,
                                                       report=True)
    np.savez(f"{sys.argv[1]}/rank{ctx.rank}.npz", out=out, lse=lse, dq=dq, dk=dk, dv=dv, sent=np.array(sent))
    print("ok rank", ctx.rank)
"""

WHOLE = """
import sys, numpy as np
from acl_fa.parallel.usp import usp_attention, usp_attention_backward
S, N, NKV, D = 40, 4, 2, 32
rng = np.random.default_rng(1)
q, k, v, dout = (rng.standard_normal((1, n, S, D)).astype(np.float16) for n in (N, NKV, NKV, N))
out, lse = usp_attention(q, k, v, devices=[0, 1, 2, 3], ulysses=2, causal=True)
dq, dk, dv, rep = usp_attention_backward(dout, q, k, v, out, lse, devices=[0, 1, 2, 3], ulysses=2, causal=True,
                                         report=True)
np.savez(f"{sys.argv[1]}/whole.npz", out=out, lse=lse, dq=dq, dk=dk, dv=dv, sent=np.array(rep.link_bytes))
print("ok whole")
"""


def test_one_process_per_rank_equals_the_threads_bit_for_bit(tmp_path):
    """usp.rank_usp_attention(_backward) under acl-fa launch (the group and ring cliques made from
    the launcher's) == usp_attention(_backward) on threads, bit for bit, with the same all-to-all
    bytes; an lse of the wrong shape on one rank is refused by every rank alike."""
    from acl_fa.parallel.usp import usp_plan

    run_on_sim_devices(["-m", "acl_fa", "launch", "-n", "4", "--timeout", "200", "--", sys.executable, "-c",
                        textwrap.dedent(RANK), str(tmp_path)], timeout=240)
    run_on_sim_devices(WHOLE, argv=[tmp_path])
    whole = np.load(tmp_path / "whole.npz")
    plan = usp_plan(40, 4, 4, 2, 2, True)
    for r in range(4):
        part = np.load(tmp_path / f"rank{r}.npz")
        for name in ("out", "dq", "dk", "dv"):
            assert np.array_equal(part[name], plan.rows_of(whole[name], r)), (r, name)
        g, u = divmod(r, 2)  # the member's heads (N/U = 2) over its group's rows
        assert np.array_equal(part["lse"], np.concatenate([whole["lse"][:, 2 * u:2 * u + 2, a:b]
                                                           for a, b in plan.chunks[g]], axis=2)), r
        assert np.array_equal(part["sent"], whole["sent"][r]), r


if __name__ == "__main__":
    pytest.main([__file__])
