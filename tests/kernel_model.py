"""What the FlashAttention kernel must execute for a plan, derived from the plan alone.

The plan (acl_fa.plan) fixes the blocks, the zigzag order and each AIC's contiguous range of
work items; the kernel's structure (op_kernel/flash_attention_kernel.h) fixes what the cube does
for a query block (one QK and one P.V per K/V block for all its rows) and what one AIV does for
its half of it. From both this module predicts, per simulated core, the counters
the simulator reports for a real launch (acl_fa.sim_stats) and the GM trace bytes per tensor --
so a kernel that computes blocks above the causal diagonal, an extra block, or ignores the
zigzag order no longer matches.

Counting rules (docs/simulator.md#counters):
- cube MACs of one Matmul call: align16(M) x align16(N) x align(K, 32 B / element) on the AIC of
  the group; QK^T is [rows, D] x [D, cols], P.V is [rows, cols] x [cols, D].
- vector elements: the count of a count-form instruction; mask x repeats for repeat forms;
  selected elements for a bit-mask Duplicate; 8 x 8 per Brcb repeat of fp32.
- GM trace: every DataCopy / DataCopyPad range, and each Matmul operand's rows once per call.
"""
from __future__ import annotations

import dataclasses

FP32 = 4
FP32_PER_REPEAT = 64     # one 256-B vector repeat of fp32
AIV_PER_AIC = 2          # KERNEL_TYPE_MIX_AIC_1_2


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def align(v: int, a: int) -> int:
    return ceil_div(v, a) * a


@dataclasses.dataclass
class KernelCounts:
    aic_macs: list            # per AIC (block index), cube MACs
    aiv_vector_elems: list    # per AIV (block index), vector elements
    tensor_bytes: dict        # {q|k|v|out|lse|workspace: {"read": bytes, "write": bytes}}

    @property
    def cube_macs(self) -> int:
        return sum(self.aic_macs)

    @property
    def vector_elems(self) -> int:
        return sum(self.aiv_vector_elems)


def query_block_at(pos: int, num_q_blocks: int, zigzag: bool) -> int:
    """Position in a head's visiting order -> query block (zigzag: 0, last, 1, last - 1, ...)."""
    if not zigzag:
        return pos
    return pos // 2 if pos % 2 == 0 else num_q_blocks - 1 - pos // 2


def item_rows(plan, item: int) -> tuple:
    """(row0, rows, kv_end) of a work item: its query block's rows and, with causal, the keys up to
    its last row's diagonal -- the K/V blocks both AIVs of the group visit (one QK and one P.V
    per block for all the item's rows)."""
    q_block = query_block_at(item % plan.num_q_blocks, plan.num_q_blocks, plan.q_zigzag)
    row0 = q_block * plan.block_m
    rows = min(plan.block_m, plan.seq - row0)
    kv_end = plan.seq_kv
    if plan.causal:
        kv_end = min(max(row0 + rows + plan.seq_kv - plan.seq, 0), plan.seq_kv)
    return row0, rows, kv_end


def aiv_rows(plan, item: int, sub_block: int) -> tuple:
    """(row0, rows) of one AIV's share of a work item: sub-block 0 takes ceil(item rows / 2)."""
    item_row0, rows, _ = item_rows(plan, item)
    first = ceil_div(rows, 2)
    return item_row0 + (0 if sub_block == 0 else first), (first if sub_block == 0 else rows - first)


def _mask_elems(plan, rows: int, row0: int, col0: int, cols: int, width: int) -> int:
    """Elements MaskScores sets to -inf on one [rows, width] score tile: per row, columns from
    the first invisible one to the tile's width (a bit-masked partial repeat, then whole repeats)."""
    n = width
    first_row_limit = row0 + plan.seq_kv - plan.seq - col0 + 1
    crosses = plan.causal and first_row_limit < cols
    if not crosses and cols == n:
        return 0
    total = 0
    for r in range(rows):
        limit = cols
        if crosses and first_row_limit + r < limit:
            limit = first_row_limit + r
        if limit >= n:
            continue
        total += n - max(0, limit)   # the partial repeat's selected bits + the whole repeats after it
    return total


def _row_ops(rows: int, width: int) -> int:
    """Elements of a row-wise op over a [rows, width] tile: one repeat per row per 64 columns."""
    return rows * width


def _reduce_rows(rows: int, width: int) -> int:
    """The softmax's row reductions: for whole 512-column groups (at most 4096 columns),
    ReduceRowsWhole -- one WholeReduce repeat per 64 columns, then one per row over its
    width / 64 partials; else ReduceRows -- fold initialised ([rows, 64]), the width folded in,
    one WholeReduce per row."""
    if width % 512 == 0 and width // FP32_PER_REPEAT <= FP32_PER_REPEAT:
        return rows * width + rows * (width // FP32_PER_REPEAT)
    return rows * FP32_PER_REPEAT + rows * width + rows * FP32_PER_REPEAT


def _brcb(rows: int) -> int:
    return ceil_div(rows, 8) * 8 * 8


def chunk_rows(plan) -> int:
    """Score rows an AIV moves through UB at a time (the tiling's chunkRows), from the budget's
    scoreQue line: 2 x [c, n] fp32 (op_host UbLines)."""
    line = next(b for b in plan.budget if b.name.startswith("scoreQue S"))
    return line.bytes // (2 * plan.block_n * FP32)


def expected_counts(plan) -> KernelCounts:
    """The counters and trace bytes a launch of `plan` must produce."""
    isz = 2  # float16 / bfloat16
    d, n = plan.head_dim, plan.block_n
    c = chunk_rows(plan)
    c0 = 32 // isz
    aic_macs = [0] * plan.used_core_num
    aiv_vec = [0] * (plan.used_core_num * AIV_PER_AIC)
    t = {name: {"read": 0, "write": 0} for name in ("q", "k", "v", "out", "lse", "workspace")}
    ws = t["workspace"]
    for core in range(plan.used_core_num):
        for item in range(plan.core_item_start[core], plan.core_item_start[core + 1]):
            _, m, kv_end = item_rows(plan, item)
            blocks = ceil_div(kv_end, n)
            for j in range(blocks):
                cols = min(n, kv_end - j * n)  # the last block stops at the item's last visible key
                # QK^T then P.V on the AIC, once for the item's m rows (sub-block 0 issues both).
                aic_macs[core] += 2 * align(m, 16) * align(cols, 16) * align(d, c0)
                t["q"]["read"] += m * d * isz
                t["k"]["read"] += cols * d * isz
                t["v"]["read"] += cols * d * isz
                ws["write"] += m * cols * FP32             # S (Matmul C)
                ws["read"] += m * cols * isz               # P as the P.V Matmul's A
                ws["write"] += m * d * FP32                # P.V (Matmul C)
            for sub in range(AIV_PER_AIC):
                row0, rows = aiv_rows(plan, item, sub)
                if rows == 0:
                    continue
                vec = 2 * rows + rows * d                       # rowMax, rowSum, acc initialised
                for j in range(blocks):
                    col0 = j * n
                    # The tile's width: the columns QK wrote (up to the item's last visible key)
                    # rounded up to 16 (whole 32-B blocks of S and of P).
                    w = min(n, align(min(n, kv_end - col0), 16))
                    cols = min(n, plan.seq_kv - col0, w)
                    ws["read"] += rows * w * FP32              # its rows of S into UB
                    ws["write"] += rows * w * isz              # its rows of P out of UB
                    ws["read"] += rows * d * FP32              # its rows of P.V into UB
                    # SoftmaxBlock, per chunk of c rows: mask, max of the raw S scaled per row,
                    # m_new (floored at -FLT_MAX), alpha, -m_new broadcast, scale into one block,
                    # scale S - m_new (one FusedMulAdd pass), P = exp, sum, P cast.
                    vec += _mask_elems(plan, rows, row0, col0, cols, w)
                    vec += _reduce_rows(rows, w) + rows + 4 * rows + rows + _brcb(rows)
                    vec += 8 * ceil_div(rows, c) + _row_ops(rows, w)
                    vec += rows * w + _reduce_rows(rows, w) + 2 * rows + rows * w
                    # AccumulateValues: acc = alpha * acc + P.V (one FusedMulAdd pass).
                    vec += _brcb(rows) + _row_ops(rows, d)
                # WriteOutput: LSE = m + ln(l), l floored at FLT_MIN (rows that saw no key: l = 0,
                # acc = 0), O = acc / l, cast.
                vec += _brcb(rows) + _row_ops(rows, d) + rows * d + 3 * rows
                aiv_vec[core * AIV_PER_AIC + sub] += vec
                t["out"]["write"] += rows * d * isz
                t["lse"]["write"] += rows * FP32
    return KernelCounts(aic_macs, aiv_vec, t)


def useful_macs(plan) -> int:
    """Both matmuls over the visible (query, key) pairs only: 2 x B x N x D x pairs."""
    diag = plan.seq_kv - plan.seq
    if plan.causal:
        pairs = sum(min(plan.seq_kv, max(0, i + diag + 1)) for i in range(plan.seq))
    else:
        pairs = plan.seq * plan.seq_kv
    return 2 * plan.batch * plan.heads * plan.head_dim * pairs
