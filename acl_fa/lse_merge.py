"""Merging partial attention results by their LSE on the device: aclnnAttentionLseMerge of our
custom operator (op/attention_lse_merge.json; the math and contract in docs/lse_merge.md).

Two results of the same query rows over disjoint key sets, (out_a, lse_a) and (out_b, lse_b)
with out [..., D] and lse float32 [...] (out's leading dims), merge into

    m = max(lse_a, lse_b);  w_x = exp(lse_x - m)
    out = (w_a out_a + w_b out_b) / (w_a + w_b);  lse = m + ln(w_a + w_b)

with out 0 and lse -inf for a row whose two LSEs are -inf (a row no key was visible to yet).
out_b has the partial's dtype T (float16, bfloat16 or float32); out_a and the result are each
float32 or T, so a running merge keeps its accumulator in float32 (no rounding to T between
steps) and rounds once, in its last step. D is a multiple of 16.

``merge_partials(out_a, lse_a, out_b, lse_b)`` runs one merge of host arrays or DeviceArrays and
returns host arrays; ``enqueue_merge`` is the device-side form ring attention uses (DeviceArrays
in, DeviceArrays out -- in place when the outputs are out_a / lse_a -- on the caller's stream).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import ml_dtypes
import numpy as np

from . import opcall
from .device_array import DeviceArray, check_device_array
from .errors import InvalidArgumentError, InvalidTypeError
from .opcall import Op, OpRunner, PreparedCall, default_session
from .runtime import DeviceSession, Stream

__all__ = ["MergeProblem", "ATTENTION_LSE_MERGE", "make_problem", "merge_partials", "enqueue_merge",
           "merge_reference"]

FLOAT32 = np.dtype(np.float32)
PARTIAL_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), FLOAT32)
HEAD_DIM_MULTIPLE = 16  # every dtype's row a whole number of 32-B blocks (the kernel's copies)


@dataclasses.dataclass(frozen=True)
class MergeProblem:
    """One validated merge: out shape [..., D] and the dtypes of out_a, out_b and the result."""

    shape: tuple
    a_dtype: np.dtype
    b_dtype: np.dtype
    out_dtype: np.dtype

    @property
    def lse_shape(self) -> tuple:
        return self.shape[:-1]

    @property
    def rows(self) -> int:
        return int(np.prod(self.lse_shape, dtype=np.int64))

    def gm_bytes(self) -> int:
        """Bytes the kernel moves between GM and UB: out_a, out_b and the result, three LSEs."""
        d = self.shape[-1]
        per_row = d * (self.a_dtype.itemsize + self.b_dtype.itemsize + self.out_dtype.itemsize) + 3 * 4
        return self.rows * per_row


def _meta(name: str, x) -> tuple:
    """(shape, dtype) of a numpy array or DeviceArray argument."""
    if isinstance(x, DeviceArray):
        return tuple(x.shape), x.dtype
    if not isinstance(x, np.ndarray):
        raise InvalidTypeError(f"{name} must be a numpy array or a DeviceArray, got {type(x).__name__}")
    return x.shape, x.dtype


def _dtype_name(dtype: np.dtype) -> str:
    return "bfloat16" if dtype == np.dtype(ml_dtypes.bfloat16) else str(dtype)


def make_problem(out_a, lse_a, out_b, lse_b, out_dtype=None) -> MergeProblem:
    """Validates the four inputs (and the result's dtype, default out_b's) before any device work,
    naming the argument and the limit."""
    (sa, da), (sla, dla), (sb, db), (slb, dlb) = (_meta(n, x) for n, x in
                                                  (("out_a", out_a), ("lse_a", lse_a), ("out_b", out_b),
                                                   ("lse_b", lse_b)))
    if db not in PARTIAL_DTYPES:
        raise InvalidTypeError(f"out_b must be float16, bfloat16 or float32, got {_dtype_name(db)}")
    if da not in (db, FLOAT32):
        raise InvalidTypeError(f"out_a must be float32 or out_b's dtype ({_dtype_name(db)}), got {_dtype_name(da)}")
    out_dtype = db if out_dtype is None else np.dtype(out_dtype)
    if out_dtype not in (db, FLOAT32):
        raise InvalidTypeError(f"out_dtype must be float32 or out_b's dtype ({_dtype_name(db)}), "
                               f"got {_dtype_name(out_dtype)}")
    for name, dt in (("lse_a", dla), ("lse_b", dlb)):
        if dt != FLOAT32:
            raise InvalidTypeError(f"{name} must be float32, got {_dtype_name(dt)}")
    if len(sa) < 2:
        raise InvalidArgumentError(f"out_a must be [..., D] with at least 2 dims, got shape {sa}")
    if sb != sa:
        raise InvalidArgumentError(f"out_b has shape {sb}; it must have out_a's shape {sa}")
    for name, shape in (("lse_a", sla), ("lse_b", slb)):
        if shape != sa[:-1]:
            raise InvalidArgumentError(f"{name} has shape {shape}; it must be out_a's leading dims {sa[:-1]}")
    if 0 in sa:
        raise InvalidArgumentError(f"out_a has shape {sa}: every dimension must be >= 1")
    if sa[-1] % HEAD_DIM_MULTIPLE:
        raise InvalidArgumentError(f"head_dim D={sa[-1]} (the last dim of out_a) must be a multiple of "
                                   f"{HEAD_DIM_MULTIPLE}")
    return MergeProblem(tuple(int(x) for x in sa), np.dtype(da), np.dtype(db), out_dtype)


class AttentionLseMergeOp(Op):
    """aclnnAttentionLseMerge over the shared op-call path (acl_fa/cdefs/aclnn_attention_lse_merge.h)."""

    name = "attention_lse_merge"
    inputs = ("out_a", "lse_a", "out_b", "lse_b")
    outputs = ("out", "lse")
    workspace_api = "aclnnAttentionLseMergeGetWorkspaceSize"
    launch_api = "aclnnAttentionLseMerge"

    def buffers(self, p: MergeProblem) -> dict:
        return {"out_a": (p.shape, p.a_dtype), "lse_a": (p.lse_shape, FLOAT32),
                "out_b": (p.shape, p.b_dtype), "lse_b": (p.lse_shape, FLOAT32),
                "out": (p.shape, p.out_dtype), "lse": (p.lse_shape, FLOAT32)}

    def workspace_args(self, p: MergeProblem, tensors: dict) -> tuple:
        return tuple(tensors[role].handle for role in (*self.inputs, *self.outputs))

    def check(self, p: MergeProblem, soc: str) -> int:
        from . import plan as planmod

        try:
            chip = planmod.chip(soc)
        except planmod.PlanError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        if chip.coupled and p.b_dtype == np.dtype(ml_dtypes.bfloat16):
            raise InvalidTypeError(f"bfloat16 partials need Atlas A2/A3: the vector unit of {chip.name} "
                                   f"({chip.short_soc}) has no bfloat16")
        return 0


ATTENTION_LSE_MERGE = AttentionLseMergeOp()


def runner_for(session: DeviceSession) -> OpRunner:
    return opcall.runner_for(session, ATTENTION_LSE_MERGE)


def merge_partials(out_a, lse_a, out_b, lse_b, *, out_dtype=None, session: Optional[DeviceSession] = None,
                   backend: Optional[str] = None, device: Optional[int] = None) -> tuple:
    """Merges (out_a, lse_a) and (out_b, lse_b) on the device; returns (out, lse) host arrays,
    out of `out_dtype` (default out_b's dtype), lse float32."""
    problem = make_problem(out_a, lse_a, out_b, lse_b, out_dtype)
    session = session if session is not None else default_session(backend, device)
    return runner_for(session).run(problem, out_a, lse_a, out_b, lse_b)


def enqueue_merge(session: DeviceSession, stream: Stream, out_a: DeviceArray, lse_a: DeviceArray,
                  out_b: DeviceArray, lse_b: DeviceArray, out: DeviceArray, lse: DeviceArray) -> PreparedCall:
    """Enqueues the merge of DeviceArrays into `out` / `lse` (which may be out_a / lse_a: in place)
    on `stream` without waiting. The executor is cached per problem and arrays; the caller keeps
    every array alive until the stream has run the merge."""
    problem = make_problem(out_a, lse_a, out_b, lse_b, out.dtype)
    roles = dict(zip(ATTENTION_LSE_MERGE.inputs + ATTENTION_LSE_MERGE.outputs, (out_a, lse_a, out_b, lse_b, out, lse)))
    for role in ATTENTION_LSE_MERGE.outputs:
        if not isinstance(roles[role], DeviceArray):
            raise InvalidTypeError(f"{role} must be a DeviceArray, got {type(roles[role]).__name__}")
        check_device_array(role, roles[role], session)
    runner = runner_for(session)
    with runner.lock:
        prepared = runner.prepare(problem, runner.bound_inputs((out_a, lse_a, out_b, lse_b)) |
                                  {role: roles[role] for role in ATTENTION_LSE_MERGE.outputs})
        runner.launch(prepared, stream)
    return prepared


def merge_reference(parts) -> tuple:
    """float64 merge of [(out, lse), ...] of the same rows by their LSE: (out, lse)."""
    lses = np.stack([np.asarray(lse, np.float64) for _, lse in parts])  # [T, ...]
    top = np.max(lses, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    weights = np.exp(lses - safe)
    total = weights.sum(axis=0)
    lse = np.where(total > 0, safe + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    out = sum(w[..., None] * np.asarray(o, np.float64) for w, (o, _) in zip(weights, parts))
    return out / np.where(total > 0, total, 1.0)[..., None], lse
