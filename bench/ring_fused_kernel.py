"""The fused ring's running kernel: modeled time and exposed communication of RingAttention launches
(the K/V exchange inside the kernel) against the same kernel without the exchange, and the stream
ring's step beside it, at sizes this machine runs; then the S = 1M N32 64-device projection from
the kernel's measured step.

All times are **modeled** (the simulator's timing model over each launch's instruction trace;
docs/timing_model.md): a RingAttention launch's trace holds the Hccl client's Commit as a COMM_START
lasting the task's modeled link time and each Wait as a COMM_WAIT (docs/hccl.md), so the launch's
modeled time is what the kernel takes with the exchange overlapped as far as the kernel overlaps it.
Links: the simulated HCCL's link model (docs/hccl.md; HCCS 56 GB/s + 2 us per message within a
server, all **assumed**). Chip: Ascend910_93 (Atlas A3) -- the kernel-side AlltoAllV the fused ring
exchanges with exists on A3 only (asc-devkit AlltoAllV.md).

Per size (B1, N heads, R rows per rank, D128 fp16, 2 ranks, non-causal; both ranks symmetric):
- fused step: the modeled time of the ring's step-0 launch (attention + exchange of K and V);
- compute-only: the ring's last-step launch (the same kernel, no exchange);
- link: the two AlltoAllV tasks' modeled link time (K, then V: the server runs tasks in order);
- exposed = (fused step - compute-only) / fused step;
- stream ring: the same step as the stream ring runs it -- FlashAttention calls on <= BLOCK_ROWS
  sub-blocks (their modeled time, profile_job) and the exchange on a comm stream, per step
  max(compute, link) with no launch or event cost (ring_fused_model.py's model; flatters it).

Projection (--project): S = 1,048,576, B1 N32 D128 fp16 on 64 devices of Ascend910_93 (4 servers x
16, the simulated HCCL's A3 table: HCCS within a server, RoCE 50 GB/s + 10 us across, **assumed**).
The fused ring splits contiguously: 16,384 rows per device, K and V = 268,435,456 B per step over
the ring's slowest hop (RoCE between servers). Per step: the kernel's compute = the FlashAttention
kernel's modeled time on the step's chunk pair (profile_job at N = --project-heads, times
32 / that), the fused step = max(compute, link) + the largest overhead the running kernel showed
above (fused step - max(compute-only, link)); all devices step together. Non-causal: every step is
a full 16384 x 16384 block. Causal (contiguous split): the diagonal block, then every step some
device computes a full block (rank 63 at every step). The stream ring beside it: its zigzag split
(two 8192-row chunks per device), 2048-row sub-block calls (profile_job each shape), 2 messages per
sub-block, per step max(compute, link).

    ACL_FA_SIM_SOC=Ascend910_93 ACL_FA_SIM_LIB_DIR=$PWD/build/lib python bench/ring_fused_kernel.py \
        [--rows 1024,4096] [--heads 2] [--project] [--project-heads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import threading

os.environ.setdefault("ACL_FA_SIM_SOC", "Ascend910_93")

from common import sim_chip_and_link, table  # noqa: E402
import ring_fused_model as design  # noqa: E402  (the design model's kernel profiles and sizes)

import numpy as np  # noqa: E402

from acl_fa.jobs.profile import profile_job  # noqa: E402
from acl_fa.jobs.settings import JobSettings  # noqa: E402
from acl_fa.parallel import ring as parallel  # noqa: E402
from acl_fa.parallel.clique import device_clique  # noqa: E402
from acl_fa.parallel.ring_fused import rank_ring_attention_fused  # noqa: E402
from acl_fa.plan.timing import last_model, op_trace  # noqa: E402
from acl_fa.spec.problem import problem_from_sizes  # noqa: E402

HEAD_DIM, ITEMSIZE = 128, 2


def fused_steps(backend, heads: int, rows: int) -> tuple:
    """(fused step s, compute-only step s) of a 2-rank fused ring of `rows` rows per rank: the
    modeled time of the step-0 launch (with exchange) and of the step-1 launch (without)."""
    rng = np.random.default_rng(0)
    shards = [[rng.standard_normal((1, heads, rows, HEAD_DIM)).astype(np.float16) for _ in range(3)]
              for _ in range(2)]
    barrier = threading.Barrier(2)
    seconds = {}
    errors = []

    def hook(rank: int, step: int):
        barrier.wait()  # both ranks' step launches done (symmetric: either is the last traced)
        if rank == 0:
            m = last_model(backend)
            seconds[step] = m.cycles / (m.clock_mhz * 1e6)
        barrier.wait()

    with op_trace(backend), device_clique([0, 1], "sim") as (sessions, comms):
        def run(r):
            try:
                rank_ring_attention_fused(sessions[r], comms[r], *shards[r], causal=False,
                                          scale=1 / np.sqrt(HEAD_DIM), step_hook=lambda step: hook(r, step))
            except BaseException as exc:  # reported below
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    return seconds[0], seconds[1]


def stream_compute(heads: int, rows: int) -> float:
    """Modeled seconds of the stream ring's FlashAttention calls for one off-diagonal step."""
    pieces = parallel.sub_blocks([[rows], [rows]], parallel.BLOCK_ROWS)
    total = 0.0
    for a0, a1 in pieces[0][0]:
        for b0, b1 in pieces[1][0]:
            r = profile_job(problem_from_sizes(seq_q=a1 - a0, seq_kv=b1 - b0, num_heads=heads, head_dim=HEAD_DIM),
                            JobSettings(backend="sim"))
            total += float(r.summary["time_s"])
    return total


SEQ, HEADS, DEVICES = design.SEQ, design.HEADS, design.DEVICES


def kernel_seconds(sq: int, skv: int, causal: bool, heads: int) -> float:
    """The FlashAttention kernel's modeled time on B1 N32 Sq x Skv D128 fp16, profiled at N = heads
    (ring_fused_model.kernel_seconds: one profile per call shape)."""
    design.PROFILE_HEADS[0] = heads
    return design.kernel_seconds(sq, skv, causal)


def projection(backend, overhead: float, heads: int) -> list:
    """Rows of the S = 1M table: (schedule, causal, modeled s, compute-only s)."""
    per_server = int(hccl_link(backend, 0, 1)["devices_per_server"])
    roce = hccl_link(backend, 0, per_server)
    rows = SEQ // DEVICES
    kv = 2 * HEADS * rows * HEAD_DIM * ITEMSIZE
    fused_link = 2 * roce["latency_us"] * 1e-6 + kv / (roce["bandwidth_gbs"] * 1e9)
    full, diag = kernel_seconds(rows, rows, False, heads), kernel_seconds(rows, rows, True, heads)
    out = []
    for causal in (False, True):
        steps = [diag if causal else full] + [full] * (DEVICES - 1)
        total = sum(max(c, fused_link) + overhead for c in steps[:-1]) + steps[-1]
        out.append(("fused ring (RingAttention, contiguous split)", causal, total, sum(steps)))
        # The stream ring: zigzag (causal) or contiguous chunks, BLOCK_ROWS sub-block calls.
        chunks = parallel.zigzag_chunks(SEQ, DEVICES, causal)
        pieces = parallel.sub_blocks([[b - a for a, b in rr] for rr in chunks], parallel.BLOCK_ROWS)
        messages = 2 * len(parallel.ring_units(pieces, 0))
        stream_link = messages * roce["latency_us"] * 1e-6 + kv / (roce["bandwidth_gbs"] * 1e9)
        total = bare = 0.0
        for step in range(DEVICES):
            compute = 0.0
            for rank in (0, DEVICES // 2, DEVICES - 1):  # the ranks that bound a step (zigzag: all alike)
                src = (rank - step) % DEVICES
                t = 0.0
                for unit in parallel.ring_units(pieces, src):
                    j, i = unit
                    kb = pieces[src][j][i]
                    for qi, a, c in parallel.ring_calls(rank, step, DEVICES, causal, unit, pieces):
                        qb = pieces[rank][qi][a]
                        t += kernel_seconds(qb[1] - qb[0], kb[1] - kb[0], c, heads)
                compute = max(compute, t)
            total += compute if step == DEVICES - 1 else max(compute, stream_link)
            bare += compute
        out.append(("stream ring (HcclBatchSendRecv per sub-block)", causal, total, bare))
    return out


def hccl_link(backend, src: int, dst: int) -> dict:
    from acl_fa.parallel import hccl
    return hccl.link_model(src, dst, backend)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1024,4096", help="rows per rank, comma-separated")
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--project", action="store_true", help="also the S = 1M N32 64-device projection")
    parser.add_argument("--project-heads", type=int, default=1, choices=[1, 2, 4, 8, 16, 32],
                        help="profile the projection's kernel calls at this N, scaled to N = 32")
    args = parser.parse_args()
    rows_list = [int(x) for x in args.rows.split(",")]
    backend, _, chip_name, peak, link = sim_chip_and_link()
    print(f"chip {chip_name} (modeled); fp16 cube peak {peak / 1e12:g} TFLOP/s; link {link}")
    out = []
    overheads = []
    for rows in rows_list:
        kv_bytes = args.heads * rows * HEAD_DIM * ITEMSIZE  # K (or V) of one rank
        link_s = 2 * (link["latency_us"] * 1e-6 + kv_bytes / (link["bandwidth_gbs"] * 1e9))
        fused, bare = fused_steps(backend, args.heads, rows)
        print(f"rows {rows}: fused step {fused * 1e6:.1f} us, compute-only {bare * 1e6:.1f} us (modeled)", flush=True)
        compute = stream_compute(args.heads, rows)
        messages = 2 * len(parallel.sub_blocks([[rows]], parallel.BLOCK_ROWS)[0][0])
        stream_link = messages * link["latency_us"] * 1e-6 + 2 * kv_bytes / (link["bandwidth_gbs"] * 1e9)
        stream = max(compute, stream_link)
        overheads.append(fused - max(bare, link_s))
        out.append([f"{rows}", f"{kv_bytes * 2}", f"{link_s * 1e6:.1f}", f"{bare * 1e6:.1f}", f"{fused * 1e6:.1f}",
                    f"{100 * (fused - bare) / fused:.1f}%", f"{(fused - max(bare, link_s)) * 1e6:+.1f}",
                    f"{compute * 1e6:.1f}", f"{stream * 1e6:.1f}", f"{100 * (stream - compute) / stream:.1f}%"])
    print(f"B1 N{args.heads} D{HEAD_DIM} fp16, 2 ranks, non-causal; per ring step (modeled us)")
    print(table(["rows/rank", "K+V bytes", "link (2 AlltoAllV)", "kernel compute-only", "fused step",
                 "exposed comm (fused)", "fused - max(compute, link)", "stream ring compute", "stream ring step",
                 "exposed comm (stream)"], out))
    if args.project:
        overhead = max(0.0, *overheads)
        print(f"\nS={SEQ} B1 N{HEADS} D{HEAD_DIM} fp16 on {DEVICES} devices of {chip_name} (modeled); fused step = "
              f"max(kernel compute, link) + {overhead * 1e6:.1f} us (the running kernel's largest overhead above)")
        rows = [[name, str(causal), f"{t * 1e3:.1f}", f"{b * 1e3:.1f}", f"{100 * (t - b) / t:.1f}%"]
                for name, causal, t, b in projection(backend, overhead, args.project_heads)]
        print(table(["schedule", "causal", "modeled ms", "compute-only ms", "exposed comm"], rows))
        scale = f"profile_job at N={args.project_heads} x {HEADS // args.project_heads}"
        print(f"kernel calls modeled (B1 N32 D128 fp16, {scale}): " + ", ".join(
            f"{sq}x{skv}{' causal' if c else ''} {t * 1e6:.1f} us"
            for (sq, skv, c), t in sorted(design.KERNEL_SECONDS.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
