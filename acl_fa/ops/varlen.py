"""Variable-length batches: flash_attention_varlen and its backward (layout TND).

The faces of flash-attn's ``flash_attn_varlen_func``: sequences packed one after another, q
[Tq, N, D], k / v [Tkv, Nkv, D], cu_seqlens_q / cu_seqlens_k the cumulative starts with the
leading 0. They validate (acl_fa/spec/options.py), build the TND problem and run the V2 ops
(acl_fa/ops/forward_v2.py, acl_fa/ops/backward_v2.py). Semantics in
docs/attention_options.md#variable-length-batches.
"""

from __future__ import annotations

import numpy as np

from .problem import check_backward_dtype, check_float32_range, outputs_of
from ..spec.problem import as_array, make_problem
from ..spec.options import build_forward_options, check_max_seqlen, cu_seqlens_ends
from .backward import backward_options
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import default_session
from .forward_v2 import varlen_problem
from .forward_v2 import run_forward_v2
from .backward_v2 import run_backward_v2, run_backward_v3
from ..spec.score_mods import alibi_slopes_value, sinks_value

__all__ = ["flash_attention_varlen", "flash_attention_varlen_backward", "make_varlen_problem"]


def make_varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, *, max_seqlen_q, max_seqlen_k, scale, block_m,
                        block_n) -> tuple:
    """Validates a varlen call; returns (TND Problem, ends_q, ends_kv, q, k, v) with the
    sequence ends in aclnn form (cumulative ends without the leading 0) and q, k, v numpy
    arrays of their TND shapes."""
    arrays = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        x = as_array(name, x)
        if isinstance(x, DeviceArray):
            raise InvalidTypeError(f"{name}: flash_attention_varlen takes numpy arrays, not DeviceArrays")
        if x.ndim != 3:
            raise InvalidArgumentError(f"{name} must be [total_tokens, heads, head_dim] (layout TND), got shape {x.shape}")
        arrays.append(x)
    q, k, v = arrays
    ends_q = cu_seqlens_ends("cu_seqlens_q", cu_seqlens_q, q.shape[0])
    ends_kv = cu_seqlens_ends("cu_seqlens_k", cu_seqlens_k, k.shape[0])
    if len(ends_q) != len(ends_kv):
        raise InvalidArgumentError(f"cu_seqlens_q lists {len(ends_q)} sequences and cu_seqlens_k {len(ends_kv)}; "
                                   "they must list the same sequences")
    check_max_seqlen("max_seqlen_q", max_seqlen_q, ends_q)
    check_max_seqlen("max_seqlen_k", max_seqlen_k, ends_kv)
    # All tokens as one BSND sequence validate dtypes, heads, head dim, scale and blocks.
    base, q4, k4, v4 = make_problem(q[None], k[None], v[None], scale=scale, layout="BSND", block_m=block_m,
                                    block_n=block_n, pad_head_dim=True)
    check_float32_range(base, q4, k4, v4)
    return varlen_problem(base, ends_q, ends_kv), ends_q, ends_kv, q4[0], k4[0], v4[0]


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, max_seqlen_q=None, max_seqlen_k=None, causal=False,
                           window=None, scale=None, return_lse=False, dropout_p=0.0, seed=None, offset=0,
                           return_dropout_mask=False, attn_mask=None, block_m=None, block_n=None, backend=None,
                           device=None, session=None, softcap=0.0, alibi_slopes=None, sinks=None):
    """FlashAttention over a batch of sequences of different lengths (flash-attn's
    flash_attn_varlen_func). q [Tq, N, D], k / v [Tkv, Nkv, D] (float16, bfloat16, float32),
    sequence s holding rows cu_seqlens_q[s]:cu_seqlens_q[s+1] of q and cu_seqlens_k[s]:
    cu_seqlens_k[s+1] of k / v; cu_seqlens int32/int64 [num_seqs + 1] starting at 0.
    Sequences never see each other. causal and window=(left, right) apply per sequence,
    bottom-right aligned with its own lengths (docs/attention_options.md). max_seqlen_* default
    to the longest sequence (a larger value is accepted; a smaller one refused).

    dropout_p, seed, offset, return_dropout_mask: as flash_attention, with b the sequence index
    (a call uses the Philox streams offset .. offset + num_seqs*N - 1); the keep mask is uint8
    [num_seqs, N, max Sq, max Skv], 0 past each sequence's lengths. attn_mask: as flash_attention
    (bool, True = the query may attend to the key; or float, added to the scores, q's dtype) over
    the grid [num_seqs, N, longest Sq, longest Skv] (each dim but the last may be 1): sequence s
    reads its top-left [Sq(s), Skv(s)] corner (docs/attention_options.md "Masks with varlen"). softcap: as flash_attention (per sequence, the
    same cap). alibi_slopes float32 [N] or [num_seqs, N] (a row per sequence, each with its own
    bottom-right alignment Skv(s) - Sq(s)) and sinks float32 [N]: as flash_attention.

    Returns out [Tq, N, D]; with return_lse or return_dropout_mask an AttentionOutputs tuple
    (out, lse float32 [N, Tq] if return_lse, the keep mask if return_dropout_mask) with the
    dropout's .seed / .offset / .next_offset. Rows that see no key (an empty key sequence, a
    window) give 0 and lse -inf."""
    if not isinstance(return_lse, (bool, np.bool_)):
        raise InvalidTypeError(f"return_lse must be a bool, got {return_lse!r}")
    problem, ends_q, ends_kv, q, k, v = make_varlen_problem(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, scale=scale,
        block_m=block_m, block_n=block_n)
    options, mask, mods = build_forward_options(
        scores=problem.score_grid, dtype=problem.dtype, causal=causal, window=window, attn_mask=attn_mask,
        dropout_p=dropout_p, seed=seed, offset=offset, return_dropout_mask=return_dropout_mask, cu_seqlens_q=ends_q,
        cu_seqlens_kv=ends_kv, softcap=softcap, alibi_slopes=alibi_slopes, sinks=sinks)
    session = default_session(backend, device) if session is None else session
    out, lse, dropout_mask = run_forward_v2(session, problem, options, q, k, v, mask, mods)
    if not (return_lse or options.return_dropout_mask):
        return out
    return outputs_of(out, lse, dropout_mask, options, problem.batch * problem.num_heads, bool(return_lse))


def flash_attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *, max_seqlen_q=None,
                                    max_seqlen_k=None, causal=False, window=None, dropout_p=0.0, seed=None, offset=0,
                                    scale=None, deterministic=True, block_m=None, block_n=None, backend=None,
                                    device=None, session=None, softcap=0.0, alibi_slopes=None, sinks=None):
    """(dq [Tq, N, D], dk, dv [Tkv, Nkv, D]) for the upstream gradient dout [Tq, N, D] of
    out, lse = flash_attention_varlen(..., return_lse=True) with the same arguments; with
    dropout_p > 0 the forward's seed and offset (sequence s, head n draws Philox stream
    offset + s * N + n, as in the forward). Sequences that see no key get zero gradients.
    softcap, alibi_slopes ([N] or [B, N], B the sequences) and sinks ([N]) as
    flash_attention_backward, each sequence with its own Sq, Skv (docs/attention_options.md "Score
    modifiers"); with sinks the result is (dq, dk, dv, dsinks), dsinks float32 [N]."""
    problem, ends_q, ends_kv, q, k, v = make_varlen_problem(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, scale=scale,
        block_m=block_m, block_n=block_n)
    check_backward_dtype(problem, "flash_attention_varlen_backward")
    options, _ = backward_options(problem, causal=causal, window=window, dropout_p=dropout_p, seed=seed, offset=offset,
                                  cu_seqlens_q=ends_q, cu_seqlens_kv=ends_kv, softcap=softcap)
    slopes = alibi_slopes_value(alibi_slopes, batch=problem.batch, num_heads=problem.num_heads)
    logits = sinks_value(sinks, num_heads=problem.num_heads)
    session = default_session(backend, device) if session is None else session
    if options.softcap or slopes is not None or logits is not None:
        return run_backward_v3(session, problem, options, (dout, q, k, v, out, lse), None, deterministic,
                               alibi_slopes=slopes, sinks=logits)
    return run_backward_v2(session, problem, options, dout, q, k, v, out, lse, None, deterministic)
