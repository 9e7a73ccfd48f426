"""FlashAttention through the aclnn two-phase API of our custom operator.

``flash_attention(q, k, v, ...)`` validates everything a caller can get wrong before any device
work (types, shapes, layout, heads, sizes, scale, blocks -- the blocks against the tiling policy
for the device's chip), then runs the op on a Session. A Session keeps, per problem shape, the
device buffers, the aclTensors, a repeatable executor and the workspace, so repeated calls on
one shape only copy data and launch.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import numbers
import threading
from typing import NamedTuple, Optional

import ml_dtypes
import numpy as np

from ._ffi import ffi
from .errors import InvalidArgumentError, InvalidTypeError
from .layouts import LAYOUT_RANK, LAYOUTS, shape_of, split_dims
from .loader import device_count, get_backend
from .runtime import DeviceBuffer, Session, Stream, _Child
from .tensor import Tensor

__all__ = ["Problem", "make_problem", "FlashAttentionRunner", "flash_attention", "default_session"]

SUPPORTED_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
MAX_HEAD_DIM = 256
HEAD_DIM_MULTIPLE = 16
BLOCK_MULTIPLE = 16
# Problem shapes whose buffers and executor a Session keeps (least recently used dropped first).
CACHED_SHAPES = 4


@dataclasses.dataclass(frozen=True)
class Problem:
    """One FlashAttention call, validated. Sizes as in DESIGN.md (B, N, Nkv, Sq, Skv, D)."""

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

    # Problems key the per-Session caches on every call: hash the fields once.
    def __hash__(self) -> int:
        return self._field_hash

    @functools.cached_property
    def _field_hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    @property
    def lse_shape(self) -> tuple:
        return (self.batch, self.num_heads, self.seq_q)

    @property
    def dtype_name(self) -> str:
        return "bfloat16" if self.dtype == np.dtype(ml_dtypes.bfloat16) else "float16"

    def visible_pairs(self) -> int:
        """(query, key) pairs that take part, per head: Sq*Skv, or fewer when causal."""
        if not self.causal:
            return self.seq_q * self.seq_kv
        # row i sees min(Skv, max(0, i + Skv - Sq + 1)) keys
        rows = np.arange(self.seq_q, dtype=np.int64)
        return int(np.clip(rows + (self.seq_kv - self.seq_q) + 1, 0, self.seq_kv).sum())

    def flops(self) -> int:
        """Useful floating-point operations: 2 matmuls x 2 FLOP per MAC over visible pairs."""
        return 4 * self.batch * self.num_heads * self.head_dim * self.visible_pairs()


def _as_array(name: str, x) -> np.ndarray:
    if isinstance(x, (str, bytes)) or x is None:
        raise InvalidTypeError(f"{name} must be a numpy array, got {type(x).__name__}")
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


def _check_int(name: str, value, *, minimum: int, allow_none: bool = True) -> int:
    if value is None and allow_none:
        return 0
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidArgumentError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def make_problem(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                 num_kv_heads=None, block_m=None, block_n=None) -> tuple:
    """Validates a call; returns (Problem, q, k, v) with the arrays as numpy arrays.

    Raises InvalidTypeError / InvalidArgumentError naming the argument and the limit. The
    validation depends only on shapes, dtypes and options, and repeated calls with the same
    ones (the common case) reuse the validated Problem.
    """
    arrays = tuple(_as_array(name, x) for name, x in (("q", q), ("k", k), ("v", v)))
    metas = tuple(_ArrayMeta(a.shape, a.dtype) for a in arrays)
    options = (causal, scale, layout, num_heads, num_kv_heads, block_m, block_n)
    try:
        problem = _validated_problem(metas, options)
    except TypeError as exc:
        if isinstance(exc, InvalidTypeError):
            raise
        problem = _validated_problem.__wrapped__(metas, options)  # an unhashable option
    return (problem, *arrays)


def problem_from_sizes(*, seq, seq_kv=None, batch=1, heads=32, kv_heads=None, head_dim=128, dtype="float16",
                       layout="BNSD", causal=False, scale=None, block_m=None, block_n=None) -> "Problem":
    """The validated Problem of these sizes (as make_problem would give for arrays of them)."""
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype in ("bfloat16", "bf16") else np.dtype(dtype)
    seq_kv = seq if seq_kv is None else seq_kv
    kv_heads = heads if kv_heads is None else kv_heads
    layout = layout.upper() if isinstance(layout, str) else layout
    q_shape = shape_of(layout, batch, heads, seq, head_dim)
    kv_shape = shape_of(layout, batch, kv_heads, seq_kv, head_dim)
    metas = (_ArrayMeta(q_shape, np_dtype), _ArrayMeta(kv_shape, np_dtype), _ArrayMeta(kv_shape, np_dtype))
    return _validated_problem(metas, (causal, scale, layout, heads, kv_heads, block_m or None, block_n or None))


@functools.lru_cache(maxsize=64)
def _validated_problem(metas: tuple, options: tuple) -> "Problem":
    q, k, v = metas
    causal, scale, layout, num_heads, num_kv_heads, block_m, block_n = options
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise InvalidArgumentError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    layout = layout.upper()
    if not isinstance(causal, (bool, np.bool_)):
        raise InvalidTypeError(f"causal must be a bool, got {causal!r}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype not in SUPPORTED_DTYPES:
            raise InvalidTypeError(
                f"{name} has dtype {x.dtype}; supported: float16, bfloat16 (ml_dtypes.bfloat16)")
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
    n_attr = _check_int("num_heads", num_heads, minimum=1)
    nkv_attr = _check_int("num_kv_heads", num_kv_heads, minimum=1)
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
    if d % HEAD_DIM_MULTIPLE or d > MAX_HEAD_DIM:
        raise InvalidArgumentError(
            f"head dim D={d} must be a multiple of {HEAD_DIM_MULTIPLE} and <= {MAX_HEAD_DIM}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise InvalidTypeError(f"scale must be a real number, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise InvalidArgumentError(f"scale must be finite and > 0, got {scale}")
    blocks = []
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        value = _check_int(name, value, minimum=BLOCK_MULTIPLE)
        if value % BLOCK_MULTIPLE:
            raise InvalidArgumentError(f"{name}={value} must be a multiple of {BLOCK_MULTIPLE}")
        blocks.append(value)
    return Problem(b, n, nkv, sq, skv, d, q.dtype, layout, bool(causal), scale, blocks[0], blocks[1],
                   tuple(q.shape), tuple(k.shape))


def check_plan(problem: Problem, soc: str):
    """Runs the tiling policy for the chip before any device work; InvalidArgumentError with
    the broken budget line when a user block does not fit. Returns the plan."""
    from . import plan as planmod

    try:
        return planmod.plan(
            batch=problem.batch, heads=problem.num_heads, kv_heads=problem.num_kv_heads,
            seq=problem.seq_q, seq_kv=problem.seq_kv, head_dim=problem.head_dim,
            dtype=problem.dtype_name, layout=problem.layout, causal=problem.causal,
            block_m=problem.block_m, block_n=problem.block_n, soc=soc)
    except planmod.PlanError as exc:
        raise InvalidArgumentError(str(exc)) from exc


def _destroy_executor(backend, executor):
    backend.call("aclDestroyAclOpExecutor", executor)


class _Executor(_Child):
    """A repeatable aclOpExecutor, destroyed before the tensors it refers to."""

    _kind = "executor"

    def __init__(self, session: Session, handle):
        self._attach(session, _destroy_executor, handle)

    @property
    def handle(self):
        return self._live_handle()


@dataclasses.dataclass
class _Prepared:
    """Device state of one problem shape on one Session."""

    buffers: dict          # name -> DeviceBuffer (q, k, v, out, lse)
    tensors: dict          # name -> Tensor
    executor: _Executor
    workspace: Optional[DeviceBuffer]
    workspace_size: int

    def close(self):
        self.executor.close()
        for tensor in self.tensors.values():
            tensor.close()
        for buffer in self.buffers.values():
            buffer.close()
        if self.workspace is not None:
            self.workspace.close()

    def upload(self, q, k, v):
        """Synchronous H2D copies of the inputs into this problem's device buffers."""
        for name, array in (("q", q), ("k", k), ("v", v)):
            self.buffers[name].copy_from_host(array)

    def bytes_by_role(self) -> dict:
        """Device bytes held: inputs (q, k, v), outputs (out, lse) and the workspace."""
        return {"inputs": sum(self.buffers[n].nbytes for n in ("q", "k", "v")),
                "outputs": sum(self.buffers[n].nbytes for n in ("out", "lse")),
                "workspace": self.workspace_size}


class FlashAttentionRunner:
    """The op on one Session: cached device state per problem, one stream, thread-safe."""

    def __init__(self, session: Session):
        self.session = session
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self._stream: Optional[Stream] = None
        self._soc: Optional[str] = None  # the session's SoC name, asked once

    def close(self):
        with self._lock:
            while self._cache:
                self._cache.popitem(last=False)[1].close()
            if self._stream is not None:
                self._stream.close()
                self._stream = None

    @property
    def stream(self) -> Stream:
        if self._stream is None or self._stream.closed:
            self._stream = self.session.stream()
        return self._stream

    def prepare(self, problem: Problem) -> _Prepared:
        """Device state for `problem` (cached); caller holds the lock. A problem new to this
        Session is first checked against the tiling policy for its chip, before device work."""
        prepared = self._cache.get(problem)
        if prepared is not None:
            self._cache.move_to_end(problem)
            return prepared
        if self._soc is None:
            self._soc = self.session.soc_name()
        check_plan(problem, self._soc)
        while len(self._cache) >= CACHED_SHAPES:
            self._cache.popitem(last=False)[1].close()
        prepared = self._build(problem)
        self._cache[problem] = prepared
        return prepared

    def _build(self, problem: Problem) -> _Prepared:
        session = self.session
        shapes = {"q": (problem.q_shape, problem.dtype), "k": (problem.kv_shape, problem.dtype),
                  "v": (problem.kv_shape, problem.dtype), "out": (problem.q_shape, problem.dtype),
                  "lse": (problem.lse_shape, np.dtype(np.float32))}
        buffers: dict = {}
        tensors: dict = {}
        executor = None
        workspace = None
        try:
            for name, (shape, dtype) in shapes.items():
                nbytes = int(np.prod(shape)) * dtype.itemsize
                buffers[name] = DeviceBuffer(session, nbytes, shape=shape, dtype=dtype)
                tensors[name] = Tensor(buffers[name])
            ws_size = ffi.new("uint64_t *")
            handle = ffi.new("aclOpExecutor **")
            layout = ffi.new("char[]", problem.layout.encode())
            session.call("aclnnFlashAttentionGetWorkspaceSize", tensors["q"].handle, tensors["k"].handle,
                         tensors["v"].handle, problem.scale, problem.causal, layout, problem.num_heads,
                         problem.num_kv_heads, problem.block_m, problem.block_n, tensors["out"].handle,
                         tensors["lse"].handle, ws_size, handle)
            # Owned from here: repeatable, so it runs once per call and is destroyed with the cache.
            executor = _Executor(session, handle[0])
            session.call("aclSetAclOpExecutorRepeatable", executor.handle)
            size = int(ws_size[0])
            if size:
                workspace = DeviceBuffer(session, size)
            return _Prepared(buffers, tensors, executor, workspace, size)
        except BaseException:
            for obj in [executor, workspace, *tensors.values(), *buffers.values()]:
                if obj is not None:
                    obj.close()
            raise

    def launch(self, prepared: _Prepared, stream: Stream):
        ws = prepared.workspace.ptr if prepared.workspace is not None else ffi.NULL
        self.session.call("aclnnFlashAttention", ws, prepared.workspace_size, prepared.executor.handle,
                          stream.handle)

    def run(self, problem: Problem, q, k, v, *, return_lse: bool = False):
        with self._lock:
            prepared = self.prepare(problem)
            buffers = prepared.buffers
            prepared.upload(q, k, v)
            stream = self.stream
            self.launch(prepared, stream)
            stream.synchronize()
            out = buffers["out"].copy_to_host(np.empty(problem.q_shape, problem.dtype))
            lse = buffers["lse"].copy_to_host(np.empty(problem.lse_shape, np.float32)) if return_lse else None
        return (out, lse) if return_lse else out


_runners_lock = threading.Lock()
_sessions: dict = {}


def runner_for(session: Session) -> FlashAttentionRunner:
    """The FlashAttentionRunner of `session` (one per Session, kept on the Session)."""
    with _runners_lock:
        runner = getattr(session, "_flash_attention_runner", None)
        if runner is None:
            runner = FlashAttentionRunner(session)
            session._flash_attention_runner = runner
        return runner


def default_session(backend: Optional[str] = None, device: Optional[int] = None) -> Session:
    """The process-wide Session for (backend, device), opened on first use."""
    if device is not None and (isinstance(device, bool) or not isinstance(device, numbers.Integral)):
        raise InvalidTypeError(f"device must be an integer, got {device!r}")
    key = (backend, 0 if device is None else int(device))
    count = device_count(get_backend(backend))
    if not 0 <= key[1] < count:
        raise InvalidArgumentError(f"device={key[1]} is out of range: this host has {count} device(s)")
    with _runners_lock:
        session = _sessions.get(key)
        if session is None or session.closed:
            session = Session(device=key[1], backend=backend)
            _sessions[key] = session
        return session


def flash_attention(q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None, num_kv_heads=None,
                    block_m=None, block_n=None, return_lse=False, backend=None, device=None, session=None):
    """FlashAttention forward: softmax(scale * Q K^T + mask) V per head.

    q [B, N, Sq, D] (BNSD), [B, Sq, N, D] (BSND) or [B, Sq, N*D] (BSH); k, v likewise with Nkv
    heads and Skv rows; float16 or bfloat16 (ml_dtypes). causal masks key j > i + (Skv - Sq).
    scale defaults to 1/sqrt(D). Returns out (like q), and lse float32 [B, N, Sq] when
    return_lse. Any numpy layout is accepted (copied C-contiguous once).
    """
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                    num_kv_heads=num_kv_heads, block_m=block_m, block_n=block_n)
    if session is None:
        session = default_session(backend, device)
    return runner_for(session).run(problem, q, k, v, return_lse=return_lse)
