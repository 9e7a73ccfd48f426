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

The int16 running result (aclnnAttentionLseMergeInt16, Atlas A2/A3; docs/lse_merge.md): out_a
int16 in units of a per-row bound bound_a / 32767 (bound_a float32 like lse_a, >= max |out_a|
of the row); the result is int16 in units of the new bound max(bound_a, max |out_b|) -- or, in a
row's last merge, the merged value in T. ``merge_partials_int16`` and ``enqueue_merge_int16``
are its two forms; ``to_fixed16`` / ``from_fixed16`` convert on the host.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import ml_dtypes
import numpy as np

from . import opcall
from ..runtime.device_array import DeviceArray, check_device_array
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from .opcall import EntryOp, OpRunner, PreparedCall, default_session
from ..runtime.session import DeviceSession, Stream
from ..plan import forward as planmod

__all__ = ["MergeProblem", "ATTENTION_LSE_MERGE", "ATTENTION_LSE_MERGE_INT16", "make_problem",
           "make_int16_problem", "merge_partials", "merge_partials_int16", "enqueue_merge", "enqueue_merge_int16",
           "merge_reference", "to_fixed16", "from_fixed16", "FIXED16_UNITS", "int16_unsupported"]

FLOAT32 = np.dtype(np.float32)
PARTIAL_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), FLOAT32)
INT16 = np.dtype(np.int16)
HEAD_DIM_MULTIPLE = 16  # every dtype's row a whole number of 32-B blocks (the kernel's copies)
FIXED16_UNITS = 32767  # int16 units per row bound


@dataclasses.dataclass(frozen=True)
class MergeProblem:
    """One validated merge: out shape [..., D] and the dtypes of out_a, out_b and the result
    (a_dtype int16: the int16 running result with its row bounds)."""

    shape: tuple
    a_dtype: np.dtype
    b_dtype: np.dtype
    out_dtype: np.dtype

    @property
    def fixed16(self) -> bool:
        return self.a_dtype == INT16

    @property
    def lse_shape(self) -> tuple:
        return self.shape[:-1]

    @property
    def rows(self) -> int:
        return int(np.prod(self.lse_shape, dtype=np.int64))

    def gm_bytes(self) -> int:
        """Bytes the kernel moves between GM and UB: out_a, out_b and the result, three LSEs (and
        the bound in and out of the int16 form)."""
        d = self.shape[-1]
        per_row = d * (self.a_dtype.itemsize + self.b_dtype.itemsize + self.out_dtype.itemsize) + 3 * 4
        return self.rows * (per_row + (2 * 4 if self.fixed16 else 0))


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
    _check_rows(sa, sb, (("lse_a", sla, dla), ("lse_b", slb, dlb)))
    return MergeProblem(tuple(int(x) for x in sa), np.dtype(da), np.dtype(db), out_dtype)


def make_int16_problem(out_a, bound_a, lse_a, out_b, lse_b, out_dtype=INT16) -> MergeProblem:
    """Validates the inputs of the int16 merge (out_a int16; bound_a, lse_a, lse_b float32 like
    out_a's leading dims; out_b float16 | bfloat16 | float32) and the result's dtype (int16, the
    running form, or out_b's: the final conversion) before any device work."""
    metas = [_meta(n, x) for n, x in (("out_a", out_a), ("bound_a", bound_a), ("lse_a", lse_a), ("out_b", out_b),
                                       ("lse_b", lse_b))]
    (sa, da), (sba, dba), (sla, dla), (sb, db), (slb, dlb) = metas
    if db not in PARTIAL_DTYPES:
        raise InvalidTypeError(f"out_b must be float16, bfloat16 or float32, got {_dtype_name(db)}")
    if da != INT16:
        raise InvalidTypeError(f"out_a must be int16 (the running result in units of bound_a / {FIXED16_UNITS}), "
                               f"got {_dtype_name(da)}")
    out_dtype = np.dtype(out_dtype)
    if out_dtype not in (INT16, db):
        raise InvalidTypeError(f"out_dtype must be int16 or out_b's dtype ({_dtype_name(db)}), "
                               f"got {_dtype_name(out_dtype)}")
    _check_rows(sa, sb, (("bound_a", sba, dba), ("lse_a", sla, dla), ("lse_b", slb, dlb)))
    return MergeProblem(tuple(int(x) for x in sa), da, np.dtype(db), out_dtype)


def _check_rows(sa, sb, per_row) -> None:
    """out_a [..., D] (D a multiple of 16, no empty dim), out_b like it, and each per-row tensor
    (name, shape, dtype) float32 of out_a's leading dims."""
    for name, _, dt in per_row:
        if dt != FLOAT32:
            raise InvalidTypeError(f"{name} must be float32, got {_dtype_name(dt)}")
    if len(sa) < 2:
        raise InvalidArgumentError(f"out_a must be [..., D] with at least 2 dims, got shape {sa}")
    if sb != sa:
        raise InvalidArgumentError(f"out_b has shape {sb}; it must have out_a's shape {sa}")
    for name, shape, _ in per_row:
        if shape != sa[:-1]:
            raise InvalidArgumentError(f"{name} has shape {shape}; it must be out_a's leading dims {sa[:-1]}")
    if 0 in sa:
        raise InvalidArgumentError(f"out_a has shape {sa}: every dimension must be >= 1")
    if sa[-1] % HEAD_DIM_MULTIPLE:
        raise InvalidArgumentError(f"head_dim D={sa[-1]} (the last dim of out_a) must be a multiple of "
                                   f"{HEAD_DIM_MULTIPLE}")


class AttentionLseMergeOp(EntryOp):
    """aclnnAttentionLseMerge over the shared op-call path, its arguments read from
    op_host/attention_lse_merge/attention_lse_merge.json (opcall.EntryOp)."""

    op_type = "AttentionLseMerge"
    roles = {"attention_out": "out", "bound_out": "bound", "softmax_lse": "lse"}
    outputs = ("out", "lse")

    def buffers(self, p: MergeProblem) -> dict:
        return {"out_a": (p.shape, p.a_dtype), "lse_a": (p.lse_shape, FLOAT32),
                "out_b": (p.shape, p.b_dtype), "lse_b": (p.lse_shape, FLOAT32),
                "out": (p.shape, p.out_dtype), "lse": (p.lse_shape, FLOAT32)}

    def check(self, p: MergeProblem, soc: str) -> int:
        try:
            chip = planmod.chip(soc)
        except planmod.PlanError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        if chip.coupled and p.b_dtype == np.dtype(ml_dtypes.bfloat16):
            raise InvalidTypeError(f"bfloat16 partials need Atlas A2/A3: the vector unit of {chip.name} "
                                   f"({chip.short_soc}) has no bfloat16")
        return 0


class AttentionLseMergeInt16Op(AttentionLseMergeOp):
    """aclnnAttentionLseMergeInt16 (op_host/attention_lse_merge/attention_lse_merge_int16.json): the
    merge with an int16 running result and its row bounds; Atlas A2/A3 only."""

    op_type = "AttentionLseMergeInt16"
    outputs = ("out", "bound", "lse")

    def buffers(self, p: MergeProblem) -> dict:
        row = (p.lse_shape, FLOAT32)
        return {"out_a": (p.shape, p.a_dtype), "bound_a": row, "lse_a": row, "out_b": (p.shape, p.b_dtype),
                "lse_b": row, "out": (p.shape, p.out_dtype), "bound": row, "lse": row}

    def check(self, p: MergeProblem, soc: str) -> int:
        super().check(p, soc)
        why = int16_unsupported(soc)
        if why:
            raise InvalidTypeError(f"the int16 running result needs Atlas A2/A3: {why}")
        return 0


def int16_unsupported(soc: str) -> str:
    """Why AttentionLseMergeInt16 cannot run on `soc`, or "" where it can (Atlas A2/A3): its Cast
    between float and int16 exists on those chips' vector units only, and the coupled chips of
    the catalogue (310P, 910A) are the others."""
    chip = planmod.chip(soc)
    return (f"the vector unit of {chip.name} has no Cast between float and int16 (docs/lse_merge.md)"
            if chip.coupled else "")


ATTENTION_LSE_MERGE = AttentionLseMergeOp()
ATTENTION_LSE_MERGE_INT16 = AttentionLseMergeInt16Op()


def runner_for(session: DeviceSession, op: EntryOp = ATTENTION_LSE_MERGE) -> OpRunner:
    return opcall.runner_for(session, op)


def merge_partials(out_a, lse_a, out_b, lse_b, *, out_dtype=None, session: Optional[DeviceSession] = None,
                   backend: Optional[str] = None, device: Optional[int] = None) -> tuple:
    """Merges (out_a, lse_a) and (out_b, lse_b) on the device; returns (out, lse) host arrays,
    out of `out_dtype` (default out_b's dtype), lse float32."""
    problem = make_problem(out_a, lse_a, out_b, lse_b, out_dtype)
    session = session if session is not None else default_session(backend, device)
    return runner_for(session).run(problem, out_a, lse_a, out_b, lse_b)


def merge_partials_int16(out_a, bound_a, lse_a, out_b, lse_b, *, out_dtype=INT16,
                         session: Optional[DeviceSession] = None, backend: Optional[str] = None,
                         device: Optional[int] = None) -> tuple:
    """The int16 merge on the device; returns (out, bound, lse) host arrays, out int16 (units of
    bound / 32767) or, with out_dtype out_b's dtype, the merged values."""
    problem = make_int16_problem(out_a, bound_a, lse_a, out_b, lse_b, out_dtype)
    session = session if session is not None else default_session(backend, device)
    return runner_for(session, ATTENTION_LSE_MERGE_INT16).run(problem, out_a, bound_a, lse_a, out_b, lse_b)


def enqueue_merge(session: DeviceSession, stream: Stream, out_a: DeviceArray, lse_a: DeviceArray,
                  out_b: DeviceArray, lse_b: DeviceArray, out: DeviceArray, lse: DeviceArray) -> PreparedCall:
    """Enqueues the merge of DeviceArrays into `out` / `lse` (which may be out_a / lse_a: in place)
    on `stream` without waiting. The executor is cached per problem and arrays; the caller keeps
    every array alive until the stream has run the merge."""
    problem = make_problem(out_a, lse_a, out_b, lse_b, out.dtype)
    return _enqueue(session, stream, ATTENTION_LSE_MERGE, problem, (out_a, lse_a, out_b, lse_b), (out, lse))


def enqueue_merge_int16(session: DeviceSession, stream: Stream, out_a: DeviceArray, bound_a: DeviceArray,
                        lse_a: DeviceArray, out_b: DeviceArray, lse_b: DeviceArray, out: DeviceArray,
                        bound: DeviceArray, lse: DeviceArray) -> PreparedCall:
    """enqueue_merge of the int16 form: `out` int16 (a running merge) or out_b's dtype (the last),
    `out` / `bound` / `lse` may be out_a / bound_a / lse_a (in place; a 2-byte `out` of out_b's
    dtype over out_a's memory too)."""
    problem = make_int16_problem(out_a, bound_a, lse_a, out_b, lse_b, out.dtype)
    return _enqueue(session, stream, ATTENTION_LSE_MERGE_INT16, problem, (out_a, bound_a, lse_a, out_b, lse_b),
                    (out, bound, lse))


def _enqueue(session, stream, op, problem, inputs, outputs) -> PreparedCall:
    roles = dict(zip(op.inputs + op.outputs, (*inputs, *outputs)))
    for role in op.outputs:
        if not isinstance(roles[role], DeviceArray):
            raise InvalidTypeError(f"{role} must be a DeviceArray, got {type(roles[role]).__name__}")
        check_device_array(role, roles[role], session)
    runner = runner_for(session, op)
    with runner.lock:
        prepared = runner.prepare(problem, runner.bound_inputs(inputs) | {role: roles[role] for role in op.outputs})
        runner.launch(prepared, stream)
    return prepared


def to_fixed16(out) -> tuple:
    """Host form of a running result: (int16 values, float32 row bounds) with the bound the row's
    max |out| and the values round(out * 32767 / bound) (0 where the bound is 0)."""
    x = np.asarray(out, np.float32)
    bound = np.abs(x).max(axis=-1)
    scale = np.where(bound > 0, FIXED16_UNITS / np.where(bound > 0, bound, 1), 0).astype(np.float32)
    return np.rint(x * scale[..., None]).astype(np.int16), bound.astype(np.float32)


def from_fixed16(values, bound) -> np.ndarray:
    """float64 values of an int16 running result in units of bound / 32767 per row."""
    return np.asarray(values, np.float64) * (np.asarray(bound, np.float64) / FIXED16_UNITS)[..., None]


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
