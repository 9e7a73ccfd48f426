"""Cost of the score modifiers in the forward (#30: ALiBi, soft-capping, sinks, a float mask): the
modeled NPU time of each against the plain forward of the same problem (default B1 N32 S4096 D128
fp16 causal on Ascend910B2), the goal being <= 1.15x for ALiBi, softcap and sinks.

Each row is one `acl-fa run` job (acl_fa.jobs.run for the plain call, acl_fa.jobs.run_options for
the modifiers: FlashAttentionV3 for softcap, V5 for ALiBi / sinks / a float mask) with one timed
and one traced launch and no reference check; the time is the pipeline model's over the simulator's
instruction trace (acl_fa.plan.timing: modeled, not measured), its range over the calibrated rates.
The float mask row is [1, 1, Sq, Skv] (the whole score grid, read tile by tile) and is not part of
the goal.
Usage: python bench/score_mods_cost.py [--seq 4096] [--heads 32] [--only plain alibi ...]
"""
import argparse
import dataclasses
import time

from acl_fa.jobs import run as run_module, run_options
from acl_fa.jobs.settings import JobSettings
from acl_fa.spec.problem import problem_from_sizes

MODIFIERS = {
    "plain": None,
    "softcap": run_options.RunOptions(softcap=30.0),
    "alibi": run_options.RunOptions(alibi=True),
    "sinks": run_options.RunOptions(sinks=True),
    "all three": run_options.RunOptions(alibi=True, softcap=30.0, sinks=True),
}


def modeled(problem, how, settings):
    """(op, modeled time s, its range, critical resource, block_m, block_n) of one job."""
    if how is None:
        r = run_module.run_job(problem, settings)
        return "FlashAttention", r.model["time_s"], r.model.get("range_s"), r.model["critical"], r.block_m, r.block_n
    r = run_options.run_options_job(problem, how, settings)
    op = run_options._op_type(run_options.attention_v2.op_for(r.options).name)
    return op, r.model["time_s"], r.model.get("range_s"), r.model["critical"], r.block_m, r.block_n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--no-causal", action="store_true")
    parser.add_argument("--only", nargs="*", choices=list(MODIFIERS), default=["plain", "softcap", "alibi", "sinks"])
    args = parser.parse_args()
    problem = problem_from_sizes(seq_q=args.seq, batch=1, num_heads=args.heads, head_dim=args.head_dim,
                                 dtype=args.dtype, causal=not args.no_causal)
    settings = JobSettings(warmup=0, iters=1, check=False, backend="sim")
    print(f"B1 N{args.heads} S{args.seq} D{args.head_dim} {args.dtype}{'' if args.no_causal else ' causal'}, "
          "modeled NPU time (pipeline model over the simulator's trace; modeled, not measured)")
    print(f"{'modifier':<10} {'op':<17} {'block':>9} {'modeled us':>11} {'range us':>17} {'x plain':>8}  critical")
    base = None
    for name in args.only:
        start = time.time()
        op, t, span, critical, bm, bn = modeled(problem, MODIFIERS[name], dataclasses.replace(settings))
        base = t if name == "plain" else base
        ratio = f"{t / base:.3f}" if base else "-"
        rng = f"{span[0] * 1e6:.1f}-{span[1] * 1e6:.1f}" if span else "-"
        print(f"{name:<10} {op:<17} {f'{bm}x{bn}':>9} {t * 1e6:>11.1f} {rng:>17} {ratio:>8}  {critical}"
              f"   ({time.time() - start:.0f} s wall)", flush=True)


if __name__ == "__main__":
    main()
