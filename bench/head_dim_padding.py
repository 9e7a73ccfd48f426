"""A head dim that is not a multiple of 16 against the next multiple of 16: the forward's modeled
NPU time (acl_fa.plan.timing's pipeline model over the simulator's instruction trace: modeled, not
measured), its cube MACs (the simulator's counters) and the host-to-device bytes of one call, for
D and Dp = ceil(D / 16) * 16 on the same sequence lengths (issue #30's goal: a padded head dim
costs <= the next multiple of 16's modeled time). The padded call copies only the caller's
bytes (aclrtMemcpy2d into zeroed padded rows, docs/compat.md "Any head dim").

Usage: python bench/head_dim_padding.py [--seq 2048] [--heads 8] [--dims 1,8,40,59,111,200]
"""
import argparse

import numpy as np

from common import header, table

import acl_fa
from acl_fa.plan import timing
from acl_fa.runtime import sim_stats


def one_call(session, d: int, seq: int, heads: int, causal: bool) -> tuple:
    """(modeled us, cube MACs, H2D bytes) of one forward call of head dim d (after a warm-up
    call that builds the cached device state)."""
    rng = np.random.default_rng(d)
    q, k, v = (rng.standard_normal((1, heads, seq, d), dtype=np.float32).astype(np.float16) for _ in range(3))
    session.flash_attention(q, k, v, causal=causal)
    before = session.copy_counters()["h2d"]["bytes"]
    with timing.op_trace(session.backend):
        session.flash_attention(q, k, v, causal=causal)
        modeled = timing.last_model(session.backend).seconds * 1e6
    macs = sim_stats.last_launch(session.backend)["cube_macs"]
    return modeled, macs, session.copy_counters()["h2d"]["bytes"] - before


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dims", default="1,8,40,59,111,200")
    parser.add_argument("--no-causal", action="store_true")
    args = parser.parse_args()
    dims = [int(x) for x in args.dims.split(",")]
    causal = not args.no_causal
    print(header(f"padded head dims vs the next multiple of 16, B1 N{args.heads} S{args.seq} fp16"
                 f"{' causal' if causal else ''} (modeled)"))
    rows = []
    with acl_fa.Session() as session:
        for d in dims:
            dp = -(-d // 16) * 16
            t, macs, h2d = one_call(session, d, args.seq, args.heads, causal)
            tp, macs_p, h2d_p = one_call(session, dp, args.seq, args.heads, causal)
            rows.append([f"{d} -> {dp}", f"{t:.1f}", f"{tp:.1f}", f"{t / tp:.4f}", f"{macs:,}", f"{macs_p:,}",
                         f"{h2d:,}", f"{h2d_p:,}"])
    print(table(["D -> Dp", "modeled us (D)", "modeled us (Dp)", "ratio", "cube MACs (D)", "cube MACs (Dp)",
                 "H2D B (D)", "H2D B (Dp)"], rows))


if __name__ == "__main__":
    main()
