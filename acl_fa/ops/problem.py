"""What the attention ops share around the ``Problem`` (acl_fa/spec/problem.py): the chip check
of its plan, the float32 range check of its inputs, and what the forward returns
(``AttentionOutputs``). Shared by the forward (V1 and V2), the backward, varlen, the compat
faces and the jobs; it runs no op.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from ..plan import forward as planmod
from ..runtime.errors import InvalidArgumentError, InvalidTypeError
from ..spec.problem import Problem

__all__ = ["check_plan", "check_float32_range", "check_like_forward", "check_backward_dtype", "max_magnitude", "AttentionOutputs",
           "outputs_of", "head_dim_rows"]


def head_dim_rows(problem: Problem, roles: tuple) -> dict:
    """Op.padded_rows of an attention op: the `roles` holding head-dim rows, (the caller's D, the
    kernel's D) each, when the problem's head dim is padded (spec.problem.Problem.given_head_dim);
    {} otherwise."""
    if not problem.padded:
        return {}
    return {role: (problem.given_head_dim, problem.head_dim) for role in roles}


def check_plan(problem: Problem, soc: str, options: "planmod.PlanOptions | None" = None):
    """Runs the tiling policy for the chip before any device work; InvalidArgumentError with
    the broken budget line when a user block does not fit. Returns the plan."""
    try:
        return planmod.plan(problem, soc) if options is None else planmod.plan(problem, soc, options)
    except planmod.PlanError as exc:
        raise InvalidArgumentError(str(exc)) from exc


# The kernel keeps scores and the unnormalised output in float32; a quarter of its largest value
# leaves room for the running sum's and the rescale's roundings.
_FLOAT32_LIMIT = float(np.finfo(np.float32).max) / 4


def max_magnitude(x) -> float:
    """max |x| of a float16/bfloat16/float32 array, by its bit patterns (magnitude order is the
    order of the bits without the sign for finite values), so no copy and no slow custom-dtype
    reduction; inf when x holds an inf or NaN, 0.0 for an empty array."""
    if x.size == 0:
        return 0.0
    bits = np.dtype(f"uint{8 * x.dtype.itemsize}")
    magnitude_bits = np.array(np.iinfo(bits).max >> 1, dtype=bits)
    top = np.bitwise_and(x.view(bits), magnitude_bits).max()
    value = float(np.array(top, dtype=bits).view(x.dtype))
    return value if np.isfinite(value) else float("inf")


def check_float32_range(problem: Problem, q, k, v) -> None:
    """Refuses, before device work, finite inputs whose scores or output sums could leave
    float32 inside the kernel (where they would turn into inf/NaN silently).

    Bounds: |scale * q_i . k_j| <= scale * D * max|q| * max|k|, and the unnormalised output
    sum_j exp(s_ij - m_i) v_j <= Skv * max|v| (every weight is at most 1). Each is checked only
    when the dtype's largest values could break it (never for float16 at ordinary scales), so
    the usual call pays nothing. DeviceArray inputs are on the device and are not inspected."""
    check_scores, check_sum = _range_checks(problem)
    if not (check_scores or check_sum) or not all(isinstance(x, np.ndarray) for x in (q, k, v)):
        return
    with np.errstate(over="ignore"):
        if check_scores:
            bound = problem.scale * problem.head_dim * max_magnitude(q) * max_magnitude(k)
            if np.isfinite(bound) and bound > _FLOAT32_LIMIT:
                raise InvalidArgumentError(
                    f"scale={problem.scale:g} with these q and k allows scores up to {bound:.3g} "
                    f"(scale x D x max|q| x max|k|), beyond what the kernel's float32 scores hold "
                    f"({_FLOAT32_LIMIT:.3g}): use a smaller scale or rescale q or k")
        if check_sum:
            bound = problem.seq_kv * max_magnitude(v)
            if np.isfinite(bound) and bound > _FLOAT32_LIMIT:
                raise InvalidArgumentError(
                    f"v values up to {max_magnitude(v):.3g} over Skv={problem.seq_kv} keys can reach "
                    f"{bound:.3g} in the kernel's float32 output sum (limit {_FLOAT32_LIMIT:.3g}): rescale v "
                    f"and the output by the same power of two")


@functools.lru_cache(maxsize=64)
def _range_checks(problem: Problem) -> tuple:
    """(scores, output sum): whether the dtype's largest values could break each bound of
    check_float32_range for this problem (decided once per problem)."""
    dtype_max = float(ml_dtypes.finfo(problem.dtype).max)
    with np.errstate(over="ignore"):
        return (problem.scale * problem.head_dim * dtype_max * dtype_max > _FLOAT32_LIMIT,
                problem.seq_kv * dtype_max > _FLOAT32_LIMIT)


class AttentionOutputs(tuple):
    """What the forward returns when return_lse or return_dropout_mask is set: a tuple of out,
    then lse (if return_lse), then the keep mask (if return_dropout_mask), so
    ``out, lse = flash_attention(..., return_lse=True)`` unpacks as before; the same values are
    attributes, with the dropout's random state:

    - ``seed``, ``offset``: the uint64 seed and offset the dropout used (the seed drawn when the
      call passed seed=None); pass them to the backward. 0 and the given offset without dropout.
    - ``next_offset``: offset + B*N (mod 2^64), the offset of the next call's fresh dropout with
      the same seed (a call uses the Philox streams offset .. offset + B*N - 1).
    """

    def __new__(cls, out, lse, dropout_mask, *, seed, offset, next_offset, return_lse, return_dropout_mask):
        items = (out,) + ((lse,) if return_lse else ()) + ((dropout_mask,) if return_dropout_mask else ())
        self = super().__new__(cls, items)
        self.out, self.lse, self.dropout_mask = out, lse, dropout_mask
        self.seed, self.offset, self.next_offset = seed, offset, next_offset
        return self

    def __reduce__(self):
        return (_rebuild_outputs, (tuple(self), dict(self.__dict__)))


def _rebuild_outputs(items, attrs):
    result = tuple.__new__(AttentionOutputs, items)
    result.__dict__.update(attrs)
    return result


def outputs_of(out, lse, dropout_mask, options, streams: int, return_lse: bool) -> AttentionOutputs:
    """The AttentionOutputs of a forward call that used `streams` Philox streams (B*N)."""
    return AttentionOutputs(out, lse, dropout_mask, seed=options.seed, offset=options.offset,
                            next_offset=(options.offset + streams) % (1 << 64), return_lse=return_lse,
                            return_dropout_mask=options.return_dropout_mask)


def check_backward_dtype(problem: Problem, op: str) -> None:
    """The backward kernels (FlashAttentionGrad V1..V3) take float16 and bfloat16 only (their OpDefs);
    float32, which the forward takes, is refused here before any device work rather than by phase 1."""
    if problem.dtype_name not in ("float16", "bfloat16"):
        raise InvalidArgumentError(f"{op} takes float16 or bfloat16 inputs; q has dtype {problem.dtype_name} (the "
                                   f"forward takes float32 too, the backward's kernel does not)")


def check_like_forward(q, dout, out, lse) -> None:
    """dout and out have q's dtype and shape, lse is float32 (what the forward returned)."""
    for name, x in (("dout", dout), ("out", out)):
        if x.dtype != q.dtype:
            raise InvalidTypeError(f"{name} has dtype {x.dtype}; it must have q's dtype {q.dtype}")
        if x.shape != q.shape:
            raise InvalidArgumentError(f"{name} has shape {x.shape}; it must have q's shape {q.shape}")
    if lse.dtype != np.float32:
        raise InvalidTypeError(f"lse has dtype {lse.dtype}; it must be float32 (as flash_attention returns it)")
