"""L2 size sensitivity of the modeled HBM traffic (modeled, not measured): one FlashAttention
launch on the simulator with the GM and instruction traces on, replayed through the L2 model at
several L2 sizes in three orders: as recorded (launch), with the AI Core groups interleaved at
equal rates (concurrent), and in the order the pipeline model times the accesses (modeled; the
one `acl-fa run` uses, deterministic).

Usage: python bench/l2_sensitivity.py [--seq 4096] [--heads 32] [--l2-mib 192,96,48,32,8]
"""
import argparse

from common import header, table

import acl_fa  # noqa: E402
from acl_fa.plan import l2model, timing  # noqa: E402
from acl_fa.ops.forward import runner_for  # noqa: E402
from acl_fa.spec.problem import problem_from_sizes  # noqa: E402
from acl_fa.plan.roofline import chip_peaks  # noqa: E402
from acl_fa.jobs.run import format_bytes, random_inputs  # noqa: E402

MIB = 1024 * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--l2-mib", default="192,96,48,32,8")
    args = parser.parse_args()
    sizes = [int(x) for x in args.l2_mib.split(",")]
    problem = problem_from_sizes(seq_q=args.seq, num_heads=args.heads, head_dim=128, causal=True)
    q, k, v = random_inputs(problem)
    with acl_fa.Session(backend="sim") as session:
        soc = session.soc_name()
        line = chip_peaks(soc).l2_line_bytes
        runner = runner_for(session)
        with l2model.gm_trace(session.backend), timing.op_trace(session.backend):
            runner.run(problem, q, k, v)
            rows = {order: [l2model.model_trace(session.backend, mib * MIB, line, order=order).hbm_bytes
                            for mib in sizes] for order in l2model.ORDERS}
    print(header(f"L2 size sensitivity at S={args.seq} causal (B1 N{args.heads} D128 fp16, {soc}, "
                 f"{line}-B lines; modeled, not measured)"))
    print(table(["L2"] + [f"{mib} MiB" for mib in sizes], [
        ["modeled HBM, launch order"] + [format_bytes(b) for b in rows["launch"]],
        ["modeled HBM, interleaved"] + [format_bytes(b) for b in rows["concurrent"]],
        ["modeled HBM, modeled order"] + [format_bytes(b) for b in rows["modeled"]],
    ]))


if __name__ == "__main__":
    main()
