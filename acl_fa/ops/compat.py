"""torch's ``scaled_dot_product_attention`` over our forward (flash-attn's faces are in
acl_fa/flash_attn_interface.py).

``scaled_dot_product_attention`` is ``torch.nn.functional.scaled_dot_product_attention``: query
[..., Hq, L, E], key/value [..., H, S, E] (our BNSD after folding the leading dimensions into the
batch); ``is_causal`` aligned top-left, which the code below maps onto our bottom-right mask
exactly; ``attn_mask`` bool (True = take part, torch's convention and ours) or float (added to the
scores), broadcast like torch's and passed to acl_fa.flash_attention at its own shape. Everything
is validated as acl_fa.flash_attention validates it (before any device work); the face calls
acl_fa.flash_attention, whose routing rule (acl_fa.plan.routing) runs decode-shaped calls on the
decode op's split-KV kernel.
"""

from __future__ import annotations

import numpy as np

from .routed import flash_attention
from ..spec.problem import as_array
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """torch's ``scaled_dot_product_attention`` on numpy arrays.

    query [..., Hq, L, E], key [..., H, S, E], value [..., H, S, Ev] (any number of leading
    dimensions, or none: [L, E] is one head; key/value's leading dimensions broadcast to query's);
    H == Hq, or with enable_gqa=True, Hq a multiple of H (query head h reads key/value head
    h // (Hq / H), as torch's repeat_interleave); torch refuses Hq != H without enable_gqa, and so
    does this face. scale defaults to 1 / sqrt(E). Any E, Ev <= 256 (padded on the device; when
    Ev != E the narrower of the two is zero-padded on the host, a copy).

    - attn_mask: bool (True = the query takes part, torch's convention) or float (added to the
      scores, -inf hides), of any shape that broadcasts to [..., Hq, L, S]; handed to
      acl_fa.flash_attention at its own shape (its leading dimensions folded with query's), never
      expanded to L x S per head. torch refuses is_causal together with attn_mask; so does this.
    - dropout_p in [0, 1): dropout on the probabilities in the kernel (acl_fa.flash_attention's;
      a fresh seed per call, as torch draws from its generator).
    - is_causal: key j is hidden from query i when j > i (aligned top-left, torch's rule; when
      L != S this differs from flash-attn's and acl_fa.flash_attention's bottom-right mask).

    Returns [..., Hq, L, Ev] in the inputs' dtype (float16, bfloat16 or float32).
    """
    if not isinstance(is_causal, (bool, np.bool_)):
        raise InvalidTypeError(f"is_causal must be a bool, got {is_causal!r}")
    if not isinstance(enable_gqa, (bool, np.bool_)):
        raise InvalidTypeError(f"enable_gqa must be a bool, got {enable_gqa!r}")
    if is_causal and attn_mask is not None:
        raise InvalidArgumentError("attn_mask and is_causal=True cannot be used together (as torch refuses them): "
                                   "fold the causal rule into attn_mask")
    q, k, v = (as_array(name, x) for name, x in (("query", query), ("key", key), ("value", value)))
    for name, x in (("query", q), ("key", k), ("value", v)):
        if isinstance(x, DeviceArray):
            raise InvalidTypeError(f"{name}: scaled_dot_product_attention takes numpy arrays, not DeviceArrays "
                                   "(use acl_fa.flash_attention for device arrays)")
        if x.ndim < 2:
            raise InvalidArgumentError(f"{name} must have at least 2 dimensions ([..., L, E]), got shape {x.shape}")
    if not q.ndim == k.ndim == v.ndim:
        raise InvalidArgumentError(f"query {q.shape}, key {k.shape} and value {v.shape} must have the same rank")
    if k.shape[:-1] != v.shape[:-1]:
        raise InvalidArgumentError(f"key {k.shape} and value {v.shape} must agree on every dimension but the last")
    if q.shape[-1] != k.shape[-1]:
        raise InvalidArgumentError(f"query's head dim E={q.shape[-1]} and key's {k.shape[-1]} must be equal")
    lead = q.shape[:-3]
    try:
        np.broadcast_shapes(k.shape[:-3], lead)
    except ValueError:
        raise InvalidArgumentError(f"key/value's leading dimensions {k.shape[:-3]} do not broadcast to query's "
                                   f"{lead}") from None
    if k.shape[:-3] != lead:
        # torch broadcasts them; the op needs one batch, so the (few) key/value heads are repeated.
        k = np.broadcast_to(k, lead + k.shape[-3:])
        v = np.broadcast_to(v, lead + v.shape[-3:])
    hq = q.shape[-3] if q.ndim >= 3 else 1
    hkv = k.shape[-3] if k.ndim >= 3 else 1
    if hq != hkv and not enable_gqa:
        raise InvalidArgumentError(
            f"query has {hq} heads and key/value {hkv}: different head counts need enable_gqa=True")
    if enable_gqa and hq % hkv:
        raise InvalidArgumentError(f"enable_gqa: query heads {hq} must be a multiple of key/value heads {hkv}")
    batch = int(np.prod(lead, dtype=np.int64)) if lead else 1
    e, ev = q.shape[-1], v.shape[-1]
    q4 = q.reshape(batch, hq, q.shape[-2], e)
    k4 = k.reshape(batch, hkv, k.shape[-2], e)
    v4 = v.reshape(batch, hkv, v.shape[-2], ev)
    if scale is None:
        scale = 1.0 / np.sqrt(e)  # torch's default from E, kept when E is padded to Ev below
    if ev != e:
        width = max(e, ev)
        q4, k4, v4 = (_pad_last(x, width) for x in (q4, k4, v4))
    mask = None if attn_mask is None else _folded_mask(attn_mask, q.shape, lead, batch, hq, k.shape[-2])
    if is_causal:
        out = _top_left(q4, k4, v4, scale, dropout_p)
    else:
        out = flash_attention(q4, k4, v4, scale=scale, attn_mask=mask, dropout_p=dropout_p)
    return np.ascontiguousarray(out[..., :ev]).reshape(q.shape[:-1] + (ev,))


def _pad_last(x: np.ndarray, width: int) -> np.ndarray:
    """x with its last dimension zero-padded to `width` (a copy; x itself when already that wide)."""
    if x.shape[-1] == width:
        return x
    padded = np.zeros(x.shape[:-1] + (width,), x.dtype)
    padded[..., :x.shape[-1]] = x
    return padded


def _folded_mask(attn_mask, q_shape: tuple, lead: tuple, batch: int, heads: int, seq_kv: int):
    """torch's attn_mask (broadcasting to [*lead, Hq, L, S]) as a mask of acl_fa.flash_attention's
    grid [B, Hq, L, S] with B the folded leading dimensions: at most 4-D as given; beyond, its
    leading dimensions (all 1, or all query's) fold into one. A mask whose leading dimensions
    broadcast only partly (some 1, some not) is expanded over those dimensions alone."""
    mask = as_array("attn_mask", attn_mask)
    if isinstance(mask, DeviceArray):
        raise InvalidTypeError("attn_mask must be a numpy array, not a DeviceArray")
    grid = lead + (heads, q_shape[-2], seq_kv)
    try:
        fits = np.broadcast_shapes(mask.shape, grid) == grid
    except ValueError:
        fits = False
    if not fits:
        raise InvalidArgumentError(f"attn_mask of shape {mask.shape} does not broadcast to the scores "
                                   f"[..., Hq, L, S] = {list(grid)}")
    if mask.ndim <= 3:
        return mask
    if mask.ndim < len(grid):
        mask = mask.reshape((1,) * (len(grid) - mask.ndim) + mask.shape)
    mask_lead = mask.shape[:-3]
    if all(d == 1 for d in mask_lead):
        return mask.reshape((1,) + mask.shape[-3:])
    if mask_lead != lead:
        mask = np.broadcast_to(mask, lead + mask.shape[-3:])
    return mask.reshape((batch,) + mask.shape[-3:])


def _top_left(q, k, v, scale, dropout_p):
    """Causal attention aligned top-left (query i sees keys j <= i) through the bottom-right
    mask (query i sees keys j <= i + S - L) on BNSD arrays.

    L <= S: keys j >= L are never seen, and on the first L keys the two masks coincide (the
    square case). L > S: rows i < S are the square case on all keys; rows i >= S see every key,
    which is attention without a mask."""
    sq, skv = q.shape[2], k.shape[2]
    if sq <= skv:
        return flash_attention(q, k[:, :, :sq], v[:, :, :sq], causal=True, scale=scale, dropout_p=dropout_p)
    head = flash_attention(q[:, :, :skv], k, v, causal=True, scale=scale, dropout_p=dropout_p)
    tail = flash_attention(q[:, :, skv:], k, v, scale=scale, dropout_p=dropout_p)
    return np.concatenate([head, tail], axis=2)
