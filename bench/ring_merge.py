"""Ring attention's LSE merge on the device (AttentionLseMerge, docs/lse_merge.md): what it moves.

Measured (the simulated devices run the ring for real): bytes each device copied to the host in
one ring call (RingReport.d2h_bytes, the Session's copy counters) against one output + LSE (what
the device merge reads back) and against every partial output + LSE (what the host-side merge
read back before). The merge's GM bytes per launch equal MergeProblem.gm_bytes on the simulator's
counters (tests/ops/attention_lse_merge/test_lse_merge.py).

Modeled (labeled): per ring step and worst device, the GM bytes of that step's merges (one per
call on a (query sub-chunk, key sub-block) pair, accumulate="float32") at the chip's HBM bandwidth, next to the step's modeled
compute at the fp16 cube peak and its K/V communication (bench/ring_model.py's models).

    python bench/ring_merge.py            # after pip install . (or ACL_FA_SIM_LIB_DIR=<build>/lib)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ring_model import modeled_row  # noqa: E402

from common import random_heads, sim_chip_and_link, table  # noqa: E402

from acl_fa.parallel import ring as parallel  # noqa: E402

T_BYTES = 2  # float16 output


def partial_kinds(rank: int, ranks: int, causal: bool, pieces: list) -> list:
    """Per step, the merge work of each call's partial with accumulate="float32" (docs/lse_merge.md),
    as (query chunk, sub-chunk, kind): 'read' (a sub-chunk's only partial, read back as it is),
    'first' (merged with zeros of LSE -inf into the float32 accumulator), 'middle', 'last' (into
    the result in the input dtype). pieces: parallel.sub_blocks of the run."""
    units = parallel.ring_units(pieces, rank)
    total: dict = {}
    for step in range(ranks):
        for unit in units:
            for qi, a, _ in parallel.ring_calls(rank, step, ranks, causal, unit, pieces):
                total[qi, a] = total.get((qi, a), 0) + 1
    seen: dict = {}
    steps = []
    for step in range(ranks):
        kinds = []
        for unit in units:
            for qi, a, _ in parallel.ring_calls(rank, step, ranks, causal, unit, pieces):
                k = seen[qi, a] = seen.get((qi, a), -1) + 1
                n = total[qi, a]
                kinds.append((qi, a, "read" if n == 1 else "first" if k == 0 else "last" if k == n - 1 else "middle"))
        steps.append(kinds)
    return steps


def merge_bytes(kind: str, rows: int, d: int) -> int:
    """GM bytes of one partial's merge for `rows` rows of D (MergeProblem.gm_bytes: out_a, out_b,
    the result and three LSEs per row)."""
    per_row = {"read": 0, "first": d * (T_BYTES + T_BYTES + 4) + 12,
               "middle": d * (4 + T_BYTES + 4) + 12, "last": d * (4 + T_BYTES + T_BYTES) + 12}[kind]
    return rows * per_row


def measured(seq: int, devices: int, heads: int, head_dim: int = 128):
    q, = random_heads(seq, head_dim, heads)
    _, _, rep = parallel.ring_attention(q, q, q, devices=list(range(devices)), causal=True, report=True)
    chunks = parallel.zigzag_chunks(seq, devices, True)
    rows = [sum(b - a for a, b in chunks[r]) * heads for r in range(devices)]
    result = [n * (head_dim * T_BYTES + 4) for n in rows]
    partials = []
    for r in range(devices):
        total = 0
        for step in range(devices):
            for qi, _, _ in parallel.ring_plan(r, step, devices, True):
                a, b = chunks[r][qi]
                total += (b - a) * heads * (head_dim * T_BYTES + 4)
        partials.append(total)
    return rep, result, partials


def modeled_merge(seq: int, devices: int, heads: int, head_dim: int, hbm_bps: float) -> tuple:
    """Worst device's per-step (merge GM bytes, modeled seconds) over the ring's steps."""
    chunks = parallel.zigzag_chunks(seq, devices, True)
    pieces = parallel.sub_blocks([[b - a for a, b in rr] for rr in chunks], parallel.BLOCK_ROWS)
    worst = 0
    for r in range(devices):
        for kinds in partial_kinds(r, devices, True, pieces):
            step_bytes = sum(merge_bytes(kind, (pieces[r][qi][a][1] - pieces[r][qi][a][0]) * heads, head_dim)
                             for qi, a, kind in kinds)
            worst = max(worst, step_bytes)
    return worst, worst / hbm_bps


def main() -> int:
    _, chip, chip_name, peak, link = sim_chip_and_link()
    hbm = float(chip.hbmBandwidthGBs) * 1e9
    print(f"chip {chip_name}; HBM {hbm / 1e9:g} GB/s; fp16 cube peak {peak / 1e12:g} TFLOP/s; "
          f"link {link}")
    print("\nMeasured on the simulator (causal zigzag, B=1, D=128, fp16), bytes device -> host per ring call:")
    print(table(["S", "devices", "N", "device 0: read back", "= output + LSE", "host merge read (all partials)",
                 "all devices"], []))
    for seq, devices, heads in [(4096, 8, 2), (4099, 4, 4)]:
        rep, result, partials = measured(seq, devices, heads)
        ok = rep.d2h_bytes == result
        print(f"| {seq} | {devices} | {heads} | {rep.d2h_bytes[0]} | {'yes' if ok else 'NO'} | {partials[0]} | "
              f"{sum(rep.d2h_bytes)} vs {sum(partials)} ({sum(partials) / sum(rep.d2h_bytes):.2f}x less) |")
    print("\nModeled per ring step, worst device (8 devices, causal zigzag, B=1, D=128, fp16 output; merge: its GM "
          "bytes at the HBM bandwidth; compute and comm: bench/ring_model.py's models):")
    print(table(["S", "N", "merge GM bytes per step", "merge us (modeled)", "compute us (modeled)", "comm us (modeled)",
                 "merge / compute"], []))
    for seq in [32768, 131072, 1048576]:
        for heads in [32]:
            nbytes, seconds = modeled_merge(seq, 8, heads, 128, hbm)
            comm, compute = modeled_row(seq, 8, heads, heads, 128, link, peak)
            print(f"| {seq} | {heads} | {nbytes} | {seconds * 1e6:.1f} | {compute * 1e6:.1f} | {comm * 1e6:.1f} | "
                  f"{seconds / compute:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
