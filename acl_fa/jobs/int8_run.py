"""`acl-fa run --qk-quant int8`: attention with int8 QK^T (docs/int8.md) on random inputs, each launch
modeled (the simulator's pipeline model), beside the fp16 forward of the same problem, and checked
against the float64 references (library code; the CLI only parses and prints).

The launches run one at a time inside acl_fa.plan.timing.op_trace so that each has its own model:
AttentionQuant of Q, AttentionQuant of K (smoothed), FlashAttentionInt8, and the fp16 FlashAttention.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..ops import forward, opcall
from ..ops.quant import ATTENTION_QUANT, FLASH_ATTENTION_INT8, Int8Problem, int8_blocks, quant_problem, smoothing_shift
from ..plan import timing
from ..reference.attention import attention_reference
from ..reference.quant import int8_attention_reference
from ..runtime.session import DeviceSession
from ..spec.problem import Problem
from .run import random_inputs
from .settings import JobSettings

__all__ = ["Int8Models", "Int8Report", "model_int8", "run_int8_job", "format_int8_report"]

# Problems checked against the float64 references (B * N * Sq * Skv); larger ones are not checked.
CHECK_PAIRS = 1 << 22


@dataclasses.dataclass
class Int8Models:
    """The modeled launches of one problem (each a timing.ModelReport, or None on an NPU)."""

    base: Problem       # the problem with the blocks of the int8 scales
    quant_q: Optional[timing.ModelReport]
    quant_k: Optional[timing.ModelReport]
    int8: Optional[timing.ModelReport]
    fp16: Optional[timing.ModelReport]
    out: np.ndarray
    lse: np.ndarray

    @property
    def int8_total_seconds(self) -> float:
        return self.quant_q.seconds + self.quant_k.seconds + self.int8.seconds


def _modeled(session: DeviceSession, launch):
    """(result of launch(), its ModelReport) -- the model only on the simulator."""
    if session.backend.name != "sim":
        return launch(), None
    with timing.op_trace(session.backend):
        result = launch()
    return result, timing.last_model(session.backend)


def model_int8(session: DeviceSession, problem: Problem, q, k, v, *, fp16: bool = True,
               blocks: Optional[tuple] = None) -> Int8Models:
    """Runs and models the int8 path's three launches (and, with fp16, the fp16 forward) on host arrays.
    blocks: (block_m, block_n) of the int8 launches (the scales' granularity) in place of the problem's
    (its own, or the int8 op's plan: int8_blocks); the fp16 forward keeps the problem's."""
    int8_problem = problem if blocks is None else dataclasses.replace(problem, block_m=blocks[0], block_n=blocks[1])
    base = int8_blocks(int8_problem, session.soc_name())
    quant = opcall.runner_for(session, ATTENTION_QUANT)
    (qy, qs), quant_q = _modeled(session, lambda: quant.run(quant_problem(base, "q"), q))
    (ky, ks), quant_k = _modeled(session, lambda: quant.run(quant_problem(base, "k"), k))
    (out, lse), int8 = _modeled(session, lambda: opcall.runner_for(session, FLASH_ATTENTION_INT8).run(
        Int8Problem(base), qy, ky, v, qs, ks))
    fp16_model = _modeled(session, lambda: forward.runner_for(session).run(problem, q, k, v, outputs=()))[1] \
        if fp16 else None
    return Int8Models(base, quant_q, quant_k, int8, fp16_model, out, lse + smoothing_shift(base, q, k))


@dataclasses.dataclass
class Int8Report:
    soc: str
    problem: Problem
    models: Int8Models
    cosine: Optional[float]          # of out against float64 attention on the unquantized inputs
    max_error: Optional[float]       # max |out - float64 attention|
    quantized_error: Optional[float]  # max |quantized float64 reference - float64 attention|

    @property
    def ok(self) -> bool:
        if self.cosine is None:
            return True
        return self.cosine >= 0.999 and self.max_error <= 2 * self.quantized_error + 1e-3


def run_int8_job(problem: Problem, settings: JobSettings = JobSettings()) -> Int8Report:
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        q, k, v = random_inputs(problem, settings.seed)
        models = model_int8(session, problem, q, k, v)
        soc = session.soc_name()
    cosine = max_error = quantized_error = None
    p = problem
    if settings.check and p.batch * p.num_heads * p.seq_q * p.seq_kv <= CHECK_PAIRS:
        kw = dict(causal=p.causal, scale=p.scale, layout=p.layout, num_heads=p.num_heads, num_kv_heads=p.num_kv_heads)
        exact, _ = attention_reference(q, k, v, **kw)
        quantized, _ = int8_attention_reference(q, k, v, block_m=models.base.block_m, block_n=models.base.block_n,
                                                **kw)
        out = models.out.astype(np.float64)
        cosine = float(out.ravel() @ exact.ravel() / (np.linalg.norm(out) * np.linalg.norm(exact)))
        max_error = float(np.abs(out - exact).max())
        quantized_error = float(np.abs(quantized - exact).max())
    return Int8Report(soc, problem, models, cosine, max_error, quantized_error)


def format_int8_report(r: Int8Report) -> str:
    p, m = r.problem, r.models
    flops = p.flops()
    lines = [f"problem     B={p.batch} N={p.num_heads} Nkv={p.num_kv_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} "
             f"{p.dtype_name} {p.layout}{' causal' if p.causal else ''} on {r.soc}, qk_quant=int8",
             f"tiling      BLOCK_M={m.base.block_m} BLOCK_N={m.base.block_n}: one Q scale per {m.base.block_m} rows, "
             f"one K scale per {m.base.block_n} keys (K smoothed)"]
    if m.int8 is not None:
        total = m.int8_total_seconds
        lines += [
            f"modeled     quantize Q {m.quant_q.seconds * 1e6:.1f} us, quantize K {m.quant_k.seconds * 1e6:.1f} us, "
            f"int8 forward {m.int8.seconds * 1e6:.1f} us ({m.int8.tflops(flops):.1f} TFLOP/s; critical {m.int8.critical}); "
            f"total {total * 1e6:.1f} us ({flops / total / 1e12:.1f} TFLOP/s) (pipeline model, not a measurement)"]
        if m.fp16 is not None:
            lines.append(f"            fp16 forward {m.fp16.seconds * 1e6:.1f} us ({m.fp16.tflops(flops):.1f} TFLOP/s): "
                         f"int8 forward {m.fp16.seconds / m.int8.seconds:.2f}x, with the quantization "
                         f"{m.fp16.seconds / total:.2f}x")
    if r.cosine is not None:
        lines.append(f"check       cosine vs float64 {r.cosine:.6f} (>= 0.999); max |out - ref| {r.max_error:.3g} <= 2 x "
                     f"the quantized reference's {r.quantized_error:.3g}: {'OK' if r.ok else 'FAILED'}")
    return "\n".join(lines)
