"""acl_fa.parallel.ulysses_attention: all-to-all sequence parallelism over simulated devices ==
the float64 reference within the 2x-naive rule (2/4/8 devices, causal and not, every layout, GQA
split and replicated, S not divisible by the device count); bytes per link of the two
HcclAlltoAllV rounds = the analytic shard sizes; bad input refused before device work, named.

Runs in a fresh process: loading HCCL makes 8 simulated devices the default for the process.
"""
from conftest import run_checks_on_sim_devices, run_cli_on_sim_devices, run_on_sim_devices

CHECK = """
import numpy as np, ml_dtypes
from acl_fa import parallel
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.runtime.errors import InvalidArgumentError

CASES = [  # devices, causal, layout, N, Nkv, S, dtype
    (2, False, "BNSD", 4, 4, 40, "float16"),
    (4, True, "BSND", 8, 4, 37, "float16"),     # GQA split, S % P != 0
    (4, True, "BSH", 4, 2, 33, "float16"),      # GQA replicated: each kv head to 2 ranks
    (8, True, "BNSD", 8, 1, 70, "bfloat16"),    # MQA replicated to every rank
    (8, False, "BSND", 16, 8, 64, "float16"),
]
rng = np.random.default_rng(11)
for p, causal, layout, n, nkv, s, dtype in CASES:
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    b, d = 2, 32
    q = rng.standard_normal(shape_of(layout, b, n, s, d)).astype(dt)
    k = rng.standard_normal(shape_of(layout, b, nkv, s, d)).astype(dt)
    v = rng.standard_normal(shape_of(layout, b, nkv, s, d)).astype(dt)
    heads = dict(num_heads=n, num_kv_heads=nkv) if layout == "BSH" else {}
    out, lse, rep = parallel.ulysses_attention(q, k, v, devices=list(range(p)), causal=causal, layout=layout,
                                               report=True, **heads)
    assert out.shape == q.shape and out.dtype == dt and lse.shape == (b, n, s)
    ref_out, ref_lse = attention_reference(q, k, v, causal=causal, layout=layout, **heads)
    naive = naive_same_precision(q, k, v, dt, causal=causal, scale=1 / np.sqrt(d), layout=layout,
                                 heads=list(range(n)), **heads)
    acc = check_accuracy(to_bnsd(out, layout, n), lse, to_bnsd(ref_out, layout, n), ref_lse, naive, dtype,
                         list(range(n)))
    assert acc.ok and acc.lse_max_error < 1e-3, (p, causal, layout, acc)
    assert rep.link_bytes == rep.analytic_link_bytes, (rep.link_bytes, rep.analytic_link_bytes)
    assert all(rep.link_bytes[r][j] > 0 for r in range(p) for j in range(p) if r != j)
    if nkv < p:
        assert rep.kv_heads == [[r * nkv // p] for r in range(p)], rep.kv_heads
    assert rep.balance < 1.01 and rep.modeled()["comm_seconds"] > 0
    print("ok", p, causal, layout, n, nkv, s, acc.max_error, acc.tolerance)

q = np.zeros((1, 6, 16, 32), np.float16)
BAD = [
    (dict(devices=[0, 1, 2, 3]), q, q, "N=6 query heads are not divisible by 4 devices"),
    (dict(devices=[0, 1, 2]), q, q[:, :2], "cannot share Nkv=2 key/value heads among 3 devices"),
    (dict(devices=[0, 0]), q, q, "devices[1]=0 repeats devices[0]"),
    (dict(devices=[0, 1]), q[:, :, :1], q[:, :, :1], "S=1 cannot be split over 2 devices"),
]
for kwargs, x, kv, words in BAD:
    try:
        parallel.ulysses_attention(x, kv, kv, **kwargs); raise SystemExit(f"no error for {kwargs}")
    except InvalidArgumentError as exc:
        assert words in str(exc), (words, str(exc))
print("ok bad inputs")
"""


def test_ulysses_matches_the_reference_and_counts_the_all_to_alls():
    run_checks_on_sim_devices(CHECK, 6)


def test_cli_run_parallel_ulysses_reports_links_against_the_analytic_sizes_and_the_check():
    text, report = run_cli_on_sim_devices("--parallel", "ulysses", "--devices", "4", "--seq", "90", "--causal",
                                          "--heads", "8", "--kv-heads", "2", "--head-dim", "32")
    assert "on devices [0, 1, 2, 3] (2 query heads per device; key/value heads per device [[0], [0], [1], [1]])" in text
    assert text.count("equal") == 4 and "DIFFERS" not in text, text
    assert "not overlapped" in text and ": OK" in text, text
    # S=90 over 4 ranks: rows 22, 23, 22, 23; rank 0 -> rank 1: Q (2 heads) + K, V (1 head each) of its 22 rows in,
    # then rank 1's 23 rows of its 2 output heads back; D=32, fp16
    assert report["link_bytes"][0][1] == 32 * 2 * (22 * (2 + 2) + 23 * 2)
    assert report["link_bytes"] == report["analytic_link_bytes"]
    assert report["accuracy"]["max_error"] <= report["accuracy"]["tolerance"]


FAILURE = """
import numpy as np
from acl_fa import parallel
from acl_fa.runtime.errors import AclError
from acl_fa.runtime.session import live_counts
from acl_fa.runtime.loader import get_backend

rng = np.random.default_rng(5)
q = rng.standard_normal((1, 4, 48, 32)).astype(np.float16)
backend = get_backend()
for fault in ("HcclAlltoAllV:3", "aclrtStreamWaitEvent:2"):
    backend.call("aclfaSimSetFaults", fault.encode())
    try:
        parallel.ulysses_attention(q, q, q, devices=[0, 1, 2, 3], causal=True); raise SystemExit("no error")
    except AclError as exc:
        assert exc.api == fault.split(":")[0], (fault, exc)
    backend.call("aclfaSimSetFaults", b"")
    counts = live_counts(backend)
    assert counts["streams"] == 0 and counts["events"] == 0 and counts["deviceAllocations"] == 0, counts
out, lse = parallel.ulysses_attention(q, q, q, devices=[0, 1, 2, 3], causal=True)
ref, ref_lse = parallel.ring_attention(q, q, q, devices=[0, 1], causal=True)
assert np.abs(out.astype(np.float32) - ref.astype(np.float32)).max() < 2e-3
print("ok failures")
"""


def test_a_failed_call_on_one_rank_surfaces_by_name_and_leaves_nothing_behind():
    """An injected HCCL or stream-wait failure on one rank is the error raised (its peers end by
    HCCL_EXEC_TIMEOUT, their compute streams are not held for ever by the missing data); every
    session is closed with nothing left, and the next run works."""
    out = run_on_sim_devices(FAILURE, timeout=300, HCCL_EXEC_TIMEOUT="3")
    assert "ok failures" in out, out
