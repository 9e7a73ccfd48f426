"""The forward's modeled time (#28, third step), its GM bytes per score element and what binds it
(modeled, not measured): one traced launch per (problem, precision) on the simulator, then
replays of the same trace with one suspected bound relieved at a time (forward_second_step's
variants: GM rates x1.28 / x1.68, the vector unit x2, both, the calibrated end of the range).

Besides the times: the launch's GM bytes (the counters: every MTE2 / MTE3 / FixPipe byte and the
Matmul operand loads, re-reads between tile passes included) per score element the cube
computes (executed MACs / (2 D): QK and P.V each take D MACs per element), the executed / useful
MAC ratio (useful: the visible (query, key) pairs x 2 D), and the time all of those bytes take at
the chip's aggregate L2 rate (the L2 bound of docs/timing_model.md).

Usage: python bench/forward_third_step.py [--only N32S4096c,N1S32768] [--precisions high_precision,high_performance]
"""
import argparse

from common import header, table
from forward_second_step import PRECISIONS, PROBLEMS, variants

import numpy as np  # noqa: E402

import acl_fa  # noqa: E402
from acl_fa.plan import timing  # noqa: E402
from acl_fa.runtime import sim_stats  # noqa: E402

HEAD_DIM = 128


def useful_macs(heads: int, seq: int, causal: bool) -> int:
    """QK and P.V MACs of the visible (query, key) pairs (Sq == Skv: the causal band keeps S(S+1)/2)."""
    pairs = seq * (seq + 1) // 2 if causal else seq * seq
    return heads * pairs * 2 * HEAD_DIM


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PROBLEMS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    args = parser.parse_args()
    rows, bytes_rows = [], []
    names = None
    with acl_fa.Session(backend="sim") as session:
        costs = timing.pipe_costs(session.backend)
        fields = timing.cost_fields(session.backend)
        for label in args.only.split(","):
            heads, seq, causal = PROBLEMS[label]
            rng = np.random.default_rng(0)
            q, k, v = (rng.standard_normal((1, heads, seq, HEAD_DIM)).astype(np.float16) for _ in range(3))
            for precision in args.precisions.split(","):
                with timing.op_trace(session.backend):
                    session.flash_attention(q, k, v, causal=causal, precision=precision)
                    base = timing.last_model(session.backend)
                    models = {name: timing.remodel(session.backend, c) for name, c in variants(costs, fields).items()}
                stats = sim_stats.last_launch(session.backend)
                names = list(models)
                busy = base.busy_fraction()
                rows.append([label, precision] + [f"{m.seconds * 1e6:.1f}" for m in models.values()] +
                            [base.critical, f"{busy.get('aiv.V', 0):.0%}", f"{busy.get('aic.M', 0):.0%}"])
                elements = stats["cube_macs"] / (2 * HEAD_DIM)
                bytes_rows.append([label, precision, f"{base.gm_bytes / 1e9:.3f}", f"{elements / 1e6:.1f}",
                                   f"{base.gm_bytes / elements:.2f}",
                                   f"{stats['cube_macs'] / useful_macs(heads, seq, causal):.4f}",
                                   f"{base.l2_bound_cycles / base.clock_mhz:.1f}",
                                   f"{base.pipeline_cycles / base.clock_mhz:.1f}"])
    print(header("Forward, B1 D128 float16 on the simulated chip: modeled us per launch (pipeline model over "
                 "the instruction trace, not a measurement)"))
    print(table(["problem", "precision"] + names + ["critical (x1.0)", "aiv.V busy", "aic.M busy"], rows))
    print()
    print(table(["problem", "precision", "GM GB", "score elements (M)", "GM B / element", "executed / useful MACs",
                 "L2 bound us", "pipeline us"], bytes_rows))


if __name__ == "__main__":
    main()
