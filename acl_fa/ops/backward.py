"""The FlashAttention backward op: aclnnFlashAttentionGrad of our custom operator.

``flash_attention_backward(dout, q, k, v, out, lse, ...)`` gives (dq, dk, dv) of
softmax(scale * Q K^T + mask) V for the upstream gradient dout, recomputing the probabilities
from the forward's LSE. Everything a caller can get wrong is refused before device work: q, k, v
as the forward checks them (problem.make_problem), dout and out shaped and typed like q, lse
float32 [B, N, Sq] and finite on every row that sees a key. Then the op runs through the shared
op-call path (acl_fa/ops/opcall.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import opcall
from ..runtime.ffi import ffi
from .backward_v2 import run_backward_v2, run_backward_v3
from .problem import check_backward_dtype, check_float32_range, check_like_forward, fitted_backward_tiling, head_dim_rows
from ..spec.problem import Problem, as_array, make_problem
from ..spec.options import build_options, dropout_keep_prob
from ..spec.score_mods import alibi_slopes_value, sinks_value
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import Op, OpRunner, default_session
from ..plan.backward import backward_plan
from ..runtime.session import DeviceSession

__all__ = ["BackwardProblem", "make_backward_problem", "FLASH_ATTENTION_GRAD", "flash_attention_backward", "backward_options"]


@dataclasses.dataclass(frozen=True)
class BackwardProblem:
    """One backward call, validated: the forward's problem and the dQ summation mode."""

    forward: Problem
    deterministic: bool

    def flops(self) -> int:
        """Useful floating-point operations: 5 matmuls (S, dP, dV, dK, dQ) x 2 FLOP per MAC."""
        return self.forward.flops() // 2 * 5


def make_backward_problem(problem: Problem, dout, q, k, v, out, lse, deterministic=True) -> tuple:
    """Validates the rest of a backward call of the forward `problem` (q, k, v as make_problem
    returned them with it); returns (BackwardProblem, dout, q, k, v, out, lse) as numpy arrays."""
    dout, out, lse = (as_array(name, x) for name, x in (("dout", dout), ("out", out), ("lse", lse)))
    check_like_forward(q, dout, out, lse)
    if lse.shape != problem.lse_shape:
        raise InvalidArgumentError(f"lse has shape {lse.shape}; it must be [B, N, Sq] = {list(problem.lse_shape)}")
    if not isinstance(deterministic, (bool, np.bool_)):
        raise InvalidTypeError(f"deterministic must be a bool, got {deterministic!r}")
    _check_lse_rows(problem, lse)
    return (BackwardProblem(problem, bool(deterministic)), dout, q, k, v, out, lse)


def _check_lse_rows(problem: Problem, lse) -> None:
    """A host lse is finite on every row that sees a key. A DeviceArray lse is on the device and
    is not inspected (like check_float32_range's inputs): reading it back is device work."""
    if not isinstance(lse, np.ndarray):
        return
    # Rows i < Sq - Skv see no key when causal (bottom-right mask); every other row has a finite LSE.
    blind = problem.seq_q - problem.seq_kv if problem.causal and problem.seq_q > problem.seq_kv else 0
    seen = lse[:, :, blind:]
    if np.isneginf(seen).any() or np.isnan(seen).any():
        b, n, s = (int(i) for i in np.argwhere(np.isneginf(seen) | np.isnan(seen))[0])
        raise InvalidArgumentError(
            f"lse[{b}, {n}, {s + blind}] is {seen[b, n, s]} but that row sees keys; lse must be the forward's "
            f"(causal={problem.causal}, scale={problem.scale:g}, layout {problem.layout})")


def check_backward_plan(problem: BackwardProblem, soc: str):
    """Runs the backward's tiling policy for the chip before any device work; a user block that
    does not fit raises InvalidArgumentError (PlanError) naming the budget line. Returns the plan."""
    return backward_plan(problem.forward, soc, problem.deterministic)


class FlashAttentionGradOp(Op):
    """aclnnFlashAttentionGrad over the shared op-call path (op_host/flash_attention_grad/flash_attention_grad.json)."""

    name = "flash_attention_grad"
    inputs = ("dout", "q", "k", "v", "out", "lse")
    outputs = ("dq", "dk", "dv")
    workspace_api = "aclnnFlashAttentionGradGetWorkspaceSize"
    launch_api = "aclnnFlashAttentionGrad"

    def buffers(self, problem: BackwardProblem) -> dict:
        p = problem.forward
        q_role, kv_role = (p.q_shape, p.dtype), (p.kv_shape, p.dtype)
        return {"dout": q_role, "q": q_role, "k": kv_role, "v": kv_role, "out": q_role,
                "lse": (p.lse_shape, np.dtype(np.float32)), "dq": q_role, "dk": kv_role, "dv": kv_role}

    def workspace_args(self, problem: BackwardProblem, tensors: dict) -> tuple:
        p = problem.forward
        layout = ffi.new("char[]", p.layout.encode())
        return (tensors["q"].handle, tensors["k"].handle, tensors["v"].handle, tensors["out"].handle,
                tensors["dout"].handle, tensors["lse"].handle, p.scale, p.causal, layout, p.num_heads,
                p.num_kv_heads, problem.deterministic, p.block_m, p.block_n, tensors["dq"].handle,
                tensors["dk"].handle, tensors["dv"].handle)

    def check(self, problem: BackwardProblem, soc: str) -> int:
        # The workspace phase one will ask for (system + user), so that OpRunner.prepare's memory
        # check counts it before any device work.
        return check_backward_plan(problem, soc).workspace_bytes

    def fit(self, problem: BackwardProblem, soc: str, workspace_bytes: int):
        fitted, ws_bytes, holds = fitted_backward_tiling(problem.forward, soc, problem.deterministic, workspace_bytes)
        return dataclasses.replace(problem, forward=fitted), ws_bytes, holds

    def padded_rows(self, problem: BackwardProblem) -> dict:
        return head_dim_rows(problem.forward, ("dout", "q", "k", "v", "out", "dq", "dk", "dv"))


FLASH_ATTENTION_GRAD = FlashAttentionGradOp()


def runner_for(session: DeviceSession) -> OpRunner:
    """The backward's OpRunner on `session` (one per Session)."""
    return opcall.runner_for(session, FLASH_ATTENTION_GRAD)


def flash_attention_backward(dout, q, k, v, out, lse, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                             num_kv_heads=None, deterministic=True, block_m=None, block_n=None, window=None,
                             attn_mask=None, dropout_p=0.0, seed=None, offset=0, backend=None, device=None,
                             session=None, softcap=0.0, alibi_slopes=None, sinks=None):
    """FlashAttention backward: (dq, dk, dv) for the upstream gradient dout of
    out, lse = flash_attention(q, k, v, ..., return_lse=True) with the same options.

    window, attn_mask (bool, True = the query may attend to the key), dropout_p, seed and offset
    must be the forward's (docs/attention_options.md): the kernel regenerates the forward's
    dropout mask from seed and offset, so dropout_p > 0 needs the seed. dq is shaped like q, dk and
    dv like k and v, in their dtype and layout; with GQA/MQA the gradient of a kv head sums over
    its query-head group; rows that see no key get dq 0. deterministic=True (default) sums dQ's
    contributions in int32 fixed point (docs/backward.md), so repeated calls -- and chips with
    other core counts -- give identical bits; False adds them with fp32 atomic adds in any order
    (equal within rounding, not bitwise). Neither mode makes a core wait for another.

    Score modifiers (docs/attention_options.md "Score modifiers"; FlashAttentionGradV3): softcap
    (> 0), alibi_slopes (float32 [N] or [B, N]) and sinks (float32 [N]) must be the forward's, and
    lse the forward's LSE with them (with sinks it includes exp(sink)). Returns (dq, dk, dv), and
    with sinks (dq, dk, dv, dsinks): dsinks float32 [N], the gradient of the sink logits. No
    gradient flows to the slopes (as flash-attn).
    """
    forward, *_ = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                               num_kv_heads=num_kv_heads, block_m=block_m, block_n=block_n, pad_head_dim=True)
    check_backward_dtype(forward, "flash_attention_backward")
    options, mask = backward_options(forward, causal=causal, window=window, attn_mask=attn_mask, dropout_p=dropout_p,
                                     seed=seed, offset=offset, softcap=softcap)
    slopes = alibi_slopes_value(alibi_slopes, batch=forward.batch, num_heads=forward.num_heads)
    logits = sinks_value(sinks, num_heads=forward.num_heads)
    if options.softcap or slopes is not None or logits is not None:
        check_float32_range(forward, *(as_array(name, x) for name, x in (("q", q), ("k", k), ("v", v))))
        session = default_session(backend, device) if session is None else session
        return run_backward_v3(session, forward, options, (dout, q, k, v, out, lse), mask, deterministic,
                               alibi_slopes=slopes, sinks=logits)
    if not options.is_default:
        check_float32_range(forward, *(as_array(name, x) for name, x in (("q", q), ("k", k), ("v", v))))
        session = default_session(backend, device) if session is None else session
        return run_backward_v2(session, forward, options, dout, q, k, v, out, lse, mask, deterministic)
    forward, q, k, v = make_problem(q, k, v, causal=causal or options.is_causal, scale=scale, layout=layout,
                                    num_heads=num_heads, num_kv_heads=num_kv_heads, block_m=block_m, block_n=block_n,
                                    pad_head_dim=True)
    problem, *arrays = make_backward_problem(forward, dout, q, k, v, out, lse, deterministic)
    check_float32_range(problem.forward, *arrays[1:4])  # the scores it recomputes, as the forward's
    session = default_session(backend, device) if session is None else session
    return runner_for(session).run(problem, *arrays)


def backward_options(forward: Problem, *, causal, window, attn_mask=None, dropout_p=0.0, seed=None, offset=0,
                     cu_seqlens_q=None, cu_seqlens_kv=None, softcap=0.0) -> tuple:
    """The backward's (AttentionOptions, device mask): the forward's options (softcap included),
    with the seed required when dropout is on (the backward regenerates the forward's keep mask
    from it)."""
    if seed is None and dropout_keep_prob(dropout_p) < 1.0:  # a bad dropout_p is named first
        raise InvalidArgumentError(
            "seed: the backward with dropout_p > 0 needs the forward's seed and offset (the ones the forward "
            "returned) to regenerate its dropout mask")
    return build_options(scores=forward.score_grid, causal=causal, window=window, attn_mask=attn_mask,
                         dropout_p=dropout_p, seed=seed, offset=offset, cu_seqlens_q=cu_seqlens_q,
                         cu_seqlens_kv=cu_seqlens_kv, softcap=softcap)
