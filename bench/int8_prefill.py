"""Int8 QK^T prefill (#31) against the fp16 forward, modeled on the simulator in one run.

For one problem (default the issue's goal point: Ascend910B2, B1 N32 S4096 D128 causal float16)
models, each launch alone inside acl_fa.plan.timing.op_trace:
  - the fp16 forward (FlashAttention, the base's kernel),
  - FlashAttentionInt8 over Q, K quantized per block of the same plan,
  - the two AttentionQuant launches (Q per block_m rows; K smoothed, per block_n keys),
and prints their modeled times and TFLOP/s (the attention's FLOPs, 4 * visible pairs * D), the int8
forward's ratio to the fp16 one, alone and with the quantization counted, and for each launch the
busiest core's vector (V) and cube (M) pipes' busy fractions (what binds). Modeled: the pipeline
model over the simulator's instruction trace (docs/timing_model.md), not a measurement.
"""
from __future__ import annotations

import argparse

import numpy as np

from common import header, size_arguments, table

import acl_fa
from acl_fa.jobs.int8_run import model_int8
from acl_fa.spec.problem import problem_from_sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_arguments(parser, seq=4096, heads=32, head_dim=128, batch=1)
    parser.add_argument("--no-causal", action="store_true")
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    parser.add_argument("--int8-blocks", metavar="MxN", default=None,
                        help="BLOCK_M x BLOCK_N of the int8 launches (default: the int8 op's own choice, "
                             "acl_fa.ops.quant.int8_blocks)")
    args = parser.parse_args()
    blocks = tuple(int(x) for x in args.int8_blocks.split("x")) if args.int8_blocks else None
    problem = problem_from_sizes(seq_q=args.seq, batch=args.batch, num_heads=args.heads, head_dim=args.head_dim,
                                 dtype=args.dtype, causal=not args.no_causal)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32).astype(problem.dtype)
               for shape in (problem.q_shape, problem.kv_shape, problem.kv_shape))
    with acl_fa.Session(backend="sim") as session:
        soc = session.soc_name()
        m = model_int8(session, problem, q, k, v, blocks=blocks)
    base, fp16, int8, quant_q, quant_k = m.base, m.fp16, m.int8, m.quant_q, m.quant_k
    flops = problem.flops()
    both = int8.seconds + quant_q.seconds + quant_k.seconds
    rows = [
        ["fp16 forward (FlashAttention)", f"{fp16.seconds * 1e6:.1f}", f"{fp16.tflops(flops):.1f}", fp16.critical, "1.00"],
        ["int8 QK^T forward (FlashAttentionInt8)", f"{int8.seconds * 1e6:.1f}", f"{int8.tflops(flops):.1f}",
         int8.critical, f"{fp16.seconds / int8.seconds:.2f}"],
        ["AttentionQuant Q (per block_m rows)", f"{quant_q.seconds * 1e6:.1f}", "", quant_q.critical, ""],
        ["AttentionQuant K (smoothed, per block_n keys)", f"{quant_k.seconds * 1e6:.1f}", "", quant_k.critical, ""],
    ]
    for row, model in zip(rows, (fp16, int8, quant_q, quant_k)):
        row += _busy(model)
    rows.append(["int8 total (quantize Q, K + int8 forward)", f"{both * 1e6:.1f}", f"{flops / both / 1e12:.1f}", "",
                 f"{fp16.seconds / both:.2f}", "", ""])
    p = problem
    print(header(f"Int8 QK^T prefill vs the fp16 forward: B{p.batch} N{p.num_heads} S{p.seq_q} D{p.head_dim} "
                 f"{p.dtype_name}{' causal' if p.causal else ''} on {soc} (modeled)"))
    origin = "given" if blocks else "the int8 op's own choice"
    print(f"Int8 blocks: BLOCK_M={base.block_m} BLOCK_N={base.block_n} ({origin}; the int8 scales' granularity). "
          f"Useful work {flops / 1e12:.3f} TFLOP per call.\n")
    print(table(["launch", "modeled us", "TFLOP/s", "critical pipe", "speedup vs fp16", "V busy", "M busy"], rows))


def _busy(model) -> list:
    """The busiest core's vector and cube pipe busy fractions (AIV / AIC tracks on A2/A3, the AI Core's on
    the coupled chips)."""
    busy = model.busy_fraction()
    vector = max((v for name, v in busy.items() if name.endswith(".V")), default=0.0)
    cube = max((v for name, v in busy.items() if name.endswith(".M")), default=0.0)
    return [f"{vector:.0%}", f"{cube:.0%}"]


if __name__ == "__main__":
    main()
