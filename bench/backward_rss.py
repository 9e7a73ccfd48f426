"""Peak host RSS of a FlashAttention backward against the bytes it must hold.

    python bench/backward_rss.py --seq 32768 --heads 8 --head-dim 128 [--atomic]

Runs the forward and then the backward (causal, float16, BNSD) on one Session and prints, as
JSON: the host arrays (q, k, v, dout, out, lse, dq, dk, dv), the simulated device memory live
after both calls (the cached buffers and workspaces of both ops), and the process's peak RSS
(ru_maxrss). Nothing Sq x Skv-sized may exist anywhere: RSS / (host + device) stays near 1.
"""
import argparse
import json
import resource

import numpy as np

import acl_fa
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.jobs.run import random_inputs
from acl_fa.jobs.run_backward import random_dout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--atomic", action="store_true", help="deterministic=False")
    args = ap.parse_args()
    p = problem_from_sizes(seq_q=args.seq, num_heads=args.heads, head_dim=args.head_dim, causal=True)
    q, k, v = random_inputs(p)
    dout = random_dout(p)
    with acl_fa.Session() as s:
        out, lse = s.flash_attention(q, k, v, causal=True, return_lse=True)
        dq, dk, dv = s.flash_attention_backward(dout, q, k, v, out, lse, causal=True, deterministic=not args.atomic)
        device = s.live_counts()["deviceBytes"]
    host = sum(x.nbytes for x in (q, k, v, dout, out, lse, dq, dk, dv))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    finite = all(np.isfinite(g.astype(np.float32)).all() for g in (dq, dk, dv))
    print(json.dumps({"seq": args.seq, "heads": args.heads, "head_dim": args.head_dim,
                      "deterministic": not args.atomic, "host_array_bytes": host, "device_bytes": device,
                      "peak_rss_bytes": rss, "rss_over_held": rss / (host + device), "gradients_finite": finite}))


if __name__ == "__main__":
    main()
