// flash_attention_rows.h -- the vector half of FlashAttention-2, shared by the kernel paths of
// every architecture: the online softmax of one score block and the final O / LSE rows.
//
// For a query row block of `rows` rows and a K/V block of `cols` keys (tile row stride n):
//   S     *= scale; mask             (only on blocks crossing the causal diagonal or the Skv tail)
//   m_new  = max(m, rowmax(S));  alpha = exp(m - m_new)
//   P      = exp(S - m_new);  l = alpha * l + rowsum(P)              (fp32, in place of S)
//   acc    = alpha * acc + P.V
// and at the end O = acc / l, LSE = m + ln(l). Per-row statistics are fp32 vectors in UB.
// Row-wise broadcasts use Brcb where the architecture has it (dav-c220, dav-m200); dav-c100
// (910A, arch 1001) has no Brcb (asc-devkit impl/basic_api/dav_c100/kernel_operator_vec_brcb_impl.h
// reports it unsupported), so there each row's value is read by the scalar unit and applied with
// one scalar-operand vector instruction per row.
#pragma once

#include "kernel_operator.h"

#include "attention_row_ops.h"
#include "flash_attention_tiling.h"

namespace flash_attn {

using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;
constexpr uint32_t STAT_SLOTS = 6;        // per-row fp32 vectors kept in statBuf (see StatSlot)
constexpr float NEG_INF = -__builtin_inff();

#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
constexpr bool HAS_BRCB = false;
#else
constexpr bool HAS_BRCB = true;
#endif

using attn_rows::CeilDiv;
using attn_rows::Min;
__aicore__ inline uint32_t Align32Bytes(uint32_t bytes) { return (bytes + 31) / 32 * 32; }

// Orders the pipe named second after the pipe named first (e.g. MTE3_S: the scalar unit waits
// until the last GM write of MTE3 has landed).
template <AscendC::HardEvent EVENT>
__aicore__ inline void WaitForPipe()
{
    event_t eventId = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
    AscendC::SetFlag<EVENT>(eventId);
    AscendC::WaitFlag<EVENT>(eventId);
}

// The online-softmax state of one vector unit's rows and the row-wise operations on its tiles.
// Buffers (UB, m = rows per vector unit; flash_attention_tiling.h):
//   statBuf  STAT_SLOTS x [m] fp32, each slot align32(m * 4) bytes
//   foldBuf  [m, 64] fp32: a tile folded to one repeat per row for the row reductions
//   brcbBuf  [m, 8] fp32: Brcb of a per-row vector, one 32-B block per row
class OnlineSoftmax {
public:
    // Per-row fp32 vectors of statBuf.
    enum StatSlot : uint32_t { ROW_MAX_A = 0, ROW_MAX_B, ROW_SUM, BLOCK_MAX, BLOCK_SUM, ALPHA };

    __aicore__ inline void Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *tiling, uint32_t m);

    // Starts a row block: m = -inf, l = 0, acc = 0 ([rows, D] fp32).
    __aicore__ inline void Reset(const AscendC::LocalTensor<float> &acc, uint32_t rows);
    // Turns scores [rows, stride] fp32 of kv block `kvBlock` into P in place and updates m, l,
    // alpha. stride (a multiple of 8, at least the block's key count) is blockN, or less for the
    // Skv tail block of a tile that the cube wrote with rows of its own width; columns past the
    // block's keys become P = 0. row0 = the first query row of the tile in the sequence.
    __aicore__ inline void ScoresToProbs(const AscendC::LocalTensor<float> &scores, uint32_t stride,
                                         uint32_t kvBlock, uint32_t rows, uint32_t row0);
    // acc = alpha * acc + pv, both [rows, D] fp32.
    __aicore__ inline void Accumulate(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &pv,
                                      uint32_t rows);
    // acc = acc / l (O in fp32), lse = m + ln(l); rows that see no key: O 0 (in out after the
    // caller's cast, see BlindRows) and LSE -inf.
    __aicore__ inline void Finish(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &lse,
                                  uint32_t rows, uint32_t row0);
    // Rows [0, result) of the tile starting at row0 see no key (causal with Sq > Skv).
    __aicore__ inline uint32_t BlindRows(uint32_t rows, uint32_t row0) const;

private:
    __aicore__ inline void MaskScores(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t rows,
                                      uint32_t row0, uint32_t col0, uint32_t cols);
    // tile[r, :width] = tile[r, :width] (OP) rowValues[r] for a tile with row stride `stride`.
    template <attn_rows::Op OP>
    __aicore__ inline void ApplyRows(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &rowValues,
                                     uint32_t rows, uint32_t width, uint32_t stride);

    __aicore__ inline AscendC::LocalTensor<float> Slot(uint32_t slot) const { return stat_[slot * statStride_]; }

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf_;  // STAT_SLOTS x [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> foldBuf_;  // [m, 64] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> brcbBuf_;  // [m, 8] fp32
    AscendC::LocalTensor<float> stat_, fold_, brcb_;
    uint32_t statStride_ = 0;  // elements between StatSlot vectors
    uint32_t maxSlot_ = ROW_MAX_A;  // the slot holding the current row max (swaps with ROW_MAX_B)
};

__aicore__ inline void OnlineSoftmax::Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *tiling, uint32_t m)
{
    td_ = tiling;
    statStride_ = Align32Bytes(m * sizeof(float)) / sizeof(float);
    pipe->InitBuffer(statBuf_, STAT_SLOTS * statStride_ * sizeof(float));
    pipe->InitBuffer(foldBuf_, m * FP32_PER_REPEAT * sizeof(float));
    pipe->InitBuffer(brcbBuf_, m * FP32_PER_BLOCK * sizeof(float));
    stat_ = statBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
}

__aicore__ inline void OnlineSoftmax::Reset(const AscendC::LocalTensor<float> &acc, uint32_t rows)
{
    maxSlot_ = ROW_MAX_A;
    AscendC::Duplicate(Slot(ROW_MAX_A), NEG_INF, rows);
    AscendC::Duplicate(Slot(ROW_SUM), 0.0f, rows);
    AscendC::Duplicate(acc, 0.0f, rows * td_->headDim);
}

__aicore__ inline void OnlineSoftmax::ScoresToProbs(const AscendC::LocalTensor<float> &scores, uint32_t stride,
                                                    uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    const uint32_t n = stride;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, td_->seqKv - col0);
    const uint32_t elems = rows * n;  // [rows, n]; columns >= cols are masked below

    AscendC::Muls(scores, scores, td_->scaleValue, elems);
    MaskScores(scores, n, rows, row0, col0, cols);

    AscendC::LocalTensor<float> rowMax = Slot(maxSlot_);
    maxSlot_ = maxSlot_ == ROW_MAX_A ? ROW_MAX_B : ROW_MAX_A;
    AscendC::LocalTensor<float> newMax = Slot(maxSlot_);
    AscendC::LocalTensor<float> blockMax = Slot(BLOCK_MAX);
    AscendC::LocalTensor<float> blockSum = Slot(BLOCK_SUM);
    AscendC::LocalTensor<float> rowSum = Slot(ROW_SUM);
    AscendC::LocalTensor<float> alpha = Slot(ALPHA);

    attn_rows::ReduceRows<attn_rows::Reduce::MAX>(blockMax, scores, fold_, rows, n, n);
    AscendC::Max(newMax, rowMax, blockMax, rows);    // m_new = max(m_old, rowmax(S))
    AscendC::Sub(alpha, rowMax, newMax, rows);
    AscendC::Exp(alpha, alpha, rows);                // alpha = exp(m_old - m_new), 0 on the first block
    ApplyRows<attn_rows::Op::SUB>(scores, newMax, rows, n, n);
    AscendC::Exp(scores, scores, elems);             // P = exp(S - m_new), masked entries -> 0
    attn_rows::ReduceRows<attn_rows::Reduce::SUM>(blockSum, scores, fold_, rows, n, n);
    AscendC::Mul(rowSum, rowSum, alpha, rows);
    AscendC::Add(rowSum, rowSum, blockSum, rows);    // l = alpha * l + rowsum(P)
}

__aicore__ inline void OnlineSoftmax::Accumulate(const AscendC::LocalTensor<float> &acc,
                                                 const AscendC::LocalTensor<float> &pv, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    ApplyRows<attn_rows::Op::MUL>(acc, Slot(ALPHA), rows, d, d);  // acc *= alpha
    AscendC::Add(acc, acc, pv, rows * d);                 // acc += P . V
}

__aicore__ inline void OnlineSoftmax::Finish(const AscendC::LocalTensor<float> &acc,
                                             const AscendC::LocalTensor<float> &lse, uint32_t rows, uint32_t row0)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> rowSum = Slot(ROW_SUM);
    ApplyRows<attn_rows::Op::DIV>(acc, rowSum, rows, d, d);  // O = acc / l
    AscendC::Ln(lse, rowSum, rows);
    AscendC::Add(lse, lse, Slot(maxSlot_), rows);    // LSE = m + ln(l)
    const uint32_t blind = BlindRows(rows, row0);
    if (blind > 0) {
        AscendC::Duplicate(acc, 0.0f, blind * d);
        AscendC::Duplicate(lse, NEG_INF, blind);
    }
}

__aicore__ inline uint32_t OnlineSoftmax::BlindRows(uint32_t rows, uint32_t row0) const
{
    // The first rows i of the sequence with i + Skv - Sq < 0 see no key at all.
    if (td_->causal == 0 || td_->seqQ <= td_->seqKv) {
        return 0;
    }
    const uint32_t blind = td_->seqQ - td_->seqKv;
    return row0 < blind ? Min(blind - row0, rows) : 0;
}

__aicore__ inline void OnlineSoftmax::MaskScores(const AscendC::LocalTensor<float> &scores, uint32_t stride,
                                                 uint32_t rows, uint32_t row0, uint32_t col0, uint32_t cols)
{
    const uint32_t n = stride;
    // visible(r) = keys of row (row0 + r) inside this block: all `cols` real columns, or fewer on
    // a block crossing the causal diagonal (key j visible iff j <= i + Skv - Sq).
    const int64_t diagonal = static_cast<int64_t>(td_->seqKv) - td_->seqQ;
    const int64_t firstRowLimit = static_cast<int64_t>(row0) + diagonal - col0 + 1;  // visible(0), unclamped
    const bool crossesDiagonal = td_->causal != 0 && firstRowLimit < static_cast<int64_t>(cols);
    if (!crossesDiagonal && cols == n) {
        return;  // fully visible block: no mask work
    }
    for (uint32_t r = 0; r < rows; ++r) {
        int64_t limit = static_cast<int64_t>(cols);
        if (crossesDiagonal && firstRowLimit + r < limit) {
            limit = firstRowLimit + r;
        }
        if (limit >= static_cast<int64_t>(n)) {
            continue;
        }
        const uint32_t visible = limit <= 0 ? 0 : static_cast<uint32_t>(limit);
        attn_rows::FillColumns(scores, r * n, visible, n, NEG_INF);  // columns [visible, n) -> -inf
    }
}

template <attn_rows::Op OP>
__aicore__ inline void OnlineSoftmax::ApplyRows(const AscendC::LocalTensor<float> &tile,
                                                const AscendC::LocalTensor<float> &rowValues, uint32_t rows,
                                                uint32_t width, uint32_t stride)
{
    if constexpr (HAS_BRCB) {
        attn_rows::BroadcastRows(brcb_, rowValues, rows);
        attn_rows::ApplyRows<OP>(tile, brcb_, rows, width, stride);
    } else {
        // No Brcb: the scalar unit reads each row's value once and one scalar-operand vector
        // instruction applies it to the row (rows scalar reads per call, independent of width).
        WaitForPipe<AscendC::HardEvent::V_S>();
        for (uint32_t r = 0; r < rows; ++r) {
            const float value = rowValues.GetValue(r);
            const AscendC::LocalTensor<float> row = tile[r * stride];
            if constexpr (OP == attn_rows::Op::SUB) {
                AscendC::Adds(row, row, -value, width);
            } else if constexpr (OP == attn_rows::Op::MUL) {
                AscendC::Muls(row, row, value, width);
            } else {
                AscendC::Muls(row, row, 1.0f / value, width);
            }
        }
    }
}

}  // namespace flash_attn
