"""Ring attention's peak device memory per device against its bound, at several S.

Measured: each rank's peak HBM above the ring's start (aclrtGetMemInfo, sampled at every
allocation point of the ring) on the simulated devices, next to parallel.MemoryBound: its rows of
Q, K, V, O and the output's LSE (1/P), the int16 running result's row bounds (accumulate="int16",
the default: one float32 per row and head, 1/P), the float32 accumulator's extra O/P
(accumulate="float32" only), the constant (one workspace for every call, a spare K/V sub-block and the merge's buffers
of BLOCK_ROWS rows) and the rounding; with the run's check, balance and bytes per link per step
(acl_fa.jobs.parallel_run, as `acl-fa run --parallel ring` prints them).

    python bench/ring_memory.py --seq 4096 8192 32768 [--accumulate int16|float32|output] [--devices 8]
"""
from __future__ import annotations

import argparse

from acl_fa import parallel
from acl_fa.jobs.parallel_run import ParallelSettings, format_parallel_report, memory_bound_met, run_parallel_job
from acl_fa.spec.problem import problem_from_sizes
from acl_fa.runtime.units import format_bytes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, nargs="+", default=[4096, 8192, 32768])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--accumulate", choices=parallel.ACCUMULATE, default=parallel.DEFAULT_ACCUMULATE)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--full-report", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for seq in args.seq:
        run = run_parallel_job(problem_from_sizes(seq_q=seq, num_heads=args.heads, head_dim=args.head_dim, causal=True),
                               ParallelSettings("ring", args.devices, accumulate=args.accumulate))
        if args.full_report:
            print(format_parallel_report(run), flush=True)
        rep = run.report
        worst = max(range(len(rep.devices)), key=lambda i: rep.device_bytes[i])
        m = rep.memory_bounds[worst]
        within = all(pk <= mb.shards_bound for pk, mb in zip(rep.device_bytes, rep.memory_bounds))
        rows.append((seq, rep.device_bytes[worst], rep.device_bytes[worst] - m.shards - m.accumulator - m.row_bounds, m,
                     memory_bound_met(rep), within, run.accuracy, rep.balance, rep.link_bytes_per_step[worst]))
        print(f"S={seq}: peak {format_bytes(rep.device_bytes[worst])}, check {'OK' if run.accuracy.ok else 'FAILED'}",
              flush=True)
    print(f"accumulate={args.accumulate}, {args.devices} devices, causal zigzag, B=1 N={args.heads} "
          f"D={args.head_dim} fp16, BLOCK_ROWS={parallel.BLOCK_ROWS}")
    print("| S | peak per device | shards (Q+K+V+O+LSE)/P | row bounds | float32 acc. extra | peak - shards - bounds "
          "- acc. | constant | rounding | bound: met | (Q+K+V+O)/P (+ bounds) + const.: met | check | max error / "
          "tolerance | balance | bytes per step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for seq, peak, above, m, met, within, acc, balance, steps in rows:
        print(f"| {seq} | {format_bytes(peak)} | {format_bytes(m.shards)} | {format_bytes(m.row_bounds)} | "
              f"{format_bytes(m.accumulator)} | {format_bytes(above)} | {format_bytes(m.constant)} | "
              f"{format_bytes(m.rounding)} | {format_bytes(m.bound)}: {'met' if met else 'NOT met'} | "
              f"{format_bytes(m.shards_bound)}: {'met' if within else 'NOT met'} | {'OK' if acc.ok else 'FAILED'} | "
              f"{acc.max_error:.3e} / {acc.tolerance:.3e} | {balance:.4f} | "
              f"{steps[0]} x {len(steps) - 1}, then {steps[-1]} |")


if __name__ == "__main__":
    main()
