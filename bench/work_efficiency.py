"""Work efficiency at S=4096 causal (B1 N32 D128 fp16) from the simulator's counters: executed
cube MACs / useful MACs, and the per-core max/mean load over the AIC cores (24 on 910B2).

Useful MACs: both matmuls over the visible (query, key) pairs only: 2 x B x N x D x pairs.
Executed MACs: what the Matmul calls ran, padded tile sizes included (the counters). Block-level
ideal: the MACs of every (query rows, key block) tile with at least one visible pair, computed in
full, at the kernel's row granularity (each AIV owns SUB_BLOCK_M rows of a BLOCK_M query block
and skips its own fully masked key blocks) -- what a kernel skipping whole tiles must execute.
Usage: python bench/work_efficiency.py [--seq 4096] [--heads 32] [--runs 1]
"""
import argparse

import numpy as np

from common import header, median, table

import acl_fa  # noqa: E402
from acl_fa.runtime import sim_stats  # noqa: E402
from acl_fa.ops.forward import runner_for  # noqa: E402
from acl_fa.ops.problem import check_plan  # noqa: E402
from acl_fa.spec.problem import make_problem  # noqa: E402
from acl_fa.jobs.run import random_inputs  # noqa: E402


def block_level_macs(problem, block_m: int, block_n: int) -> int:
    """MACs of the block pairs a block-skipping causal kernel computes (tails counted at size)."""
    sq, skv, d = problem.seq_q, problem.seq_kv, problem.head_dim
    total = 0
    for r0 in range(0, sq, block_m):
        rows = min(block_m, sq - r0)
        last_row = r0 + rows - 1
        visible_cols = min(skv, last_row + (skv - sq) + 1) if problem.causal else skv  # keys of the last row
        for c0 in range(0, max(0, visible_cols), block_n):
            total += rows * min(block_n, skv - c0) * d * 2
    return total * problem.batch * problem.num_heads


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    shells = [np.empty((1, args.heads, args.seq, 128), np.float16) for _ in range(3)]
    problem, *_ = make_problem(*shells, causal=True)
    with acl_fa.Session(backend="sim") as session:
        plan = check_plan(problem, session.soc_name())
        soc = session.soc_name()
        q, k, v = random_inputs(problem)
        runner = runner_for(session)
        stats = []
        for _ in range(args.runs):
            runner.run(problem, q, k, v)
            stats.append(sim_stats.last_launch(session.backend, per_core=True))
        runner.close()
    s = stats[-1]  # the counters are deterministic; every run gives the same
    assert all(x["cube_macs"] == s["cube_macs"] for x in stats)
    useful = problem.flops() // 2
    ideal = block_level_macs(problem, plan.sub_block_m, plan.block_n)
    aic = [c["cube_macs"] for c in s["aic"]]
    aiv_vec = [c["vector_elems"] for c in s["aiv"]]
    aiv_gm = [c["gm_read_bytes"] + c["gm_write_bytes"] for c in s["aiv"]]
    print(header(f"Work efficiency at S={args.seq} causal (B1 N{args.heads} D128 fp16, {soc})"))
    print(f"Tiling: BLOCK_M {plan.block_m} (SUB_BLOCK_M {plan.sub_block_m}), BLOCK_N {plan.block_n}, "
          f"{plan.used_core_num} AIC x 2 AIV; "
          f"the plan's own work max/mean {plan.imbalance:.4f}. Kernel wall time "
          f"{median([x['wall_seconds'] for x in stats]):.2f} s (simulator).\n")
    print(table(["measure", "value", "goal"], [
        ["useful MACs (visible pairs, both matmuls)", f"{useful:,}", ""],
        ["executed cube MACs (counters)", f"{s['cube_macs']:,}", ""],
        [f"block-level ideal MACs ({plan.sub_block_m}-row x {plan.block_n}-key tiles)", f"{ideal:,}", ""],
        ["executed / useful", f"{s['cube_macs'] / useful:.4f}", "<= 1.05"],
        ["executed / block-level ideal", f"{s['cube_macs'] / ideal:.4f}", ""],
        [f"cube MACs per AIC: max / mean over {len(aic)} AIC", f"{max(aic) / (sum(aic) / len(aic)):.4f}", "<= 1.05"],
        [f"vector elements per AIV: max / mean over {len(aiv_vec)} AIV",
         f"{max(aiv_vec) / (sum(aiv_vec) / len(aiv_vec)):.4f}", ""],
        [f"GM bytes per AIV: max / mean over {len(aiv_gm)} AIV", f"{max(aiv_gm) / (sum(aiv_gm) / len(aiv_gm)):.4f}", ""],
        ["scalar accesses (GetValue/SetValue)", f"{s['scalar_accesses']:,}", ""],
    ]))


if __name__ == "__main__":
    main()
