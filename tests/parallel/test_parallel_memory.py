"""Ring attention's device memory per rank: the peak HBM a rank's ring holds
(aclrtGetMemInfo, sampled at every allocation point, RankReport.device_bytes) is at most its
rows of Q, K, V, O (+ the output's LSE) plus a constant independent of S: one workspace serving
every call, one spare K/V sub-block the exchange receives into and one call's partial output
(parallel.MemoryBound), with the K/V exchange and the merges cut into sub-blocks of BLOCK_ROWS
rows. Every accumulation: "int16" (the running result in the output's memory as int16 units of
per-row bounds) within (Q + K + V + O) / P with the LSE and the bounds + the constant, "output"
(merged in place into the output, in its dtype) within (Q + K + V + O) / P + the constant,
"float32" (the default) with the accumulator's extra O / P on top.
Run with BLOCK_ROWS = 16 so several sub-blocks travel per step at small S; the per-step
link bytes stay the analytic K/V shard size and the result stays within the 2x-naive rule.

Runs in a fresh process: loading HCCL makes 8 simulated devices the default for the process.
"""
import os
import subprocess
import sys
from pathlib import Path

from conftest import run_checks_on_sim_devices, run_on_sim_devices

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import numpy as np, ml_dtypes
from acl_fa import parallel
from acl_fa.runtime.session import MALLOC_SLACK
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference

parallel.BLOCK_ROWS = 16
B, N, NKV, D = 1, 2, 1, 32
CASES = [  # devices, causal, S, dtype, accumulate: 1, 2 and 4 sub-blocks per chunk; one S not a multiple of anything
    (4, True, 128, "float16", "output"), (4, True, 256, "float16", "output"), (4, True, 512, "float16", "output"),
    (4, True, 128, "float16", "float32"), (4, True, 512, "float16", "float32"),
    (3, False, 151, "float16", "float32"), (8, True, 300, "bfloat16", "output"),
    (4, True, 128, "float16", "int16"), (4, True, 512, "float16", "int16"), (8, True, 300, "bfloat16", "int16"),
]
rng = np.random.default_rng(5)
excess = {}
for p, causal, s, dtype, accumulate in CASES:
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    q = rng.standard_normal((B, N, s, D)).astype(dt)
    k, v = (rng.standard_normal((B, NKV, s, D)).astype(dt) for _ in range(2))
    out, lse, rep = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, report=True,
                                            accumulate=accumulate)
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    naive = naive_same_precision(q, k, v, dt, causal=causal, scale=1 / np.sqrt(D), layout="BNSD", heads=list(range(N)))
    acc = check_accuracy(out, lse, ref, ref_lse, naive, dtype, list(range(N)))
    assert acc.ok, (p, causal, s, acc)
    chunks = parallel.zigzag_chunks(s, p, causal)
    row = 2 * B * NKV * D * dt.itemsize  # K and V of one row
    for r in range(p):
        want = [0 if t == p - 1 else row * sum(b - a for a, b in chunks[(r - t) % p]) for t in range(p)]
        assert rep.link_bytes_per_step[r] == want, (r, rep.link_bytes_per_step[r], want)
    for r, (peak, m) in enumerate(zip(rep.device_bytes, rep.memory_bounds)):
        rows = sum(b - a for a, b in chunks[r])
        assert m.shards == rows * (2 * B * N * D * dt.itemsize + row + B * N * 4), (m, rows)
        # float32: the accumulator holds O / P at 4 bytes an element instead of the dtype's 2.
        assert m.accumulator == (rows * B * N * D * 2 if accumulate == "float32" else 0), m
        # int16: one float32 bound per row and head beside the LSE.
        assert m.row_bounds == (rows * B * N * 4 if accumulate == "int16" else 0), m
        assert 0 < peak <= m.bound, (p, causal, s, r, peak, m)
        if accumulate in ("output", "int16"):
            assert peak <= m.shards_bound, (peak, m)
        # Nothing beyond the ring's own buffers: the forward's calls hold no memory of their own.
        assert peak == rep.ring_buffer_bytes[r], (peak, rep.ring_buffer_bytes[r])
        # Above the shards: the constant and the rounding (which is 2 / BLOCK_ROWS of K, V / P at most).
        assert peak - m.shards - m.accumulator - m.row_bounds <= m.constant + m.rounding
        assert m.rounding <= 2 * rows * row / parallel.BLOCK_ROWS + 4 * row + MALLOC_SLACK * (4 * rows + 10), m
    if (p, causal, dt) == (4, True, np.dtype(np.float16)):
        excess[accumulate, s] = max(peak - m.shards - m.accumulator - m.row_bounds
                                    for peak, m in zip(rep.device_bytes, rep.memory_bounds))
    print("ok", p, causal, s, dtype, accumulate, max(rep.device_bytes), rep.memory_bounds[0], acc.max_error,
          acc.tolerance)
# 4x the rows per device, the same bytes above the shards (up to the rounding: 2 rows per sub-block).
for mode in ("output", "float32", "int16"):
    assert excess[mode, 512] - excess[mode, 128] <= 2 * (512 // 8 // 16) * 2 * 2 * NKV * D * 2 + MALLOC_SLACK * 200, excess
print("excess", excess)
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
for bad, error, words in [("float16", InvalidArgumentError, "accumulate='float16': must be one of int16, float32, output"),
                          (32, InvalidTypeError, "accumulate must be a string, got 32")]:
    try:
        parallel.ring_attention(q, k, v, devices=[0, 1], accumulate=bad); raise SystemExit(f"no error for {bad!r}")
    except error as exc:
        assert words in str(exc), str(exc)
print("refused")
"""


def test_ring_device_memory_is_the_shards_plus_a_constant():
    out = run_checks_on_sim_devices(CHECK, 10)
    assert "excess" in out and "refused" in out, out


def _run_cli(*args):
    env = dict(os.environ, ACL_FA_BACKEND="sim")
    env.pop("ACL_FA_SIM_DEVICE_COUNT", None)
    return subprocess.run([sys.executable, "-m", "acl_fa", "run", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def test_cli_accumulate_chooses_the_ring_merge_and_its_bound():
    """`acl-fa run --parallel ring --accumulate output` merges in the output (no float32 accumulator
    in the bound it prints), int16 in the output with its row bounds, the default into a float32
    accumulator; --accumulate without --parallel ring is a usage error."""
    ring = ["--parallel", "ring", "--devices", "4", "--seq", "256", "--causal", "--head-dim", "32"]
    lines, strict = {}, {}
    for mode in ("output", "float32", "int16"):
        proc = _run_cli(*ring, "--accumulate", mode) if mode != "float32" else _run_cli(*ring)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines[mode] = next(l for l in proc.stdout.splitlines() if l.startswith("memory bound per device"))
        strict[mode] = next(l for l in proc.stdout.splitlines() if l.startswith("(Q + K + V + O) / P"))
        assert "met on every device" in lines[mode] and ": OK" in proc.stdout, proc.stdout
    assert "(the output is the accumulator)" in lines["output"] and "float32 accumulator" not in lines["output"]
    assert "the float32 accumulator beyond O" in lines["float32"]
    assert "+ the int16 running result's row bounds 256 B (the output holds the running result)" in lines["int16"]
    assert strict["int16"].startswith("(Q + K + V + O) / P with O's LSE and row bounds + the constant")
    assert strict["int16"].endswith(": met (the running result in int16 units of per-row bounds: "
                                    "docs/lse_merge.md)"), strict
    # The strict bound, and what meeting it costs in precision (docs/lse_merge.md).
    assert ": met (rounding the running result to the dtype at every merge" in strict["output"], strict
    # S = 256: the float32 accumulator (32 KiB per device) fits in what the constant leaves over.
    assert strict["float32"].endswith(": met"), strict
    for other in (["--seq", "64"], ["--parallel", "ulysses", "--devices", "2", "--seq", "64"]):
        proc = _run_cli(*other, "--accumulate", "output")
        assert proc.returncode == 2 and "--accumulate is for --parallel ring" in proc.stderr, proc.stdout + proc.stderr


def test_report_names_the_precision_cost_of_the_strict_bound():
    """A float32 ring over (Q + K + V + O) / P + the constant is reported NOT met, with the mode that
    meets it and at what precision; the "output" ring's line says it rounds at every merge."""
    from acl_fa import parallel
    from acl_fa.jobs.parallel_run import _memory_lines

    def report(peak, accumulator, row_bounds=0, int16_unsupported=""):
        bound = parallel.MemoryBound(shards=1000, constant=500, rounding=10, accumulator=accumulator,
                                     row_bounds=row_bounds)
        return parallel.RingReport(int16_unsupported=int16_unsupported, devices=[0, 1], causal=True, steps=2, link_bytes=[0, 0],
                                   link_bytes_per_step=[[0, 0]] * 2, flops=[1, 1], modeled_comm_seconds=[[0.0]] * 2,
                                   modeled_compute_seconds=[[0.0]] * 2, wall_seconds=[0.0] * 2, link={},
                                   device_bytes=[peak, peak - 1], ring_buffer_bytes=[peak, peak - 1],
                                   memory_bounds=[bound, bound])

    lines = _memory_lines(report(1800, 500))
    assert lines[1].endswith(": met on every device"), lines
    assert lines[2].endswith(": NOT met (accumulate=int16 or output meets it; int16 at outlier channels' "
                             "precision, output by rounding the running result to the dtype at every merge: "
                             "docs/lse_merge.md)"), lines
    # A chip without the int16 merge (310P, 910A) is not told to use it.
    lines = _memory_lines(report(1800, 500, int16_unsupported="the vector unit of X has no Cast"))
    assert lines[2].endswith(": NOT met (accumulate=output meets it, by rounding the running result to the dtype "
                             "at every merge: docs/lse_merge.md; no int16 merge here: the vector unit of X has no "
                             "Cast)"), lines
    lines = _memory_lines(report(1500, 0))
    assert lines[2].endswith(": met (rounding the running result to the dtype at every merge: docs/lse_merge.md)"), lines
    lines = _memory_lines(report(1540, 0, row_bounds=40))
    assert "+ the int16 running result's row bounds 40 B" in lines[1], lines
    assert lines[2] == ("(Q + K + V + O) / P with O's LSE and row bounds + the constant (no room for a float32 "
                        "accumulator): 1.5 KiB: met (the running result in int16 units of per-row bounds: "
                        "docs/lse_merge.md)"), lines
    assert _memory_lines(report(1551, 0, row_bounds=40))[2].endswith(": NOT met (the running result in int16 units "
                                                                     "of per-row bounds: docs/lse_merge.md)")


COUPLED = """
import numpy as np
from acl_fa import parallel
from acl_fa.runtime.errors import InvalidArgumentError

rng = np.random.default_rng(2)
q = rng.standard_normal((1, 2, 32, 32)).astype(np.float16)
out, lse, rep = parallel.ring_attention(q, q, q, devices=[0, 1], causal=True, report=True)
m = rep.memory_bounds[0]
print("default", m.accumulator > 0, m.row_bounds)
print("no int16:", rep.int16_unsupported)
try:
    parallel.ring_attention(q, q, q, devices=[0, 1], accumulate="int16"); raise SystemExit("no error")
except InvalidArgumentError as exc:
    print("refused", exc)
"""


def test_coupled_chips_default_to_float32_and_refuse_int16_naming_the_chip():
    """310P's vector unit has no Cast between float and int16: the ring's default there is the
    float32 accumulator, and accumulate="int16" is refused before the ring starts."""
    out = run_on_sim_devices(COUPLED, timeout=300, ACL_FA_SIM_SOC="Ascend310P3")
    assert "default True 0" in out, out
    assert "no int16: the vector unit of Ascend310P3 has no Cast between float and int16" in out, out
    assert ("refused accumulate='int16' needs Atlas A2/A3: the vector unit of Ascend310P3 has no Cast between "
            "float and int16") in out, out
