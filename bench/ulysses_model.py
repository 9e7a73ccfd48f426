"""Ulysses (all-to-all) attention at scale: measured runs on the simulator (small S) and the
modeled time for S = 32K ... 1M tokens on 8 devices of a 910B server.

Measured (the simulated devices run Ulysses for real, HcclAlltoAllV through the simulator's
shared-memory cliques): bytes each device sent to each peer over both all-to-all rounds, read
from the link counters, against the analytic shard sizes (acl_fa.parallel.ulysses.ulysses_link_bytes).

Modeled (every number labeled): per device, communication = the bytes of its busiest outgoing
link over that link of the simulated HCCL's link model (docs/hccl.md; its figures assumed), four
messages per link (Q, K, V in; O out) at B = 1, links working in parallel; compute = the causal
attention FLOPs of its N/P heads over the whole sequence (4 * D * visible pairs per head) at the
chip's fp16 cube peak, a lower bound. Ulysses does not overlap the two: step = comm + compute.

    python bench/ulysses_model.py         # after pip install . (or ACL_FA_SIM_LIB_DIR=<build>/lib)
"""
from __future__ import annotations

import sys

import numpy as np

from acl_fa.parallel import hccl, ring as parallel
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.runtime.loader import get_backend
from acl_fa.parallel.ulysses import kv_heads_of_rank, ulysses_link_bytes


def measured(seq: int, devices: int, heads: int, kv_heads: int, head_dim: int = 128):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, heads, seq, head_dim)).astype(np.float16)
    kv = rng.standard_normal((1, kv_heads, seq, head_dim)).astype(np.float16)
    _, _, rep = parallel.ulysses_attention(q, kv, kv, devices=list(range(devices)), causal=True, report=True)
    return rep


def modeled_row(seq: int, devices: int, heads: int, kv_heads: int, head_dim: int, link: dict, peak: float):
    kv_per_rank = len(kv_heads_of_rank(heads, kv_heads, devices)[0])
    per_link = ulysses_link_bytes(seq, devices, 1, heads, kv_per_rank, head_dim, 2)
    busiest = max(max(row) for row in per_link)
    comm = 4 * link["latency_us"] * 1e-6 + busiest / (link["bandwidth_gbs"] * 1e9)
    pairs = problem_from_sizes(seq_q=seq, num_heads=1, head_dim=head_dim, causal=True).visible_pairs()
    compute = 4 * head_dim * (heads // devices) * pairs / peak
    return busiest, comm, compute


def main() -> int:
    backend = hccl.use_hccl(get_backend("sim"))
    chip = backend.fn("aclfaSimGetChip")()
    peak = float(chip.cubeFp16Tflops) * 1e12
    link = hccl.link_model(0, 1, backend)
    from acl_fa.runtime.ffi import ffi

    print(f"chip {ffi.string(chip.name).decode()}; link {link}; fp16 cube peak {peak / 1e12:g} TFLOP/s")
    print("\nMeasured on the simulator (causal, B=1, D=128, fp16):")
    print("| S | devices | N / Nkv | kv heads per device | bytes device 0 -> 1 (both rounds) | "
          "every link = analytic | balance max/mean |")
    print("|---|---|---|---|---|---|---|")
    for seq, devices, heads, kv in [(4096, 8, 8, 8), (4099, 4, 8, 2), (2048, 8, 8, 1)]:
        rep = measured(seq, devices, heads, kv)
        print(f"| {seq} | {devices} | {heads} / {kv} | {len(rep.kv_heads[0])} | {rep.link_bytes[0][1]} | "
              f"{'yes' if rep.link_bytes == rep.analytic_link_bytes else 'NO'} | {rep.balance:.4f} |")
    print("\nModeled per forward, slowest device (8 devices, causal, B=1, D=128, fp16; communication: "
          "busiest link of the model above, 4 messages; compute: at the cube peak, a lower bound):")
    print("| S | N / Nkv | bytes per link | comm ms (modeled) | compute ms (modeled) | comm share of the step |")
    print("|---|---|---|---|---|---|")
    for heads, kv in [(32, 32), (32, 8)]:
        for seq in [32768, 65536, 131072, 262144, 524288, 1048576]:
            nbytes, comm, compute = modeled_row(seq, 8, heads, kv, 128, link, peak)
            print(f"| {seq} | {heads} / {kv} | {nbytes} | {comm * 1e3:.3f} | {compute * 1e3:.3f} | "
                  f"{100 * comm / (comm + compute):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
