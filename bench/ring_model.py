"""Ring attention at scale: measured ring runs on the simulator (small S) and the modeled step
time for S = 32K ... 1M tokens on 8 devices of a 910B server.

Measured (the simulated devices run the ring for real): bytes each device sends to the next per
step (compared with the analytic K/V chunk size), FLOPs balance max/mean across devices.

Modeled (every number labeled): per ring step and device, communication = the K and V chunks of
one rank over one link of the simulated HCCL's link model (docs/hccl.md, its figures assumed)
and compute = the step's attention FLOPs (4 * D * visible pairs per head) at the chip's fp16 cube
peak -- a lower bound on compute time, so "hidden" here is conservative. Communication hides
behind compute when compute >= communication.

    python bench/ring_model.py            # after pip install . (or ACL_FA_SIM_LIB_DIR=<build>/lib)
"""
from __future__ import annotations

import sys

import numpy as np

from acl_fa.parallel import hccl, ring as parallel
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.runtime.loader import get_backend


def measured(seq: int, devices: int, heads: int, kv_heads: int, head_dim: int = 128):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, heads, seq, head_dim)).astype(np.float16)
    kv = rng.standard_normal((1, kv_heads, seq, head_dim)).astype(np.float16)
    _, _, rep = parallel.ring_attention(q, kv, kv, devices=list(range(devices)), causal=True, report=True)
    chunks = parallel.zigzag_chunks(seq, devices, True)
    analytic_ok = all(rep.link_bytes_per_step[r][t] == (0 if t == devices - 1 else
                      2 * kv_heads * head_dim * 2 * sum(b - a for a, b in chunks[(r - t) % devices]))
                      for r in range(devices) for t in range(devices))
    return rep, analytic_ok


def modeled_row(seq: int, devices: int, heads: int, kv_heads: int, head_dim: int, link: dict, peak: float):
    """Worst device's per-step modeled (comm, compute) seconds over the ring's steps but the last."""
    chunks = parallel.zigzag_chunks(seq, devices, True)
    pieces = parallel.sub_blocks([[b - a for a, b in rr] for rr in chunks], parallel.BLOCK_ROWS)
    messages = 2 * len(parallel.ring_units(pieces, 0))  # K and V of each sub-block, each paying the latency
    worst_comm = worst_compute = 0.0
    for r in range(devices):
        for step in range(devices - 1):
            src = (r - step) % devices
            rows = [b - a for a, b in chunks[src]]
            comm_bytes = 2 * kv_heads * head_dim * 2 * sum(rows)  # K and V, fp16
            comm = messages * link["latency_us"] * 1e-6 + comm_bytes / (link["bandwidth_gbs"] * 1e9)
            flops = 0
            for qi, ki, causal in parallel.ring_plan(r, step, devices, True):
                sq = chunks[r][qi][1] - chunks[r][qi][0]
                skv = chunks[src][ki][1] - chunks[src][ki][0]
                pairs = problem_from_sizes(seq_q=sq, seq_kv=skv, num_heads=1, head_dim=head_dim,
                                           causal=causal).visible_pairs()
                flops += 4 * head_dim * heads * pairs
            worst_comm = max(worst_comm, comm)
            worst_compute = max(worst_compute, flops / peak)
    return worst_comm, worst_compute


def main() -> int:
    backend = hccl.use_hccl(get_backend("sim"))
    chip = backend.fn("aclfaSimGetChip")()
    peak = float(chip.cubeFp16Tflops) * 1e12
    link = hccl.link_model(0, 1, backend)
    from acl_fa.runtime.ffi import ffi

    print(f"chip {ffi.string(chip.name).decode()}; link {link}; fp16 cube peak "
          f"{peak / 1e12:g} TFLOP/s")
    print("\nMeasured on the simulator (causal, zigzag, B=1, D=128, fp16):")
    print("| S | devices | N / Nkv | bytes per step to next (device 0) | = analytic K/V chunks | balance max/mean |")
    print("|---|---|---|---|---|---|")
    for seq, devices, heads, kv in [(4096, 8, 2, 2), (8192, 8, 1, 1), (4099, 4, 4, 2)]:
        rep, ok = measured(seq, devices, heads, kv)
        steps = ", ".join(str(b) for b in rep.link_bytes_per_step[0])
        print(f"| {seq} | {devices} | {heads} / {kv} | {steps} | {'yes' if ok else 'NO'} | {rep.balance:.4f} |")
    print("\nModeled per ring step, worst device (8 devices, causal zigzag, B=1, D=128, fp16; "
          "communication: one link of the model above; compute: at the cube peak, a lower bound):")
    print("| S | N / Nkv | K/V bytes per step | comm us (modeled) | compute us (modeled) | comm hidden? |")
    print("|---|---|---|---|---|---|")
    for heads, kv in [(32, 32), (32, 8)]:
        for seq in [32768, 65536, 131072, 262144, 524288, 1048576]:
            comm, compute = modeled_row(seq, 8, heads, kv, 128, link, peak)
            kv_bytes = 2 * kv * 128 * 2 * (seq // 8)
            print(f"| {seq} | {heads} / {kv} | {kv_bytes} | {comm * 1e6:.1f} | {compute * 1e6:.1f} | "
                  f"{'yes' if compute >= comm else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
