"""What the FlashAttentionDecode operator will do on a chip for one decode step: the GQA-packed
rows, key chunks, buffer budget, the split of each sequence's keys into work items (batch, kv
head, split) over the vector cores, the merges, core balance, workspace.

The tiling comes from the operator's own decode policy (op_host/decode_tiling_policy.cpp); the
split from the same module's model of the kernel's run-time split (ComputeDecodeSchedule: the
kernel cuts the keys from the sequences' lengths, which the tiling cannot see), both through
libaclfa_plan.so (native/aclfa_decode_plan.h, declared for cffi in acl_fa/cdefs/plan_decode.h),
with the chip limits marshalled as for the forward (acl_fa.plan). Host only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

import numpy as np

from . import forward as planmod
from ..runtime.ffi import ffi
from ..spec.band import window_band
from ..runtime.errors import AclLibraryError
from .forward import BudgetLine, ChipLimits, PlanError, Workspace, budget_lines, chip
from .roofline import chip_peaks

__all__ = ["DecodePlan", "decode_plan", "format_decode_plan"]

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class DecodePlan(Workspace):
    chip: ChipLimits
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    head_dim: int
    dtype: str
    seq_lens: list           # keys each sequence has at this step
    block_size: Optional[int]  # None: contiguous cache
    causal: bool
    num_splits: int          # as asked
    rows: int                # GQA-packed matmul M: row_group_heads * row_group_tokens
    block_n: int             # keys per chunk
    chunks_per_block: int
    split_kv: bool
    splits_per_group: int    # explicit count after clamping (0: auto or whole)
    used_core_num: int
    num_parts: int           # vector cores (parts of the split)
    max_slots: int
    groups: int              # (sequence, kv head) pairs
    total_units: int         # key chunks of all groups
    pieces: int              # work items (batch, kv head, split)
    combine_groups: int
    min_pieces: int
    max_pieces: int
    part_units: list = field(default_factory=list)
    part_pieces: list = field(default_factory=list)
    part_combines: list = field(default_factory=list)
    budget: list = field(default_factory=list)
    user_workspace_bytes: int = 0
    system_workspace_bytes: int = 0
    tiling_key: int = 0
    modeled_cycles: float = 0.0  # the closed form of the launch's modeled time (DecodeModeledCycles)
    row_group_heads: int = 0     # query heads per row group (divides N / Nkv)
    row_group_tokens: int = 0    # query tokens per row group (divides Sq)
    row_groups: int = 1          # row groups per kv head (> 1 beyond 255 query rows per kv head)

    @property
    def modeled_us(self) -> float:
        """The closed form's launch time in microseconds at the chip's clock."""
        return self.modeled_cycles / chip_peaks(self.chip.name).clock_hz * 1e6

    @property
    def aic_units(self) -> list:
        """Key chunks per AI Core (its two vector cores: parts 2i and 2i + 1)."""
        return [self.part_units[2 * i] + self.part_units[2 * i + 1] for i in range(self.used_core_num)]

    @staticmethod
    def _balance(values: list) -> float:
        mean = sum(values) / len(values) if values else 0.0
        return max(values) / mean if mean else 1.0

    @property
    def aic_balance(self) -> float:
        """max / mean key chunks over the AI Cores."""
        return self._balance(self.aic_units)

    @property
    def aiv_balance(self) -> float:
        return self._balance(self.part_units)

    @property
    def kv_bytes(self) -> int:
        """K and V bytes the sequences hold for the kv heads (what one step must read at least)."""
        return 2 * sum(self.seq_lens) * self.kv_heads * self.head_dim * _DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(workspace_bytes=self.workspace_bytes, aic_units=self.aic_units, aic_balance=self.aic_balance,
                   aiv_balance=self.aiv_balance, kv_bytes=self.kv_bytes, modeled_us=self.modeled_us)
        out["chip"]["has_kernel"] = self.chip.has_kernel
        return out


def _lib():
    lib = planmod._plan_lib()
    try:
        sizes = [lib.aclfaDecodePlanSizeOf(which) for which in (0, 1)]
    except AttributeError as exc:
        raise AclLibraryError(f"{planmod.PLAN_LIBRARY_NAME} has no decode policy (aclfaDecodePlanCompute)") from exc
    for size, struct in zip(sizes, ("aclfaDecodePlanProblem", "aclfaDecodePlan")):
        if size != ffi.sizeof(struct):
            raise AclLibraryError(f"{planmod.PLAN_LIBRARY_NAME} does not match acl_fa/cdefs/plan_decode.h: "
                                  f"sizeof({struct}) is {size} in the library, {ffi.sizeof(struct)} here")
    return lib


def _lengths(seq_kv, batch: int) -> list:
    lengths = [seq_kv] * batch if isinstance(seq_kv, (int, np.integer)) and not isinstance(seq_kv, bool) \
        else list(seq_kv)
    if len(lengths) != batch:
        raise PlanError(f"seq_kv must be one length or {batch} (one per sequence), got {len(lengths)}")
    for length in lengths:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 0 or length >= 2**31:
            raise PlanError(f"sequence lengths must be integers in [0, 2^31), got {length!r}")
    return [int(x) for x in lengths]


def decode_plan(*, seq_kv: "int | Sequence[int]", batch: int = 1, heads: int = 32, kv_heads: Optional[int] = None,
                seq_q: int = 1, head_dim: int = 128, dtype: str = "float16", block_size: Optional[int] = None,
                num_splits: int = 0, causal: bool = True, window=None,
                soc: "Optional[str | ChipLimits]" = None) -> DecodePlan:
    """The decode op's plan for one step with `seq_kv` keys per sequence (one int for all, or one
    per sequence) in a contiguous cache (block_size None) or a paged one of `block_size`-key blocks."""
    limits = soc if isinstance(soc, ChipLimits) else chip(soc)
    kv_heads = heads if kv_heads is None else kv_heads
    planmod._choice("dtype", dtype, tuple(_DTYPE_BYTES))
    for name, value in (("batch", batch), ("heads", heads), ("kv_heads", kv_heads), ("seq_q", seq_q),
                        ("head_dim", head_dim), ("num_splits", num_splits)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise PlanError(f"{name} must be a non-negative integer, got {value!r}")
    lengths = _lengths(seq_kv, batch)
    capacity = max(max(lengths, default=0), 1)
    if block_size is None:
        num_blocks, block, max_blocks = batch, capacity, 1
    else:
        if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1 \
                or block_size % 16:
            raise PlanError(f"block_size must be a positive multiple of 16, got {block_size!r}")
        max_blocks = -(-capacity // block_size)
        num_blocks, block = batch * max_blocks, block_size
    pre, nxt = window_band(window, causal)
    problem = ffi.new("aclfaDecodePlanProblem *")
    problem.batch, problem.numHeads, problem.numKvHeads = batch, heads, kv_heads
    problem.seqQ, problem.headDim = seq_q, head_dim
    problem.numBlocks, problem.blockSize, problem.maxBlocksPerSeq = num_blocks, block, max_blocks
    problem.numSplits, problem.preTokens, problem.nextTokens = min(num_splits, 2**62), pre, nxt
    problem.dtypeBytes, problem.bf16 = _DTYPE_BYTES[dtype], int(dtype == "bfloat16")
    c_lens = ffi.new("int64_t[]", lengths or [0])
    out = ffi.new("aclfaDecodePlan *")
    err = ffi.new("char[]", 1024)
    if _lib().aclfaDecodePlanCompute(problem, c_lens, planmod.c_chip_limits(limits), out, err, 1024) != 0:
        raise PlanError(ffi.string(err).decode())
    parts = out.numParts
    return DecodePlan(
        chip=limits, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q, head_dim=head_dim, dtype=dtype,
        seq_lens=lengths, block_size=block_size, causal=bool(causal), num_splits=int(num_splits),
        rows=out.rows, block_n=out.blockN, chunks_per_block=out.chunksPerBlock, split_kv=bool(out.splitKv),
        splits_per_group=out.splitsPerGroup, used_core_num=out.usedCoreNum, num_parts=parts, max_slots=out.maxSlots,
        groups=out.groups, total_units=out.totalUnits, pieces=out.pieces, combine_groups=out.combineGroups,
        min_pieces=out.minPieces, max_pieces=out.maxPieces,
        part_units=[int(out.partUnits[a]) for a in range(parts)],
        part_pieces=[int(out.partPieces[a]) for a in range(parts)],
        part_combines=[int(out.partCombines[a]) for a in range(parts)],
        budget=[BudgetLine(ffi.string(line.name).decode(), line.bytes, line.capacity)
                for line in out.lines[0:out.numLines]],
        user_workspace_bytes=out.userWorkspaceBytes, system_workspace_bytes=limits.lib_api_workspace_bytes,
        tiling_key=out.tilingKey, modeled_cycles=float(out.modeledCycles), row_group_heads=out.rowGroupHeads,
        row_group_tokens=out.rowGroupTokens, row_groups=out.rowGroups)


def _split_words(p: DecodePlan) -> str:
    if p.splits_per_group:
        clamp = f", clamped from {p.num_splits}" if p.num_splits != p.splits_per_group else ""
        return (f"num_splits={p.num_splits}: each group cut into up to {p.splits_per_group} pieces{clamp} "
                f"(at most its chunks), round-robin over the {p.num_parts} AIV")
    if p.split_kv:
        return f"num_splits=0 (auto): the chunks of all groups cut into {p.num_parts} equal ranges, one per AIV"
    return "num_splits=1: each group whole on one AIV"


def _rows_words(p: DecodePlan) -> str:
    group = p.heads // p.kv_heads
    if p.row_groups <= 1:
        return (f"rows      GQA packing: {group} query heads x {p.seq_q} token(s) = {p.rows} rows (matmul M) "
                f"per (sequence, kv head): the K/V of a kv head is read once per step, not once per query head")
    return (f"rows      GQA packing: {group} query heads x {p.seq_q} token(s) = {group * p.seq_q} rows per kv head, "
            f"more than one group holds (255 rows, the chip's UB): {p.row_groups} row groups of "
            f"{p.row_group_heads} head(s) x {p.row_group_tokens} token(s) "
            f"= {p.rows} rows (matmul M); the K/V of a kv head is read once per row group")


def format_decode_plan(p: DecodePlan) -> str:
    """A human-readable report of one decode plan."""
    c = p.chip
    kernel = "yes" if c.has_kernel and c.aiv_num == 2 * c.aic_num else "no (the decode op runs on Atlas A2/A3)"
    lens = sorted(set(p.seq_lens))
    keys = f"{lens[0]} keys per sequence" if len(lens) == 1 else f"{min(lens)} .. {max(lens)} keys per sequence"
    cache = "contiguous cache" if p.block_size is None else f"paged cache, block_size {p.block_size}"
    busy_aiv = sum(1 for u in p.part_units if u)
    busy_aic = sum(1 for u in p.aic_units if u)
    lines = [
        f"chip      {c.name} ({c.short_soc}): {c.aic_num} AIC / {c.aiv_num} AIV, UB {c.ub_bytes} B, "
        f"L1 {c.l1_bytes} B; kernel: {kernel}",
        f"problem   decode B={p.batch} N={p.heads} Nkv={p.kv_heads} Sq={p.seq_q} D={p.head_dim} {p.dtype}; "
        f"{keys} ({cache}){', causal' if p.causal else ''}",
        _rows_words(p),
        f"blocks    {p.block_n} keys per chunk, {p.chunks_per_block} chunk(s) per cache block; {p.groups} groups "
        f"(sequence, kv head{', row group' if p.row_groups > 1 else ''}), {p.total_units} chunks in all",
        f"split     {_split_words(p)}",
        f"work      {p.pieces} work items (batch, kv head, split); splits per sequence and kv head "
        f"{p.min_pieces}" + (f" .. {p.max_pieces}" if p.max_pieces != p.min_pieces else "")
        + f"; {p.combine_groups} group(s) merged by LSE after SyncAll",
        f"budget    (per AIV UB buffers in the kernel's InitBuffer order, then totals)",
    ]
    lines += budget_lines(p.budget)
    lines += [
        f"cores     AIV: {busy_aiv} of {p.num_parts} busy, chunks max/mean {p.aiv_balance:.3f}; AIC (2 AIV each): "
        f"{busy_aic} of {p.used_core_num} busy, chunks max/mean {p.aic_balance:.3f}",
        f"          chunks per AIC: {' '.join(str(u) for u in p.aic_units)}",
        f"K/V       {p.kv_bytes} B ({p.kv_bytes / 2**20:.2f} MiB) the sequences hold, each key read once per kv head",
        f"workspace {p.workspace_bytes} B ({p.workspace_bytes / 2**20:.2f} MiB) = system {p.system_workspace_bytes} "
        f"+ {p.user_workspace_bytes} (per-AIV slices and {p.max_slots} partial O/LSE slots)",
        f"tiling key {p.tiling_key:#x}",
        f"modeled   {p.modeled_us:.1f} us per step (closed form of the pipeline model, DecodeModeledCycles; "
        f"acl-fa run --decode replays the kernel's trace)",
    ]
    return "\n".join(lines)
