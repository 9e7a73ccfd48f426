"""Decoding against a KV cache: aclnnFlashAttentionDecode of our custom operator.

``flash_attention_with_kvcache(q, k_cache, v_cache, *, cache_seqlens, ...)`` follows
flash-attn's ``flash_attn_with_kvcache``:

- q [B, Sq, N, D], a few query tokens per sequence (Sq 1 .. 16 is the decode case);
- k_cache / v_cache either contiguous [B, S_max, Nkv, D] or paged [num_blocks, block_size, Nkv, D]
  with ``block_table`` [B, max_blocks_per_seq] int32 (key j of sequence b is row j % block_size of
  block block_table[b, j // block_size]); block_size a multiple of 16;
- cache_seqlens: an int or [B] int32, the keys each sequence has in the cache;
- k / v [B, S_new, Nkv, D]: new keys/values written into the cache at positions
  cache_seqlens[b] .. + S_new (in place: a DeviceArray cache on the device, a numpy cache in host
  memory) before attention; attention then sees cache_seqlens + S_new keys. As in flash-attn,
  cache_seqlens itself is not advanced: the caller adds S_new for the next step;
- causal: query token s of a sequence with L keys sees keys j <= s + L - Sq (bottom-right
  aligned); window (left, right): keys s + L - Sq - left .. s + L - Sq + right, -1 = unbounded
  (causal sets right to 0);
- num_splits: 0 lets the kernel split each sequence's keys over all cores (flash-decoding: the
  keys of all (sequence, kv head) groups cut into one equal range per vector core); 1 keeps each
  group on one core; S >= 2 cuts each group's keys into S pieces of equal key chunks (as
  flash-attn's num_splits), spread round-robin over the vector cores and merged by their LSE.
  S is clamped to the vector cores' count (2 per AI Core: more pieces of one group cannot run
  at once; ``acl_fa.plan`` shows the value used) and, per group at run time, to its key chunks
  (a piece holds at least one chunk of up to blockN keys).

- cache_batch_idx [B] (contiguous caches): sequence b uses cache row cache_batch_idx[b];
  cache_leftpad [B]: keys [0, cache_leftpad[b]) are invisible (flash-attn's, docs/decode.md);
- softcap, alibi_slopes [N] / [B, N], sinks [N]: the score modifiers (docs/attention_options.md
  "Score modifiers"), computed in the kernel; with any of them or cache_leftpad the call runs on
  FlashAttentionDecodeV2, else on FlashAttentionDecode;
- more than 255 query rows per kv head ((N / Nkv) x Sq, speculative decoding) run as row groups
  (docs/decode.md);
- an int8 cache (FlashAttentionDecodeV3, docs/int8.md "Int8 KV cache (decode)"): k_cache / v_cache
  int8 with k_scale float32 [Nkv, D] (per channel: k = k_scale[h, c] x k_int8) and v_scale float32
  [B, Nkv, S_max] (contiguous) or [num_blocks, Nkv, block_size] (paged) (per token: v = v_scale x
  v_int8); the kernel reads the cache as int8 and dequantizes on chip. ``acl_fa.quantize_kv_cache``
  makes them from a float cache. k / v appended to it are q's float dtype, quantized with the
  cache's scheme on the way in (keys with k_scale, saturating at +-127; each value token with a new
  scale written into v_scale at its slot).

Returns out [B, Sq, N, D] (and lse float32 [B, N, Sq] with return_lse). Keys past a sequence's
length are never read: unused cache slots may hold anything.

Everything a caller can get wrong is checked on the host before any device work, including the
block table's entries (in range, not repeated within a sequence) for the blocks each sequence
uses; a DeviceArray block table or cache_seqlens is read back for that (a few bytes).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Optional

import ml_dtypes
import numpy as np

from . import kv_quant, opcall
from ..spec.problem import resolve_scale
from ..spec.band import UNBOUNDED, window_band
from ..spec.options import softcap_value
from ..spec.score_mods import alibi_slopes_value, sinks_value
from ..runtime.device_array import DeviceArray, check_device_array
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import Op, OpRunner, default_session
from ..runtime.ffi import ffi
from ..runtime.session import DeviceSession
from ..plan import forward as planmod

__all__ = ["DecodeProblem", "FLASH_ATTENTION_DECODE", "FLASH_ATTENTION_DECODE_V2", "FLASH_ATTENTION_DECODE_V3",
           "flash_attention_with_kvcache",
           "decode_plan_check",
           "write_kv_cache", "contiguous_call", "runner_for", "seqlens_array", "int_array", "leftpad_array"]

SUPPORTED_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
MAX_HEAD_DIM = 256
HEAD_DIM_MULTIPLE = 16
BLOCK_SIZE_MULTIPLE = 16
INT8_HEAD_DIM_MULTIPLE = 32  # FlashAttentionDecodeV3: DataCopyPad puts each int8 row at a 32-B boundary of UB
MAX_SPLITS = 2**31 - 1  # num_splits: an int64 attribute the tiling refuses beyond int32


@dataclasses.dataclass(frozen=True)
class DecodeProblem:
    """One validated call's shapes and options (the device state is cached per problem)."""

    batch: int
    seq_q: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: np.dtype
    num_blocks: int        # contiguous cache: B
    block_size: int        # contiguous cache: S_max
    max_blocks: int        # block table row length (contiguous: 1)
    paged: bool
    scale: float
    pre_tokens: int
    next_tokens: int
    num_splits: int
    softcap: float = 0.0   # FlashAttentionDecodeV2's score modifiers (docs/decode.md)
    alibi: bool = False    # alibi_slopes [B, N] fp32 given
    sinks: bool = False    # sinks [N] fp32 given
    leftpad: bool = False  # cache_leftpad [B] int32 given
    kv_int8: bool = False  # int8 k_cache / v_cache with k_scale / v_scale (FlashAttentionDecodeV3)

    @property
    def needs_v2(self) -> bool:
        return self.softcap > 0 or self.alibi or self.sinks or self.leftpad

    @property
    def q_shape(self) -> tuple:
        return (self.batch, self.seq_q, self.num_heads, self.head_dim)

    @property
    def cache_shape(self) -> tuple:
        return (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)

    @property
    def lse_shape(self) -> tuple:
        return (self.batch, self.num_heads, self.seq_q)

    @property
    def capacity(self) -> int:
        """Keys one sequence can hold."""
        return self.max_blocks * self.block_size

    @property
    def cache_dtype(self) -> np.dtype:
        return kv_quant.INT8 if self.kv_int8 else self.dtype

    @property
    def dtype_name(self) -> str:
        return "bfloat16" if self.dtype == np.dtype(ml_dtypes.bfloat16) else "float16"


class FlashAttentionDecodeOp(Op):
    """aclnnFlashAttentionDecode over the shared op-call path
    (op_host/flash_attention_decode/flash_attention_decode.json)."""

    name = "flash_attention_decode"
    inputs = ("q", "k_cache", "v_cache", "block_table", "seqlens")
    outputs = ("out", "lse")
    workspace_api = "aclnnFlashAttentionDecodeGetWorkspaceSize"
    launch_api = "aclnnFlashAttentionDecode"

    def buffers(self, p: DecodeProblem) -> dict:
        return {"q": (p.q_shape, p.dtype), "k_cache": (p.cache_shape, p.dtype), "v_cache": (p.cache_shape, p.dtype),
                "block_table": ((p.batch, p.max_blocks), np.dtype(np.int32)),
                "seqlens": ((p.batch,), np.dtype(np.int32)),
                "out": (p.q_shape, p.dtype), "lse": (p.lse_shape, np.dtype(np.float32))}

    def workspace_args(self, p: DecodeProblem, tensors: dict) -> tuple:
        return (tensors["q"].handle, tensors["k_cache"].handle, tensors["v_cache"].handle,
                tensors["block_table"].handle, tensors["seqlens"].handle, p.scale, p.block_size,
                p.pre_tokens, p.next_tokens, p.num_splits, tensors["out"].handle, tensors["lse"].handle)

    def check(self, p: DecodeProblem, soc: str) -> None:
        decode_plan_check(p, soc)


FLASH_ATTENTION_DECODE = FlashAttentionDecodeOp()


class FlashAttentionDecodeV2Op(FlashAttentionDecodeOp):
    """aclnnFlashAttentionDecodeV2 (op_host/flash_attention_decode/flash_attention_decode_v2.json): V1's arguments,
    the optional alibi_slopes [B, N] and sinks [N] (fp32) after its inputs and softcap after its
    attrs; for calls with a score modifier (every other call keeps V1)."""

    name = "flash_attention_decode_v2"
    inputs = FlashAttentionDecodeOp.inputs + ("alibi", "sinks", "leftpad")
    workspace_api = "aclnnFlashAttentionDecodeV2GetWorkspaceSize"
    launch_api = "aclnnFlashAttentionDecodeV2"

    def buffers(self, p: DecodeProblem) -> dict:
        roles = super().buffers(p)
        if p.alibi:
            roles["alibi"] = ((p.batch, p.num_heads), np.dtype(np.float32))
        if p.sinks:
            roles["sinks"] = ((p.num_heads,), np.dtype(np.float32))
        if p.leftpad:
            roles["leftpad"] = ((p.batch,), np.dtype(np.int32))
        return roles

    def workspace_args(self, p: DecodeProblem, tensors: dict) -> tuple:
        v1 = super().workspace_args(p, tensors)
        optional = tuple(tensors[role].handle if role in tensors else ffi.NULL
                         for role in ("alibi", "sinks", "leftpad"))
        # V1's: 5 inputs, 5 attrs, 2 outputs; V2 puts its inputs after V1's and softcap after the attrs.
        return v1[:5] + optional + v1[5:10] + (float(p.softcap),) + v1[10:]


FLASH_ATTENTION_DECODE_V2 = FlashAttentionDecodeV2Op()


class FlashAttentionDecodeV3Op(FlashAttentionDecodeV2Op):
    """aclnnFlashAttentionDecodeV3 (declared from its op JSON, flash_attention_decode_v3.json): V2's arguments
    with an int8 k_cache / v_cache, then key_antiquant_scale [Nkv, D] and value_antiquant_scale
    [num_blocks, Nkv, block_size] (float32) after its inputs and key_antiquant_mode (0, per channel)
    and value_antiquant_mode (1, per token) after its attrs; for calls with an int8 cache."""

    name = "flash_attention_decode_v3"
    inputs = FlashAttentionDecodeV2Op.inputs + ("k_scale", "v_scale")
    workspace_api = "aclnnFlashAttentionDecodeV3GetWorkspaceSize"
    launch_api = "aclnnFlashAttentionDecodeV3"
    KEY_PER_CHANNEL = 0    # FusedInferAttentionScore's key_antiquant_mode 0
    VALUE_PER_TOKEN = 1    # its value_antiquant_mode 1

    def buffers(self, p: DecodeProblem) -> dict:
        roles = super().buffers(p)
        roles["k_cache"] = roles["v_cache"] = (p.cache_shape, kv_quant.INT8)
        roles["k_scale"] = ((p.num_kv_heads, p.head_dim), np.dtype(np.float32))
        roles["v_scale"] = ((p.num_blocks, p.num_kv_heads, p.block_size), np.dtype(np.float32))
        return roles

    def workspace_args(self, p: DecodeProblem, tensors: dict) -> tuple:
        v2 = super().workspace_args(p, tensors)
        # V2's: 8 inputs, 6 attrs, 2 outputs; V3 puts its scales after the inputs, its modes after the attrs.
        return (v2[:8] + (tensors["k_scale"].handle, tensors["v_scale"].handle) + v2[8:14]
                + (self.KEY_PER_CHANNEL, self.VALUE_PER_TOKEN) + v2[14:])

    def check(self, p: DecodeProblem, soc: str) -> None:
        decode_plan_check(p, soc, what="an int8 k_cache / v_cache (FlashAttentionDecodeV3)")


FLASH_ATTENTION_DECODE_V3 = FlashAttentionDecodeV3Op()


def op_for(p: DecodeProblem) -> FlashAttentionDecodeOp:
    """V3 for an int8 cache; V2 for a call with a score modifier or left padding; else V1 (the
    entry every other call used before)."""
    if p.kv_int8:
        return FLASH_ATTENTION_DECODE_V3
    return FLASH_ATTENTION_DECODE_V2 if p.needs_v2 else FLASH_ATTENTION_DECODE


def decode_plan_check(p: DecodeProblem, soc: str, what: str = ""):
    """Refuses chips the decode kernel does not run on (it is an AIC:AIV 1:2 kernel: Atlas
    A2/A3) before any device work."""
    try:
        chip = planmod.chip(soc)
    except planmod.PlanError as exc:
        raise InvalidArgumentError(str(exc)) from exc
    if not chip.has_kernel or chip.aiv_num != 2 * chip.aic_num:
        raise InvalidArgumentError(
            f"flash_attention_with_kvcache{' with ' + what if what else ''} runs on Atlas A2/A3 (ascend910b, ascend910_93: separate cube and "
            f"vector cores, 1:2); {chip.name} ({chip.short_soc}) has {chip.aic_num} AIC and {chip.aiv_num} AIV cores")


# ---- validation ------------------------------------------------------------------------------

def _meta(name: str, x):
    """(shape, dtype) of a numpy array or DeviceArray argument."""
    if isinstance(x, DeviceArray):
        return tuple(x.shape), x.dtype
    if x is None or isinstance(x, (str, bytes)):
        raise InvalidTypeError(f"{name} must be a numpy array or a DeviceArray, got {type(x).__name__}")
    try:
        a = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the caller's type error
        raise InvalidTypeError(f"{name} cannot be converted to a numpy array: {exc}") from exc
    return a.shape, a.dtype


def seqlens_array(cache_seqlens, batch: int) -> np.ndarray:
    """cache_seqlens (one integer for every sequence, or an integer array [B]) as int32 [B];
    a value beyond int32 is refused naming cache_seqlens (not numpy's OverflowError)."""
    if isinstance(cache_seqlens, numbers.Integral) and not isinstance(cache_seqlens, bool):
        value = int(cache_seqlens)
        if not _INT32.min <= value <= _INT32.max:
            raise InvalidArgumentError(f"cache_seqlens={value} must fit int32 ({_INT32.min} .. {_INT32.max})")
        cache_seqlens = np.full((batch,), value, np.int32)
    return int_array("cache_seqlens", cache_seqlens, (batch,))


_INT32 = np.iinfo(np.int32)


def int_array(name: str, x, shape: tuple) -> np.ndarray:
    """An int32 host copy of an integer array argument of `shape` (a DeviceArray is read back)."""
    if isinstance(x, DeviceArray):
        x = x.numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise InvalidTypeError(f"{name} must be an integer array (int32), got dtype {a.dtype}")
    if a.shape != shape:
        raise InvalidArgumentError(f"{name} must have shape {shape}, got {a.shape}")
    if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
        raise InvalidArgumentError(f"{name} values must fit int32")
    return a.astype(np.int32)


@functools.lru_cache(maxsize=64)
def _validated(q_meta, cache_metas, table_shape, new_metas, options, indexed: bool = False) -> DecodeProblem:
    """indexed: cache_batch_idx is given (a contiguous cache's batch may then differ from q's)."""
    (q_shape, q_dtype) = q_meta
    (k_shape, k_dtype), (v_shape, v_dtype) = cache_metas
    scale, pre, nxt, num_splits = options
    kv_int8 = k_dtype == kv_quant.INT8 or v_dtype == kv_quant.INT8
    for name, dtype in (("q", q_dtype),) + ((("k_cache", k_dtype), ("v_cache", v_dtype)) if not kv_int8 else ()):
        if dtype not in SUPPORTED_DTYPES:
            raise InvalidTypeError(f"{name} has dtype {dtype}; supported: float16, bfloat16 (ml_dtypes.bfloat16)"
                                   + ("; k_cache / v_cache also int8 (with k_scale, v_scale)" if name != "q" else ""))
    if kv_int8 and not k_dtype == v_dtype == kv_quant.INT8:
        raise InvalidTypeError(f"k_cache and v_cache must both be int8 (an int8 cache) or both q's dtype, got "
                               f"{k_dtype}, {v_dtype}")
    if not kv_int8 and not q_dtype == k_dtype == v_dtype:
        raise InvalidTypeError(f"q, k_cache and v_cache must share one dtype, got {q_dtype}, {k_dtype}, {v_dtype}")
    if len(q_shape) != 4:
        raise InvalidArgumentError(f"q must be [B, Sq, N, D], got shape {q_shape}")
    if len(k_shape) != 4:
        raise InvalidArgumentError(
            f"k_cache must be [B, S_max, Nkv, D] or paged [num_blocks, block_size, Nkv, D], got shape {k_shape}")
    if k_shape != v_shape:
        raise InvalidArgumentError(f"k_cache {k_shape} and v_cache {v_shape} must have the same shape")
    for name, shape in (("q", q_shape), ("k_cache", k_shape)):
        if 0 in shape:
            raise InvalidArgumentError(f"{name} has an empty dimension {shape}; every size must be >= 1")
    batch, seq_q, heads, d = q_shape
    blocks, block_size, kv_heads, dk = k_shape
    if dk != d:
        raise InvalidArgumentError(f"head dim differs: q {q_shape} has {d}, k_cache {k_shape} has {dk}")
    if d % HEAD_DIM_MULTIPLE or d > MAX_HEAD_DIM:
        raise InvalidArgumentError(f"head dim D={d} must be a multiple of {HEAD_DIM_MULTIPLE} and <= {MAX_HEAD_DIM}")
    if kv_int8 and d % INT8_HEAD_DIM_MULTIPLE:  # the kernel copies whole 32-B int8 rows into UB
        raise InvalidArgumentError(f"an int8 k_cache / v_cache needs head dim D a multiple of "
                                   f"{INT8_HEAD_DIM_MULTIPLE}, got {d}")
    if heads % kv_heads:
        raise InvalidArgumentError(f"query heads {heads} must be a multiple of key/value heads {kv_heads}")
    paged = table_shape is not None
    if paged and indexed:
        raise InvalidArgumentError(
            "cache_batch_idx indexes a contiguous cache's batch; with a paged cache the block_table already names "
            "each sequence's blocks (flash-attn refuses the pair too)")
    if paged:
        if len(table_shape) != 2 or table_shape[0] != batch or table_shape[1] < 1:
            raise InvalidArgumentError(f"block_table must be [B={batch}, max_blocks_per_seq >= 1], got {table_shape}")
        if block_size % BLOCK_SIZE_MULTIPLE:
            raise InvalidArgumentError(
                f"block_size (k_cache dim 1) must be a multiple of {BLOCK_SIZE_MULTIPLE}, got {block_size}")
        max_blocks = table_shape[1]
    else:
        if blocks != batch and not indexed:
            raise InvalidArgumentError(
                f"a contiguous k_cache must be [B={batch}, S_max, Nkv, D], got {k_shape} (pass block_table for a "
                "paged cache)")
        max_blocks = 1
    if new_metas is not None:
        (kn_shape, kn_dtype), (vn_shape, vn_dtype) = new_metas
        for name, shape, dtype in (("k", kn_shape, kn_dtype), ("v", vn_shape, vn_dtype)):
            if dtype != q_dtype:
                raise InvalidTypeError(f"{name} must have the dtype of q ({q_dtype}), got {dtype}" + (
                    ": new tokens enter an int8 cache as floats and are quantized with the cache's scheme "
                    "(per-channel k_scale, a new per-token v_scale)" if kv_int8 else ""))
            if len(shape) != 4 or shape[0] != batch or shape[2] != kv_heads or shape[3] != d or shape[1] < 1:
                raise InvalidArgumentError(f"{name} must be [B={batch}, S_new, Nkv={kv_heads}, D={d}], got {shape}")
        if kn_shape != vn_shape:
            raise InvalidArgumentError(f"k {kn_shape} and v {vn_shape} must have the same shape")
    scale = resolve_scale(scale, d)
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral):
        raise InvalidTypeError(f"num_splits must be an integer, got {num_splits!r}")
    if not 0 <= num_splits <= MAX_SPLITS:
        raise InvalidArgumentError(
            f"num_splits must be 0 (auto: each sequence's keys split over all cores), 1 (one core per "
            f"sequence and kv head) or a split count in [2, {MAX_SPLITS}] (clamped to the vector cores), "
            f"got {num_splits}")
    return DecodeProblem(batch, seq_q, heads, kv_heads, d, q_dtype, blocks, block_size, max_blocks, paged, scale,
                         pre, nxt, int(num_splits), kv_int8=kv_int8)


def _with_v2_inputs(p: DecodeProblem, seqlens, softcap: float, alibi_slopes, sinks, cache_leftpad) -> tuple:
    """(problem with FlashAttentionDecodeV2's options, V2's optional inputs alibi, sinks, leftpad
    as the op uploads them, None where not given)."""
    slopes = alibi_slopes_value(alibi_slopes, batch=p.batch, num_heads=p.num_heads)
    logits = sinks_value(sinks, num_heads=p.num_heads)
    leftpad = None if cache_leftpad is None else leftpad_array(cache_leftpad, seqlens)
    if softcap or slopes is not None or logits is not None or leftpad is not None:
        p = dataclasses.replace(p, softcap=softcap, alibi=slopes is not None, sinks=logits is not None,
                                leftpad=leftpad is not None)
    return p, (slopes, logits, leftpad)


def _table_of(p: DecodeProblem, block_table, cache_batch_idx, *, appending: bool) -> np.ndarray:
    """The op's block table: the caller's (paged), cache_batch_idx as one block per sequence, or
    sequence b's own row b (a contiguous cache is the paged one with S_max-key blocks)."""
    if p.paged:
        return int_array("block_table", block_table, (p.batch, p.max_blocks))
    if cache_batch_idx is not None:
        return _cache_rows(p, cache_batch_idx, appending=appending).reshape(p.batch, 1)
    return np.arange(p.batch, dtype=np.int32).reshape(p.batch, 1)


def leftpad_array(cache_leftpad, seqlens: np.ndarray) -> np.ndarray:
    """cache_leftpad as int32 [B], each in [0, cache_seqlens[b]]."""
    leftpad = int_array("cache_leftpad", cache_leftpad, seqlens.shape)
    bad = (leftpad < 0) | (leftpad > seqlens)
    if bad.any():
        b = int(np.argmax(bad))
        raise InvalidArgumentError(f"cache_leftpad[{b}] = {int(leftpad[b])} must be in [0, cache_seqlens[{b}] = "
                                   f"{int(seqlens[b])}]: it marks where sequence {b} starts in its cache")
    return leftpad


def _cache_rows(p: DecodeProblem, cache_batch_idx, *, appending: bool) -> np.ndarray:
    """cache_batch_idx as int32 [B]: each in [0, B_cache), distinct when k/v are appended."""
    rows = int_array("cache_batch_idx", cache_batch_idx, (p.batch,))
    bad = (rows < 0) | (rows >= p.num_blocks)
    if bad.any():
        b = int(np.argmax(bad))
        raise InvalidArgumentError(
            f"cache_batch_idx[{b}] = {int(rows[b])} is out of range: k_cache holds {p.num_blocks} sequences")
    if appending and len(np.unique(rows)) != len(rows):
        values, counts = np.unique(rows, return_counts=True)
        raise InvalidArgumentError(
            f"cache_batch_idx names cache row {int(values[counts > 1][0])} twice while k/v are appended: two "
            "sequences would write the same cache slots")
    return rows


def _check_lengths(p: DecodeProblem, seqlens: np.ndarray, s_new: int, table: Optional[np.ndarray]):
    """Every sequence fits its capacity and (paged) the blocks it uses are valid and distinct."""
    if (seqlens < 0).any():
        b = int(np.argmax(seqlens < 0))
        raise InvalidArgumentError(f"cache_seqlens[{b}] = {int(seqlens[b])} must be >= 0")
    total = seqlens.astype(np.int64) + s_new
    over = total > p.capacity
    if over.any():
        b = int(np.argmax(over))
        what = "cache_seqlens + k's new tokens" if s_new else "cache_seqlens"
        reach = (f"the block table's reach ({p.max_blocks} blocks x {p.block_size})" if p.paged
                 else f"the cache capacity S_max={p.block_size}")
        raise InvalidArgumentError(f"{what} of sequence {b} = {int(total[b])} exceeds {reach}")
    if table is None:
        return
    for b in range(p.batch):
        used = table[b, :-(-int(total[b]) // p.block_size)] if total[b] else table[b, :0]
        bad = (used < 0) | (used >= p.num_blocks)
        if bad.any():
            j = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"block_table[{b}, {j}] = {int(used[j])} is out of range: the cache has {p.num_blocks} blocks")
        if len(np.unique(used)) != len(used):
            values, counts = np.unique(used, return_counts=True)
            raise InvalidArgumentError(
                f"block_table[{b}] uses block {int(values[counts > 1][0])} twice within the sequence")


# ---- the call --------------------------------------------------------------------------------

def runner_for(session: DeviceSession) -> OpRunner:
    return opcall.runner_for(session, FLASH_ATTENTION_DECODE)


def flash_attention_with_kvcache(q, k_cache, v_cache, *, cache_seqlens, block_table=None, k=None, v=None,
                                 causal=True, window=None, scale=None, num_splits=0, return_lse=False,
                                 backend=None, device=None, session=None, softcap=0.0, cache_batch_idx=None,
                                 alibi_slopes=None, sinks=None, cache_leftpad=None, k_scale=None, v_scale=None):
    """Attention of q against a KV cache (see the module docstring).

    k_scale / v_scale: an int8 cache's scales (the module docstring, docs/int8.md).

    Score modifiers (docs/attention_options.md "Score modifiers"; FlashAttentionDecodeV2, computed in
    the kernel): softcap > 0 caps the scaled scores, softcap * tanh(scale * q.k / softcap);
    alibi_slopes [N] or [B, N] (float32) adds -slope * |s + L - Sq - j| to query token s's score of
    key j (L the sequence's keys, bottom-right aligned as the causal mask); sinks [N] (float32) is a
    per-head logit in every row's softmax denominator with no value (a row that sees no key gives 0
    and LSE = sink).

    cache_batch_idx (int [B], contiguous caches only): sequence b uses row cache_batch_idx[b] of
    k_cache / v_cache [B_cache, S_max, Nkv, D] (B_cache may differ from B), as flash-attn's. It is
    the kernel's own addressing: a contiguous cache is the paged one with one S_max-key block per
    row, so the index becomes the sequence's block-table entry (no copy). Each index must be in
    [0, B_cache); with k/v appended the indices must also be distinct (two sequences appending
    into one row would race; flash-attn leaves that result undefined).

    cache_leftpad (int [B], flash-attn's): keys [0, cache_leftpad[b]) of sequence b are invisible;
    cache_seqlens[b] stays the end index (the diagonal, windows and ALiBi distances count from the
    sequence's end, so they are those of the unpadded call). In the kernel (FlashAttentionDecodeV2:
    the first visible key of the sequence, whose chunks before it are never read); each value in
    [0, cache_seqlens[b]]."""
    softcap = softcap_value(softcap)
    if (k is None) != (v is None):
        raise InvalidArgumentError("k and v must be given together (new keys and values to append)")
    # Types before the validated-problem cache: 1, 1.0 and True hash alike.
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)):
        raise InvalidTypeError(f"scale must be a real number, got {scale!r}")
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral):
        raise InvalidTypeError(f"num_splits must be an integer, got {num_splits!r}")
    if not isinstance(return_lse, (bool, np.bool_)):
        raise InvalidTypeError(f"return_lse must be a bool, got {return_lse!r}")
    scale = None if scale is None else float(scale)
    pre, nxt = window_band(window, causal)
    q_meta = _meta("q", q)
    cache_metas = (_meta("k_cache", k_cache), _meta("v_cache", v_cache))
    table_shape = None if block_table is None else _meta("block_table", block_table)[0]
    new_metas = None if k is None else (_meta("k", k), _meta("v", v))
    problem = _validated(q_meta, cache_metas, table_shape, new_metas, (scale, pre, nxt, int(num_splits)),
                         cache_batch_idx is not None)
    seqlens = seqlens_array(cache_seqlens, problem.batch)
    problem, v2_inputs = _with_v2_inputs(problem, seqlens, softcap, alibi_slopes, sinks, cache_leftpad)
    table = _table_of(problem, block_table, cache_batch_idx, appending=k is not None)
    s_new = 0 if k is None else new_metas[0][0][1]
    _check_lengths(problem, seqlens, s_new, table if problem.paged else None)
    scales = _int8_scales(problem, k_scale, v_scale, seqlens, table, v2_inputs[2])
    if session is None:
        session = _session_of(q, k_cache, v_cache, block_table, k, v, cache_seqlens) or default_session(
            backend, device)
    op = op_for(problem)
    runner = opcall.runner_for(session, op)
    inputs = (_host_or_device(q), _host_or_device(k_cache), _host_or_device(v_cache),
              block_table if isinstance(block_table, DeviceArray) else table, seqlens + np.int32(s_new))
    if op is not FLASH_ATTENTION_DECODE:
        inputs += v2_inputs + _scale_inputs(op, scales, k_scale, v_scale)
    bound = runner.bound_inputs(inputs)
    for name, x in (("k", k), ("v", v)):
        if isinstance(x, DeviceArray):
            check_device_array(name, x, session)
    outputs = ("out", "lse") if return_lse else ("out",)
    with session.in_flight(), runner.lock:  # close() waits for the call
        prepared = runner.prepare(problem, bound)
        new = None
        if k is not None:  # after prepare's checks (memory too): a refused call appends nothing
            new = _quantized_appends(k, v, scales[0]) if problem.kv_int8 else (k, v, None)
            _append_host_caches(problem, inputs[1], inputs[2], new[0], new[1], seqlens, table,
                                v_scale=inputs[-1], new_scales=new[2])
        prepared.upload(*inputs)
        if k is not None and bound:
            _append_device_caches(session, problem, bound, new[0], new[1], seqlens, table, new_scales=new[2])
        stream = runner.stream
        runner.launch(prepared, stream)
        stream.synchronize()
        results = tuple(prepared.read(role) for role in outputs)
    return results if return_lse else results[0]


def _int8_scales(p: DecodeProblem, k_scale, v_scale, seqlens, table, leftpad) -> Optional[tuple]:
    """(k_scale, v_scale) float32 host arrays of an int8 cache's call, checked (shapes, dtype, and
    finite > 0 wherever the call reads them: every k_scale, the v_scale of each sequence's existing
    tokens; new tokens get new scales); None for a float cache, which refuses scales."""
    if not p.kv_int8:
        for name, x in (("k_scale", k_scale), ("v_scale", v_scale)):
            if x is not None:
                raise InvalidArgumentError(f"{name} describes an int8 cache; k_cache / v_cache are {p.dtype_name}")
        return None
    ks, vs = kv_quant.scale_arrays(k_scale, v_scale, num_kv_heads=p.num_kv_heads, head_dim=p.head_dim,
                                   cache_rows=p.num_blocks, block_size=p.block_size)
    if vs is not None:  # a DeviceArray v_scale is not read back (kv_quant.scale_arrays)
        kv_quant.check_value_scales(vs, seqlens, table, p.block_size, start=leftpad)
    return ks, vs


def _scale_inputs(op, scales, k_scale, v_scale) -> tuple:
    """V3's scale inputs (a DeviceArray as given, else the checked host copy); () for V1 / V2."""
    if op is not FLASH_ATTENTION_DECODE_V3:
        return ()
    return (k_scale if isinstance(k_scale, DeviceArray) else scales[0],
            v_scale if isinstance(v_scale, DeviceArray) else scales[1])


def _quantized_appends(k, v, k_scale: np.ndarray) -> tuple:
    """New tokens for an int8 cache: (k int8, v int8 [B, S_new, Nkv, D], v's scales float32
    [B, S_new, Nkv]); keys with the cache's k_scale (checked already), saturating."""
    k, v = (x.numpy() if isinstance(x, DeviceArray) else np.asarray(x) for x in (k, v))
    vq, v_scales = kv_quant.quantize_values(v)
    return kv_quant.quantize_keys(k, k_scale), vq, v_scales


def contiguous_call(q, k_cache, v_cache, *, cache_seqlens: int, causal: bool, scale: float) -> tuple:
    """(DecodeProblem, the op's inputs) of a call over a contiguous cache in which every sequence
    holds cache_seqlens keys, no new tokens, num_splits 0, validated as flash_attention_with_kvcache
    validates it: what a routed forward call measures (acl_fa.plan.routing, ``acl-fa run``)."""
    pre, nxt = window_band(None, causal)
    problem = _validated(_meta("q", q), (_meta("k_cache", k_cache), _meta("v_cache", v_cache)), None, None,
                         (float(scale), pre, nxt, 0))
    seqlens = np.full((problem.batch,), int(cache_seqlens), np.int32)
    _check_lengths(problem, seqlens, 0, None)
    table = np.arange(problem.batch, dtype=np.int32).reshape(problem.batch, 1)
    return problem, (_host_or_device(q), _host_or_device(k_cache), _host_or_device(v_cache), table, seqlens)


def write_kv_cache(k_cache: DeviceArray, v_cache: DeviceArray, k, v, *, cache_seqlens, block_table=None):
    """Writes k / v [B, S_new, Nkv, D] into DeviceArray caches at positions cache_seqlens (as the
    k/v of flash_attention_with_kvcache are, without attention): how a prefill's keys and values
    enter the cache. One upload of k/v unless they are DeviceArrays of the caches' Session, then
    one device-to-device copy per run of tokens inside a cache block; the same checks before any
    device work."""
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(cache, DeviceArray):
            raise InvalidTypeError(f"{name} must be a DeviceArray (write_kv_cache writes on the device), "
                                   f"got {type(cache).__name__}")
    session = k_cache.session
    new_metas = (_meta("k", k), _meta("v", v))
    (k_shape, k_dtype) = new_metas[0]
    if len(k_shape) != 4:
        raise InvalidArgumentError(f"k must be [B, S_new, Nkv, D], got shape {k_shape}")
    q_meta = ((k_shape[0], 1, k_shape[2], k_shape[3]), k_dtype)  # one query row per kv head: no attention
    table_shape = None if block_table is None else _meta("block_table", block_table)[0]
    problem = _validated(q_meta, (_meta("k_cache", k_cache), _meta("v_cache", v_cache)), table_shape, new_metas,
                         (None, UNBOUNDED, 0, 0))
    if problem.kv_int8:
        raise InvalidArgumentError("write_kv_cache writes float caches; new tokens enter an int8 cache through "
                                   "flash_attention_with_kvcache(k=, v=, k_scale=, v_scale=), which quantizes "
                                   "them (or quantize a float cache with acl_fa.quantize_kv_cache)")
    seqlens = seqlens_array(cache_seqlens, problem.batch)
    table = (int_array("block_table", block_table, (problem.batch, problem.max_blocks)) if problem.paged
             else np.arange(problem.batch, dtype=np.int32).reshape(problem.batch, 1))
    _check_lengths(problem, seqlens, k_shape[1], table if problem.paged else None)
    for name, array in (("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v)):
        if isinstance(array, DeviceArray):
            check_device_array(name, array, session)
    with session.in_flight():
        _append_device_caches(session, problem, {"k_cache": k_cache, "v_cache": v_cache}, k, v, seqlens, table)


def _host_or_device(x):
    return x if isinstance(x, DeviceArray) else np.asarray(x)


def _session_of(*args) -> Optional[DeviceSession]:
    """The Session of the first DeviceArray argument, if any."""
    for x in args:
        if isinstance(x, DeviceArray):
            return x.session
    return None


def _token_runs(p: DecodeProblem, seqlens, s_new: int, table: np.ndarray):
    """(b, first new token, tokens, cache row) of each run of new tokens that lies in one cache
    block; cache row = block * block_size + row within the block."""
    for b in range(p.batch):
        t = 0
        while t < s_new:
            pos = int(seqlens[b]) + t
            block = int(table[b, pos // p.block_size])
            count = min(s_new - t, p.block_size - pos % p.block_size)
            yield b, t, count, block * p.block_size + pos % p.block_size
            t += count


def _append_host_caches(p, k_cache, v_cache, k, v, seqlens, table, v_scale=None, new_scales=None):
    """Writes the new tokens into numpy caches in place (DeviceArray caches: on the device).
    Both caches are checked before either is written, so a refusal leaves neither half-appended.
    An int8 cache: k / v quantized already, new_scales [B, S_new, Nkv] their value scales, written
    into v_scale [num_blocks, Nkv, block_size] (a numpy array: in place) at their slots."""
    pairs = [(cache, new) for cache, new in ((k_cache, k), (v_cache, v)) if not isinstance(cache, DeviceArray)]
    scale_host = new_scales is not None and not isinstance(v_scale, DeviceArray)
    if scale_host and not v_scale.flags.writeable:
        raise InvalidArgumentError("v_scale must be writable (or a DeviceArray): appending v writes each new "
                                   "token's scale into it in place")
    if scale_host:
        for b, t, count, row in _token_runs(p, seqlens, new_scales.shape[1], table):
            block, slot = divmod(row, p.block_size)
            v_scale[block, :, slot:slot + count] = new_scales[b, t:t + count].T
    for cache, name in ((k_cache, "k_cache"), (v_cache, "v_cache")):
        if not isinstance(cache, DeviceArray) and (not cache.flags.writeable or not cache.flags.c_contiguous):
            raise InvalidArgumentError(
                f"{name} must be a writable C-contiguous array (or a DeviceArray): appending k/v writes into it "
                "in place")
    for cache, new in pairs:
        new = new.numpy() if isinstance(new, DeviceArray) else np.asarray(new)
        rows = cache.reshape(p.num_blocks * p.block_size, p.num_kv_heads, p.head_dim)
        for b, t, count, row in _token_runs(p, seqlens, new.shape[1], table):
            rows[row:row + count] = new[b, t:t + count]


def _append_device_caches(session, p, bound, k, v, seqlens, table, new_scales=None):
    """Copies the new tokens into DeviceArray caches: one upload of k/v (unless they are on the
    device already), then one device-to-device copy per run of tokens inside a cache block. An
    int8 cache: k / v quantized already; new_scales [B, S_new, Nkv] go into a DeviceArray v_scale
    [num_blocks, Nkv, block_size], one copy per run and kv head."""
    token_bytes = p.num_kv_heads * p.head_dim * p.cache_dtype.itemsize
    s_new = (k.shape if isinstance(k, DeviceArray) else np.shape(k))[1]
    scale_cache = bound.get("v_scale") if new_scales is not None else None
    if scale_cache is not None:
        staged = DeviceArray.from_host(session, np.ascontiguousarray(new_scales.transpose(0, 2, 1)))  # [B, Nkv, S_new]
        try:
            for b, t, count, row in _token_runs(p, seqlens, s_new, table):
                block, slot = divmod(row, p.block_size)
                for h in range(p.num_kv_heads):
                    scale_cache.buffer.copy_from_device(
                        staged.buffer, count * 4, offset=((block * p.num_kv_heads + h) * p.block_size + slot) * 4,
                        src_offset=((b * p.num_kv_heads + h) * s_new + t) * 4)
        finally:
            staged.close()
    for role, new in (("k_cache", k), ("v_cache", v)):
        cache = bound.get(role)
        if cache is None:
            continue
        staged = new if isinstance(new, DeviceArray) else DeviceArray.from_host(session, np.asarray(new))
        try:
            for b, t, count, row in _token_runs(p, seqlens, s_new, table):
                cache.buffer.copy_from_device(staged.buffer, count * token_bytes, offset=row * token_bytes,
                                              src_offset=(b * s_new + t) * token_bytes)
        finally:
            if staged is not new:
                staged.close()
