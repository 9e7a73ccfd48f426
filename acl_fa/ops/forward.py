"""The FlashAttention forward op: aclnnFlashAttention of our custom operator.

``flash_attention(q, k, v, ...)`` validates everything a caller can get wrong before any device
work (types, shapes, layout, heads, sizes, scale, blocks -- the blocks against the tiling policy
for the device's chip), then runs the op on a session through the shared op-call path
(acl_fa/ops/opcall.py), which keeps per problem shape the device buffers, the aclTensors, a
repeatable executor and the workspace, so repeated calls on one shape only copy and launch.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import opcall
from ..runtime.errors import InvalidTypeError
from ..runtime.session import DeviceSession
from ..spec.options import build_forward_options, check_precision_dtype
from .forward_v2 import run_forward_v2
from .opcall import EntryOp, OpRunner, default_session
from .problem import check_float32_range, check_plan, fitted_tiling, head_dim_rows, outputs_of
from ..spec.problem import Problem, make_problem

__all__ = ["FLASH_ATTENTION", "runner_for", "flash_attention", "ForwardCall", "validated_call", "run_call",
           "PROBLEM_ARGS", "OPTION_ARGS"]


class FlashAttentionOp(EntryOp):
    """aclnnFlashAttention over the shared op-call path, its arguments read from
    op_host/flash_attention/flash_attention.json (opcall.EntryOp)."""

    op_type = "FlashAttention"
    roles = {"query": "q", "key": "k", "value": "v", "attention_out": "out", "softmax_lse": "lse"}
    outputs = ("out", "lse")

    def buffers(self, problem: Problem) -> dict:
        return {"q": (problem.q_shape, problem.dtype), "k": (problem.kv_shape, problem.dtype),
                "v": (problem.kv_shape, problem.dtype), "out": (problem.q_shape, problem.dtype),
                "lse": (problem.lse_shape, np.dtype(np.float32))}

    def attr_values(self, problem: Problem) -> dict:
        return dict(scale_value=problem.scale, causal=problem.causal, input_layout=problem.layout,
                    num_heads=problem.num_heads, num_kv_heads=problem.num_kv_heads, block_m=problem.block_m,
                    block_n=problem.block_n)

    def check(self, problem: Problem, soc: str) -> int:
        return check_plan(problem, soc).workspace_bytes

    def fit(self, problem: Problem, soc: str, workspace_bytes: int):
        return fitted_tiling(problem, check_plan(problem, soc, workspace_bytes))

    def padded_rows(self, problem: Problem) -> dict:
        return head_dim_rows(problem, ("q", "k", "v", "out"))


FLASH_ATTENTION = FlashAttentionOp()


def runner_for(session: DeviceSession) -> OpRunner:
    """The forward's OpRunner on `session` (one per Session)."""
    return opcall.runner_for(session, FLASH_ATTENTION)


def flash_attention(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None, num_kv_heads=None,
                    block_m=None, block_n=None, return_lse=False, window=None, attn_mask=None, dropout_p=0.0,
                    seed=None, offset=0, return_dropout_mask=False, backend=None, device=None, session=None,
                    softcap=0.0, precision="high_precision", alibi_slopes=None, sinks=None):
    """FlashAttention forward: softmax(scale * Q K^T + mask) V per head.

    q [B, N, Sq, D] (BNSD), [B, Sq, N, D] (BSND) or [B, Sq, N*D] (BSH); k, v likewise with Nkv
    heads and Skv rows; float16, bfloat16 (ml_dtypes) or float32. scale defaults to 1/sqrt(D).
    Any D 1..256: one not a multiple of 16 runs padded to the next multiple on the device (zeroed
    rows filled by aclrtMemcpy2d, no host copy; docs/compat.md "Any head dim").
    Any numpy layout is accepted (copied C-contiguous once); q, k, v may also be DeviceArrays of
    the session (used in place, no host copy). Semantics of the options in
    docs/attention_options.md:

    - causal: key j is hidden from query i when j > i + (Skv - Sq) (bottom-right aligned).
    - window=(left, right): key j is visible to query i iff
      i + (Skv - Sq) - left <= j <= i + (Skv - Sq) + right; -1 = unbounded; intersects causal.
      Runs FlashAttentionV2, which never loads or computes blocks outside the band.
    - attn_mask: a bool array, **True = the query may attend to the key** (torch SDPA's
      convention), of any shape that broadcasts to [B, N, Sq, Skv] with Skv columns ([Sq, Skv],
      [B, 1, Sq, Skv], [1, N, Sq, Skv], [B, N, Sq, Skv], key padding [B, 1, 1, Skv]); held on the
      device at its own shape, never expanded; key blocks it hides completely are skipped.
    - dropout_p in [0, 1): dropout on the attention probabilities inside the kernel (kept values
      scaled by 1/(1 - dropout_p)), Philox4x32-10 keyed by (seed, offset + b*N + n, i, j), so the
      same arguments give the same result on any chip, block size or thread count. seed=None
      draws one (returned as ``.seed`` of the result with return_lse=True). The LSE is that of
      the undropped probabilities.
    - return_dropout_mask: also return the keep mask the kernel used, uint8 [B, N, Sq, Skv]
      (1 = kept; a testing aid that materializes it). Pairs the query cannot see (band, mask)
      hold 0.
    - softcap >= 0: soft-capping as flash-attn 2.6, scores = softcap * tanh(scores / softcap)
      on the scaled scores, before the mask; the LSE is that of the capped scores. 0 (default)
      is off. Runs FlashAttentionV3 (forward only: the backward and decode refuse it).
    - precision: "high_precision" (default) keeps S = Q K^T in float32 between the two matmuls;
      "high_performance" (float16 / bfloat16 inputs) lets the cube round S to the input dtype,
      halving S's bytes through GM -- the result is that of S rounded to the input dtype, as a
      naive attention in that dtype computes it. Runs FlashAttentionV4 (inner_precise 1).
    - score modifiers (docs/attention_options.md "Score modifiers"; run FlashAttentionV5, Atlas
      A2/A3): alibi_slopes float32 [N] or [B, N] adds -slope * |i + Skv - Sq - j| after the cap
      (flash-attn's ALiBi); sinks float32 [N] puts exp(sink[h]) in every row's denominator
      (gpt-oss; the LSE includes it, a row that sees no key gives 0 and LSE = sink); a float
      attn_mask (the query's dtype, broadcast like the bool one) is added to the scores (torch
      SDPA's float mask; -inf hides a key).

    Rows that see no key give 0 (lse -inf). Returns out (like q); with return_lse or
    return_dropout_mask an AttentionOutputs tuple (out, lse float32 [B, N, Sq] if return_lse,
    the keep mask if return_dropout_mask) whose .seed / .offset / .next_offset are the dropout's.
    """
    call = validated_call(q, k, v, return_lse, dict(
        causal=causal, scale=scale, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, block_m=block_m,
        block_n=block_n, window=window, attn_mask=attn_mask, dropout_p=dropout_p, seed=seed, offset=offset,
        return_dropout_mask=return_dropout_mask, softcap=softcap, precision=precision, alibi_slopes=alibi_slopes,
        sinks=sinks))
    return run_call(default_session(backend, device) if session is None else session, call)


# flash_attention's keyword arguments that make its Problem, and those that make its options.
PROBLEM_ARGS = ("causal", "scale", "layout", "num_heads", "num_kv_heads", "block_m", "block_n")
OPTION_ARGS = ("causal", "window", "attn_mask", "dropout_p", "seed", "offset", "return_dropout_mask", "softcap",
               "precision", "alibi_slopes", "sinks")


@dataclasses.dataclass(frozen=True)
class ForwardCall:
    """A validated forward call: the Problem (causal also when the window is (-1, 0)), the arrays
    as the op takes them, the options, the uint8 device mask or None, the score modifiers' arrays."""

    problem: Problem
    q: object
    k: object
    v: object
    options: object
    mask: object
    mods: object
    return_lse: bool


def validated_call(q, k, v, return_lse, args: dict) -> ForwardCall:
    """Every check of flash_attention, before any device work, of q, k, v, return_lse and the
    keyword arguments `args` (each name of PROBLEM_ARGS and OPTION_ARGS); the one validation of
    the forward faces (this module's and acl_fa.ops.routed's)."""
    problem, q, k, v = make_problem(q, k, v, pad_head_dim=True, **{name: args[name] for name in PROBLEM_ARGS})
    if not isinstance(return_lse, (bool, np.bool_)):
        raise InvalidTypeError(f"return_lse must be a bool, got {return_lse!r}")
    options, mask, mods = build_forward_options(scores=problem.score_grid, dtype=problem.dtype,
                                                **{name: args[name] for name in OPTION_ARGS})
    check_precision_dtype(options, problem.dtype_name)
    check_float32_range(problem, q, k, v)
    if options.is_causal and not problem.causal:  # window (-1, 0) is causal: the V1 op's is_causal
        problem = dataclasses.replace(problem, causal=True)
    return ForwardCall(problem, q, k, v, options, mask, mods, bool(return_lse))


def run_call(session: DeviceSession, call: ForwardCall):
    """Runs a validated call on the general forward: FlashAttention (V1) when it has no V2 option,
    else the V2 entry its options need. Returns flash_attention's result."""
    problem, options = call.problem, call.options
    if options.is_default:
        if not call.return_lse:
            return runner_for(session).run(problem, call.q, call.k, call.v, outputs=("out",))[0]
        out, lse = runner_for(session).run(problem, call.q, call.k, call.v, outputs=("out", "lse"))
        dropout_mask = None
    else:
        out, lse, dropout_mask = run_forward_v2(session, problem, options, call.q, call.k, call.v, call.mask,
                                                call.mods)
        if not (call.return_lse or options.return_dropout_mask):
            return out
    return outputs_of(out, lse, dropout_mask, options, problem.batch * problem.num_heads, call.return_lse)
