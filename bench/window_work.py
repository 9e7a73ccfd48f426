"""Sliding window vs full causal at long S (B1, fp16, D128) on the simulator: executed cube MACs
(counters) against the band's useful MACs, per-AIC balance and the kernel's simulator wall time,
for the FlashAttentionV2 window run and the FlashAttention causal run of the same size.

Useful MACs: both matmuls over the visible (query, key) pairs only: 2 x B x N x D x pairs, the
pairs of the band i - pre <= j <= i + next (bottom-right aligned, Sq = Skv here).
Usage: python bench/window_work.py [--seq 32768] [--heads 1] [--window 256,0] [--runs 1]
"""
import argparse

import numpy as np

from common import header, median, table

import acl_fa  # noqa: E402
from acl_fa.ops import forward_v2 as attention_v2
from acl_fa.runtime import sim_stats  # noqa: E402
from acl_fa.ops.forward import runner_for  # noqa: E402
from acl_fa.ops.problem import check_plan  # noqa: E402
from acl_fa.spec.problem import make_problem  # noqa: E402
from acl_fa.spec.options import AttentionOptions  # noqa: E402
from acl_fa.spec.band import UNBOUNDED as UNBOUNDED_TOKENS  # noqa: E402
from acl_fa.jobs.run import random_inputs  # noqa: E402


def band_pairs(seq: int, pre: int, nxt: int) -> int:
    """Visible (query, key) pairs of one head with Sq = Skv = seq."""
    i = np.arange(seq, dtype=np.int64)
    lo = np.zeros_like(i) if pre >= UNBOUNDED_TOKENS else np.maximum(i - pre, 0)
    hi = np.full_like(i, seq - 1) if nxt >= UNBOUNDED_TOKENS else np.minimum(i + nxt, seq - 1)
    return int(np.maximum(hi - lo + 1, 0).sum())


def launch(run, runs: int, session) -> list:
    stats = []
    for _ in range(runs):
        run()
        stats.append(sim_stats.last_launch(session.backend, per_core=True))
    assert all(x["cube_macs"] == stats[0]["cube_macs"] for x in stats)  # deterministic counters
    return stats


def row(name, plan, stats, useful, heads):
    s = stats[-1]
    aic = [c["cube_macs"] for c in s["aic"]]
    return [name, f"{plan.block_m} x {plan.block_n}", f"{useful:,}", f"{s['cube_macs']:,}",
            f"{s['cube_macs'] / useful:.4f}", f"{max(aic) / (sum(aic) / len(aic)):.4f}",
            f"{median([x['wall_seconds'] for x in stats]):.2f}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32768)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--window", default="256,0", help="left,right (-1 = unbounded)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    left, right = (int(x) for x in args.window.split(","))
    pre = UNBOUNDED_TOKENS if left < 0 else left
    nxt = 0 if right < 0 else min(right, 0)  # with causal, as the run asks
    d = 128
    shells = [np.empty((1, args.heads, args.seq, d), np.float16) for _ in range(3)]
    causal, *_ = make_problem(*shells, causal=True)
    band, *_ = make_problem(*shells)
    options = AttentionOptions(pre_tokens=pre, next_tokens=nxt)
    with acl_fa.Session(backend="sim") as session:
        soc = session.soc_name()
        q, k, v = random_inputs(causal)
        window_plan = attention_v2.check_v2_plan(attention_v2.V2Call(band, options), soc)
        window = launch(lambda: attention_v2.run_forward_v2(session, band, options, q, k, v), args.runs, session)
        causal_plan = check_plan(causal, soc)
        runner = runner_for(session)
        full = launch(lambda: runner.run(causal, q, k, v), args.runs, session)
        runner.close()
    useful_window = 2 * args.heads * d * band_pairs(args.seq, pre, nxt)
    useful_causal = 2 * args.heads * d * band_pairs(args.seq, UNBOUNDED_TOKENS, 0)
    print(header(f"Sliding window ({left}, {right}) + causal vs causal at S={args.seq} "
                 f"(B1 N{args.heads} D{d} fp16, {soc})"))
    print(table(["run", "BLOCK_M x BLOCK_N", "useful MACs", "executed cube MACs", "executed / useful",
                 "AIC max / mean", "kernel s (simulator)"], [
        row(f"window ({left}, {right}), FlashAttentionV2", window_plan, window, useful_window, args.heads),
        row("causal, FlashAttention", causal_plan, full, useful_causal, args.heads),
    ]))
    t_window = median([x["wall_seconds"] for x in window])
    t_full = median([x["wall_seconds"] for x in full])
    print(f"\nSimulator time: causal / window = {t_full / t_window:.1f}x; executed cube MACs: causal / window = "
          f"{full[-1]['cube_macs'] / window[-1]['cube_macs']:.1f}x.")


if __name__ == "__main__":
    main()
