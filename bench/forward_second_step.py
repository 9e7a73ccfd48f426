"""The forward's modeled time (#28, second step) and what binds it (modeled, not measured): one
traced launch per (problem, precision) on the simulator, then replays of the same trace with one
suspected bound relieved at a time -- the GM rates x1.28 and x1.68 (L2_RATE_FIELDS together, the
range of bench/RESULTS.md "Forward speed (#28)"), the vector unit twice as fast (vectorRepeatCycles
and vectorExpRepeatCycles x0.5), both -- and the calibrated end of the ranges. A bound binds where
relieving it moves the time.

Usage: python bench/forward_second_step.py [--only N32S4096c,N1S32768] [--precisions high_precision,high_performance]
"""
import argparse

from common import header, table

import numpy as np  # noqa: E402

import acl_fa  # noqa: E402
from acl_fa.plan import timing  # noqa: E402

PROBLEMS = {  # label: (heads, seq, causal)
    "N32S4096c": (32, 4096, True),
    "N1S32768": (1, 32768, False),
}
PRECISIONS = ("high_precision", "high_performance")


def variants(costs: dict, fields: list) -> dict:
    vector = {"vectorRepeatCycles": costs["vectorRepeatCycles"] * 0.5,
              "vectorExpRepeatCycles": costs["vectorExpRepeatCycles"] * 0.5}
    return {
        "x1.0": costs,
        "GM x1.28": timing.with_l2_rates(costs, 1.28),
        "GM x1.68": timing.with_l2_rates(costs, 1.68),
        "vector x2": dict(costs, **vector),
        "GM x1.68 + vector x2": dict(timing.with_l2_rates(costs, 1.68), **vector),
        "calibrated": timing.calibrated_costs(fields, costs),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PROBLEMS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    args = parser.parse_args()
    rows = []
    names = None
    with acl_fa.Session(backend="sim") as session:
        costs = timing.pipe_costs(session.backend)
        fields = timing.cost_fields(session.backend)
        for label in args.only.split(","):
            heads, seq, causal = PROBLEMS[label]
            rng = np.random.default_rng(0)
            q, k, v = (rng.standard_normal((1, heads, seq, 128)).astype(np.float16) for _ in range(3))
            for precision in args.precisions.split(","):
                with timing.op_trace(session.backend):
                    session.flash_attention(q, k, v, causal=causal, precision=precision)
                    base = timing.last_model(session.backend)
                    models = {name: timing.remodel(session.backend, c) for name, c in variants(costs, fields).items()}
                names = list(models)
                busy = base.busy_fraction()
                rows.append([label, precision] + [f"{m.seconds * 1e6:.1f}" for m in models.values()] +
                            [base.critical, f"{busy.get('aiv.V', 0):.0%}", f"{busy.get('aic.M', 0):.0%}"])
    print(header("Forward, B1 D128 float16 on the simulated chip: modeled us per launch (pipeline model over "
                 "the instruction trace, not a measurement)"))
    print(table(["problem", "precision"] + names + ["critical (x1.0)", "aiv.V busy", "aic.M busy"], rows))


if __name__ == "__main__":
    main()
