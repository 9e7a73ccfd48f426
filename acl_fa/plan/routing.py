"""Which op serves an attention call: the general forward or the decode op's split-KV kernel.

One rule for every entry point (acl_fa.flash_attention, flash_attn_func, scaled_dot_product_attention,
``acl-fa run`` and ``acl-fa plan``; issue #34, docs/decode.md "Routing"):

1. The call must be one the decode op computes exactly as the forward does: float16 or bfloat16,
   head dim a multiple of 16 and at most 256, at most 255 query rows per kv head ((N / Nkv) x Sq,
   the decode kernel's matmul M), a chip with the decode kernel (Atlas A2/A3), and no option only
   the general forward has (the caller says which: attn_mask, dropout, softcap, window, explicit
   blocks, device arrays in a layout the decode op cannot read in place).
2. Then the op whose tiling's modeled time is the shorter runs: the forward's closed form
   (op_host/common/block_cost.h, ``acl_fa.plan.forward.analytic_cycles`` with the blocks its
   policy picks) against the decode's (DecodeModeledCycles in
   op_host/flash_attention_decode/decode_tiling_policy.cpp), both in the cost table's cycles at
   the chip's clock. No threshold is guessed: a shape goes to the decode op exactly when its own
   tiling models it faster.

Host only: both closed forms come from libaclfa_plan.so. The decision is cached per problem.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

from ..spec.problem import Problem
from . import forward as planmod
from .decode import decode_plan
from .roofline import chip_peaks

__all__ = ["Route", "route", "decode_view", "decode_plan_of", "FORWARD", "DECODE", "MAX_DECODE_ROWS"]

FORWARD = "flash_attention"
DECODE = "flash_attention_decode"
MAX_DECODE_ROWS = 255       # (N / Nkv) x Sq: the decode kernel's matmul M (decode_tiling_policy.h)
MAX_DECODE_HEAD_DIM = 256
DECODE_HEAD_DIM_MULTIPLE = 16
DECODE_DTYPES = ("float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class Route:
    """The op that serves a call and why; both modeled times (us, closed forms) when compared."""

    op: str
    reason: str
    forward_us: Optional[float] = None
    decode_us: Optional[float] = None

    @property
    def decode(self) -> bool:
        return self.op == DECODE

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class DecodeView:
    """The problem as the decode op sees it: q [batch, Sq, heads, D] against a contiguous cache
    [batch, Skv, kv_heads, D]. BSND and BSH are that already; BNSD keys [B, Nkv, Skv, D] are a
    cache of B x Nkv sequences with one kv head each, whose query rows are the group's heads."""

    batch: int
    heads: int
    kv_heads: int


def decode_view(problem: Problem) -> DecodeView:
    if problem.layout == "BNSD":
        return DecodeView(problem.batch * problem.num_kv_heads, problem.num_heads // problem.num_kv_heads, 1)
    return DecodeView(problem.batch, problem.num_heads, problem.num_kv_heads)


def _unsupported(problem: Problem, limits) -> Optional[str]:
    """Why the decode op cannot compute this problem, or None."""
    rows = problem.num_heads // problem.num_kv_heads * problem.seq_q
    if problem.dtype_name not in DECODE_DTYPES:
        return f"dtype {problem.dtype_name}: the decode op takes float16 or bfloat16"
    if problem.head_dim % DECODE_HEAD_DIM_MULTIPLE or problem.head_dim > MAX_DECODE_HEAD_DIM:
        return (f"head dim {problem.head_dim}: the decode op takes multiples of {DECODE_HEAD_DIM_MULTIPLE} up to "
                f"{MAX_DECODE_HEAD_DIM}")
    if rows > MAX_DECODE_ROWS:
        return (f"{rows} query rows per kv head ((N / Nkv) x Sq = {problem.num_heads // problem.num_kv_heads} x "
                f"{problem.seq_q}) exceed the decode op's {MAX_DECODE_ROWS}")
    if not limits.has_kernel or limits.aiv_num != 2 * limits.aic_num:
        return f"{limits.name} has no decode kernel (it runs on Atlas A2/A3)"
    if problem.block_m or problem.block_n:
        return "explicit block_m/block_n are the general forward's tiling"
    return None


def decode_plan_of(problem: Problem, soc=None):
    """The decode op's plan (acl_fa.plan.decode.DecodePlan) for a forward problem, as routed
    (decode_view: every sequence Skv keys in a contiguous cache)."""
    limits = soc if isinstance(soc, planmod.ChipLimits) else planmod.chip(soc)
    view = decode_view(problem)
    return decode_plan(seq_kv=problem.seq_kv, batch=view.batch, heads=view.heads, kv_heads=view.kv_heads,
                       seq_q=problem.seq_q, head_dim=problem.head_dim, dtype=problem.dtype_name,
                       causal=problem.causal, soc=limits)


@functools.lru_cache(maxsize=256)
def _compared(problem: Problem, soc: str) -> Route:
    limits = planmod.chip(soc)
    why = _unsupported(problem, limits)
    if why is not None:
        return Route(FORWARD, why)
    clock_mhz = chip_peaks(limits.name).clock_hz / 1e6
    chosen = planmod.plan(problem, limits)
    blocks = dataclasses.replace(problem, block_m=chosen.block_m, block_n=chosen.block_n)
    forward_us = planmod.analytic_cycles(blocks, limits) / clock_mhz
    try:
        decode_us = decode_plan_of(problem, limits).modeled_us
    except planmod.PlanError as exc:  # e.g. the rows' buffers do not fit the chip's UB
        return Route(FORWARD, f"the decode op cannot run it ({exc})")
    if problem.num_heads == problem.num_kv_heads and chosen.total_items >= limits.aic_num:
        # Neither of the decode op's advantages applies: no GQA rows to pack (K/V are read once per
        # query head by both ops) and no idle AI Core for its split to use. What is left is within
        # the closed forms' error on such shapes (bench/RESULTS.md, "Decode speed (#29) and routing").
        return Route(FORWARD, f"one query head per kv head and the forward's {chosen.total_items} work items fill "
                              f"the {limits.aic_num} AI Cores (modeled: forward {forward_us:.1f} us, decode op "
                              f"{decode_us:.1f} us)", forward_us, decode_us)
    if decode_us < forward_us:
        return Route(DECODE, f"the decode op's split-KV kernel models {decode_us:.1f} us, the general forward "
                             f"{forward_us:.1f} us (BLOCK_M={chosen.block_m} BLOCK_N={chosen.block_n})",
                     forward_us, decode_us)
    return Route(FORWARD, f"the general forward models {forward_us:.1f} us (BLOCK_M={chosen.block_m} "
                          f"BLOCK_N={chosen.block_n}), the decode op {decode_us:.1f} us", forward_us, decode_us)


def route(problem: Problem, soc: Optional[str] = None, general_only: Optional[str] = None) -> Route:
    """The op that serves `problem` on `soc` (a catalogue name; None = the default chip).
    general_only: what in the call only the general forward supports (it then keeps that path)."""
    if general_only is not None:
        return Route(FORWARD, f"{general_only}: only the general forward has it")
    return _compared(problem, planmod.chip(soc).name)
