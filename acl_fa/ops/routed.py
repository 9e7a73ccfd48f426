"""acl_fa.flash_attention: the forward call, served by the op the routing rule picks (issue #34).

The call is validated once, by acl_fa.ops.forward.validated_call (flash_attention's own
validation, before any device work), then acl_fa.plan.routing decides: a
decode-shaped call (few query rows per kv head, long keys) whose decode tiling models faster runs
on the decode op's split-KV kernel (flash_attention_with_kvcache over the keys as a contiguous
cache); every other call, and every call with an option only the general forward has, runs the
general forward unchanged. Both ops return the same outputs: out in q's layout and dtype, the LSE
float32 [B, N, Sq] with return_lse, rows that see no key 0 (LSE -inf).

``last_route(session)`` tells which op served the session's last call and why.
"""

from __future__ import annotations

import threading
import weakref
from typing import Optional

import numpy as np

from ..plan import routing
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError
from ..runtime.session import DeviceSession
from ..spec.problem import Problem
from .decode import flash_attention_with_kvcache
from .forward import run_call, validated_call
from .opcall import default_session
from .problem import outputs_of
from .quant import check_qk_quant, quantized_attention

__all__ = ["flash_attention", "last_route", "general_only", "decode_arrays", "forward_outputs"]

# The last Route per session (weakly keyed: a closed session's entry goes with it).
_LAST = weakref.WeakKeyDictionary()
_LAST_LOCK = threading.Lock()


def general_only(problem: Problem, block_m, block_n, options, arrays) -> Optional[str]:
    """What in a call only the general forward supports, or None (docs/decode.md "Routing")."""
    if block_m or block_n:
        return "explicit block_m/block_n"
    if problem.padded:
        return f"head dim {problem.user_head_dim} (padded to {problem.head_dim} by the general forward's copies)"
    if not options.is_default:
        return ("attn_mask, dropout, softcap, a window, precision='high_performance', alibi_slopes or sinks "
                "(the FlashAttentionV2..V5 options)")
    return _device_layout_reason(problem, arrays)


def _device_layout_reason(problem: Problem, arrays) -> Optional[str]:
    """DeviceArrays are read in place: the decode op reads BSND q, k, v as they are; BSH and BNSD
    device arrays would need a copy on the device, so they keep the general path."""
    if problem.layout != "BSND" and any(isinstance(a, DeviceArray) for a in arrays):
        return f"DeviceArray inputs in layout {problem.layout} (the decode op reads BSND device arrays in place)"
    return None


def last_route(session: DeviceSession) -> Optional[routing.Route]:
    """The Route of the last acl_fa.flash_attention call on `session` (None before the first)."""
    with _LAST_LOCK:
        return _LAST.get(session)


def _remember(session: DeviceSession, decision: routing.Route) -> None:
    with _LAST_LOCK:
        _LAST[session] = decision


def decode_arrays(problem: Problem, q, k, v) -> tuple:
    """(q, k_cache, v_cache) of the decode op for the forward's arrays (routing.decode_view):
    BSND as is, BSH reshaped, BNSD keys as B x Nkv one-head sequences with q's group heads
    moved next to its tokens (host arrays only: a copy of q, never of k or v)."""
    view = routing.decode_view(problem)
    b, sq, skv, d = problem.batch, problem.seq_q, problem.seq_kv, problem.head_dim
    if problem.layout == "BSND":
        return q, k, v
    if problem.layout == "BSH":
        shape = (b, skv, problem.num_kv_heads, d)
        return q.reshape(b, sq, problem.num_heads, d), k.reshape(shape), v.reshape(shape)
    group = view.heads
    q5 = q.reshape(b, problem.num_kv_heads, group, sq, d).transpose(0, 1, 3, 2, 4)
    cache = (view.batch, skv, 1, d)
    return np.ascontiguousarray(q5).reshape(view.batch, sq, group, d), k.reshape(cache), v.reshape(cache)


def forward_outputs(problem: Problem, out, lse) -> tuple:
    """The decode op's out [B', Sq, N', D] and lse [B', N', Sq] in the forward's layout and shape."""
    b, sq, n, d = problem.batch, problem.seq_q, problem.num_heads, problem.head_dim
    if problem.layout == "BSH":
        out = out.reshape(b, sq, n * d)
    elif problem.layout == "BNSD":
        group = n // problem.num_kv_heads
        out = np.ascontiguousarray(out.reshape(b, problem.num_kv_heads, sq, group, d).transpose(0, 1, 3, 2, 4))
        out = out.reshape(b, n, sq, d)
    return out, lse.reshape(b, n, sq)


def _run_decode(problem: Problem, session: DeviceSession, q, k, v, return_lse: bool, options):
    qd, kd, vd = decode_arrays(problem, q, k, v)
    out, lse = flash_attention_with_kvcache(qd, kd, vd, cache_seqlens=problem.seq_kv, causal=problem.causal,
                                            scale=problem.scale, num_splits=0, return_lse=True, session=session)
    out, lse = forward_outputs(problem, out, lse)
    if not return_lse:
        return out
    return outputs_of(out, lse, None, options, problem.batch * problem.num_heads, True)


def flash_attention(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None, num_kv_heads=None,
                    block_m=None, block_n=None, return_lse=False, window=None, attn_mask=None, dropout_p=0.0,
                    seed=None, offset=0, return_dropout_mask=False, backend=None, device=None, session=None,
                    softcap=0.0, precision="high_precision", qk_quant=None, alibi_slopes=None, sinks=None):
    """FlashAttention forward (acl_fa.ops.forward.flash_attention's arguments, semantics, outputs
    and errors), run on the op acl_fa.plan.routing picks: decode-shaped calls on the decode op's
    split-KV kernel, the rest on the general forward. ``last_route(session)`` says which ran.

    qk_quant="int8" (float16 / bfloat16 on Atlas A2/A3, float16 on Ascend310P; docs/int8.md): Q and K
    quantized to int8 per block on the device (K smoothed first), QK^T on the cube in int8, P.V in the
    input dtype; with
    causal and scale only (no window, mask, dropout, softcap or precision option). 'fp8' and 'int4'
    are refused with their reason."""
    int8 = check_qk_quant(qk_quant)
    call = validated_call(q, k, v, return_lse, dict(
        causal=causal, scale=scale, layout=layout, num_heads=num_heads, num_kv_heads=num_kv_heads, block_m=block_m,
        block_n=block_n, window=window, attn_mask=attn_mask, dropout_p=dropout_p, seed=seed, offset=offset,
        return_dropout_mask=return_dropout_mask, softcap=softcap, precision=precision, alibi_slopes=alibi_slopes,
        sinks=sinks))
    problem, options, arrays = call.problem, call.options, (call.q, call.k, call.v)
    if int8 and not options.is_default:
        raise InvalidArgumentError("qk_quant='int8' takes causal and scale only: no window, attn_mask, dropout, "
                                   "softcap, precision, alibi_slopes or sinks option")
    if session is None:
        session = default_session(backend, device)
    if int8:
        out, lse = quantized_attention(session, problem, *arrays)
        return outputs_of(out, lse, None, options, problem.batch * problem.num_heads, True) if return_lse else out
    reason = general_only(problem, block_m, block_n, options, arrays)
    decision = routing.route(problem, session.soc_name(), general_only=reason)
    _remember(session, decision)
    if decision.decode:
        return _run_decode(problem, session, *arrays, call.return_lse, options)
    return run_call(session, call)
