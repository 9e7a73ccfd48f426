"""The backward's modeled time, GM bytes per visible pair and what binds it (issue #29, third step).

    python bench/backward_third_step.py --seq 4096 --heads 8,32 [--relieve]

For each head count, runs the causal backward (B1, D128, float16, BNSD) in the atomic and the
deterministic mode on one Session under the simulator's op trace and prints, per launch, one JSON
row: the **modeled** time (acl_fa.plan.timing: the pipeline model of docs/timing_model.md over the
instruction trace, Ascend910B2 unless ACL_FA_SIM_SOC says otherwise), what sets it (the replay or
a memory bound) and its busiest pipe, the replay's GM bytes over the visible (query, key) pairs
N x S (S + 1) / 2, the plan's work split (busiest AIV / mean, dealt or contiguous), and for the
deterministic row its ratio to the atomic one (the issue's goal: <= 1.15x). With --relieve, the
same trace is replayed (timing.remodel) with one cost family relieved at a time -- the L2 rates
x2 (and the chip's aggregate and the per-core ports apart), the FixPipe x2, all latencies / 2 --
to show which one the time waits on. The inputs are random: the modeled time depends on the shapes and the tiling, not the values.
"""
import argparse
import json

import numpy as np

import acl_fa
from acl_fa.jobs.run import random_inputs
from acl_fa.jobs.run_backward import random_dout
from acl_fa.plan import timing
from acl_fa.plan.backward import backward_plan
from acl_fa.spec.problem import problem_from_sizes


def relieved(costs: dict) -> dict:
    """{label: cost table}: one cost family relieved at a time -- every L2 rate (the chip's and the
    per-core ports, timing.L2_RATE_FIELDS) x2, then the chip's aggregate alone and the per-core
    ports alone; the FixPipe (its rate and the core's write port) x2; every latency and the Matmul
    request cost / 2."""
    fixpipe = ("fixpipeBytesPerCycle", "corePortWriteBytesPerCycle")
    latencies = [k for k in costs if "Latency" in k or k == "matmulRequestCycles"]
    ports = ("corePortBytesPerCycle", "corePortWriteBytesPerCycle", "mte3BytesPerCycle")
    return {"l2 rates x2": timing.with_l2_rates(costs, 2.0),
            "chip l2 rate x2": dict(costs, gmBytesPerCycle=2 * costs["gmBytesPerCycle"]),
            "core ports x2": dict(costs, **{k: 2 * costs[k] for k in ports}),
            "fixpipe x2": dict(costs, **{k: 2 * costs[k] for k in fixpipe}),
            "latencies / 2": dict(costs, **{k: costs[k] / 2 for k in latencies})}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", default="8,32")
    ap.add_argument("--relieve", action="store_true")
    args = ap.parse_args()
    s_len = args.seq
    with acl_fa.Session() as s:
        for n in (int(x) for x in args.heads.split(",")):
            p = problem_from_sizes(seq_q=s_len, num_heads=n, head_dim=128, causal=True)
            q, k, v = random_inputs(p)
            dout = random_dout(p)
            rng = np.random.default_rng(1)
            out = rng.standard_normal(q.shape).astype(q.dtype)
            lse = (np.abs(rng.standard_normal((1, n, s_len))) + np.log(s_len)).astype(np.float32)
            pairs = n * s_len * (s_len + 1) / 2
            atomic_us = None
            for deterministic in (False, True):
                with timing.op_trace(s.backend):
                    s.flash_attention_backward(dout, q, k, v, out, lse, causal=True, deterministic=deterministic)
                model = timing.last_model(s.backend)
                plan = backward_plan(p, model.chip, deterministic)
                us = model.seconds * 1e6
                row = {"heads": n, "seq": s_len, "mode": "deterministic" if deterministic else "atomic",
                       "modeled_us": round(us, 1), "bound": model.bound, "critical": model.critical,
                       "gm_bytes": model.gm_bytes, "gm_bytes_per_pair": round(model.gm_bytes / pairs, 1),
                       "balance": round(plan.imbalance, 3), "dealt": plan.units_dealt,
                       "workspace_mib": round(plan.workspace_bytes / 2**20, 1), "chip": model.chip}
                if deterministic:
                    row["over_atomic"] = round(us / atomic_us, 3)
                else:
                    atomic_us = us
                if args.relieve:
                    costs = timing.pipe_costs(s.backend)
                    row["relieved_us"] = {label: round(timing.remodel(s.backend, table).seconds * 1e6, 1)
                                          for label, table in relieved(costs).items()}
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
