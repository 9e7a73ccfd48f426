"""The band rule, once for Python: which keys a query row sees under `causal` and `window`
(docs/attention_options.md, "Visibility window").

Sizes per sequence: Sq queries, Skv keys, diag = Skv - Sq (bottom-right alignment). Key j is
visible from query row i iff

    i + diag - pre_tokens <= j <= i + diag + next_tokens

``window=(left, right)`` (flash-attn's window_size), -1 = unbounded on that side, gives
pre_tokens = left and next_tokens = right, UNBOUNDED (the int32 maximum, FlashAttentionScore's and
our ops' "no bound") for -1; ``causal`` is the window (-1, 0) and intersects a window. Every op
(forward, backward, varlen, decode), the plans and the CLI turn causal / window into
(pre_tokens, next_tokens) with ``window_band``; the float64 references do not use this module
(they compute the band themselves from the same documented rule, so the check shares no code
with what it checks).
"""

from __future__ import annotations

import numbers
from typing import Optional

import numpy as np

from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["UNBOUNDED", "window_band", "band_visible", "band_columns", "int_argument"]


def int_argument(name: str, value) -> int:
    """`value` as an int; InvalidTypeError naming `name` for a bool or a non-integer (also used by
    the other option checks of spec/options.py)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
    return int(value)


# pre_tokens / next_tokens value meaning "no bound" (the int32 maximum, as FlashAttentionScore and
# our decode op, op/flash_attention_decode.json).
UNBOUNDED = 2147483647


def window_band(window, causal: bool = False) -> tuple:
    """(pre_tokens, next_tokens) of `window` = (left, right) intersected with causal.

    left/right: ints >= -1, -1 = unbounded (values beyond the int32 maximum are unbounded too).
    window None = (-1, -1). causal = (-1, 0): next = 0 if right == -1 else min(right, 0).
    InvalidTypeError for a causal that is not a bool or a window that is not a sequence of ints,
    InvalidArgumentError (naming `window`) for a sequence of the wrong length or a value < -1."""
    if not isinstance(causal, (bool, np.bool_)):
        raise InvalidTypeError(f"causal must be a bool, got {causal!r}")
    if window is None:
        left, right = -1, -1
    else:
        if isinstance(window, (str, bytes)) or not hasattr(window, "__len__"):
            raise InvalidTypeError(f"window must be a pair (left, right) of ints, got {window!r}")
        if len(window) != 2:
            raise InvalidArgumentError(f"window must be a pair (left, right), got {len(window)} values: {window!r}")
        left, right = (int_argument(f"window[{i}]", x) for i, x in enumerate(window))
        for i, x in enumerate((left, right)):
            if x < -1:
                raise InvalidArgumentError(
                    f"window[{i}]={x}: window values must be >= -1 (-1 = unbounded on that side)")
    pre = UNBOUNDED if left == -1 else min(left, UNBOUNDED)
    nxt = UNBOUNDED if right == -1 else min(right, UNBOUNDED)
    if causal:
        nxt = min(nxt, 0)
    return pre, nxt


def band_columns(options, seq_q: int, seq_kv: int, rows: slice) -> slice:
    """The keys any of the query rows `rows` can see under the band (a slice of range(Skv),
    empty when none)."""
    diag = seq_kv - seq_q
    lo = max(0, rows.start + diag - options.pre_tokens)
    hi = min(seq_kv, rows.stop - 1 + diag + options.next_tokens + 1)
    return slice(lo, max(lo, hi))


def band_visible(options, seq_q: int, seq_kv: int, rows: slice, cols: Optional[slice] = None):
    """bool [rows, cols]: the band of `options` (mask not included) for query rows `rows` and key
    columns `cols` (default all) of a sequence of Sq queries and Skv keys:
    i + diag - pre <= j <= i + diag + next."""
    cols = slice(0, seq_kv) if cols is None else cols
    i = np.arange(rows.start, rows.stop, dtype=np.int64)[:, None] + (seq_kv - seq_q)
    j = np.arange(cols.start, cols.stop, dtype=np.int64)[None, :]
    return (j >= i - options.pre_tokens) & (j <= i + options.next_tokens)
