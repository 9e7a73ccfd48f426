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

    ACL_FA_SIM_SOC=Ascend910_93 ACL_FA_SIM_LIB_DIR=$PWD/build/lib python bench/ring_fused_kernel.py \
        [--rows 1024,4096] [--heads 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import threading

os.environ.setdefault("ACL_FA_SIM_SOC", "Ascend910_93")

from common import sim_chip_and_link, table  # noqa: E402

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
    pieces = parallel.sub_blocks([rows, rows], parallel.BLOCK_ROWS)
    total = 0.0
    for a0, a1 in pieces[0][0]:
        for b0, b1 in pieces[1][0]:
            r = profile_job(problem_from_sizes(seq_q=a1 - a0, seq_kv=b1 - b0, num_heads=heads, head_dim=HEAD_DIM),
                            JobSettings(backend="sim"))
            total += float(r.summary["time_s"])
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1024,4096", help="rows per rank, comma-separated")
    parser.add_argument("--heads", type=int, default=2)
    args = parser.parse_args()
    rows_list = [int(x) for x in args.rows.split(",")]
    backend, _, chip_name, peak, link = sim_chip_and_link()
    print(f"chip {chip_name} (modeled); fp16 cube peak {peak / 1e12:g} TFLOP/s; link {link}")
    out = []
    for rows in rows_list:
        kv_bytes = args.heads * rows * HEAD_DIM * ITEMSIZE  # K (or V) of one rank
        link_s = 2 * (link["latency_us"] * 1e-6 + kv_bytes / (link["bandwidth_gbs"] * 1e9))
        fused, bare = fused_steps(backend, args.heads, rows)
        compute = stream_compute(args.heads, rows)
        messages = 2 * len(parallel.sub_blocks([rows], parallel.BLOCK_ROWS)[0][0])
        stream_link = messages * link["latency_us"] * 1e-6 + 2 * kv_bytes / (link["bandwidth_gbs"] * 1e9)
        stream = max(compute, stream_link)
        out.append([f"{rows}", f"{kv_bytes * 2}", f"{link_s * 1e6:.1f}", f"{bare * 1e6:.1f}", f"{fused * 1e6:.1f}",
                    f"{100 * (fused - bare) / fused:.1f}%", f"{(fused - max(bare, link_s)) * 1e6:+.1f}",
                    f"{compute * 1e6:.1f}", f"{stream * 1e6:.1f}", f"{100 * (stream - compute) / stream:.1f}%"])
    print(f"B1 N{args.heads} D{HEAD_DIM} fp16, 2 ranks, non-causal; per ring step (modeled us)")
    print(table(["rows/rank", "K+V bytes", "link (2 AlltoAllV)", "kernel compute-only", "fused step",
                 "exposed comm (fused)", "fused - max(compute, link)", "stream ring compute", "stream ring step",
                 "exposed comm (stream)"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
