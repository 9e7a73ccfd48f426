"""The FlashAttentionV2 forward op: aclnnFlashAttentionV2 of our custom operator.

The V1 forward (acl_fa/ops/forward.py) generalized by the options of acl_fa/spec/options.py:
a band of visible keys (pre_tokens / next_tokens; causal folded in), variable-length batches in
the TND layout (q [Tq, N, D], k / v [Tkv, Nkv, D], cumulative sequence ends), and the slots of
the attention mask and dropout. ``run_forward_v2`` runs one validated call through the shared
op-call path (acl_fa/ops/opcall.py); the public faces (flash_attention's keyword arguments,
flash_attention_varlen) validate and build the ``Problem`` and the options before calling it.

The sequence ends are value-depend inputs of the op (its tiling balances the cores by each
sequence's real work), so phase one reads them from the device: they are part of the cached
problem and uploaded before phase one (``Op.constants``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from . import opcall
from ..spec.problem import Problem
from ..runtime.errors import InvalidArgumentError
from .opcall import EntryOp, OpRunner
from ..plan import forward as planmod
from ..runtime.session import DeviceSession
from ..spec.band import UNBOUNDED, band_visible
from ..spec.options import NO_SCORE_MODS, PRECISIONS
from .problem import check_plan, fitted_tiling, head_dim_rows

__all__ = ["V2Call", "FlashAttentionV2Op", "input_arrays", "FLASH_ATTENTION_V2", "FLASH_ATTENTION_V3", "FLASH_ATTENTION_V4", "FLASH_ATTENTION_V5", "op_for", "runner_for", "run_forward_v2", "varlen_problem",
           "lse_shape"]


@dataclasses.dataclass(frozen=True)
class V2Call:
    """One FlashAttentionV2 call: the validated problem (problem.Problem; layout TND for a
    varlen batch, see varlen_problem) and its options (spec.options.AttentionOptions or
    anything with the same fields). Hashable: it keys the per-Session op cache."""

    problem: Problem
    options: object

    @functools.cached_property
    def varlen(self) -> bool:
        return self.problem.layout == "TND"


def lse_shape(problem: Problem) -> tuple:
    """float32 LSE: [B, N, Sq]; for TND [N, Tq] (flash-attn varlen's layout)."""
    if problem.layout == "TND":
        return (problem.num_heads, problem.q_shape[0])
    return problem.lse_shape


def varlen_problem(base: Problem, ends_q: tuple, ends_kv: tuple) -> Problem:
    """The TND Problem of a varlen batch: `base` validated as one BSND-like sequence of all
    tokens (q [Tq, N, D] seen as batch 1) with the sequences' cumulative ends (without the
    leading 0) -> batch = sequences, seq_q / seq_kv = the longest, shapes the TND tensors'."""
    lens_q = np.diff((0,) + tuple(ends_q))
    lens_kv = np.diff((0,) + tuple(ends_kv))
    if len(lens_q) != len(lens_kv) or len(lens_q) == 0:
        raise InvalidArgumentError(f"cu_seqlens_q and cu_seqlens_k must describe the same number (>= 1) of "
                                   f"sequences, got {len(lens_q)} and {len(lens_kv)}")
    tokens_q, tokens_kv = int(ends_q[-1]), int(ends_kv[-1])
    return dataclasses.replace(
        base, batch=len(lens_q), seq_q=int(lens_q.max()), seq_kv=int(lens_kv.max()), layout="TND",
        q_shape=(tokens_q, base.num_heads, base.head_dim), kv_shape=(tokens_kv, base.num_kv_heads, base.head_dim))


def check_v2_plan(call: V2Call, soc: str, workspace_bytes: "int | None" = None):
    """The tiling policy's plan for the call's problem and band (and sequences) on `soc`,
    before any device work; InvalidArgumentError naming the broken limit. With
    `workspace_bytes`: the plan fitted to that much workspace (problem.check_plan)."""
    p, o = call.problem, call.options
    lens = {}
    if call.varlen:
        lens = dict(seq_lens_q=tuple(int(x) for x in np.diff((0,) + tuple(o.cu_seqlens_q))),
                    seq_lens_kv=tuple(int(x) for x in np.diff((0,) + tuple(o.cu_seqlens_kv))))
    mods = dict(alibi=getattr(o, "alibi", False), sinks=getattr(o, "sinks", False),
                bias_shape=getattr(o, "bias_shape", None))
    options = planmod.PlanOptions(pre_tokens=o.pre_tokens, next_tokens=o.next_tokens, mask_shape=o.mask_shape,
                                  dropout=o.keep_prob < 1.0, dropout_mask_out=o.return_dropout_mask,
                                  narrow_scores=PRECISIONS[getattr(o, "precision", "high_precision")] == 1,
                                  **lens, **mods)
    refused = [name for name, used in (("attn_mask", o.mask_shape is not None), ("dropout_p > 0", o.keep_prob < 1.0),
                                       ("alibi_slopes", mods["alibi"]), ("sinks", mods["sinks"]),
                                       ("a float attn_mask", mods["bias_shape"] is not None))
               if used]
    if refused and planmod.chip(soc).coupled:  # the plan's own refusal names aclnn's arguments
        raise InvalidArgumentError(f"{' and '.join(refused)}: supported on Atlas A2/A3 (Ascend910B*, Ascend910_93*) "
                                   f"only; {planmod.chip(soc).name} has coupled AI Cores (docs/chips.md)")
    return check_plan(dataclasses.replace(p, causal=False), soc, workspace_bytes, options)


class FlashAttentionV2Op(EntryOp):
    """The forward's versioned entries (aclnnFlashAttentionV2 ... V5) over the shared op-call path,
    their arguments read from each op's JSON (opcall.EntryOp): one class, one instance per entry.
    Inputs q, k, v, the uint8 device mask (None when the options have none) and, from V5, the score
    modifiers' arrays; the sequence ends are constants of the call; outputs out, lse and the keep
    mask when asked for. Every option of ``attr_values`` an entry's JSON lacks is ignored (op_for
    picks the entry whose JSON has what the call uses)."""

    op_type = "FlashAttentionV2"
    roles = {"query": "q", "key": "k", "value": "v", "atten_mask": "mask", "actual_seq_qlen": "seq_q",
             "actual_seq_kvlen": "seq_kv", "alibi_slopes": "alibi", "atten_bias": "bias", "attention_out": "out",
             "softmax_lse": "lse"}
    constant_roles = ("seq_q", "seq_kv")
    outputs = ("out", "lse", "dropout_mask")

    def buffers(self, call: V2Call) -> dict:
        p, o = call.problem, call.options
        roles = {"q": (p.q_shape, p.dtype), "k": (p.kv_shape, p.dtype), "v": (p.kv_shape, p.dtype)}
        if o.mask_shape is not None:
            roles["mask"] = (tuple(o.mask_shape), np.dtype(np.uint8))
        if call.varlen:
            roles["seq_q"] = ((len(o.cu_seqlens_q),), np.dtype(np.int64))
            roles["seq_kv"] = ((len(o.cu_seqlens_kv),), np.dtype(np.int64))
        if getattr(o, "alibi", False):
            roles["alibi"] = ((p.batch, p.num_heads), np.dtype(np.float32))
        if getattr(o, "sinks", False):
            roles["sinks"] = ((p.num_heads,), np.dtype(np.float32))
        if getattr(o, "bias_shape", None) is not None:
            roles["bias"] = (tuple(o.bias_shape), p.dtype)
        roles["out"] = (p.q_shape, p.dtype)
        roles["lse"] = (lse_shape(p), np.dtype(np.float32))
        if o.return_dropout_mask:
            roles["dropout_mask"] = ((p.batch, p.num_heads, p.seq_q, p.seq_kv), np.dtype(np.uint8))
        return roles

    def padded_rows(self, call: V2Call) -> dict:
        return head_dim_rows(call.problem, ("q", "k", "v", "out"))

    def constants(self, call: V2Call) -> dict:
        if not call.varlen:
            return {}
        o = call.options
        return {"seq_q": np.asarray(o.cu_seqlens_q, dtype=np.int64),
                "seq_kv": np.asarray(o.cu_seqlens_kv, dtype=np.int64)}

    def attr_values(self, call: V2Call) -> dict:
        p, o = call.problem, call.options
        # seed and offset are uint64 carried in int64 attrs: the same 64 bits.
        return dict(scale_value=p.scale, pre_tokens=o.pre_tokens, next_tokens=o.next_tokens, input_layout=p.layout,
                    num_heads=p.num_heads, num_kv_heads=p.num_kv_heads, keep_prob=o.keep_prob,
                    seed=int(np.uint64(o.seed).view(np.int64)), offset=int(np.uint64(o.offset).view(np.int64)),
                    block_m=p.block_m, block_n=p.block_n, softcap=o.softcap,
                    inner_precise=PRECISIONS[o.precision])

    def check(self, call: V2Call, soc: str) -> int:
        return check_v2_plan(call, soc).workspace_bytes

    def fit(self, call: V2Call, soc: str, workspace_bytes: int):
        problem, ws_bytes, holds = fitted_tiling(call.problem, check_v2_plan(call, soc, workspace_bytes))
        return dataclasses.replace(call, problem=problem), ws_bytes, holds


# V3 adds softcap (docs/attention_options.md#soft-capping-flashattentionv3), V4 inner_precise
# (#high-performance-precision-flashattentionv4), V5 the optional inputs alibi_slopes, sinks and
# atten_bias (#score-modifiers-in-the-forward-flashattentionv5); each JSON says where.
FLASH_ATTENTION_V2 = FlashAttentionV2Op("FlashAttentionV2")
FLASH_ATTENTION_V3 = FlashAttentionV2Op("FlashAttentionV3")
FLASH_ATTENTION_V4 = FlashAttentionV2Op("FlashAttentionV4")
FLASH_ATTENTION_V5 = FlashAttentionV2Op("FlashAttentionV5")


def op_for(options) -> FlashAttentionV2Op:
    """The entry a call's options need: V5 for a score modifier (ALiBi, sinks, a float mask), V4 for
    the high-performance precision, V3 for soft-capping, else V2 (each only when needed, so every
    other call keeps the entry it used before)."""
    if getattr(options, "has_score_mods", False):
        return FLASH_ATTENTION_V5
    if options.precision != "high_precision":
        return FLASH_ATTENTION_V4
    return FLASH_ATTENTION_V3 if options.softcap else FLASH_ATTENTION_V2


def input_arrays(op: FlashAttentionV2Op, q, k, v, mask_u8=None, mods=NO_SCORE_MODS) -> tuple:
    """The arrays of a call in the order of `op`'s inputs (the roles its JSON has)."""
    by_role = dict(q=q, k=k, v=v, mask=mask_u8, alibi=mods.alibi, sinks=mods.sinks, bias=mods.bias)
    return tuple(by_role[role] for role in op.inputs)


def runner_for(session: DeviceSession) -> OpRunner:
    """The V2 forward's OpRunner on `session` (one per Session)."""
    return opcall.runner_for(session, FLASH_ATTENTION_V2)


def run_forward_v2(session: DeviceSession, problem: Problem, options, q, k, v, mask_u8=None,
                   mods=NO_SCORE_MODS) -> tuple:
    """Runs aclnnFlashAttentionV2 (V3 when options.softcap > 0, V4 for precision="high_performance") for a
    validated call: `problem` (problem.Problem, layout TND from varlen_problem for a varlen
    batch), `options` (AttentionOptions), q, k, v as the problem's shapes, `mask_u8` the uint8
    device mask of options.mask_shape (or None), `mods` the score modifiers' arrays
    (spec.options.ScoreModArrays, from score_mod_options: V5 runs when options have any).
    Returns (out, lse, dropout_mask or None); lse is [B, N, Sq] float32, [N, Tq] for TND."""
    if (mask_u8 is None) != (options.mask_shape is None):
        raise InvalidArgumentError("mask_u8 must be given exactly when options.mask_shape is set")
    if options.pre_tokens != UNBOUNDED and options.next_tokens != UNBOUNDED and \
            options.pre_tokens + options.next_tokens < 0:
        raise InvalidArgumentError(f"the window sees no key at all: pre_tokens {options.pre_tokens} + next_tokens "
                                   f"{options.next_tokens} < 0")
    call = V2Call(problem, options)
    roles = ("out", "lse", "dropout_mask") if options.return_dropout_mask else ("out", "lse")
    op = op_for(options)
    if any((array is None) != (not used) for array, used in (
            (mods.alibi, getattr(options, "alibi", False)), (mods.sinks, getattr(options, "sinks", False)),
            (mods.bias, getattr(options, "bias_shape", None) is not None))):
        raise InvalidArgumentError("mods must hold exactly the arrays options.alibi / sinks / bias_shape announce")
    results = opcall.runner_for(session, op).run(call, *input_arrays(op, q, k, v, mask_u8, mods), outputs=roles)
    if not options.return_dropout_mask:
        return results[0], results[1], None
    return results[0], results[1], visible_keep_mask(results[2], problem, options, mask_u8)


def visible_keep_mask(keep: np.ndarray, problem: Problem, options, mask_u8) -> np.ndarray:
    """The kernel's keep mask uint8 [B, N, Sq, Skv] (TND: [sequences, N, longest Sq, longest Skv])
    with every pair the query cannot see set to 0: the kernel writes only the blocks it computes
    (never those outside the band, hidden by the mask or past a sequence's end), so the rest of
    the buffer is whatever it held before."""
    keep = keep & np.uint8(1)
    if problem.layout != "TND":
        keep &= band_visible(options, problem.seq_q, problem.seq_kv, slice(0, problem.seq_q)).astype(np.uint8)
        if mask_u8 is not None:
            keep &= (mask_u8 == 0).astype(np.uint8)  # broadcasts the mask's own shape, 1 = masked out
        return keep
    lens_q = np.diff((0,) + tuple(options.cu_seqlens_q))
    lens_kv = np.diff((0,) + tuple(options.cu_seqlens_kv))
    for s, (sq, skv) in enumerate(zip(lens_q, lens_kv)):
        keep[s, :, sq:, :] = 0
        keep[s, :, :, skv:] = 0
        keep[s, :, :sq, :skv] &= band_visible(options, int(sq), int(skv), slice(0, int(sq))).astype(np.uint8)
        if mask_u8 is not None:  # sequence s reads its mask's top-left [sq, skv] corner
            keep[s, :, :sq, :skv] &= (mask_u8[s if mask_u8.shape[0] > 1 else 0, :, :sq, :skv] == 0).astype(np.uint8)
    return keep
