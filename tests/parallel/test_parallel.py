"""acl_fa.parallel.ring_attention: sharded over simulated devices == the float64 reference within
the 2x-naive rule (ring, causal zigzag and not, GQA, S not divisible by the device count,
2/3/4/8 devices, every layout, random and q = k = v inputs); bytes per link per step = the analytic K/V shard size; bad input
refused before device work, named; the partial outputs are merged on the devices (device -> host
bytes of a ring call = one output and its LSE).

Runs in a fresh process: loading HCCL makes 8 simulated devices the default for the process.
"""
import pytest

from conftest import run_checks_on_sim_devices, run_cli_on_sim_devices, run_on_sim_devices

CHECK = """
import numpy as np, ml_dtypes, acl_fa
from acl_fa import parallel
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError

from acl_fa.spec.layouts import from_bnsd

# devices, causal, layout, N, Nkv, S, dtype, data. q=k=v: every row dominated by its own key,
# |out| up to ~4 -- the case where merging in the output in fp16 (accumulate="output") exceeded the
# tolerance (docs/lse_merge.md); "outlier": random, with one V row of 1000 that no query attends to
# (its key scores ~20 below the others), which a per-head fixed-point bound fails by 22x. Each case
# runs with the default merge (accumulate="float32") and with "int16" (the running result in int16
# units of per-row bounds), both held to the 2x-naive rule.
CASES = [
    (2, False, "BNSD", 2, 2, 40, "float16", "random"),
    (4, True, "BSND", 4, 2, 37, "float16", "random"),
    (3, False, "BSH", 4, 4, 29, "float16", "random"),
    (8, True, "BNSD", 2, 1, 70, "bfloat16", "random"),
    (2, True, "BNSD", 2, 2, 33, "float16", "random"),
    (4, True, "BNSD", 2, 2, 64, "float16", "q=k=v"),
    (2, False, "BSND", 4, 2, 61, "float16", "q=k=v"),
    (8, True, "BNSD", 2, 2, 64, "float16", "q=k=v"),
    (8, False, "BNSD", 2, 1, 100, "float16", "q=k=v"),
    (3, True, "BSH", 2, 2, 45, "float16", "q=k=v"),
    (8, True, "BNSD", 2, 2, 128, "bfloat16", "q=k=v"),
    (4, False, "BNSD", 2, 2, 64, "float16", "outlier"),
]
rng = np.random.default_rng(7)
for (p, causal, layout, n, nkv, s, dtype, data), accumulate in [(c, a) for c in CASES for a in (None, "int16")]:
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    d = 32
    if data == "q=k=v":  # k = v = q's first head of each kv group (q = k = v without GQA)
        qb = rng.standard_normal((2, n, s, d)).astype(dt)
        q, k = from_bnsd(qb, layout), from_bnsd(np.ascontiguousarray(qb[:, ::n // nkv]), layout)
        v = k
    else:
        q = rng.standard_normal(shape_of(layout, 2, n, s, d)).astype(np.float32)
        k = rng.standard_normal(shape_of(layout, 2, nkv, s, d)).astype(np.float32)
        v = rng.standard_normal(shape_of(layout, 2, nkv, s, d)).astype(np.float32)
        if data == "outlier":
            q[..., 0] = np.abs(q[..., 0]) + 2
            k[:, :, s // 2, 0] = -40
            v[:, :, s // 2] = 1000
        q, k, v = q.astype(dt), k.astype(dt), v.astype(dt)
    heads = dict(num_heads=n, num_kv_heads=nkv) if layout == "BSH" else {}
    out, lse, rep = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, layout=layout,
                                            report=True, accumulate=accumulate, **heads)
    assert out.shape == q.shape and out.dtype == dt and lse.shape == (2, n, s)
    ref_out, ref_lse = attention_reference(q, k, v, causal=causal, layout=layout, **heads)
    scale = 1 / np.sqrt(d)
    naive = naive_same_precision(q, k, v, dt, causal=causal, scale=scale, layout=layout, heads=list(range(n)), **heads)
    acc = check_accuracy(to_bnsd(out, layout, n), lse, to_bnsd(ref_out, layout, n), ref_lse, naive, dtype,
                         list(range(n)))
    assert acc.ok, (p, causal, layout, data, accumulate, acc)
    assert acc.lse_max_error < 1e-3, acc
    # Each step but the last, rank r sends the K and V chunks it holds (those of rank r - step).
    chunks = parallel.zigzag_chunks(s, p, causal)
    for r in range(p):
        for step in range(p):
            src = (r - step) % p
            rows = sum(b - a for a, b in chunks[src])
            expected = 0 if step == p - 1 else 2 * 2 * nkv * rows * d * dt.itemsize
            assert rep.link_bytes_per_step[r][step] == expected, (r, step, rep.link_bytes_per_step[r], expected)
    if causal:
        assert rep.balance <= 1.15, rep.balance  # tiny S: chunks differ by a row
    # The partials are merged on the devices: only the output and its LSE come back to the host.
    assert sum(rep.d2h_bytes) == 2 * n * s * (d * dt.itemsize + 4), (rep.d2h_bytes, 2 * n * s * (d * dt.itemsize + 4))
    print("ok", p, causal, layout, data, accumulate, acc.max_error / acc.tolerance, rep.balance)

q = np.zeros((1, 2, 16, 32), np.float16)
BAD = [
    (dict(devices=[0, 0]), InvalidArgumentError, "devices[1]=0 repeats devices[0]"),
    (dict(devices=[0, 9]), InvalidArgumentError, "devices[1]=9 is out of range: this host has 8 devices"),
    (dict(devices=[0, True]), InvalidTypeError, "devices[1] must be an integer"),
    (dict(devices=list(range(8)), causal=True), InvalidArgumentError,
     "S=15 cannot be split over 8 devices: the zigzag split needs S >= 2P = 16"),
]
for kwargs, error, words in BAD:
    x = q[:, :, :15] if kwargs.get("causal") else q
    try:
        parallel.ring_attention(x, x, x, **kwargs); raise SystemExit(f"no error for {kwargs}")
    except error as exc:
        assert words in str(exc), (words, str(exc))
try:
    parallel.ring_attention(q, q[:, :, :8], q[:, :, :8], devices=[0, 1]); raise SystemExit("no error")
except InvalidArgumentError as exc:
    assert "Sq=16 must equal Skv=8" in str(exc)
print("ok bad inputs")
"""


def test_ring_attention_matches_the_reference_and_counts_the_ring():
    run_checks_on_sim_devices(CHECK, 25)


OUTLIER_CHANNEL = """
import numpy as np, acl_fa
from acl_fa import parallel
from acl_fa.reference.accuracy import naive_same_precision
from acl_fa.reference.attention import attention_reference

# B1 N2 S1024 D64 causal on 4 devices, V channel 0 30,000x the others (outlier channels are common
# in real models; random isotropic data hides what follows). The 2x-naive rule is applied to the
# small channels on their own: an error there is invisible next to channel 0's rounding.
rng = np.random.default_rng(3)
b, n, s, d = 1, 2, 1024, 64
q = rng.standard_normal((b, n, s, d)).astype(np.float16)
k = rng.standard_normal((b, n, s, d)).astype(np.float16)
v = rng.standard_normal((b, n, s, d)) * 0.01
v[..., 0] *= 30000
v = v.astype(np.float16)
ref, _ = attention_reference(q, k, v, causal=True)
naive = naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(d), layout="BNSD", heads=[0, 1])
naive_small = np.abs(naive[..., 1:] - ref[..., 1:]).max()
tolerance = max(2 * naive_small, 2.0 ** -10 * np.abs(ref[..., 1:]).max())
one = acl_fa.flash_attention(q, k, v, causal=True)
assert np.abs(one[..., 1:] - ref[..., 1:]).max() <= tolerance
for accumulate in ("float32", "output", "int16", None):
    out, _ = parallel.ring_attention(q, k, v, devices=[0, 1, 2, 3], causal=True, accumulate=accumulate)
    small = np.abs(out[..., 1:].astype(np.float64) - ref[..., 1:]).max()
    if accumulate == "int16":
        # Fixed point in units of the row's bound keeps an absolute precision of bound / 65534 per
        # merge: the small channels fail the rule (docs/lse_merge.md, "Outlier channels"). A row gets
        # at most 2P = 8 partials (one per zigzag key chunk it sees), each merge adding at most half a
        # unit of a bound <= max |V|; the result's rounding to float16 is far below that.
        assert small > tolerance, (small, tolerance)
        assert small <= 8 * np.abs(v[..., 0].astype(np.float64)).max() / 65534, small
    else:
        assert small <= tolerance, (accumulate, small, tolerance)
    print("ok", accumulate, small, tolerance)
"""


def test_every_merge_mode_on_an_outlier_channel():
    """The issue's case: the default (float32) and "output" keep every channel within the 2x-naive
    rule; "int16" loses the small channels within its documented bound (why it is not the default)."""
    run_checks_on_sim_devices(OUTLIER_CHANNEL, 4)


def test_cli_run_parallel_ring_reports_devices_links_overlap_and_check():
    text, report = run_cli_on_sim_devices("--parallel", "ring", "--devices", "4", "--seq", "96", "--causal",
                                          "--heads", "2", "--kv-heads", "1", "--head-dim", "32")
    assert "on devices [0, 1, 2, 3] (zigzag split)" in text
    assert "link model (modeled): HCCS" in text and "balance (max/mean FLOPs): 1.0000" in text
    assert "hidden by overlap" in text and ": OK" in text, text
    # S=96 over 2P=8 chunks of 12 rows: each step but the last moves K and V of 2 chunks, 1 kv head, D=32, fp16
    assert report["link_bytes_per_step"][0] == [2 * 24 * 32 * 2] * 3 + [0]
    assert report["accuracy"]["max_error"] <= report["accuracy"]["tolerance"]


ORDERING = """
import time
import numpy as np, acl_fa
from acl_fa import parallel
from acl_fa.runtime.errors import AclError
from acl_fa.runtime.session import live_counts
from acl_fa.runtime.loader import get_backend

rng = np.random.default_rng(3)
q = rng.standard_normal((1, 2, 64, 32)).astype(np.float16)
backend = get_backend()
backend.call("aclfaSimSetFaults", b"aclrtStreamWaitEvent:1")
start = time.monotonic()
try:
    parallel.ring_attention(q, q, q, devices=[0, 1, 2, 3], causal=True); raise SystemExit("no error")
except AclError as exc:
    assert exc.api == "aclrtStreamWaitEvent", exc
backend.call("aclfaSimSetFaults", b"")
print("failed as injected after", round(time.monotonic() - start, 1), "s")
counts = live_counts(backend)
assert counts["streams"] == 0 and counts["events"] == 0 and counts["deviceAllocations"] == 0, counts
out, lse = parallel.ring_attention(q, q, q, devices=[0, 1, 2, 3], causal=True)
# The 2x-naive rule against the float64 reference (the ring's merges round each partial into the
# float16 output, so it is not bit-equal to the single-device op).
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference
ref, ref_lse = attention_reference(q, q, q, causal=True)
naive = naive_same_precision(q, q, q, np.dtype(np.float16), causal=True, scale=1 / np.sqrt(32), layout="BNSD",
                             heads=[0, 1])
acc = check_accuracy(out, lse, ref, ref_lse, naive, "float16", [0, 1])
assert acc.ok, acc
print("ok ordering")
"""


def test_ring_orders_its_streams_on_the_device_and_fails_cleanly():
    """The ring's comm and compute streams are ordered by aclrtStreamWaitEvent (an injected
    failure of that call surfaces with its name); the other ranks, whose peer stopped, end by
    HCCL_EXEC_TIMEOUT instead of hanging; nothing is left behind and the next ring works."""
    # 10 s: long enough that, on a loaded host, no rank times out before the injected failure
    # surfaces (3 s did once at load 13), short enough to keep the test quick.
    out = run_on_sim_devices(ORDERING, timeout=300, HCCL_EXEC_TIMEOUT="10")
    assert "ok ordering" in out, out


CTRL_C = """
import os, signal, time, numpy as np
from acl_fa import parallel
from acl_fa.runtime.loader import get_backend
from acl_fa.runtime.session import live_counts

backend = get_backend()
launches = []
real = backend.call
ctrl_c = []


watched = ["aclnnFlashAttention"]


def call(api, *args):  # counts the ring's FlashAttention launches; Ctrl-C at the one asked for
    if api == watched[0]:
        launches.append(api)
        if len(launches) in ctrl_c:
            os.kill(os.getpid(), signal.SIGINT)  # lands in the main thread while the rank threads run
        time.sleep(0.05)  # a launch takes a while, as on a device: steps are not over before the stop
    return real(api, *args)


backend.call = call
q = np.random.default_rng(2).standard_normal((1, 2, 4096, 64)).astype(np.float16)
parallel.ring_attention(q, q, q, devices=list(range(8)), causal=True)
full = len(launches)
del launches[:]
ctrl_c.append(3)
start = time.monotonic()
try:
    parallel.ring_attention(q, q, q, devices=list(range(8)), causal=True)
    raise SystemExit("the ring ended without KeyboardInterrupt")
except KeyboardInterrupt:
    pass
stopped = len(launches)
counts = live_counts(backend)
assert counts["streams"] == 0 and counts["events"] == 0 and counts["deviceAllocations"] == 0, counts
del ctrl_c[:]
out, lse = parallel.ring_attention(q[:, :, :256], q[:, :, :256], q[:, :, :256], devices=list(range(8)), causal=True)
assert np.isfinite(out.astype(np.float32)).all()
# 8 steps; Ctrl-C during step 0 or 1 stops every rank by the step after the furthest one begun.
assert stopped <= full // 2, (stopped, full)
print("ok stopped after", stopped, "of", full, "launches in", round(time.monotonic() - start, 1), "s")

# The ring backward stops at an agreed exchange the same way; Ulysses (one exchange round, one
# call, one return round) runs its ranks to their end; both then raise the KeyboardInterrupt.
out, lse = parallel.ring_attention(q, q, q, devices=list(range(8)), causal=True)
for name, run in (("backward", lambda: parallel.ring_attention_backward(q, q, q, q, out, lse, devices=list(range(8)),
                                                                        causal=True)),
                  ("ulysses", lambda: parallel.ulysses_attention(q, q, q, devices=[0, 1], causal=True))):
    del launches[:]
    watched[0] = "aclnnFlashAttentionGrad" if name == "backward" else "aclnnFlashAttention"
    ctrl_c[:] = [1]
    try:
        run()
        raise SystemExit(f"{name}: ended without KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    counts = live_counts(backend)
    assert counts["streams"] == 0 and counts["events"] == 0 and counts["deviceAllocations"] == 0, (name, counts)
    if name == "backward":  # 136 launches in all, like the forward: stopped by the gate
        assert len(launches) <= full // 2, (len(launches), full)
    print("ok", name, "interrupted after", len(launches), "launches")
"""


def test_ctrl_c_ends_the_whole_ring_with_keyboard_interrupt():
    """Ctrl-C during ring_attention (SIGINT lands in the main thread; the ranks are other threads):
    the ranks stop at an agreed step, nothing is closed under a running kernel or exchange, the
    KeyboardInterrupt (no 507015 in its place) reaches the caller, nothing is left behind and the
    next ring works. The child's own stderr must stay empty: no rank thread's traceback."""
    out = run_on_sim_devices(CTRL_C, timeout=300)
    assert "ok stopped after" in out and "ok backward" in out and "ok ulysses" in out, out

