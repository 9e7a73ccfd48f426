"""What the FlashAttentionGrad operator will do on a chip: blocks, buffer budget, unit split
over the vector cores, workspace -- from the operator's own backward tiling policy
(op_host/flash_attention_grad_policy.cpp) through libaclfa_plan.so (native/aclfa_grad_plan.h,
declared for cffi in acl_fa/cdefs/plan_grad.h). Host only, like acl_fa.plan.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from . import forward as planmod
from ..runtime.ffi import ffi
from ..runtime.errors import AclLibraryError
from .forward import BudgetLine, ChipLimits, PlanError, PlannedSizes, Workspace, budget_lines, chip
from ..spec.problem import Problem

__all__ = ["BackwardPlan", "backward_plan", "to_dict", "format_backward_plan", "format_backward_plan_table"]


@dataclass(frozen=True)
class BackwardPlan(PlannedSizes, Workspace):
    deterministic: bool
    block_m: int
    block_n: int
    num_q_blocks: int
    num_kv_blocks: int
    row_chunk: int
    block_dim: int
    aiv_num: int
    panel_rows: int
    total_units: int
    unit_start: list = field(default_factory=list)
    total_work: int = 0
    max_core_work: int = 0
    mean_core_work: float = 0.0
    imbalance: float = 1.0
    budget: list = field(default_factory=list)
    ws_dq_bytes: int = 0
    ws_scratch_bytes: int = 0
    user_workspace_bytes: int = 0
    system_workspace_bytes: int = 0
    tiling_key: int = 0
    units_dealt: bool = False  # units (pairs) dealt to the AIVs in rounds, not contiguous ranges
    dq_group_blocks: int = 0   # deterministic dQ summed per group of this many K/V blocks (0: single parts)


def _lib():
    lib = planmod._plan_lib()
    try:
        size = lib.aclfaGradPlanSizeOf()
    except AttributeError as exc:
        raise AclLibraryError(f"{planmod.PLAN_LIBRARY_NAME} has no backward policy (aclfaGradPlanCompute)") from exc
    if size != ffi.sizeof("aclfaGradPlan"):
        raise AclLibraryError(f"{planmod.PLAN_LIBRARY_NAME} does not match acl_fa/cdefs/plan_grad.h: "
                              f"sizeof(aclfaGradPlan) is {size} in the library, {ffi.sizeof('aclfaGradPlan')} here")
    return lib


def backward_plan(problem: Problem, soc: "Optional[str | ChipLimits]" = None,
                  deterministic: bool = True, options: Optional[planmod.PlanOptions] = None) -> BackwardPlan:
    """The backward's plan of the forward `problem` on `soc` (with the V2 entry's band, mask,
    dropout and sequence lengths in `options`); PlanError names the budget a user block breaks
    (the problem may be unchecked: sized_problem)."""
    limits = soc if isinstance(soc, ChipLimits) else chip(soc)
    p = planmod.pad_head_dim(problem)  # a head dim of 1..256 runs padded to the next multiple of 16
    c, c_limits = (planmod.c_problem_and_limits(limits, p) if options is None
                   else planmod.c_problem_and_limits(limits, p, options))
    out = ffi.new("aclfaGradPlan *")
    err = ffi.new("char[]", 1024)
    if _lib().aclfaGradPlanCompute(c, int(bool(deterministic)), c_limits, out, err, 1024) != 0:
        raise PlanError(ffi.string(err).decode())
    return BackwardPlan(
        **PlannedSizes.of(limits, p), deterministic=bool(deterministic),
        block_m=out.blockM, block_n=out.blockN, num_q_blocks=out.numQBlocks, num_kv_blocks=out.numKvBlocks,
        row_chunk=out.rowChunk, block_dim=out.blockDim, aiv_num=out.aivNum,
        panel_rows=out.panelRows,
        total_units=out.totalUnits, unit_start=[out.unitStart[i] for i in range(out.aivNum + 1)],
        total_work=out.totalWork, max_core_work=out.maxCoreWork, mean_core_work=out.meanCoreWork,
        imbalance=out.imbalance,
        budget=[BudgetLine(ffi.string(line.name).decode(), line.bytes, line.capacity)
                for line in out.lines[0:out.numLines]],
        ws_dq_bytes=out.wsDqBytes, ws_scratch_bytes=out.wsScratchBytes,
        user_workspace_bytes=out.userWorkspaceBytes, system_workspace_bytes=limits.lib_api_workspace_bytes,
        tiling_key=out.tilingKey, units_dealt=bool(out.unitsDealt), dq_group_blocks=out.dqGroupBlocks)


def to_dict(p: BackwardPlan) -> dict:
    out = asdict(p)
    out["workspace_bytes"] = p.workspace_bytes
    out["chip"]["has_kernel"] = p.chip.has_kernel
    return out


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.2f} MiB"


def format_backward_plan(p: BackwardPlan) -> str:
    c = p.chip
    mode = "deterministic (dQ summed in int32 fixed point: the same bits in any order)" if p.deterministic else \
        "atomic (dQ added in fp32 by the cube's atomic adds, in any order)"
    lines = [
        f"chip      {c.name} ({c.short_soc}): {c.aic_num} AIC / {c.aiv_num} AIV, UB {c.ub_bytes} B, L1 {c.l1_bytes} B",
        f"problem   backward B={p.batch} N={p.heads} Nkv={p.kv_heads} Sq={p.seq} Skv={p.seq_kv} D={p.head_dim} "
        f"{p.dtype} {p.layout}{' causal' if p.causal else ''}; {mode}",
        f"blocks    BLOCK_M={p.block_m} (query rows per step) BLOCK_N={p.block_n} (key rows per unit); "
        f"{p.num_q_blocks} query x {p.num_kv_blocks} kv blocks per head; row chunk {p.row_chunk}; "
        f"cube requests of up to {p.panel_rows} query rows (a panel)",
        "budget    (per AIV UB buffers in the kernel's InitBuffer order, then totals)",
    ]
    lines += budget_lines(p.budget)
    lines += [
        f"cores     {p.total_units} K/V-block units on {p.aiv_num} AIVs ({p.block_dim} blocks); work (query blocks "
        f"walked) total {p.total_work}, max/AIV {p.max_core_work}, mean {p.mean_core_work:.1f}, "
        f"max/mean {p.imbalance:.3f}{' (dealt in rounds)' if p.units_dealt else ''}",
        f"workspace {p.workspace_bytes} B ({_mib(p.workspace_bytes)}) = system {p.system_workspace_bytes} + dQ "
        f"{_mib(p.ws_dq_bytes)} ({'int32' if p.deterministic else 'fp32'}){' + row norms' if p.deterministic else ''} + "
        f"{p.aiv_num} x "
        f"{p.ws_scratch_bytes} B scratch + D",
        f"tiling key {p.tiling_key:#x}",
    ]
    return "\n".join(lines)


def format_backward_plan_table(rows: list) -> str:
    """One line per chip: rows are (ChipLimits, BackwardPlan or the PlanError message)."""
    out = [f"{'chip':<14} {'AIC/AIV':>8} {'UB':>7} {'L1':>7} {'BLOCK_M':>7} {'BLOCK_N':>7} {'UB used':>8} "
           f"{'AIVs':>5} {'max/mean':>8} {'workspace':>12}  kernel"]
    for c, p in rows:
        head = f"{c.name:<14} {f'{c.aic_num}/{c.aiv_num}':>8} {c.ub_bytes:>7} {c.l1_bytes:>7}"
        if isinstance(p, BackwardPlan):
            ub = next(b for b in p.budget if b.name.startswith("UB total"))
            out.append(f"{head} {p.block_m:>7} {p.block_n:>7} {ub.bytes:>8} {p.aiv_num:>5} {p.imbalance:>8.3f} "
                       f"{_mib(p.workspace_bytes):>12}  {'yes' if c.has_kernel else 'no'}")
        else:
            out.append(f"{head}  rejected: {p}")
    return "\n".join(out)
