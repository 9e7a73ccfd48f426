"""The problem every attention op, plan, job and report starts from: ``Problem`` (the validated
sizes, dtype, layout, causal, scale and blocks of one call), its validation from arrays
(``make_problem``) or sizes (``problem_from_sizes``). Host only: no device work, no op.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from typing import NamedTuple

import ml_dtypes
import numpy as np

from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .layouts import LAYOUT_RANK, LAYOUTS, shape_of, split_dims

__all__ = ["Problem", "make_problem", "problem_from_sizes", "sized_problem", "with_lengths", "as_array", "resolve_scale",
           "SUPPORTED_DTYPES", "padded_head_dim", "device_shape"]

# float32 runs with float32 operands on the cube where the chip's cube takes them (Atlas A2/A3);
# the tiling refuses it, naming the chip, elsewhere.
SUPPORTED_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))


_DTYPE_NAMES = {np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16",
                np.dtype(np.float32): "float32"}


MAX_HEAD_DIM = 256


HEAD_DIM_MULTIPLE = 16  # the cube's K/N granule for 16-bit inputs: the kernel's D is a multiple of it


BLOCK_MULTIPLE = 16


@dataclasses.dataclass(frozen=True)
class Problem:
    """One FlashAttention call, validated. Sizes as in docs/architecture.md#sizes-and-names (B, N, Nkv, Sq, Skv, D)."""

    batch: int
    num_heads: int
    num_kv_heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: np.dtype
    layout: str
    causal: bool
    scale: float
    block_m: int  # 0 = chosen by the tiling
    block_n: int
    q_shape: tuple
    kv_shape: tuple
    # The caller's head dim when it is not a multiple of HEAD_DIM_MULTIPLE: head_dim is then the
    # next multiple (the kernel's D), q_shape / kv_shape the device's zero-padded shapes, and the
    # scale 1/sqrt(given) by default (docs/compat.md "Any head dim"). 0 = not padded.
    given_head_dim: int = 0

    @property
    def padded(self) -> bool:
        """Whether the caller's head dim is padded up to head_dim on the device."""
        return bool(self.given_head_dim) and self.given_head_dim != self.head_dim

    @property
    def user_head_dim(self) -> int:
        """The caller's head dim (head_dim when not padded)."""
        return self.given_head_dim or self.head_dim

    # Problems key the per-Session caches on every call: hash the fields once.
    def __hash__(self) -> int:
        return self._field_hash

    @functools.cached_property
    def _field_hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    @property
    def score_grid(self) -> tuple:
        """(batch, num_heads, seq_q, seq_kv): the grid of scores a mask is broadcast against."""
        return (self.batch, self.num_heads, self.seq_q, self.seq_kv)

    @property
    def lse_shape(self) -> tuple:
        return (self.batch, self.num_heads, self.seq_q)

    @property
    def dtype_name(self) -> str:
        """float16, bfloat16 or float32 (an unchecked problem's other dtype: as given)."""
        return _DTYPE_NAMES.get(self.dtype, str(self.dtype))

    def visible_pairs(self) -> int:
        """(query, key) pairs that take part, per head: Sq*Skv, or fewer when causal."""
        if not self.causal:
            return self.seq_q * self.seq_kv
        # row i sees min(Skv, max(0, i + Skv - Sq + 1)) keys
        rows = np.arange(self.seq_q, dtype=np.int64)
        return int(np.clip(rows + (self.seq_kv - self.seq_q) + 1, 0, self.seq_kv).sum())

    def flops(self) -> int:
        """Useful floating-point operations: 2 matmuls x 2 FLOP per MAC over visible pairs (of the
        caller's head dim: a padded head dim's zero columns are not useful work)."""
        return 4 * self.batch * self.num_heads * self.user_head_dim * self.visible_pairs()


# The C types the options cross into (aclnnFlashAttentionGetWorkspaceSize's int64_t attributes;
# the tiling's uint32_t blocks and sizes), so no value reaches cffi that it cannot convert.
MAX_BLOCK = 2**32 - 1


MAX_HEADS = 2**32 - 1


def as_array(name: str, x):
    """`x` as a numpy array, or `x` itself when it is a DeviceArray (used in place)."""
    if type(x) is np.ndarray:  # the common case, first
        return x
    if isinstance(x, DeviceArray):
        return x
    if isinstance(x, (str, bytes)) or x is None:
        raise InvalidTypeError(f"{name} must be a numpy array, got {type(x).__name__}")
    if isinstance(x, np.ma.MaskedArray):
        raise InvalidTypeError(f"{name} is a numpy.ma.MaskedArray: its mask would be ignored; pass a plain "
                               "array (np.ma.getdata, or np.ma.filled with the value masked entries should take)")
    try:
        return np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the caller's type error
        raise InvalidTypeError(f"{name} cannot be converted to a numpy array: {exc}") from exc


class _ArrayMeta(NamedTuple):
    """What validation needs of an input array (hashable, so validated problems are cached)."""

    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


def resolve_scale(scale, head_dim: int) -> float:
    """The softmax scale as a float: 1 / sqrt(head_dim) when None, else a finite real > 0."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise InvalidTypeError(f"scale must be a real number, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise InvalidArgumentError(f"scale must be finite and > 0, got {scale}")
    return scale


def _check_int(name: str, value, *, minimum: int, maximum: int, allow_none: bool = True) -> int:
    if value is None and allow_none:
        return 0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise InvalidArgumentError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def _typed(options: tuple) -> tuple:
    """The cache key of the options: the values and their types, since 1 == 1.0 == True hash
    alike and validation must see the value the caller passed (causal=1 is refused, causal=True
    not)."""
    return options, tuple(map(type, options))


def _metas_key(arrays) -> tuple:
    """The cache key of the arrays' metadata, flat: (shape, dtype) of each array in turn."""
    return tuple([meta for a in arrays for meta in (a.shape, a.dtype)])


def make_problem(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                 num_kv_heads=None, block_m=None, block_n=None, pad_head_dim=False) -> tuple:
    """Validates a call; returns (Problem, q, k, v) with the arrays as numpy arrays.

    Raises InvalidTypeError / InvalidArgumentError naming the argument and the limit. The
    validation depends only on shapes, dtypes and options, and repeated calls with the same
    ones (the common case) reuse the validated Problem. pad_head_dim=True (the ops whose
    op-call path pads rows: forward, varlen, backward) takes any head dim 1..MAX_HEAD_DIM and
    pads it to the next multiple of HEAD_DIM_MULTIPLE (Problem.given_head_dim); otherwise the
    head dim must be such a multiple.
    """
    arrays = (as_array("q", q), as_array("k", k), as_array("v", v))
    metas = _metas_key(arrays)
    options = _typed((causal, scale, layout, num_heads, num_kv_heads, block_m, block_n))
    try:
        problem = _validated_problem(metas, options, pad_head_dim)
    except TypeError as exc:
        if isinstance(exc, InvalidTypeError):
            raise
        problem = _validated_problem.__wrapped__(metas, options, pad_head_dim)  # an unhashable option
    return (problem, *arrays)


def problem_from_sizes(*, seq_q, seq_kv=None, batch=1, num_heads=32, num_kv_heads=None, head_dim=128,
                       dtype="float16", layout="BNSD", causal=False, scale=None, block_m=None,
                       block_n=None) -> "Problem":
    """The validated Problem of these sizes (as make_problem would give for arrays of them)."""
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype in ("bfloat16", "bf16") else np.dtype(dtype)
    seq_kv = seq_q if seq_kv is None else seq_kv
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    layout = layout.upper() if isinstance(layout, str) else layout
    q_shape = shape_of(layout, batch, num_heads, seq_q, head_dim)
    kv_shape = shape_of(layout, batch, num_kv_heads, seq_kv, head_dim)
    metas = (q_shape, np_dtype, kv_shape, np_dtype, kv_shape, np_dtype)
    options = (causal, scale, layout, num_heads, num_kv_heads, block_m or None, block_n or None)
    return _validated_problem(metas, _typed(options))


def padded_head_dim(d: int) -> int:
    """The kernel's head dim for a caller's head dim d: the next multiple of HEAD_DIM_MULTIPLE."""
    return -(-d // HEAD_DIM_MULTIPLE) * HEAD_DIM_MULTIPLE


def device_shape(shape: tuple, problem: "Problem") -> tuple:
    """An array shape of the caller's (last dim a whole number of the caller's head-dim rows:
    D, or N*D in layout BSH) as the device holds it, each row padded to problem.head_dim."""
    if not problem.padded:
        return tuple(shape)
    return _pad_rows(shape, problem.given_head_dim, problem.head_dim)


def _pad_rows(shape: tuple, given: int, padded: int) -> tuple:
    return tuple(shape[:-1]) + (shape[-1] // given * padded,)


@functools.lru_cache(maxsize=64)
def _validated_problem(metas: tuple, options: tuple, pad_head_dim: bool = False) -> "Problem":
    q, k, v = (_ArrayMeta(metas[i], metas[i + 1]) for i in (0, 2, 4))
    causal, scale, layout, num_heads, num_kv_heads, block_m, block_n = options[0]
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise InvalidArgumentError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    layout = layout.upper()
    if not isinstance(causal, (bool, np.bool_)):
        raise InvalidTypeError(f"causal must be a bool, got {causal!r}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype == np.float64:
            raise InvalidTypeError(
                f"{name} has dtype float64, which the NPU cannot compute in; pass {name}.astype(np.float32) "
                "(supported: float16, bfloat16 (ml_dtypes.bfloat16), float32)")
        if x.dtype not in SUPPORTED_DTYPES:
            raise InvalidTypeError(
                f"{name} has dtype {x.dtype}; supported: float16, bfloat16 (ml_dtypes.bfloat16), float32")
    if not (q.dtype == k.dtype == v.dtype):
        raise InvalidTypeError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    rank = LAYOUT_RANK[layout]
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.ndim != rank:
            raise InvalidArgumentError(
                f"{name} must have rank {rank} for layout {layout}, got shape {x.shape}")
        if 0 in x.shape:
            raise InvalidArgumentError(f"{name} has an empty dimension {x.shape}; every size must be >= 1")
    if k.shape != v.shape:
        raise InvalidArgumentError(f"k {k.shape} and v {v.shape} must have the same shape")
    n_attr = _check_int("num_heads", num_heads, minimum=1, maximum=MAX_HEADS)
    nkv_attr = _check_int("num_kv_heads", num_kv_heads, minimum=1, maximum=MAX_HEADS)
    if layout == "BSH" and not n_attr:
        raise InvalidArgumentError("layout BSH needs num_heads (the hidden size cannot tell it)")
    b, n, sq, d = split_dims(q.shape, layout, n_attr or None)
    if layout == "BSH":
        if k.shape[2] % d:
            raise InvalidArgumentError(
                f"k hidden size {k.shape[2]} is not a multiple of the head dim {d} (= {q.shape[2]} / num_heads)")
        bk, nkv, skv, dk = k.shape[0], k.shape[2] // d, k.shape[1], d
        if nkv_attr and nkv_attr != nkv:
            raise InvalidArgumentError(f"num_kv_heads={nkv_attr} does not match k hidden size {k.shape[2]} / head dim {d}")
    else:
        bk, nkv, skv, dk = split_dims(k.shape, layout)
        if n_attr and n_attr != n:
            raise InvalidArgumentError(f"num_heads={n_attr} does not match q {q.shape} (layout {layout})")
        if nkv_attr and nkv_attr != nkv:
            raise InvalidArgumentError(f"num_kv_heads={nkv_attr} does not match k {k.shape} (layout {layout})")
    if bk != b:
        raise InvalidArgumentError(f"batch differs: q {q.shape} has {b}, k {k.shape} has {bk}")
    if dk != d:
        raise InvalidArgumentError(f"head dim differs: q {q.shape} has {d}, k {k.shape} has {dk}")
    if n % nkv:
        raise InvalidArgumentError(f"query heads {n} must be a multiple of key/value heads {nkv}")
    if pad_head_dim:
        if d > MAX_HEAD_DIM:
            raise InvalidArgumentError(f"head dim D={d} must be <= {MAX_HEAD_DIM}")
    elif d % HEAD_DIM_MULTIPLE or d > MAX_HEAD_DIM:
        raise InvalidArgumentError(
            f"head dim D={d} must be a multiple of {HEAD_DIM_MULTIPLE} and <= {MAX_HEAD_DIM}")
    scale = resolve_scale(scale, d)
    blocks = []
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        value = _check_int(name, value, minimum=BLOCK_MULTIPLE, maximum=MAX_BLOCK)
        if value % BLOCK_MULTIPLE:
            raise InvalidArgumentError(f"{name}={value} must be a multiple of {BLOCK_MULTIPLE}")
        blocks.append(value)
    problem = Problem(b, n, nkv, sq, skv, d, q.dtype, layout, bool(causal), scale, blocks[0], blocks[1],
                      tuple(q.shape), tuple(k.shape))
    if d % HEAD_DIM_MULTIPLE == 0:
        return problem
    # Any head dim: the device holds each head's row zero-padded to the cube's multiple; the
    # scale above stays that of the caller's D.
    dp = padded_head_dim(d)
    return dataclasses.replace(problem, head_dim=dp, given_head_dim=d, q_shape=_pad_rows(q.shape, d, dp),
                               kv_shape=_pad_rows(k.shape, d, dp))


def with_lengths(problem: Problem, seq_q: int, seq_kv: int = None) -> Problem:
    """The validated problem with these sequence lengths (Skv = Sq when None) and everything else
    of `problem` (a bench's or sweep's rows from one template)."""
    return problem_from_sizes(seq_q=seq_q, seq_kv=seq_kv, batch=problem.batch, num_heads=problem.num_heads,
                              num_kv_heads=problem.num_kv_heads, head_dim=problem.head_dim, dtype=problem.dtype_name,
                              layout=problem.layout, causal=problem.causal, scale=problem.scale,
                              block_m=problem.block_m, block_n=problem.block_n)


def sized_problem(*, seq_q, seq_kv=None, batch=1, num_heads=1, num_kv_heads=None, head_dim=128, dtype="float16",
                  layout="BNSD", causal=False, block_m=None, block_n=None) -> Problem:
    """These sizes as a Problem, NOT validated: what the plans take, whose tiling policy checks the
    sizes itself and names its own rule (acl-fa plan; PlanError). Ops and jobs use
    problem_from_sizes. Defaults as the plans' (one head); a dtype numpy does not know stays a str."""
    try:
        np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    except TypeError:
        np_dtype = dtype
    seq_kv = seq_q if seq_kv is None else seq_kv
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    shapes = ((), ())
    if layout in LAYOUTS:
        shapes = (shape_of(layout, batch, num_heads, seq_q, head_dim),
                  shape_of(layout, batch, num_kv_heads, seq_kv, head_dim))
    scale = 1.0 / math.sqrt(head_dim) if isinstance(head_dim, numbers.Real) and head_dim > 0 else 0.0
    return Problem(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim, np_dtype, layout, causal, scale,
                   block_m or 0, block_n or 0, *shapes)
