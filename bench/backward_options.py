"""The backward's cost of dropout and of a key-padding mask at one shape.

    python bench/backward_options.py --seq 4096 --heads 2 --head-dim 128 --dropout 0.1

Runs, on one Session, FlashAttentionGradV2 (deterministic; the causal pair as the band (S, 0),
which sees what causal sees, so both run the V2 op) four times on the same inputs:
  causal, p = 0            against   causal, dropout p (the keep mask regenerated in the kernel)
  all keys visible (mask)  against   a key-padding mask [1, 1, 1, S] hiding the second half
(the mask pair both carry a mask, so both pay the summary pre-pass; the second skips the hidden
blocks). Each case runs --repeat times (the median kernel wall time is reported; the counters
are the same every run). The out / LSE inputs are random: counters and times depend on the shapes, the options
and the tiling, not on the values. Prints JSON per run: the simulator's kernel wall time (host
time of the CPU simulator, not NPU time), executed cube MACs, vector elements and GM bytes read, then the
ratios.
"""
import argparse
import json
import statistics

import numpy as np

import acl_fa
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.jobs.run import random_inputs
from acl_fa.jobs.run_backward import random_dout
from acl_fa.runtime.sim_stats import last_launch


def summary(stats: dict) -> dict:
    return {"kernel": stats["kernel"], "kernel_wall_s": round(stats["wall_seconds"], 3),
            "cube_macs": stats["cube_macs"], "vector_elems": stats["vector_elems"],
            "gm_read_bytes": stats["gm_read_bytes"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; the median wall time is reported")
    args = ap.parse_args()
    s_len = args.seq
    p = problem_from_sizes(seq_q=s_len, num_heads=args.heads, head_dim=args.head_dim)
    q, k, v = random_inputs(p)
    dout = random_dout(p)
    rng = np.random.default_rng(1)
    out = rng.standard_normal(q.shape).astype(q.dtype)
    lse = (np.abs(rng.standard_normal((1, args.heads, s_len))) + np.log(s_len)).astype(np.float32)
    runs = {}
    all_keys = np.ones((1, 1, 1, s_len), bool)
    half_keys = np.arange(s_len)[None, None, None, :] < s_len // 2
    # window (S, -1) with causal: the band (S, 0) sees what causal sees, and p = 0 runs the V2 op too
    band = dict(causal=True, window=(s_len, -1))
    cases = {"causal p=0": band,
             f"causal p={args.dropout}": dict(band, dropout_p=args.dropout, seed=1234),
             "mask all keys visible": dict(attn_mask=all_keys),
             "mask hiding half the keys": dict(attn_mask=half_keys)}
    with acl_fa.Session() as s:
        for name, kw in cases.items():
            walls = []
            for _ in range(args.repeat):
                s.flash_attention_backward(dout, q, k, v, out, lse, **kw)
                stats = last_launch(s.backend)
                walls.append(stats["wall_seconds"])
            runs[name] = summary(dict(stats, wall_seconds=statistics.median(walls)))
            print(json.dumps({name: runs[name]}), flush=True)
    names = list(cases)
    print(json.dumps({
        "dropout_time_ratio": round(runs[names[1]]["kernel_wall_s"] / runs[names[0]]["kernel_wall_s"], 3),
        "dropout_cube_mac_ratio": round(runs[names[1]]["cube_macs"] / runs[names[0]]["cube_macs"], 4),
        "half_mask_cube_mac_ratio": round(runs[names[3]]["cube_macs"] / runs[names[2]]["cube_macs"], 4),
        "half_mask_time_ratio": round(runs[names[3]]["kernel_wall_s"] / runs[names[2]]["kernel_wall_s"], 3)}))


if __name__ == "__main__":
    main()
