"""Entry points with the signatures and semantics of flash-attn and torch, over our forward.

``flash_attn_func`` is flash-attn 2's ``flash_attn.flash_attn_func``: q [B, Sq, N, D], k, v
[B, Skv, Nkv, D] (our layout BSND, flash-attn's BSHD); causal aligned bottom-right (flash-attn
>= 2.1), as ours. ``scaled_dot_product_attention`` is ``torch.nn.functional.
scaled_dot_product_attention``: query [..., Hq, L, E], key/value [..., H, S, E] (our BNSD after
folding the leading dimensions into the batch); ``is_causal`` aligned top-left, which the code
below maps onto our bottom-right mask exactly. Arguments that need features the operator does
not have yet raise NotImplementedError naming the feature; everything else is validated as
acl_fa.flash_attention validates it (before any device work). Both faces call acl_fa.flash_attention,
whose routing rule (acl_fa.plan.routing) runs decode-shaped calls on the decode op's split-KV kernel.
"""

from __future__ import annotations

import numbers

import numpy as np

from .routed import flash_attention
from ..spec.problem import as_array
from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["flash_attn_func", "scaled_dot_product_attention"]


def _not_built(condition: bool, feature: str):
    if condition:
        raise NotImplementedError(f"{feature} is not supported by acl-fa's FlashAttention operator yet")


def _check_dropout(dropout_p):
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise InvalidTypeError(f"dropout_p must be a real number, got {dropout_p!r}")
    _not_built(dropout_p != 0, f"dropout (dropout_p={dropout_p})")


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash-attn's ``flash_attn_func`` on numpy arrays.

    q [B, Sq, N, D], k, v [B, Skv, Nkv, D] (N a multiple of Nkv: GQA/MQA), float16 or bfloat16;
    softmax_scale defaults to D ** -0.5; causal masks key j > i + (Skv - Sq) (bottom-right).
    Returns out [B, Sq, N, D]; with return_attn_probs, (out, softmax_lse [B, N, Sq] float32,
    None) -- flash-attn fills the third element (the dropout pattern) only when dropout_p > 0.
    window_size=(left, right) is flash-attn's sliding window (-1 = unbounded; acl_fa's window).
    softcap > 0 caps the scaled scores, softcap * tanh(scores / softcap) (acl_fa's softcap).
    The forward is deterministic whatever ``deterministic`` says (it concerns flash-attn's
    backward). Not built yet: dropout_p > 0, alibi_slopes.
    """
    _check_dropout(dropout_p)
    try:
        window = tuple(int(w) for w in window_size)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(f"window_size must be a pair of integers, got {window_size!r}") from exc
    if len(window) != 2:
        raise InvalidArgumentError(f"window_size must be a pair (left, right), got {window_size!r}")
    window = None if window == (-1, -1) else window
    _not_built(alibi_slopes is not None, "ALiBi (alibi_slopes)")
    if not isinstance(return_attn_probs, (bool, np.bool_)):
        raise InvalidTypeError(f"return_attn_probs must be a bool, got {return_attn_probs!r}")
    if return_attn_probs:
        out, lse = flash_attention(q, k, v, causal=causal, scale=softmax_scale, layout="BSND", return_lse=True,
                                   window=window, softcap=softcap)
        return out, lse, None
    return flash_attention(q, k, v, causal=causal, scale=softmax_scale, layout="BSND", window=window, softcap=softcap)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """torch's ``scaled_dot_product_attention`` on numpy arrays.

    query [..., Hq, L, E], key and value [..., H, S, E] with the same leading dimensions (any
    number, or none: [L, E] is one head); H == Hq, or with enable_gqa=True, Hq a multiple of H
    (query head h reads key/value head h // (Hq / H), as torch's repeat_interleave). scale
    defaults to 1 / sqrt(E). is_causal masks key j > i (aligned top-left, torch's rule; when
    L != S this differs from flash-attn's and acl_fa.flash_attention's bottom-right mask).
    Returns [..., Hq, L, E] in the inputs' dtype (float16 or bfloat16). Not built yet:
    attn_mask, dropout_p > 0, a value head dim other than E, leading dimensions that broadcast.
    """
    _not_built(attn_mask is not None, "an explicit attention mask (attn_mask)")
    _check_dropout(dropout_p)
    if not isinstance(is_causal, (bool, np.bool_)):
        raise InvalidTypeError(f"is_causal must be a bool, got {is_causal!r}")
    if not isinstance(enable_gqa, (bool, np.bool_)):
        raise InvalidTypeError(f"enable_gqa must be a bool, got {enable_gqa!r}")
    q, k, v = (as_array(name, x) for name, x in (("query", query), ("key", key), ("value", value)))
    for name, x in (("query", q), ("key", k), ("value", v)):
        if x.ndim < 2:
            raise InvalidArgumentError(f"{name} must have at least 2 dimensions ([..., L, E]), got shape {x.shape}")
    if not q.ndim == k.ndim == v.ndim:
        raise InvalidArgumentError(f"query {q.shape}, key {k.shape} and value {v.shape} must have the same rank")
    _not_built(v.shape[-1] != k.shape[-1], f"a value head dim ({v.shape[-1]}) other than the key's ({k.shape[-1]})")
    if k.shape != v.shape:
        raise InvalidArgumentError(f"key {k.shape} and value {v.shape} must have the same shape")
    lead = q.shape[:-3]
    _not_built(lead != k.shape[:-3], f"broadcasting leading dimensions (query {q.shape}, key {k.shape})")
    hq = q.shape[-3] if q.ndim >= 3 else 1
    hkv = k.shape[-3] if k.ndim >= 3 else 1
    if hq != hkv and not enable_gqa:
        raise InvalidArgumentError(
            f"query has {hq} heads and key/value {hkv}: different head counts need enable_gqa=True")
    if enable_gqa and hq % hkv:
        raise InvalidArgumentError(f"enable_gqa: query heads {hq} must be a multiple of key/value heads {hkv}")
    batch = int(np.prod(lead, dtype=np.int64)) if lead else 1
    q4 = q.reshape(batch, hq, q.shape[-2], q.shape[-1])
    k4 = k.reshape(batch, hkv, k.shape[-2], k.shape[-1])
    v4 = v.reshape(batch, hkv, v.shape[-2], v.shape[-1])
    out = _top_left(q4, k4, v4, scale) if is_causal else flash_attention(q4, k4, v4, scale=scale)
    return out.reshape(q.shape)


def _top_left(q, k, v, scale):
    """Causal attention aligned top-left (query i sees keys j <= i) through the bottom-right
    mask (query i sees keys j <= i + S - L) on BNSD arrays.

    L <= S: keys j >= L are never seen, and on the first L keys the two masks coincide (the
    square case). L > S: rows i < S are the square case on all keys; rows i >= S see every key,
    which is attention without a mask."""
    sq, skv = q.shape[2], k.shape[2]
    if sq <= skv:
        return flash_attention(q, k[:, :, :sq], v[:, :, :sq], causal=True, scale=scale)
    head = flash_attention(q[:, :, :skv], k, v, causal=True, scale=scale)
    tail = flash_attention(q[:, :, skv:], k, v, scale=scale)
    return np.concatenate([head, tail], axis=2)
