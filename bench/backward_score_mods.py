"""The backward's modeled cost of ALiBi, soft-capping and attention sinks (FlashAttentionGradV3).

    python bench/backward_score_mods.py --seq 4096 --heads 32 --head-dim 128

Runs, on one Session, the causal backward (B1, float16, BNSD, deterministic) five times on the
same inputs: plain (FlashAttentionGrad, V1), and FlashAttentionGradV3 with ALiBi ([N] slopes),
softcap (30), sinks ([N] logits, dsinks written) and all three. Each launch runs under the
simulator's op trace and prints the **modeled** NPU time (acl_fa.plan.timing: the pipeline model
of docs/timing_model.md over the instruction trace, Ascend910B2 unless ACL_FA_SIM_SOC says
otherwise) and its ratio to the plain backward's; the goal of issue #30 is <= 1.15x each. The out /
LSE inputs are random: the modeled time depends on the shapes, the options and the tiling, not on
the values.
"""
import argparse
import json

import numpy as np

import acl_fa
from acl_fa.jobs.run import random_inputs
from acl_fa.jobs.run_backward import random_dout
from acl_fa.plan import timing
from acl_fa.runtime.sim_stats import last_launch
from acl_fa.spec.problem import problem_from_sizes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--softcap", type=float, default=30.0)
    args = ap.parse_args()
    s_len, n = args.seq, args.heads
    p = problem_from_sizes(seq_q=s_len, num_heads=n, head_dim=args.head_dim, causal=True)
    q, k, v = random_inputs(p)
    dout = random_dout(p)
    rng = np.random.default_rng(1)
    out = rng.standard_normal(q.shape).astype(q.dtype)
    lse = (np.abs(rng.standard_normal((1, n, s_len))) + np.log(s_len)).astype(np.float32)
    slopes = (2.0 ** (-8.0 * np.arange(1, n + 1) / n)).astype(np.float32)
    sinks = rng.standard_normal(n).astype(np.float32)
    cases = {"plain": {}, "alibi": dict(alibi_slopes=slopes), "softcap": dict(softcap=args.softcap),
             "sinks": dict(sinks=sinks), "all three": dict(alibi_slopes=slopes, softcap=args.softcap, sinks=sinks)}
    times = {}
    with acl_fa.Session() as s:
        for name, kw in cases.items():
            with timing.op_trace(s.backend):
                s.flash_attention_backward(dout, q, k, v, out, lse, causal=True, **kw)
            model = timing.last_model(s.backend)
            times[name] = model.seconds * 1e6
            row = {"case": name, "kernel": last_launch(s.backend)["kernel"], "modeled_us": round(times[name], 1),
                   "modeled_over_plain": round(times[name] / times["plain"], 3), "critical": model.critical,
                   "chip": model.chip}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
