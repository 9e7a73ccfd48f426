"""Score modifiers of flash-attn 2.x and gpt-oss, validated: ALiBi slopes and attention sinks.

Semantics (docs/attention_options.md, "Score modifiers"): for query row i and key j of a head h,

    s_ij = cap(scale * q_i . k_j) - slope[b, h] * |i + Skv - Sq - j|  (+ a float mask, SDPA)

and the row's softmax denominator gains exp(sink[h]) when sinks are given (a logit with no
value: the row's weights sum to less than 1). cap is soft-capping (spec/options.softcap_value).

Every function raises InvalidTypeError / InvalidArgumentError naming the argument and the limit,
before any device work, and returns the float32 array an op uploads.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["alibi_slopes_value", "sinks_value"]


def _float_array(name: str, value) -> np.ndarray:
    """value (a numpy array, a sequence, or a DeviceArray, downloaded: it is a few floats) as a float32
    array; floating-point values only (flash-attn takes fp32; an int array is more likely a mistake)."""
    try:
        array = np.asarray(value)
    except Exception as err:  # noqa: BLE001 -- any conversion failure is the caller's type error
        raise InvalidTypeError(f"{name} must be an array of float32 values, got {type(value).__name__}") from err
    if array.dtype.kind != "f":
        raise InvalidTypeError(f"{name} must hold floating-point values (float32 as flash-attn), got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(array).all():
        bad = np.flatnonzero(~np.isfinite(array.ravel()))[0]
        raise InvalidArgumentError(f"{name} must be finite in float32; element {bad} is "
                                   f"{np.asarray(value).ravel()[bad]!r}")
    return array


def alibi_slopes_value(alibi_slopes, *, batch: int, num_heads: int) -> Optional[np.ndarray]:
    """alibi_slopes validated: None (off), or [N] / [B, N] finite floats -> float32 [B, N] (one slope
    per batch and query head; a [N] vector repeated over the batch)."""
    if alibi_slopes is None:
        return None
    slopes = _float_array("alibi_slopes", alibi_slopes)
    if slopes.shape == (num_heads,):
        return np.ascontiguousarray(np.broadcast_to(slopes, (batch, num_heads)))
    if slopes.shape == (batch, num_heads):
        return slopes
    raise InvalidArgumentError(f"alibi_slopes must have shape (num_heads,) = ({num_heads},) or "
                               f"(batch, num_heads) = ({batch}, {num_heads}); got {tuple(slopes.shape)}")


def sinks_value(sinks, *, num_heads: int) -> Optional[np.ndarray]:
    """sinks validated: None (off), or [N] finite floats, one logit per query head -> float32 [N]."""
    if sinks is None:
        return None
    logits = _float_array("sinks", sinks)
    if logits.shape != (num_heads,):
        raise InvalidArgumentError(f"sinks must have shape (num_heads,) = ({num_heads},), one logit per query "
                                   f"head; got {tuple(logits.shape)}")
    return logits
