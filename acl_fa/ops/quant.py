"""Int8 QK^T for prefill (issue #31; docs/int8.md): two ops of our custom operator.

- aclnnAttentionQuant: x (float16 / bfloat16) -> y int8 and scale float32 [B, H, ceil(S / block)],
  one scale per `block` rows of each (batch, head), optionally after subtracting each head's
  per-channel mean over the sequence (``smooth``, for K: exact for softmax).
- aclnnFlashAttentionInt8: attention with Q and K int8 (their per-block scales beside them) and V in
  float16 / bfloat16: QK^T on the cube as int8 x int8 -> int32, dequantized in the softmax's scale.

``flash_attention(q, k, v, qk_quant="int8")`` (acl_fa/ops/routed.py) runs ``quantized_attention``:
both quantizations and the int8 forward on the device, the int8 Q, K and scales in device memory
between them (no host round trip). ``flash_attention_int8(q_i8, k_i8, v, q_scale, k_scale, ...)``
takes tensors quantized already (by AttentionQuant's scheme, e.g. ``reference.quant.quantize_blocks``).
Every check runs before device work.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import opcall
from ..plan.forward import PlanOptions
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..runtime.ffi import ffi
from ..runtime.session import DeviceSession
from ..spec.layouts import to_bnsd
from ..spec.problem import Problem, make_problem
from .opcall import Op, default_session
from .problem import check_plan

__all__ = ["QK_QUANT_CHOICES", "check_qk_quant", "check_int8_chip", "QuantProblem", "Int8Problem",
           "ATTENTION_QUANT", "FLASH_ATTENTION_INT8", "quantized_attention", "flash_attention_int8",
           "int8_blocks", "quant_problem", "smoothing_shift"]

# qk_quant values flash_attention takes; the others it names are refused with their reason.
QK_QUANT_CHOICES = (None, "none", "int8")
_REFUSED = {
    "fp8": ("no chip of the catalogue has an fp8 cube: the Matmul API takes fp8_e4m3fn_t / fp8_e5m2_t / hifloat8_t "
            "operands on Ascend 950PR / 950DT only; Atlas A2/A3 (Ascend910B*, Ascend910_93), Ascend310P3 and "
            "Ascend910 take float16, bfloat16, float32 and int8 (asc-devkit Matmul使用说明.md)"),
    "int4": ("not implemented: the Atlas A2/A3 cube takes int4b_t operands (asc-devkit Matmul使用说明.md), but 15 "
             "levels per Q/K element leave the scores too coarse for the accuracy rule of docs/int8.md; use "
             "qk_quant='int8'"),
}
_INT8_CHIPS = ("Ascend910B", "Ascend910_93", "Ascend310P")
# The coupled-core chips: one AI Core holds cube and vector unit (flash_attention_int8_coupled_kernel.h).
_COUPLED_CHIPS = ("Ascend310P", "Ascend910A")


def check_qk_quant(qk_quant) -> bool:
    """True for int8, False for none; InvalidArgumentError naming the reason for the others."""
    if qk_quant is not None and not isinstance(qk_quant, str):
        raise InvalidTypeError(f"qk_quant must be a string ('int8') or None, got {qk_quant!r}")
    name = (qk_quant or "none").lower()
    if name in _REFUSED:
        raise InvalidArgumentError(f"qk_quant={qk_quant!r} is not supported: {_REFUSED[name]}")
    if name not in ("none", "int8"):
        raise InvalidArgumentError(f"qk_quant must be None, 'none' or 'int8', got {qk_quant!r}")
    return name == "int8"


def _is_910a(soc: str) -> bool:
    return soc == "Ascend910" or soc.startswith("Ascend910A")


def check_int8_chip(soc: str, quantize: bool = True) -> None:
    """InvalidArgumentError unless `soc` runs the int8 ops, naming why not. FlashAttentionInt8 (quantize
    False) runs on Atlas A2/A3, Ascend310P and 910A; AttentionQuant (quantize True) not on 910A."""
    if soc.startswith(_INT8_CHIPS) or (_is_910a(soc) and not quantize):
        return
    if _is_910a(soc):
        raise InvalidArgumentError(
            f"qk_quant='int8' runs on Atlas A2/A3 (Ascend910B*, Ascend910_93) and Ascend310P only. On {soc} the "
            "int8 forward runs, but its quantization (AttentionQuant) needs a float32 ReduceMax for each block's "
            "max |x|, and the 910A vector unit (dav-c100) reduces half only (asc-devkit ReduceMax.md); quantize on "
            "the host (acl_fa.reference.quant.quantize_blocks) and call flash_attention_int8 (docs/int8.md)")
    raise InvalidArgumentError(f"qk_quant='int8' runs on Atlas A2/A3 (Ascend910B*, Ascend910_93) and Ascend310P "
                               f"only, not {soc}")


def _coupled(soc: str) -> bool:
    return soc.startswith(_COUPLED_CHIPS)


@dataclasses.dataclass(frozen=True)
class QuantProblem:
    """One AttentionQuant call: x of `shape` in `layout` (BSH: `num_heads`), `block` rows per scale."""

    shape: tuple
    dtype: np.dtype
    layout: str
    num_heads: int
    batch: int
    seq: int
    block: int
    smooth: bool

    @property
    def scale_shape(self) -> tuple:
        return (self.batch, self.num_heads, -(-self.seq // self.block))


@dataclasses.dataclass(frozen=True)
class Int8Problem:
    """One FlashAttentionInt8 call: the forward's Problem (blocks fixed: the scales' granularity)."""

    base: Problem

    @property
    def q_scale_shape(self) -> tuple:
        p = self.base
        return (p.batch, p.num_heads, -(-p.seq_q // p.block_m))

    @property
    def k_scale_shape(self) -> tuple:
        p = self.base
        return (p.batch, p.num_kv_heads, -(-p.seq_kv // p.block_n))


class AttentionQuantOp(Op):
    """aclnnAttentionQuant (op_host/attention_quant/attention_quant.json)."""

    name = "attention_quant"
    inputs = ("x",)
    outputs = ("y", "scale")
    workspace_api = "aclnnAttentionQuantGetWorkspaceSize"
    launch_api = "aclnnAttentionQuant"

    def buffers(self, problem: QuantProblem) -> dict:
        return {"x": (problem.shape, problem.dtype), "y": (problem.shape, np.dtype(np.int8)),
                "scale": (problem.scale_shape, np.dtype(np.float32))}

    def workspace_args(self, problem: QuantProblem, tensors: dict) -> tuple:
        layout = ffi.new("char[]", problem.layout.encode())
        return (tensors["x"].handle, problem.block, problem.smooth, layout, problem.num_heads,
                tensors["y"].handle, tensors["scale"].handle)

    def check(self, problem: QuantProblem, soc: str) -> int:
        check_int8_chip(soc)
        if _coupled(soc):
            if problem.dtype != np.float16:
                raise InvalidTypeError(f"x must be float16 on {soc} (no bfloat16 on its vector unit), got "
                                       f"{problem.dtype}")
            head_dim = problem.shape[-1] // (problem.num_heads if problem.layout == "BSH" else 1)
            if head_dim % 32:
                raise InvalidArgumentError(f"AttentionQuant on {soc} needs a head dim that is a multiple of 32 (no "
                                           f"DataCopyPad: int8 rows leave UB in whole 32-B blocks), got {head_dim}")
        return 0


class FlashAttentionInt8Op(Op):
    """aclnnFlashAttentionInt8 (op_host/flash_attention_int8/flash_attention_int8.json)."""

    name = "flash_attention_int8"
    inputs = ("q", "k", "v", "q_scale", "k_scale")
    outputs = ("out", "lse")
    workspace_api = "aclnnFlashAttentionInt8GetWorkspaceSize"
    launch_api = "aclnnFlashAttentionInt8"

    def buffers(self, problem: Int8Problem) -> dict:
        p = problem.base
        f32 = np.dtype(np.float32)
        return {"q": (p.q_shape, np.dtype(np.int8)), "k": (p.kv_shape, np.dtype(np.int8)), "v": (p.kv_shape, p.dtype),
                "q_scale": (problem.q_scale_shape, f32), "k_scale": (problem.k_scale_shape, f32),
                "out": (p.q_shape, p.dtype), "lse": (p.lse_shape, f32)}

    def workspace_args(self, problem: Int8Problem, tensors: dict) -> tuple:
        p = problem.base
        layout = ffi.new("char[]", p.layout.encode())
        return (tensors["q"].handle, tensors["k"].handle, tensors["v"].handle, tensors["q_scale"].handle,
                tensors["k_scale"].handle, p.scale, p.causal, layout, p.num_heads, p.num_kv_heads, p.block_m,
                p.block_n, tensors["out"].handle, tensors["lse"].handle)

    def check(self, problem: Int8Problem, soc: str) -> int:
        check_int8_chip(soc, quantize=False)
        return check_plan(problem.base, soc).workspace_bytes


ATTENTION_QUANT = AttentionQuantOp()
FLASH_ATTENTION_INT8 = FlashAttentionInt8Op()


def _check_value_dtype(problem: Problem) -> None:
    if problem.dtype_name not in ("float16", "bfloat16"):
        raise InvalidTypeError(f"qk_quant='int8' needs float16 or bfloat16 inputs (V and the output keep that dtype), "
                               f"got {problem.dtype_name}")


def int8_blocks(problem: Problem, soc: str) -> Problem:
    """`problem` with block_m / block_n fixed to the forward's plan on `soc` with the blocks priced
    as the int8 kernel runs them (int8_plan_options): the granularity of the scales (one per block_m
    query rows, one per block_n keys). FlashAttentionInt8's TilingFunc chooses the same."""
    _check_value_dtype(problem)
    check_int8_chip(soc)
    if _coupled(soc) and problem.head_dim % 32:
        raise InvalidArgumentError(f"qk_quant='int8' on {soc} needs a head dim that is a multiple of 32 (no "
                                   f"DataCopyPad: AttentionQuant writes each int8 row as whole 32-B blocks), got "
                                   f"{problem.head_dim}")
    if problem.layout != "BNSD" and problem.head_dim % 32:
        raise InvalidArgumentError(f"qk_quant='int8' with layout {problem.layout} needs a head dim that is a multiple "
                                   f"of 32 (AttentionQuant writes each int8 row as whole 32-B blocks), got "
                                   f"{problem.head_dim}; BNSD takes any multiple of 16")
    plan = check_plan(problem, soc, options=int8_plan_options(problem, soc))
    return dataclasses.replace(problem, block_m=plan.block_m, block_n=plan.block_n)


def int8_plan_options(problem: Problem, soc: str) -> PlanOptions:
    """The forward's plan options that price FlashAttentionInt8's blocks as its kernel runs them
    (FlashAttentionInt8's TilingFunc sets the same): on A2/A3, S leaves the cube as half and, with
    a float16 value, the softmax runs in half (docs/int8.md "S in half on A2/A3")."""
    if _coupled(soc):
        return PlanOptions()
    return PlanOptions(half_scores=True, half_softmax=problem.dtype_name == "float16")


def quant_problem(problem: Problem, which: str) -> QuantProblem:
    """AttentionQuant's call for q ("q": per block_m rows) or k ("k": smoothed, per block_n keys)."""
    p = problem
    if which == "q":
        return QuantProblem(p.q_shape, p.dtype, p.layout, p.num_heads, p.batch, p.seq_q, p.block_m, False)
    return QuantProblem(p.kv_shape, p.dtype, p.layout, p.num_kv_heads, p.batch, p.seq_kv, p.block_n, True)


def _host_only(**arrays) -> None:
    for name, x in arrays.items():
        if isinstance(x, DeviceArray):
            raise InvalidTypeError(f"{name}: the int8 path takes host (numpy) arrays; this is a DeviceArray")


def quantized_attention(session: DeviceSession, problem: Problem, q, k, v) -> tuple:
    """(out, lse) of attention with QK^T in int8: AttentionQuant of q (per block_m rows) and of k
    (smoothed, per block_n keys) into device memory, then FlashAttentionInt8 over them. `problem`
    is the validated forward problem of host arrays q, k, v (float16 / bfloat16)."""
    _host_only(q=q, k=k, v=v)
    base = int8_blocks(problem, session.soc_name())
    int8_problem = Int8Problem(base)
    quant = opcall.runner_for(session, ATTENTION_QUANT)
    forward = opcall.runner_for(session, FLASH_ATTENTION_INT8)
    parts = [(x, quant_problem(base, which)) for x, which in ((q, "q"), (k, "k"))]
    arrays = []
    try:
        for _, qp in parts:
            arrays += [DeviceArray.empty(session, qp.shape, np.int8), DeviceArray.empty(session, qp.scale_shape,
                                                                                        np.float32)]
        with session.in_flight(), quant.lock:
            for i, (x, qp) in enumerate(parts):
                prepared = quant.prepare(qp, {"y": arrays[2 * i], "scale": arrays[2 * i + 1]})
                prepared.upload(x)
                quant.launch(prepared, quant.stream)
            quant.stream.synchronize()  # the int8 forward runs on its own stream
        q8, qs, k8, ks = arrays
        out, lse = forward.run(int8_problem, q8, k8, v, qs, ks)
        return out, lse + smoothing_shift(base, q, k)
    finally:
        quant.discard(arrays)
        forward.discard(arrays)
        for array in arrays:
            array.close()


def smoothing_shift(problem: Problem, q, k) -> np.ndarray:
    """float32 [B, N, Sq]: what K's smoothing took off each row's LSE, scale * q . mean_s(k) (the
    output is unchanged: every score of a row moved by the same amount), computed on the host
    from the host arrays q and k, so that the returned LSE is that of the unsmoothed scores."""
    p = problem
    qb = to_bnsd(np.asarray(q), p.layout, p.num_heads).astype(np.float32)
    mean = to_bnsd(np.asarray(k), p.layout, p.num_kv_heads).astype(np.float64).mean(axis=2).astype(np.float32)
    group = p.num_heads // p.num_kv_heads
    mean = np.repeat(mean, group, axis=1)  # [B, N, D]: query head h reads kv head h // group
    return (p.scale * np.einsum("bnsd,bnd->bns", qb, mean)).astype(np.float32)


def _check_scale(name: str, x, shape: tuple, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy float32 array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise InvalidTypeError(f"{name} must be float32, got {x.dtype}")
    if tuple(x.shape) != tuple(shape):
        raise InvalidArgumentError(f"{name} must have shape {tuple(shape)} ({what}), got {tuple(x.shape)}")
    if not np.all(np.isfinite(x)) or not np.all(x > 0):
        bad = np.flatnonzero(~(np.isfinite(x) & (x > 0)))
        raise InvalidArgumentError(f"{name} must be finite and > 0 everywhere; {bad.size} entries are not "
                                   f"(first at flat index {int(bad[0])}: {x.flat[bad[0]]})")
    return x


def flash_attention_int8(q, k, v, q_scale=None, k_scale=None, *, block_m, block_n, causal=False, scale=None,
                         layout="BNSD", num_heads=None, num_kv_heads=None, return_lse=False, backend=None,
                         device=None, session=None):
    """Attention over Q and K already quantized to int8 by AttentionQuant's scheme (docs/int8.md):
    q int8 like the forward's q, k int8 like its k, v float16 / bfloat16, q_scale float32
    [B, N, ceil(Sq / block_m)] (one per block_m query rows), k_scale float32
    [B, Nkv, ceil(Skv / block_n)] (one per block_n keys), each finite and > 0. block_m / block_n
    are the scales' granularity and the kernel's blocks (a multiple of 16 the chip's UB admits).
    Returns out (v's dtype, q's layout), or (out, lse) with return_lse."""
    for name, x in (("q", q), ("k", k)):
        if not isinstance(x, np.ndarray):
            raise InvalidTypeError(f"{name} must be a numpy int8 array, got {type(x).__name__}")
        if x.dtype != np.int8:
            raise InvalidTypeError(f"{name} must be int8 (quantized; see acl_fa.reference.quant.quantize_blocks), "
                                   f"got {x.dtype}")
    _host_only(v=v)
    v = np.asarray(v)
    if q_scale is None or k_scale is None:
        raise InvalidArgumentError("int8 q and k need their scales: pass q_scale and k_scale (float32, one per block)")
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgumentError(f"{name} must be a positive integer (the scales' block), got {value!r}")
    # Validated as the forward validates it, over v's dtype: zero-copy views of q's and k's shapes.
    q_meta = np.broadcast_to(np.zeros((), v.dtype), q.shape)
    k_meta = np.broadcast_to(np.zeros((), v.dtype), k.shape)
    problem, _, _, v = make_problem(q_meta, k_meta, v, causal=causal, scale=scale, layout=layout,
                                    num_heads=num_heads, num_kv_heads=num_kv_heads, block_m=block_m, block_n=block_n)
    _check_value_dtype(problem)
    int8_problem = Int8Problem(problem)
    _check_scale("q_scale", q_scale, int8_problem.q_scale_shape, f"one per block_m={block_m} query rows")
    _check_scale("k_scale", k_scale, int8_problem.k_scale_shape, f"one per block_n={block_n} keys")
    if not isinstance(return_lse, (bool, np.bool_)):
        raise InvalidTypeError(f"return_lse must be a bool, got {return_lse!r}")
    if session is None:
        session = default_session(backend, device)
    check_int8_chip(session.soc_name(), quantize=False)
    out, lse = opcall.runner_for(session, FLASH_ATTENTION_INT8).run(int8_problem, q, k, v, q_scale, k_scale)
    return (out, lse) if return_lse else out

