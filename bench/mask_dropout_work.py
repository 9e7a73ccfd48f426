"""Mask and dropout in the FlashAttentionV2 forward at S=4096 (B1, fp16, D128) on the simulator:
executed cube MACs (counters) of a key-padding mask hiding half of the keys against no mask, the
mask's device bytes against its given shape and against [B, N, Sq, Skv], and the kernel's
simulator time with dropout against p = 0: wall seconds of the launch (sim_stats) and CPU seconds
of the process around each call (every thread's, so less sensitive to other load on the host).

All runs go through FlashAttentionV2 with the blocks the policy picks with mask and dropout both
on, so the rows differ only in the option measured. Useful MACs: 2 x N x D x visible pairs.
Usage: python bench/mask_dropout_work.py [--seq 4096] [--heads 2] [--dropout 0.1] [--runs 2] [--block-m M --block-n N]
"""
import argparse
import resource

import numpy as np

from common import header, median, size_arguments, table

import acl_fa  # noqa: E402
from acl_fa.ops import forward_v2 as attention_v2
from acl_fa.runtime import sim_stats  # noqa: E402
from acl_fa.spec.problem import make_problem  # noqa: E402
from acl_fa.spec.options import build_options  # noqa: E402
from acl_fa.jobs.run import random_inputs  # noqa: E402


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def launch(session, problem, options, mask, q, k, v) -> dict:
    t0 = cpu_seconds()
    attention_v2.run_forward_v2(session, problem, options, q, k, v, mask)
    cpu = cpu_seconds() - t0
    return dict(sim_stats.last_launch(session.backend), cpu_seconds=cpu)


def main():
    parser = size_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), seq=4096, heads=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--block-m", type=int, default=0, help="0: the policy's choice with both options on")
    parser.add_argument("--block-n", type=int, default=0, help="0: the policy's choice with both options on")
    args = parser.parse_args()
    s, n, d = args.seq, args.heads, 128
    shells = [np.empty((1, n, s, d), np.float16) for _ in range(3)]
    plain, *_ = make_problem(*shells)
    padding = np.ones((1, 1, 1, s), dtype=bool)
    padding[..., s // 2:] = False  # key padding: the second half of the keys hidden
    # Every run with the blocks the policy picks with both options on (the most UB), so only the
    # option differs between the rows.
    chosen = attention_v2.check_v2_plan(attention_v2.V2Call(plain, build_options(
        scores=(1, n, s, s), attn_mask=padding, dropout_p=args.dropout, seed=1)[0]), None)
    problem, *_ = make_problem(*shells, block_m=args.block_m or chosen.block_m, block_n=args.block_n or chosen.block_n)
    sizes = dict(scores=(1, n, s, s))
    runs = {
        "no mask, p = 0": build_options(**sizes, window=(-1, -1)),
        "key padding [1, 1, 1, S] hiding half, p = 0": build_options(**sizes, attn_mask=padding),
        f"no mask, dropout p = {args.dropout}": build_options(**sizes, dropout_p=args.dropout, seed=1),
    }
    results = {}
    with acl_fa.Session(backend="sim") as session:
        soc = session.soc_name()
        q, k, v = random_inputs(problem)
        for name, (options, mask) in runs.items():
            plan = attention_v2.check_v2_plan(attention_v2.V2Call(problem, options), soc)
            results[name] = (plan, mask, [])
            launch(session, problem, options, mask, q, k, v)  # warm-up: first-call costs out of the runs
        # The rows take turns, run by run, so a change in the host's load falls on all of them
        # alike and each run's p = 0.1 / p = 0 pair is side by side.
        for _ in range(args.runs):
            for name, (options, mask) in runs.items():
                results[name][2].append(launch(session, problem, options, mask, q, k, v))
    for _, _, stats in results.values():
        assert all(x["cube_macs"] == stats[0]["cube_macs"] for x in stats)  # deterministic counters
    full_pairs, half_pairs = s * s, s * (s // 2)
    rows = []
    for name, (plan, mask, stats) in results.items():
        useful = 2 * n * d * (half_pairs if mask is not None else full_pairs)
        rows.append([name, f"{plan.block_m} x {plan.block_n}", f"{useful:,}", f"{stats[-1]['cube_macs']:,}",
                     "-" if mask is None else f"{mask.nbytes:,} B", f"{median([x['wall_seconds'] for x in stats]):.2f}",
                     f"{median([x['cpu_seconds'] for x in stats]):.2f}"])
    print(header(f"Mask and dropout in FlashAttentionV2 at S={s} (B1 N{n} D{d} fp16, {soc})"))
    print(table(["run", "BLOCK_M x BLOCK_N", "useful MACs", "executed cube MACs", "mask device bytes",
                 "kernel s (simulator)", "call CPU s"], rows))
    base, masked, dropped = (results[name][2] for name in runs)
    t = lambda stats, key="wall_seconds": median([x[key] for x in stats])  # noqa: E731
    print(f"\nExecuted cube MACs: no mask / key padding = {base[-1]['cube_macs'] / masked[-1]['cube_macs']:.3f}x; "
          f"mask bytes {padding.nbytes:,} B given shape vs {n * s * s:,} B expanded to [B, N, Sq, Skv] uint8.")
    print(f"Simulator time with dropout p = {args.dropout} / p = 0: {t(dropped) / t(base):.2f}x "
          f"({t(dropped):.2f} s vs {t(base):.2f} s); CPU seconds of the calls: "
          f"{t(dropped, 'cpu_seconds') / t(base, 'cpu_seconds'):.2f}x "
          f"({t(dropped, 'cpu_seconds'):.2f} s vs {t(base, 'cpu_seconds'):.2f} s); medians of {args.runs} runs.")
    paired = sorted(d["cpu_seconds"] / b["cpu_seconds"] for d, b in zip(dropped, base))
    added = median([d["cpu_seconds"] - b["cpu_seconds"] for d, b in zip(dropped, base)])
    elements = n * s * s
    print(f"Run by run (CPU): p = {args.dropout} / p = 0 = {', '.join(f'{x:.2f}' for x in paired)} (median "
          f"{median(paired):.2f}x); dropout adds {added:.3f} s = {added / elements * 1e9:.1f} ns per score element "
          f"to {t(base, 'cpu_seconds') / elements * 1e9:.1f} ns at p = 0.")


if __name__ == "__main__":
    main()
