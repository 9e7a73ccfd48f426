"""Fused ring (communication inside the kernel) vs the stream-level ring at S = 1,048,576,
N32 D128 fp16 causal, 64 devices (8 servers x 8) of Ascend910B2: exposed communication, modeled.

Every time below is modeled, from two sources:
- compute: the forward kernel's modeled time (acl_fa.jobs.profile.profile_job: the pipeline model
  over the simulator's instruction trace) on the exact FlashAttention calls each schedule makes at
  N = 32, per ring step and device (the zigzag pairs of acl_fa.parallel.ring_plan);
- communication: the simulated HCCL's link model (docs/hccl.md: HCCS 56 GB/s and 2 us per message
  within a server, RoCE 25 GB/s and 10 us across, all **assumed**), one K/V chunk per step.

Schedules:
- stream ring (acl_fa.parallel.ring_attention today): every step's K/V travel in sub-blocks of
  BLOCK_ROWS rows, one HcclBatchSendRecv (K and V: 2 messages) per sub-block on a comm stream, and
  the step's attention runs as ring_calls' sub-block calls. Launch and stream-event costs are not
  modeled (they would only add to this schedule).
- fused ring: one launch per step whose kernel commits the exchange of the K/V chunk it is about
  to compute on (K and V: 2 messages) and waits for it after the step's chunk pairs, as the
  hccl_exchange test kernel does (tests/sim/test_hccl_kernel.py: the timing model overlaps a
  committed task with the cores' work).
- fused double ring (LoongTrain's double-ring attention, arXiv 2406.18485): the fused kernel's
  ring runs inside each server over HCCS (8 inner steps), and each device's outer K/V chunk goes
  to the same device of the next server over its RoCE port while the 8 inner steps compute; it
  holds one more K/V chunk (the outer one) than the plain ring.

A step ends when the device's compute and the receive it needs are both done; every device
steps together (the ring's slowest link sets the pace). Exposed communication = (modeled time -
the same schedule's time without communication) / modeled time. The compute-only lower bound
(the step's FLOPs at the fp16 cube peak) is given beside it: the least compute can take, so
the most communication can be exposed.

    ACL_FA_SIM_LIB_DIR=$PWD/build/lib python bench/ring_fused_model.py [--profile-heads H]  # ~10 min

--profile-heads H (default 32) profiles each call shape at N = H and scales its modeled time by
32 / H (heads are independent work items of the kernel; H = 32 is exact and takes longest: the
simulator runs every call for real).
"""
from __future__ import annotations

import argparse
import sys

from common import sim_chip_and_link, table

from acl_fa.jobs.profile import profile_job  # noqa: E402
from acl_fa.jobs.settings import JobSettings  # noqa: E402
from acl_fa.parallel import hccl  # noqa: E402
from acl_fa.parallel import ring as parallel  # noqa: E402
from acl_fa.spec.problem import problem_from_sizes  # noqa: E402

SEQ, HEADS, HEAD_DIM, ITEMSIZE = 1 << 20, 32, 128, 2
SERVERS, PER_SERVER = 8, 8
DEVICES = SERVERS * PER_SERVER


KERNEL_SECONDS = {}  # (sq, skv, causal) -> modeled seconds, each call shape profiled once
PROFILE_HEADS = [HEADS]  # heads profiled (main's --profile-heads)


def kernel_seconds(sq: int, skv: int, causal: bool) -> float:
    """The forward kernel's modeled time on one call of B1 N32 Sq x Skv D128 fp16."""
    key = (sq, skv, causal)
    if key not in KERNEL_SECONDS:
        heads = PROFILE_HEADS[0]
        r = profile_job(problem_from_sizes(seq_q=sq, seq_kv=skv, num_heads=heads, head_dim=HEAD_DIM, causal=causal),
                        JobSettings(backend="sim"))
        KERNEL_SECONDS[key] = float(r.summary["time_s"]) * HEADS / heads
    return KERNEL_SECONDS[key]


def pair_flops(sq: int, skv: int, causal: bool) -> float:
    pairs = problem_from_sizes(seq_q=sq, seq_kv=skv, num_heads=1, head_dim=HEAD_DIM, causal=causal).visible_pairs()
    return 4.0 * HEAD_DIM * HEADS * pairs


def link_seconds(link: dict, nbytes: int, messages: int) -> float:
    return messages * link["latency_us"] * 1e-6 + nbytes / (link["bandwidth_gbs"] * 1e9)


class Ring:
    def __init__(self, peak: float, hccs: dict, roce: dict):
        self.peak = peak
        self.hccs, self.roce = hccs, roce
        self.chunks = parallel.zigzag_chunks(SEQ, DEVICES, True)
        rows = [[b - a for a, b in rr] for rr in self.chunks]
        self.pieces = parallel.sub_blocks(rows, parallel.BLOCK_ROWS)
        self.kv_bytes = 2 * HEADS * HEAD_DIM * ITEMSIZE * sum(rows[0])  # K and V of one rank's chunks

    def link(self, src: int, dst: int) -> dict:
        return self.hccs if src // PER_SERVER == dst // PER_SERVER else self.roce

    def step_compute(self, rank: int, step: int, fused: bool, at_peak: bool) -> float:
        """Seconds of `rank`'s attention at ring step `step` (source rank (rank - step) mod P)."""
        src = (rank - step) % DEVICES
        total = 0.0
        if fused:  # one call per chunk pair
            for qi, ki, causal in parallel.ring_plan(rank, step, DEVICES, True):
                sq = self.chunks[rank][qi][1] - self.chunks[rank][qi][0]
                skv = self.chunks[src][ki][1] - self.chunks[src][ki][0]
                total += pair_flops(sq, skv, causal) / self.peak if at_peak else kernel_seconds(sq, skv, causal)
            return total
        for unit in parallel.ring_units(self.pieces, src):  # the stream ring's sub-block calls
            j, i = unit
            kb = self.pieces[src][j][i]
            for qi, a, causal in parallel.ring_calls(rank, step, DEVICES, True, unit, self.pieces):
                qb = self.pieces[rank][qi][a]
                sq, skv = qb[1] - qb[0], kb[1] - kb[0]
                total += pair_flops(sq, skv, causal) / self.peak if at_peak else kernel_seconds(sq, skv, causal)
        return total

    def plain(self, fused: bool, at_peak: bool) -> tuple:
        """(modeled seconds, seconds without communication) of the plain ring, lockstep."""
        messages = 2 if fused else 2 * len(parallel.ring_units(self.pieces, 0))
        # every rank computes the same pairs at every step up to symmetry: the worst rank per step
        total = bare = 0.0
        for step in range(DEVICES):
            compute = max(self.step_compute(r, step, fused, at_peak) for r in range(DEVICES))
            comm = 0.0 if step == DEVICES - 1 else max(
                link_seconds(self.link((r - 1) % DEVICES, r), self.kv_bytes, messages) for r in range(DEVICES))
            total += max(compute, comm)
            bare += compute
        return total, bare

    def double(self, at_peak: bool) -> tuple:
        """(modeled seconds, seconds without communication) of the fused double ring."""
        total = bare = 0.0
        inner_comm = link_seconds(self.hccs, self.kv_bytes, 2)
        outer_comm = link_seconds(self.roce, self.kv_bytes, 2)
        for outer in range(SERVERS):
            span = span_bare = 0.0
            for inner in range(PER_SERVER):
                compute = 0.0
                for r in range(DEVICES):
                    s, d = divmod(r, PER_SERVER)
                    src = ((s - outer) % SERVERS) * PER_SERVER + (d - inner) % PER_SERVER
                    compute = max(compute, self.step_compute(r, (r - src) % DEVICES, True, at_peak))
                last = outer == SERVERS - 1 and inner == PER_SERVER - 1
                span += max(compute, 0.0 if inner == PER_SERVER - 1 else inner_comm) if not last else compute
                span_bare += compute
            # the next outer chunk must have arrived before the next outer step begins
            total += span if outer == SERVERS - 1 else max(span, outer_comm)
            bare += span_bare
        return total, bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile-heads", type=int, default=HEADS, choices=[1, 2, 4, 8, 16, 32])
    PROFILE_HEADS[0] = parser.parse_args().profile_heads
    backend, _, chip_name, peak, hccs = sim_chip_and_link()
    roce = hccl.link_model(0, PER_SERVER, backend)
    ring = Ring(peak, hccs, roce)
    print(f"chip {chip_name}; fp16 cube peak {peak / 1e12:g} TFLOP/s; intra-server {hccs}; across {roce}")
    print(f"S={SEQ} B1 N{HEADS} D{HEAD_DIM} fp16 causal zigzag on {DEVICES} devices ({SERVERS} servers x "
          f"{PER_SERVER}); K/V bytes per rank and step {ring.kv_bytes}")
    rows = []
    for name, run in [("stream ring (HcclBatchSendRecv per sub-block)", lambda p: ring.plain(False, p)),
                      ("fused ring (Hccl client in the kernel)", lambda p: ring.plain(True, p)),
                      ("fused double ring (HCCS inside servers, RoCE across)", ring.double)]:
        (t, b), (tp, bp) = run(False), run(True)
        rows.append([name, f"{t * 1e3:.1f}", f"{b * 1e3:.1f}", f"{100 * (t - b) / t:.1f}%", f"{tp * 1e3:.1f}",
                     f"{100 * (tp - bp) / tp:.1f}%"])
    print(table(["schedule", "modeled ms (kernel model)", "compute-only ms", "exposed comm",
                 "modeled ms (compute at cube peak)", "exposed comm (compute at peak)"], rows))
    scale = f"profile_job at N={PROFILE_HEADS[0]} x {HEADS // PROFILE_HEADS[0]}"
    print(f"kernel calls modeled (B1 N32 D128 fp16, {scale}): " + ", ".join(
        f"{sq}x{skv}{' causal' if c else ''} {t * 1e6:.1f} us" for (sq, skv, c), t in sorted(KERNEL_SECONDS.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
