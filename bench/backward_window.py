"""A sliding-window backward against the full causal backward at one shape.

    python bench/backward_window.py --seq 32768 --heads 1 --head-dim 128 --window 256,0

Runs, on one Session, the causal forward (its out and LSE feed both backwards: the counters and
the times depend on the shapes, the band and the tiling, not on the values), then the causal
backward (aclnnFlashAttentionGrad, V1) and the windowed backward (aclnnFlashAttentionGradV2 with
window = (left, right) intersected with causal, acl_fa.spec.band.window_band), both
deterministic. Prints, as JSON per backward: the simulator's kernel wall time (host time of the
CPU simulator, not NPU time), executed cube MACs, the useful MACs (5 matmuls x D over the visible
(query, key) pairs), their ratio, and the AIC cores' cube MACs max / mean; then the time ratio.
"""
import argparse
import json

import numpy as np

import acl_fa
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.spec.band import window_band
from acl_fa.spec.options import AttentionOptions
from acl_fa.ops.backward_v2 import run_backward_v2
from acl_fa.jobs.run import random_inputs
from acl_fa.jobs.run_backward import random_dout
from acl_fa.runtime.sim_stats import last_launch


def visible_pairs(seq: int, pre: int, nxt: int) -> int:
    """(query, key) pairs inside the band of a square sequence (diag = 0), by rows."""
    rows = np.arange(seq, dtype=np.int64)
    lo = np.maximum(rows - pre, 0)
    hi = np.minimum(rows + nxt, seq - 1)
    return int(np.maximum(hi - lo + 1, 0).sum())


def summary(stats: dict, useful: int) -> dict:
    loads = [c["cube_macs"] for c in stats["aic"] if c["cube_macs"]]
    return {"kernel": stats["kernel"], "kernel_wall_s": round(stats["wall_seconds"], 3),
            "cube_macs": stats["cube_macs"], "useful_macs": useful,
            "executed_over_useful": round(stats["cube_macs"] / useful, 4),
            "aic_max_over_mean": round(max(loads) / (sum(loads) / len(loads)), 4)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--window", default="256,0", help="left,right (-1 = unbounded), intersected with causal")
    args = ap.parse_args()
    left, right = (int(x) for x in args.window.split(","))
    pre, nxt = window_band((left, right), causal=True)
    p = problem_from_sizes(seq_q=args.seq, num_heads=args.heads, head_dim=args.head_dim, causal=True)
    q, k, v = random_inputs(p)
    dout = random_dout(p)
    per_pair = 5 * args.head_dim * args.heads
    with acl_fa.Session() as s:
        out, lse = s.flash_attention(q, k, v, causal=True, return_lse=True)
        s.flash_attention_backward(dout, q, k, v, out, lse, causal=True)
        causal = summary(last_launch(s.backend, per_core=True), per_pair * visible_pairs(args.seq, args.seq, 0))
        run_backward_v2(s, p, AttentionOptions(pre_tokens=pre, next_tokens=nxt), dout, q, k, v, out, lse, None, True)
        window = summary(last_launch(s.backend, per_core=True), per_pair * visible_pairs(args.seq, pre, nxt))
    print(json.dumps({"seq": args.seq, "heads": args.heads, "head_dim": args.head_dim, "window": [left, right],
                      "pre_tokens": pre, "next_tokens": nxt, "causal": causal, "windowed": window,
                      "causal_over_window_time": round(causal["kernel_wall_s"] / window["kernel_wall_s"], 2)},
                     indent=1))


if __name__ == "__main__":
    main()
