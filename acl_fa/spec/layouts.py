"""The input layouts the operator accepts and how their axes map to [B, N, S, D].

BNSD  [B, N, S, D]
BSND  [B, S, N, D]
BSH   [B, S, N*D]   (same memory order as BSND; N must be given)
"""

from __future__ import annotations

import numpy as np

from ..runtime.errors import InvalidArgumentError

__all__ = ["LAYOUTS", "LAYOUT_RANK", "to_bnsd", "from_bnsd", "split_dims", "shape_of"]

LAYOUTS = ("BNSD", "BSND", "BSH")
LAYOUT_RANK = {"BNSD": 4, "BSND": 4, "BSH": 3}


def split_dims(shape, layout, num_heads=None):
    """(B, N, S, D) of a tensor of `shape` in `layout`; BSH needs num_heads."""
    if layout == "BNSD":
        b, n, s, d = shape
    elif layout == "BSND":
        b, s, n, d = shape
    elif layout == "BSH":
        b, s, hidden = shape
        if not num_heads:
            raise InvalidArgumentError("layout BSH needs num_heads to split the hidden size")
        if hidden % num_heads:
            raise InvalidArgumentError(f"hidden size {hidden} is not divisible by num_heads={num_heads}")
        n, d = num_heads, hidden // num_heads
    else:
        raise InvalidArgumentError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return int(b), int(n), int(s), int(d)


def shape_of(layout, b, n, s, d) -> tuple:
    """The shape of a [B, N, S, D] tensor in `layout`."""
    if layout == "BNSD":
        return (b, n, s, d)
    if layout == "BSND":
        return (b, s, n, d)
    if layout == "BSH":
        return (b, s, n * d)
    raise InvalidArgumentError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")


def to_bnsd(x: np.ndarray, layout: str, num_heads=None) -> np.ndarray:
    """A [B, N, S, D] view (or copy for BSH) of x in `layout`."""
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    b, n, s, d = split_dims(x.shape, layout, num_heads)
    return x.reshape(b, s, n, d).transpose(0, 2, 1, 3)


def from_bnsd(x: np.ndarray, layout: str) -> np.ndarray:
    """x [B, N, S, D] rearranged into `layout` (C-contiguous)."""
    if layout == "BNSD":
        return np.ascontiguousarray(x)
    bsnd = np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    if layout == "BSND":
        return bsnd
    b, s, n, d = bsnd.shape
    return bsnd.reshape(b, s, n * d)
