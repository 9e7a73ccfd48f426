"""The FlashAttention backward with the V2 options: aclnnFlashAttentionGradV2 of our custom operator.

``run_backward_v2(session, problem, options, dout, q, k, v, out, lse, mask_u8, deterministic)``
gives (dq, dk, dv) for a forward run with a sliding-window band (options.pre_tokens /
next_tokens, causal folded in), a variable-length batch (options.cu_seqlens_q / kv: the
cumulative ends without the leading 0; then q is [Tq, N, D], k/v [Tkv, Nkv, D] and lse
float32 [N, Tq], layout "TND"), an attention mask (mask_u8: the uint8 device mask of
options.mask_shape, 1 = masked out; dense layouts only) and dropout (options.keep_prob < 1 with
options.seed / offset: the kernel regenerates the forward's keep mask from the same key). The
options are validated by acl_fa.spec.options; this module checks what the arrays must agree
on before device work and runs the op through the shared op-call path (acl_fa/ops/opcall.py). The
options select a problem of their own, so the per-Session cache keeps one executor per (shapes,
options).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from . import opcall
from ..runtime.ffi import ffi
from .problem import check_like_forward, fitted_backward_tiling, head_dim_rows
from ..spec.problem import Problem, as_array, device_shape
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import Op
from ..plan.backward import backward_plan
from ..plan.forward import PlanError, PlanOptions
from ..runtime.session import DeviceSession

__all__ = ["BackwardV2Problem", "BackwardV3Problem", "make_backward_v2_problem", "run_backward_v2",
           "run_backward_v3"]


@dataclasses.dataclass(frozen=True)
class BackwardV2Problem:
    """One V2 backward call, validated: the forward's problem, the options, the summation mode
    and the arrays' shapes (TND: [Tq, N, D], [Tkv, Nkv, D], LSE [N, Tq])."""

    forward: Problem
    options: object  # acl_fa.spec.options.AttentionOptions (hashable)
    deterministic: bool
    q_shape: tuple
    kv_shape: tuple
    lse_shape: tuple

    @property
    def layout(self) -> str:
        return "TND" if self.options.cu_seqlens_q is not None else self.forward.layout


def make_backward_v2_problem(problem: Problem, options, dout, q, k, v, out, lse, mask_u8, deterministic) -> tuple:
    """Checks the arrays against each other and the options; returns (BackwardV2Problem, dout, q,
    k, v, out, lse) as numpy arrays."""
    arrays = [as_array(name, x) for name, x in
              (("dout", dout), ("q", q), ("k", k), ("v", v), ("out", out), ("lse", lse))]
    dout, q, k, v, out, lse = arrays
    if (mask_u8 is None) != (options.mask_shape is None):
        raise InvalidArgumentError("attn_mask: the device mask must be given exactly when options.mask_shape is set")
    if mask_u8 is not None:
        if not isinstance(mask_u8, np.ndarray) or mask_u8.dtype != np.uint8 or \
                tuple(mask_u8.shape) != tuple(options.mask_shape):
            raise InvalidArgumentError(f"attn_mask: the device mask must be uint8 of shape {tuple(options.mask_shape)}"
                                       f", got {getattr(mask_u8, 'dtype', type(mask_u8))} "
                                       f"{getattr(mask_u8, 'shape', '')}")
        if options.cu_seqlens_q is not None:
            raise InvalidArgumentError("attn_mask is not supported with a variable-length batch (cu_seqlens)")
    if not isinstance(deterministic, (bool, np.bool_)):
        raise InvalidTypeError(f"deterministic must be a bool, got {deterministic!r}")
    check_like_forward(q, dout, out, lse)
    if k.shape != v.shape or k.dtype != q.dtype or v.dtype != q.dtype:
        raise InvalidArgumentError(f"k {k.shape} {k.dtype} and v {v.shape} {v.dtype} must have one shape and q's dtype "
                                   f"{q.dtype}")
    varlen = options.cu_seqlens_q is not None
    if varlen:
        if options.cu_seqlens_kv is None or len(options.cu_seqlens_q) != len(options.cu_seqlens_kv):
            raise InvalidArgumentError("cu_seqlens_q and cu_seqlens_k must describe the same sequences")
        if q.ndim != 3 or k.ndim != 3:
            raise InvalidArgumentError(f"a variable-length batch needs q [Tq, N, D] and k [Tkv, Nkv, D], got "
                                       f"{q.shape} and {k.shape}")
        if options.cu_seqlens_q[-1] != q.shape[0] or options.cu_seqlens_kv[-1] != k.shape[0]:
            raise InvalidArgumentError(
                f"cu_seqlens end at {options.cu_seqlens_q[-1]} queries / {options.cu_seqlens_kv[-1]} keys; q has "
                f"{q.shape[0]} tokens and k {k.shape[0]}")
        lse_shape = (q.shape[1], q.shape[0])
        expected = "[N, Tq]"
    else:
        lse_shape = problem.lse_shape
        expected = "[B, N, Sq]"
    if lse.shape != tuple(lse_shape):
        raise InvalidArgumentError(f"lse has shape {lse.shape}; it must be {expected} = {list(lse_shape)}")
    grad = BackwardV2Problem(problem, options, bool(deterministic), device_shape(q.shape, problem),
                             device_shape(k.shape, problem), tuple(lse_shape))
    return (grad, dout, q, k, v, out, lse, mask_u8)


class FlashAttentionGradV2Op(Op):
    """aclnnFlashAttentionGradV2 over the shared op-call path (op_host/flash_attention_grad/flash_attention_grad_v2.json).

    Two instances: dense layouts, and varlen (TND) whose actual_seq_qlen / actual_seq_kvlen are
    device buffers of the prepared call, written from the problem's options before phase one
    reads them (the TilingFunc takes them as ValueDepend inputs). The mask is an optional input
    (no buffer and a NULL tensor without one)."""

    name = "flash_attention_grad_v2"
    inputs = ("dout", "q", "k", "v", "out", "lse", "mask")
    outputs = ("dq", "dk", "dv")
    workspace_api = "aclnnFlashAttentionGradV2GetWorkspaceSize"
    launch_api = "aclnnFlashAttentionGradV2"

    def __init__(self, varlen: bool):
        self.varlen = varlen
        if varlen:
            self.name = "flash_attention_grad_v2_varlen"

    def buffers(self, problem: BackwardV2Problem) -> dict:
        dtype = problem.forward.dtype
        q_role, kv_role = (problem.q_shape, dtype), (problem.kv_shape, dtype)
        roles = {"dout": q_role, "q": q_role, "k": kv_role, "v": kv_role, "out": q_role,
                 "lse": (problem.lse_shape, np.dtype(np.float32)), "dq": q_role, "dk": kv_role, "dv": kv_role}
        if problem.options.mask_shape is not None:
            roles["mask"] = (tuple(problem.options.mask_shape), np.dtype(np.uint8))
        if self.varlen:
            count = len(problem.options.cu_seqlens_q)
            roles["seq_qlen"] = roles["seq_kvlen"] = ((count,), np.dtype(np.int64))
        return roles

    def padded_rows(self, problem: BackwardV2Problem) -> dict:
        return head_dim_rows(problem.forward, ("dout", "q", "k", "v", "out", "dq", "dk", "dv"))

    def check(self, problem: BackwardV2Problem, soc: str) -> int:
        """The workspace phase one will ask for, from the operator's backward policy with the
        call's band, mask, dropout and sequences, so that OpRunner.prepare's memory check counts
        it before any device work. A problem the policy refuses gives 0 (unknown): phase one then
        refuses it with the tiling's own error, as the op's contract states."""
        forward, options = self._plan_inputs(problem)
        try:
            return backward_plan(forward, soc, problem.deterministic, options).workspace_bytes
        except PlanError:
            return 0

    def fit(self, problem: BackwardV2Problem, soc: str, workspace_bytes: int):
        forward, options = self._plan_inputs(problem)
        fitted, ws_bytes, holds = fitted_backward_tiling(forward, soc, problem.deterministic, workspace_bytes, options)
        blocks = dataclasses.replace(problem.forward, block_m=fitted.block_m, block_n=fitted.block_n)
        return dataclasses.replace(problem, forward=blocks), ws_bytes, holds

    @staticmethod
    def _plan_inputs(problem: BackwardV2Problem) -> tuple:
        """(the forward problem, PlanOptions) the backward's policy plans the call with."""
        o = problem.options
        lens = {}
        if o.cu_seqlens_q is not None:
            lens = dict(seq_lens_q=tuple(int(x) for x in np.diff((0,) + tuple(o.cu_seqlens_q))),
                        seq_lens_kv=tuple(int(x) for x in np.diff((0,) + tuple(o.cu_seqlens_kv))))
        options = PlanOptions(pre_tokens=o.pre_tokens, next_tokens=o.next_tokens, mask_shape=o.mask_shape,
                              dropout=o.keep_prob < 1.0, **lens)
        # causal is in the band; a varlen call's layout is TND whatever the forward problem's says
        return dataclasses.replace(problem.forward, causal=False, layout=problem.layout), options

    def workspace_args(self, problem: BackwardV2Problem, tensors: dict) -> tuple:
        p, o = problem.forward, problem.options
        layout = ffi.new("char[]", problem.layout.encode())
        seq_q = seq_kv = ffi.NULL
        if self.varlen:
            tensors["seq_qlen"].buffer.copy_from_host(np.asarray(o.cu_seqlens_q, dtype=np.int64))
            tensors["seq_kvlen"].buffer.copy_from_host(np.asarray(o.cu_seqlens_kv, dtype=np.int64))
            seq_q, seq_kv = tensors["seq_qlen"].handle, tensors["seq_kvlen"].handle
        num_heads, num_kv_heads = problem.q_shape[-2], problem.kv_shape[-2]
        if problem.layout != "TND":
            num_heads, num_kv_heads = p.num_heads, p.num_kv_heads
        mask = tensors["mask"].handle if "mask" in tensors else ffi.NULL
        # seed and offset are uint64 carried in int64 attrs: the same 64 bits.
        seed = int(np.uint64(o.seed).view(np.int64))
        offset = int(np.uint64(o.offset).view(np.int64))
        return (tensors["q"].handle, tensors["k"].handle, tensors["v"].handle, tensors["out"].handle,
                tensors["dout"].handle, tensors["lse"].handle, mask, seq_q, seq_kv, p.scale, o.pre_tokens,
                o.next_tokens, layout, num_heads, num_kv_heads, float(o.keep_prob), seed, offset,
                problem.deterministic, p.block_m, p.block_n, tensors["dq"].handle, tensors["dk"].handle,
                tensors["dv"].handle)


FLASH_ATTENTION_GRAD_V2 = FlashAttentionGradV2Op(varlen=False)
FLASH_ATTENTION_GRAD_V2_VARLEN = FlashAttentionGradV2Op(varlen=True)


@dataclasses.dataclass(frozen=True)
class BackwardV3Problem(BackwardV2Problem):
    """A V2 backward call with the score modifiers of FlashAttentionGradV3
    (docs/attention_options.md "Score modifiers"): softcap (> 0 on; also options.softcap), and
    whether alibi_slopes (float32 [B, N]) and sinks (float32 [N]) are given; with sinks the op
    also returns dsinks (float32 [N])."""

    softcap: float = 0.0
    alibi: bool = False
    sinks: bool = False


class FlashAttentionGradV3Op(FlashAttentionGradV2Op):
    """aclnnFlashAttentionGradV3 (op_host/flash_attention_grad/flash_attention_grad_v3.json): V2's arguments,
    then the optional inputs alibi_slopes and sinks after actual_seq_kvlen, the attr softcap after
    block_n and the optional output dsinks after dv (NULL tensors when not given)."""

    name = "flash_attention_grad_v3"
    inputs = FlashAttentionGradV2Op.inputs + ("alibi", "sinks")
    outputs = ("dq", "dk", "dv", "dsinks")
    workspace_api = "aclnnFlashAttentionGradV3GetWorkspaceSize"
    launch_api = "aclnnFlashAttentionGradV3"

    def __init__(self, varlen: bool):
        super().__init__(varlen)
        if varlen:
            self.name = "flash_attention_grad_v3_varlen"

    def buffers(self, problem: BackwardV3Problem) -> dict:
        roles = super().buffers(problem)
        f32 = np.dtype(np.float32)
        num_heads = problem.q_shape[-2] if problem.layout == "TND" else problem.forward.num_heads
        if problem.alibi:
            roles["alibi"] = ((problem.forward.batch, num_heads), f32)
        if problem.sinks:
            roles["sinks"] = roles["dsinks"] = ((num_heads,), f32)
        return roles

    def workspace_args(self, problem: BackwardV3Problem, tensors: dict) -> tuple:
        args = super().workspace_args(problem, tensors)
        optional = tuple(tensors[role].handle if role in tensors else ffi.NULL for role in ("alibi", "sinks"))
        dsinks = tensors["dsinks"].handle if "dsinks" in tensors else ffi.NULL
        # V2's: 9 inputs, 12 attrs, 3 outputs.
        return args[:9] + optional + args[9:21] + (float(problem.softcap),) + args[21:] + (dsinks,)


FLASH_ATTENTION_GRAD_V3 = FlashAttentionGradV3Op(varlen=False)
FLASH_ATTENTION_GRAD_V3_VARLEN = FlashAttentionGradV3Op(varlen=True)


def run_backward_v2(session: DeviceSession, problem: Problem, options, dout, q, k, v, out, lse,
                    mask_u8: Optional[np.ndarray], deterministic: bool = True) -> tuple:
    """(dq, dk, dv) of the V2 forward with `options` (acl_fa.spec.options.AttentionOptions).

    `problem` is the forward's (scale, heads, dtype, blocks; for varlen its layout is not used);
    gradients come back in q's / k's shapes and dtype; `mask_u8` is the uint8 device mask of
    options.mask_shape (1 = masked out) or None. Rows that see no key get dq = 0 and add nothing
    to dk, dv."""
    grad, *arrays = make_backward_v2_problem(problem, options, dout, q, k, v, out, lse, mask_u8, deterministic)
    op = FLASH_ATTENTION_GRAD_V2_VARLEN if options.cu_seqlens_q is not None else FLASH_ATTENTION_GRAD_V2
    return opcall.runner_for(session, op).run(grad, *arrays)


def run_backward_v3(session: DeviceSession, problem: Problem, options, arrays: tuple, mask_u8: Optional[np.ndarray],
                    deterministic: bool = True, *, alibi_slopes=None, sinks=None) -> tuple:
    """run_backward_v2 with the score modifiers: options.softcap, alibi_slopes (float32 [B, N],
    validated by acl_fa.spec.score_mods) and sinks (float32 [N]); `arrays` = (dout, q, k, v, out,
    lse), lse the forward's with the same modifiers (its sinks included). Returns (dq, dk, dv),
    and dsinks (float32 [N]) last when sinks are given."""
    grad, *arrays = make_backward_v2_problem(problem, options, *arrays, mask_u8, deterministic)
    grad = BackwardV3Problem(**{f.name: getattr(grad, f.name) for f in dataclasses.fields(grad)},
                             softcap=float(options.softcap), alibi=alibi_slopes is not None,
                             sinks=sinks is not None)
    op = FLASH_ATTENTION_GRAD_V3_VARLEN if options.cu_seqlens_q is not None else FLASH_ATTENTION_GRAD_V3
    outputs = ("dq", "dk", "dv", "dsinks") if sinks is not None else ("dq", "dk", "dv")
    return opcall.runner_for(session, op).run(grad, *arrays, alibi_slopes, sinks, outputs=outputs)
