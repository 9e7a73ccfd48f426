"""The options of the V2 ops (window, mask, dropout, variable-length batches), validated.

Every function here checks what a caller passed and raises InvalidArgumentError /
InvalidTypeError naming the argument and the limit, before any device work. The result is an
``AttentionOptions`` (hashable: it keys the per-shape op caches) plus, for a mask, its uint8
device form. Semantics in docs/attention_options.md:

- window (left, right): key j is visible to query i iff i + diag - pre <= j <= i + diag + next,
  diag = Skv - Sq; -1 = unbounded; causal is (-1, 0) and intersects with the window.
- attn_mask: bool, True = the query may attend to the key (torch SDPA). The device form is
  aclnn's (FlashAttentionScore's atten_mask): uint8, 1 = masked out, rank 4, at the given shape.
- dropout_p in [0, 1), seed and offset uint64 (Philox4x32-10 key scheme in acl_fa/spec/philox.py).
- cu_seqlens: flash-attn's cumulative starts with the leading 0 -> aclnn's actual_seq_qlen /
  actual_seq_kvlen, the cumulative ends without it.
- softcap >= 0: scores = softcap * tanh(scores / softcap) before the mask (flash-attn 2.6); 0 = off.
- precision: "high_precision" (default: S = Q K^T in float32 between the matmuls) or
  "high_performance" (S rounded to the input dtype, float16 / bfloat16, as it leaves the cube:
  FlashAttentionV4 inner_precise 1).
- score modifiers (FlashAttentionV5, docs/attention_options.md "Score modifiers"): alibi_slopes
  ([N] or [B, N] float32), sinks ([N] float32) and a float attn_mask (added to the scores, in the
  query's dtype, broadcast like the bool mask); the options hold only their presence and shapes,
  the arrays travel beside them (ScoreModArrays), as the mask does.
"""

from __future__ import annotations

import dataclasses
import numbers
import secrets
from typing import Optional

import numpy as np

from . import philox
from .score_mods import alibi_slopes_value, sinks_value
from .band import UNBOUNDED, int_argument, window_band
from ..runtime.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["UINT64_MAX", "AttentionOptions", "device_mask", "dropout_keep_prob", "dropout_rng", "cu_seqlens_ends",
           "check_max_seqlen", "softcap_value", "PRECISIONS", "precision_value", "check_precision_dtype",
           "build_options", "ScoreModArrays", "split_attn_mask", "float_mask_value", "score_mod_options",
           "build_forward_options"]

UINT64_MAX = (1 << 64) - 1
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# precision -> FlashAttentionV4's inner_precise (FusedInferAttentionScore's innerPrecise 0 / 1).
PRECISIONS = {"high_precision": 0, "high_performance": 1}


@dataclasses.dataclass(frozen=True)
class AttentionOptions:
    """What a call asks of the V2 ops beyond the V1 problem (acl_fa/ops/forward.py Problem).

    pre_tokens / next_tokens hold the band with causal folded in (causal alone is
    (UNBOUNDED, 0), which the V1 op runs as is_causal). The mask itself is not held, only its
    device shape; the uint8 array travels beside the options."""

    pre_tokens: int = UNBOUNDED
    next_tokens: int = UNBOUNDED
    keep_prob: float = 1.0                 # float32 value as a Python float
    seed: int = 0                          # uint64
    offset: int = 0                        # uint64
    mask_shape: Optional[tuple] = None     # rank-4 device mask shape [mb, mn, mq, Skv], or None
    cu_seqlens_q: Optional[tuple] = None   # cumulative ends WITHOUT the leading 0 (aclnn form), or None
    cu_seqlens_kv: Optional[tuple] = None
    return_dropout_mask: bool = False
    softcap: float = 0.0                   # > 0: scores capped (FlashAttentionV3); 0 = off
    precision: str = "high_precision"      # a key of PRECISIONS; "high_performance" runs FlashAttentionV4
    alibi: bool = False                    # alibi_slopes given (FlashAttentionV5; float32 [B, N] beside)
    sinks: bool = False                    # sinks given (FlashAttentionV5; float32 [N] beside)
    bias_shape: Optional[tuple] = None     # a float attn_mask's rank-4 shape [bb, bn, bq, Skv] (FlashAttentionV5)

    @property
    def is_default(self) -> bool:
        """True when the V1 op computes the call: at most causal, no mask, no dropout, no
        varlen, no mask output, no soft-capping."""
        return (self.pre_tokens == UNBOUNDED and self.next_tokens in (UNBOUNDED, 0) and self.keep_prob == 1.0
                and self.mask_shape is None and self.cu_seqlens_q is None and self.cu_seqlens_kv is None
                and not self.return_dropout_mask and self.softcap == 0.0 and self.precision == "high_precision"
                and not self.has_score_mods)

    @property
    def has_score_mods(self) -> bool:
        """ALiBi, sinks or a float mask: the call runs FlashAttentionV5."""
        return self.alibi or self.sinks or self.bias_shape is not None

    @property
    def is_causal(self) -> bool:
        """The band is exactly causal (what the V1 op's is_causal computes)."""
        return self.pre_tokens == UNBOUNDED and self.next_tokens == 0

    @property
    def has_dropout(self) -> bool:
        return self.keep_prob < 1.0

    @property
    def dropout_threshold(self) -> int:
        """The 8-bit Philox draw (in [0, 256]) an element needs to be kept (acl_fa/spec/philox.py)."""
        return philox.dropout_threshold(self.keep_prob)

    @property
    def is_varlen(self) -> bool:
        return self.cu_seqlens_q is not None


_MASK_CONVENTION = "True = the query may attend to the key"


def device_mask(attn_mask, batch: int, heads: int, seq_q: int, seq_kv: int) -> np.ndarray:
    """The uint8 rank-4 device form of a bool `attn_mask` (True = may attend): 1 = masked out
    (aclnn atten_mask), shape [mb, mn, mq, Skv] with mb in {1, B}, mn in {1, N}, mq in {1, Sq}.

    The mask keeps its given shape: lower ranks gain leading 1s as a view, the inversion
    (np.logical_not) touches only its own elements, nothing is broadcast to [B, N, Sq, Skv]."""
    if isinstance(attn_mask, np.ma.MaskedArray):
        raise InvalidTypeError("attn_mask is a numpy.ma.MaskedArray; pass a plain bool array "
                               f"({_MASK_CONVENTION})")
    if isinstance(attn_mask, (str, bytes)):
        raise InvalidTypeError(f"attn_mask must be a bool numpy array ({_MASK_CONVENTION}), got {type(attn_mask).__name__}")
    try:
        mask = np.asarray(attn_mask)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the caller's type error
        raise InvalidTypeError(f"attn_mask cannot be converted to a numpy array: {exc}") from exc
    if mask.dtype != np.bool_:
        raise InvalidTypeError(
            f"attn_mask must be a bool array ({_MASK_CONVENTION}), got dtype {mask.dtype}; pass a bool array: "
            "mask.astype(bool) if nonzero means attend, or mask == 0 if it follows aclnn's atten_mask "
            "convention (1 = masked out); an additive float mask (0 / -inf, added to the scores) is a float "
            "array of the query's dtype")
    shape = _mask_shape(mask.shape, (batch, heads, seq_q, seq_kv))
    return np.logical_not(mask).view(np.uint8).reshape(shape)


def _mask_shape(given: tuple, target: tuple) -> tuple:
    """attn_mask's rank-4 device shape (leading 1s added) for a mask of shape `given` broadcast
    against target = (B, N, Sq, Skv): each dim 1 or the full size, the last Skv."""
    if len(given) > 4 or len(given) < 1:
        raise InvalidArgumentError(
            f"attn_mask shape {given} does not broadcast to [B, N, Sq, Skv] = {list(target)} (rank must be 1 to 4)")
    shape = (1,) * (4 - len(given)) + tuple(given)
    for size, full in zip(shape, target):
        if size not in (1, full):
            raise InvalidArgumentError(f"attn_mask shape {given} does not broadcast to [B, N, Sq, Skv] = {list(target)}")
    if shape[3] != target[3]:
        raise InvalidArgumentError(
            f"attn_mask shape {given}: its last dimension must be Skv={target[3]} (the device reads a mask "
            f"row per key block); a mask equal for every key hides or shows whole query rows -- "
            f"pass it with Skv columns")
    return shape


@dataclasses.dataclass(frozen=True, eq=False)
class ScoreModArrays:
    """The arrays of FlashAttentionV5's score modifiers that travel beside AttentionOptions (None when
    off): alibi float32 [B, N], sinks float32 [N], bias (a float attn_mask) in q's dtype, rank 4."""

    alibi: Optional[np.ndarray] = None
    sinks: Optional[np.ndarray] = None
    bias: Optional[np.ndarray] = None


NO_SCORE_MODS = ScoreModArrays()


def split_attn_mask(attn_mask) -> tuple:
    """(bool mask or None, float mask or None): a floating-point attn_mask is additive (torch SDPA's
    float mask, FlashAttentionV5), anything else goes to the bool mask's validation."""
    if attn_mask is None or isinstance(attn_mask, (str, bytes, np.ma.MaskedArray)):
        return attn_mask, None
    dtype = getattr(attn_mask, "dtype", None)
    if dtype is not None and (np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"):
        return None, attn_mask
    return attn_mask, None


def float_mask_value(mask, dtype, batch: int, heads: int, seq_q: int, seq_kv: int) -> np.ndarray:
    """A float attn_mask validated: q's dtype (as torch SDPA requires of a float mask), no NaN and no
    +inf (-inf hides a key), a shape that broadcasts to [B, N, Sq, Skv] with Skv columns -> the
    rank-4 array the device reads at its own shape (a view, never expanded)."""
    array = np.asarray(mask)
    if array.dtype != np.dtype(dtype):
        raise InvalidTypeError(f"a float attn_mask must have the query's dtype {np.dtype(dtype).name} (it is added to "
                               f"the scores, as torch SDPA's float mask), got {array.dtype}; pass "
                               f"mask.astype(q.dtype), or a bool mask ({_MASK_CONVENTION})")
    shape = _mask_shape(array.shape, (batch, heads, seq_q, seq_kv))
    wide = array.astype(np.float32)
    if np.isnan(wide).any() or np.isposinf(wide).any():
        bad = np.flatnonzero(np.isnan(wide.ravel()) | np.isposinf(wide.ravel()))[0]
        raise InvalidArgumentError(f"a float attn_mask must hold finite values or -inf (hides a key); element {bad} "
                                   f"is {wide.ravel()[bad]!r}")
    return np.ascontiguousarray(array).reshape(shape)


def score_mod_options(options: "AttentionOptions", *, batch: int, heads: int, seq_q: int, seq_kv: int, dtype,
                      alibi_slopes=None, sinks=None, float_mask=None) -> tuple:
    """(options with the modifiers' fields, ScoreModArrays) for a call's alibi_slopes ([N] or [B, N];
    varlen: B = the sequences), sinks ([N]) and float attn_mask (see float_mask_value), each
    validated before any device work (spec/score_mods.py)."""
    if alibi_slopes is None and sinks is None and float_mask is None:
        return options, NO_SCORE_MODS
    slopes = alibi_slopes_value(alibi_slopes, batch=batch, num_heads=heads)
    logits = sinks_value(sinks, num_heads=heads)
    bias = None if float_mask is None else float_mask_value(float_mask, dtype, batch, heads, seq_q, seq_kv)
    options = dataclasses.replace(options, alibi=slopes is not None, sinks=logits is not None,
                                  bias_shape=None if bias is None else tuple(bias.shape))
    return options, ScoreModArrays(slopes, logits, bias)


def dropout_keep_prob(dropout_p) -> float:
    """keep_prob = 1 - dropout_p as a float32 value (a Python float); dropout_p real in [0, 1)."""
    if isinstance(dropout_p, (bool, np.bool_)) or not isinstance(dropout_p, numbers.Real):
        raise InvalidTypeError(f"dropout_p must be a real number in [0, 1), got {dropout_p!r}")
    p = float(dropout_p)
    if not (0.0 <= p < 1.0):  # also refuses NaN
        raise InvalidArgumentError(f"dropout_p must be in [0, 1) (the probability of dropping), got {dropout_p!r}")
    return float(np.float32(1.0 - p))


def _uint64(name: str, value) -> int:
    value = int_argument(name, value)
    if not 0 <= value <= UINT64_MAX:
        raise InvalidArgumentError(f"{name} must be in [0, 2**64 - 1] (a uint64), got {value}")
    return value


def dropout_rng(keep_prob: float, seed, offset) -> tuple:
    """(seed, offset) validated as uint64. seed None draws a fresh one from the OS's entropy
    (secrets) when dropout is on -- the caller returns it so the backward can reuse it --
    and is 0 when it is off (the generator is then never run)."""
    offset = _uint64("offset", offset)
    if seed is None:
        seed = secrets.randbits(64) if keep_prob < 1.0 else 0
    return _uint64("seed", seed), offset


def cu_seqlens_ends(name: str, cu_seqlens, total_tokens: int) -> tuple:
    """flash-attn's cumulative sequence starts [0, s1, s1+s2, ..., T] -> aclnn's cumulative ends
    without the leading 0 (s1, s1+s2, ..., T). int32/int64, 1-D, >= 2 entries, starting at 0,
    non-decreasing, ending at `total_tokens` (the tokens of the tensor it indexes)."""
    if isinstance(cu_seqlens, (str, bytes)) or cu_seqlens is None:
        raise InvalidTypeError(f"{name} must be an int32/int64 numpy array, got {type(cu_seqlens).__name__}")
    arr = np.asarray(cu_seqlens)
    if arr.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise InvalidTypeError(f"{name} must be an int32 or int64 array, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size < 2:
        raise InvalidArgumentError(
            f"{name} must be 1-D with at least 2 entries (0 and the token count), got shape {arr.shape}")
    if arr[0] != 0:
        raise InvalidArgumentError(f"{name} must start at 0, got {int(arr[0])}")
    steps = np.diff(arr.astype(np.int64))
    if (steps < 0).any():
        at = int(np.argmax(steps < 0))
        raise InvalidArgumentError(
            f"{name} must be non-decreasing, got {int(arr[at])} then {int(arr[at + 1])} at index {at + 1}")
    if int(arr[-1]) != total_tokens:
        raise InvalidArgumentError(f"{name} must end at the token count {total_tokens}, got {int(arr[-1])}")
    return tuple(int(x) for x in arr[1:])


def check_max_seqlen(name: str, max_seqlen, ends: tuple) -> int:
    """max_seqlen validated against the sequence lengths of `ends` (aclnn form); None = the
    longest sequence."""
    lengths = np.diff(np.asarray((0,) + tuple(ends), dtype=np.int64))
    longest = int(lengths.max()) if lengths.size else 0
    if max_seqlen is None:
        return longest
    value = int_argument(name, max_seqlen)
    if value < longest:
        at = int(np.argmax(lengths))
        raise InvalidArgumentError(f"{name}={value} is smaller than sequence {at}, which has {longest} tokens")
    return value


def softcap_value(softcap) -> float:
    """softcap validated: a real number, finite and >= 0 (0 = off). Returned as a Python float."""
    if isinstance(softcap, (bool, np.bool_)) or not isinstance(softcap, numbers.Real):
        raise InvalidTypeError(f"softcap must be a real number (0 = off), got {softcap!r}")
    value = float(softcap)
    if not (0.0 <= value <= _FLOAT32_MAX):  # also refuses NaN; the op's attr is a float32
        raise InvalidArgumentError(f"softcap must be a finite number >= 0 (0 = off), got {softcap!r}")
    return value


def precision_value(precision) -> str:
    """precision validated: one of PRECISIONS' names."""
    if not isinstance(precision, str):
        raise InvalidTypeError(f"precision must be a str, one of {', '.join(PRECISIONS)}; got {precision!r}")
    if precision not in PRECISIONS:
        raise InvalidArgumentError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    return precision


def check_precision_dtype(options: "AttentionOptions", dtype_name: str):
    """The high-performance precision rounds S to the input dtype: float16 and bfloat16 only."""
    if options.precision == "high_performance" and dtype_name not in ("float16", "bfloat16"):
        raise InvalidArgumentError(f"precision='high_performance' needs float16 or bfloat16 inputs (S is rounded "
                                   f"to the input dtype); got {dtype_name}, which runs at high precision only")


def build_options(*, scores: tuple, causal: bool = False, window=None, attn_mask=None, dropout_p=0.0, seed=None,
                  offset=0, return_dropout_mask=False, cu_seqlens_q: Optional[tuple] = None,
                  cu_seqlens_kv: Optional[tuple] = None, softcap=0.0, precision="high_precision") -> tuple:
    """Validates the V2 keyword arguments of a call; returns (AttentionOptions, mask_u8 or None).

    scores: (batch, heads, seq_q, seq_kv), the score grid a mask is broadcast against.
    cu_seqlens_* are already in aclnn form (cu_seqlens_ends). For varlen, batch is the number
    of sequences and seq_q / seq_kv the longest ones."""
    if (window is None and attn_mask is None and seed is None and return_dropout_mask is False
            and cu_seqlens_q is None and cu_seqlens_kv is None and (causal is True or causal is False)
            and type(offset) is int and offset == 0 and type(dropout_p) in (float, int) and dropout_p == 0
            and type(softcap) in (float, int) and softcap == 0 and precision == "high_precision"):
        # None of the V2 arguments (the common call): the options depend on causal alone; the
        # full validation below made them once.
        plain = _PLAIN_OPTIONS.get(causal)
        if plain is None:
            plain = _PLAIN_OPTIONS[causal] = _validated_options(scores, causal, None, None, 0.0, None, 0, False,
                                                                None, None)
        return plain
    options, mask = _validated_options(scores, causal, window, attn_mask, dropout_p, seed, offset,
                                       return_dropout_mask, cu_seqlens_q, cu_seqlens_kv)
    cap = softcap_value(softcap)
    precision = precision_value(precision)
    if cap or precision != "high_precision":
        options = dataclasses.replace(options, softcap=cap, precision=precision)
    return options, mask


_PLAIN_OPTIONS: dict = {}  # causal -> build_options' (options, None) of a call without V2 arguments


def _validated_options(scores, causal, window, attn_mask, dropout_p, seed, offset, return_dropout_mask,
                       cu_seqlens_q, cu_seqlens_kv) -> tuple:
    if not isinstance(causal, (bool, np.bool_)):
        raise InvalidTypeError(f"causal must be a bool, got {causal!r}")
    if not isinstance(return_dropout_mask, (bool, np.bool_)):
        raise InvalidTypeError(f"return_dropout_mask must be a bool, got {return_dropout_mask!r}")
    pre, nxt = window_band(window, bool(causal))
    mask = None if attn_mask is None else device_mask(attn_mask, *scores)
    keep_prob = dropout_keep_prob(dropout_p)
    seed, offset = dropout_rng(keep_prob, seed, offset)
    options = AttentionOptions(pre_tokens=pre, next_tokens=nxt, keep_prob=keep_prob, seed=seed, offset=offset,
                               mask_shape=None if mask is None else tuple(mask.shape),
                               cu_seqlens_q=cu_seqlens_q, cu_seqlens_kv=cu_seqlens_kv,
                               return_dropout_mask=bool(return_dropout_mask))
    return options, mask




def build_forward_options(*, scores: tuple, dtype, attn_mask=None, alibi_slopes=None, sinks=None, **kwargs) -> tuple:
    """build_options for a forward call that may carry score modifiers: attn_mask bool (the V2 mask)
    or float (added to the scores), alibi_slopes, sinks; the other keyword arguments as
    build_options. Returns (AttentionOptions, mask_u8 or None, ScoreModArrays)."""
    bool_mask, float_mask = split_attn_mask(attn_mask)
    options, mask = build_options(scores=scores, attn_mask=bool_mask, **kwargs)
    options, mods = score_mod_options(options, batch=scores[0], heads=scores[1], seq_q=scores[2], seq_kv=scores[3],
                                      dtype=dtype, alibi_slopes=alibi_slopes, sinks=sinks, float_mask=float_mask)
    return options, mask, mods
