// flash_attention_rows.h -- the vector half of FlashAttention-2, shared by the kernel paths of
// every architecture: the online softmax of one score block and the final O / LSE rows.
//
// For a query row block of `rows` rows and a K/V block of `cols` keys (tile row stride n):
//   S     *= scale                   (softcap > 0, FlashAttentionV3: S = softcap * tanh(S / softcap);
//                                     where FusedMulAdd exists, folded into P's argument below)
//   visibility                       (MaskScores: -inf outside the band and past the Skv tail;
//                                     only on blocks the band's edges or the tail cross)
//   m_new  = max(m, rowmax(S), -FLT_MAX);  alpha = exp(m - m_new)
//   P      = exp(S - m_new);  l = alpha * l + rowsum(P)              (fp32, in place of S)
//   acc    = alpha * acc + P.V
// and at the end O = acc / max(l, FLT_MIN), LSE = m + ln(l). Per-row statistics are fp32
// vectors in UB. The floor on m keeps a row that has seen no key yet at P = exp(-inf) = 0
// instead of exp(-inf + inf) = NaN; such a row ends with l = 0, so O = 0 and LSE = -inf
// without knowing why it saw nothing (band, sequence end or an explicit mask).
// Row-wise broadcasts use Brcb where the architecture has it (dav-c220, dav-m200) and the scalar
// unit on dav-c100 (attn_rows::ApplyRowValues).
#pragma once

#include "kernel_operator.h"

#include "attention_band.h"
#include "attention_row_ops.h"
#include "flash_attention_tiling.h"

namespace flash_attn {

using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;
constexpr uint32_t STAT_SLOTS = 7;        // per-row fp32 vectors kept in statBuf (see StatSlot)
constexpr float NEG_INF = -__builtin_inff();
constexpr float MAX_FLOOR = -3.40282346638528859812e+38f;  // -FLT_MAX: the floor of the running row max
constexpr float SUM_FLOOR = 1.17549435082228750797e-38f;   // FLT_MIN: O = acc / max(l, FLT_MIN)
constexpr float HALF_LOWEST = -65504.0f;  // half's lowest finite value: the narrow softmax's shift floor

using attn_rows::CeilDiv;
using attn_rows::Min;
__aicore__ inline uint32_t Align32Bytes(uint32_t bytes) { return (bytes + 31) / 32 * 32; }

using attn_rows::WaitForPipe;

// ScoresToProbs' default: no mask bias. A Bias may also leave a per-row term out of the tile:
// RowShift then names the [rows] fp32 values to subtract from its rows, which the softmax takes
// into its row max instead of a pass over the tile (FlashAttentionV5's ALiBi, score_mods.h).
struct NoBias {
    __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &, uint32_t, uint32_t, uint32_t, uint32_t,
                                   uint32_t)
    {
    }
    __aicore__ inline bool RowShift(AscendC::LocalTensor<float> *) { return false; }
};

// The online-softmax state of one vector unit's rows and the row-wise operations on its tiles.
// The state covers all m rows the unit owns; a score tile may hold only a chunk of them (at most
// c rows, c <= m, a multiple of 8 so that a chunk's per-row vectors start 32-B aligned): a block's
// softmax is StartBlock, then one ScoresToProbs per chunk, each naming its first state row.
// Buffers (UB, m = rows per vector unit, c = rows per score tile; flash_attention_tiling.h):
//   statBuf  STAT_SLOTS x [m] fp32, each slot align32(m * 4) bytes
//   foldBuf  [c, 64] fp32: a tile folded to one repeat per row for the row reductions (a kernel
//            may instead lend the reductions a buffer it does not use during ScoresToProbs: Init
//            with ownFold false, then UseFold before each ScoresToProbs)
//   brcbBuf  [m, 8] fp32: Brcb of a per-row vector, one 32-B block per row
class OnlineSoftmax {
public:
    // Per-row fp32 vectors of statBuf.
    // alpha has one slot per K/V block parity (ALPHA_A + kvBlock % 2): a kernel that adds P_j . V_j
    // only after the softmax of block j + 1 still rescales acc by block j's alpha.
    enum StatSlot : uint32_t { ROW_MAX_A = 0, ROW_MAX_B, ROW_SUM, BLOCK_MAX, BLOCK_SUM, ALPHA_A, ALPHA_B };

    // wholeRows: reduce tiles of whole 512-column groups with ReduceRowsWhole and subtract the row
    // max one instruction per row where that takes fewer instructions (the MIX kernel's choice;
    // the coupled kernel keeps one instruction per 64 columns).
    __aicore__ inline void Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *tiling, uint32_t m,
                                uint32_t chunkRows, bool ownFold = true, bool wholeRows = false);
    // The [c, 64] fp32 scratch of the next ScoresToProbs' row reductions (Init without ownFold).
    __aicore__ inline void UseFold(const AscendC::LocalTensor<float> &fold) { fold_ = fold; }

    // Starts a row block of a sequence with seqQ queries and seqKv keys: m = -inf, l = 0,
    // acc = 0 ([rows, D] fp32). sink (FlashAttentionV5's attention sink logit, score_mods.h): the
    // row state starts as if one key of score `sink` and value 0 had been seen, m = sink, l = 1,
    // so its exp(sink - m) stays in the denominator and the LSE; a row that then sees no key
    // ends with O = 0 and LSE = sink.
    __aicore__ inline void Reset(const AscendC::LocalTensor<float> &acc, uint32_t rows, uint32_t seqQ, uint32_t seqKv,
                                 float sink = NEG_INF);
    // Starts the softmax of a K/V block: the running row max moves to the other ROW_MAX slot, so
    // every chunk of the block reads the max before the block and writes the new one.
    __aicore__ inline void StartBlock() { maxSlot_ = maxSlot_ == ROW_MAX_A ? ROW_MAX_B : ROW_MAX_A; }
    // Turns scores [rows, stride] fp32 of kv block `kvBlock` into P in place and updates m, l and
    // the block's alpha of state rows [stateRow, stateRow + rows) (stateRow a multiple of 8; after
    // StartBlock). stride (a multiple of 8) is blockN, or less: for the Skv tail block of a tile that
    // the cube wrote with rows of its own width, or for a block the band's end cuts, where no row
    // of the tile sees a key at or past `stride`; columns past the block's keys become P = 0. row0 = the first query row of the tile in the sequence.
    // bias (optional): an explicit mask's AddBias(scores, stride, row0, rows, col0, cols), which adds
    // 0 / -inf to the scaled scores of the tile's keys [col0, col0 + cols) before the row max.
    template <typename Bias = NoBias>
    __aicore__ inline void ScoresToProbs(const AscendC::LocalTensor<float> &scores, uint32_t stride,
                                         uint32_t kvBlock, uint32_t rows, uint32_t row0, uint32_t stateRow,
                                         Bias *bias = nullptr);
    // ScoresToProbs in the 16-bit input type H (half; the high-performance precision's S): for a
    // tile with stride a multiple of 128, no soft-capping, no mask bias and scale > 0; the band's
    // edges and the Skv tail are masked in H (MaskScores: -inf, so P = 0 there, as in fp32), and
    // a masked tile floors the shift at H's lowest finite value (a row that has seen no key yet
    // keeps a finite shift: S - shift is -inf - finite = -inf, never -inf + inf). row0: the tile's
    // first query row in the sequence. scores [rows, stride] H (raw S, overwritten), prob [rows, stride] H receives
    // P = exp(scale (S - shift)) (also the max's scratch before that), wide [rows, stride] fp32
    // scratch for the row sum, which is taken in fp32 of P as the cube will read it. The running
    // max stays fp32, m = scale * shift, where shift = max(m_old / scale, rowmax(S)) rounded to H
    // (so that S - shift is one H instruction and P is relative to the m the state holds). The
    // fold for the fp32 row sum must be lent (UseFold) and be free: the caller gives scores'.
    // Scale exactly 1 (S scaled already: the int8 forward's FixPipe) skips the scale's pass.
    template <typename H>
    __aicore__ inline void ScoresToProbsNarrow(const AscendC::LocalTensor<H> &scores, const AscendC::LocalTensor<H> &prob,
                                               const AscendC::LocalTensor<float> &wide, uint32_t stride,
                                               uint32_t kvBlock, uint32_t rows, uint32_t row0, uint32_t stateRow);
    // acc = alpha_kvBlock * acc + pv, both [rows, D] fp32, pv = P_kvBlock . V_kvBlock, for state
    // rows [stateRow, stateRow + rows) (acc: those rows' accumulator); valid until the softmax of
    // block kvBlock + 2.
    __aicore__ inline void Accumulate(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &pv,
                                      uint32_t rows, uint32_t kvBlock, uint32_t stateRow = 0);
    // acc = acc / l (O in fp32), lse = m + ln(l); rows that saw no key (l = 0): O 0, LSE -inf.
    __aicore__ inline void Finish(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &lse,
                                  uint32_t rows);

private:
    // The per-tile visibility of the scores [rows, stride] of keys [col0, col0 + cols) for query
    // rows [row0, row0 + rows): -inf outside the band and in columns [cols, stride). Every
    // restriction of which key a query may see is applied here. E: float, or the half tile of
    // ScoresToProbsNarrow. Returns whether any element was masked.
    template <typename E>
    __aicore__ inline bool MaskScores(const AscendC::LocalTensor<E> &scores, uint32_t stride, uint32_t rows,
                                      uint32_t row0, uint32_t col0, uint32_t cols);
    // tile[r, :width] = tile[r, :width] (OP) rowValues[r] for a tile with row stride `stride`.
    template <attn_rows::Op OP>
    __aicore__ inline void ApplyRows(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &rowValues,
                                     uint32_t rows, uint32_t width, uint32_t stride);

    __aicore__ inline AscendC::LocalTensor<float> Slot(uint32_t slot, uint32_t stateRow = 0) const
    {
        return stat_[slot * statStride_ + stateRow];
    }

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf_;  // STAT_SLOTS x [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> foldBuf_;  // [c, 64] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> brcbBuf_;  // [m, 8] fp32
    AscendC::LocalTensor<float> stat_, fold_, brcb_;
    uint32_t statStride_ = 0;  // elements between StatSlot vectors
    uint32_t seqQ_ = 0, seqKv_ = 0;  // the current row block's sequence lengths
    uint32_t maxSlot_ = ROW_MAX_A;  // the slot of the current row max (StartBlock swaps it with ROW_MAX_B)
    bool wholeRows_ = false;        // Init's wholeRows

    // dst[r] = max (sum) of scores[r, 0:n], a tile of row stride n: ReduceRowsWhole where it takes
    // the tile and wholeRows_ asks for it (the MIX kernel only: ReduceRowsWhole needs dav-c220's
    // float WholeReduce with ORDER_ONLY_VALUE), else ReduceRowsOnArch, which uses only what the
    // architecture has (fold_ is the scratch).
    template <attn_rows::Reduce OP>
    __aicore__ inline void ReduceTile(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &scores,
                                      uint32_t rows, uint32_t n)
    {
        if (wholeRows_ && attn_rows::WholeRowReducible(n, n)) {
            attn_rows::ReduceRowsWhole<OP>(dst, scores, fold_, rows, n);
        } else {
            attn_rows::ReduceRowsOnArch<OP>(dst, scores, fold_, rows, n, n);
        }
    }
};

__aicore__ inline void OnlineSoftmax::Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *tiling, uint32_t m,
                                           uint32_t chunkRows, bool ownFold, bool wholeRows)
{
    td_ = tiling;
    wholeRows_ = wholeRows;
    statStride_ = Align32Bytes(m * sizeof(float)) / sizeof(float);
    pipe->InitBuffer(statBuf_, STAT_SLOTS * statStride_ * sizeof(float));
    if (ownFold) {
        pipe->InitBuffer(foldBuf_, chunkRows * FP32_PER_REPEAT * sizeof(float));
        fold_ = foldBuf_.Get<float>();
    }
    pipe->InitBuffer(brcbBuf_, m * FP32_PER_BLOCK * sizeof(float));
    stat_ = statBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
}

__aicore__ inline void OnlineSoftmax::Reset(const AscendC::LocalTensor<float> &acc, uint32_t rows, uint32_t seqQ,
                                            uint32_t seqKv, float sink)
{
    seqQ_ = seqQ;
    seqKv_ = seqKv;
    maxSlot_ = ROW_MAX_A;
    // Soft-capped scores are shifted by -softcap (ScoresToProbs), the sink with them.
    AscendC::Duplicate(Slot(ROW_MAX_A), sink == NEG_INF ? sink : sink - td_->softcap, rows);
    AscendC::Duplicate(Slot(ROW_SUM), sink == NEG_INF ? 0.0f : 1.0f, rows);  // exp(sink - m) with m = sink
    AscendC::Duplicate(acc, 0.0f, rows * td_->headDim);
}

template <typename Bias>
__aicore__ inline void OnlineSoftmax::ScoresToProbs(const AscendC::LocalTensor<float> &scores, uint32_t stride,
                                                    uint32_t kvBlock, uint32_t rows, uint32_t row0, uint32_t stateRow,
                                                    Bias *bias)
{
    const uint32_t n = stride;
    const uint32_t col0 = kvBlock * td_->blockN;
    // The tile's keys: the block's, cut at the Skv tail and at the tile's width (a caller passes a
    // stride below the block's keys only when no row of the tile sees a key past it).
    const uint32_t cols = Min(Min(td_->blockN, seqKv_ - col0), n);
    const uint32_t elems = rows * n;  // [rows, n]; columns >= cols are masked below

    // Scale folded into the exponent's argument: without soft-capping or a mask bias (which adds to
    // the scaled scores) and with scale > 0, the row max is taken of the raw scores and scaled per
    // row (rowmax(scale S) = scale rowmax(S): rounding is monotone), and one FusedMulAdd pass gives
    // scale S - m_new (ScaleShiftRows) where Muls and a Sub pass did: the same roundings, one pass
    // less per score element. The mask's -inf stays -inf under a positive scale.
    const bool foldScale = attn_rows::HAS_FUSED_MUL_ADD && attn_rows::HAS_BRCB && td_->softcap <= 0.0f &&
                           bias == nullptr && td_->scaleValue > 0.0f;
    if (td_->softcap > 0.0f) {
        // FlashAttentionV3: S = softcap * tanh(scale * S / softcap), before any mask (flash-attn's
        // order); brcb_ lends one block of scratch, free until ApplyRows below.
        // Shifted by -softcap (one pass less): Reset starts a sink shifted alike and Finish adds
        // softcap back to the LSE.
        attn_rows::SoftCap(scores, brcb_, elems, td_->scaleValue, td_->softcap, true);
    } else if (!foldScale) {
        AscendC::Muls(scores, scores, td_->scaleValue, elems);
    }
    MaskScores(scores, n, rows, row0, col0, cols);
    // shifted: the true scores are scores - rowShift[r] (the bias' per-row term, left out of the tile).
    AscendC::LocalTensor<float> rowShift;
    bool shifted = false;
    if (bias != nullptr) {
        bias->AddBias(scores, n, row0, rows, col0, cols);
        shifted = bias->RowShift(&rowShift);
    }

    AscendC::LocalTensor<float> rowMax = Slot(maxSlot_ == ROW_MAX_A ? ROW_MAX_B : ROW_MAX_A, stateRow);
    AscendC::LocalTensor<float> newMax = Slot(maxSlot_, stateRow);
    AscendC::LocalTensor<float> blockMax = Slot(BLOCK_MAX, stateRow);
    AscendC::LocalTensor<float> blockSum = Slot(BLOCK_SUM, stateRow);
    AscendC::LocalTensor<float> rowSum = Slot(ROW_SUM, stateRow);
    AscendC::LocalTensor<float> alpha = Slot(ALPHA_A + kvBlock % 2, stateRow);

    ReduceTile<attn_rows::Reduce::MAX>(blockMax, scores, rows, n);
    if (foldScale) {
        AscendC::Muls(blockMax, blockMax, td_->scaleValue, rows);  // rowmax(scale S)
    }
    if (shifted) {  // never with foldScale: a bias excludes the fold
        AscendC::Sub(blockMax, blockMax, rowShift, rows);  // rowmax of the true scores
    }
    AscendC::Max(newMax, rowMax, blockMax, rows);    // m_new = max(m_old, rowmax(S))
    attn_rows::MaxsOnArch(newMax, newMax, MAX_FLOOR, rows, brcb_);  // finite even for a row that sees no key yet
    AscendC::Sub(alpha, rowMax, newMax, rows);
    AscendC::Exp(alpha, alpha, rows);                // alpha = exp(m_old - m_new), 0 on the first block
    // What each row subtracts before Exp: m_new, or m_new + rowShift (blockSum's slot is free until
    // the row sums below).
    AscendC::LocalTensor<float> subtrahend = newMax;
    if (shifted) {
        AscendC::Add(blockSum, newMax, rowShift, rows);
        subtrahend = blockSum;
    }
    if (foldScale) {
        // -m_new into BLOCK_SUM (free until the row sum below), broadcast; scale into fold_'s first
        // block (free between the two row reductions).
        AscendC::Muls(blockSum, newMax, -1.0f, rows);
        attn_rows::BroadcastRows(brcb_, blockSum, rows);
        AscendC::Duplicate(fold_, td_->scaleValue, static_cast<int32_t>(FP32_PER_BLOCK));
        const bool byRow = wholeRows_ && n % FP32_PER_REPEAT == 0 && rows < n / FP32_PER_REPEAT;
        attn_rows::ScaleShiftRows(scores, fold_, brcb_, rows, n, n, byRow);  // scale S - m_new
    } else if (attn_rows::HAS_BRCB && wholeRows_ && n % FP32_PER_REPEAT == 0 && rows < n / FP32_PER_REPEAT) {
        attn_rows::BroadcastRows(brcb_, subtrahend, rows);
        attn_rows::ApplyRowsByRow<attn_rows::Op::SUB>(scores, brcb_, rows, n, n);  // fewer instructions here
    } else {
        ApplyRows<attn_rows::Op::SUB>(scores, subtrahend, rows, n, n);
    }
    AscendC::Exp(scores, scores, elems);             // P = exp(S - m_new), masked entries -> 0
    ReduceTile<attn_rows::Reduce::SUM>(blockSum, scores, rows, n);
    AscendC::Mul(rowSum, rowSum, alpha, rows);
    AscendC::Add(rowSum, rowSum, blockSum, rows);    // l = alpha * l + rowsum(P)
}

template <typename H>
__aicore__ inline void OnlineSoftmax::ScoresToProbsNarrow(const AscendC::LocalTensor<H> &scores,
                                                          const AscendC::LocalTensor<H> &prob,
                                                          const AscendC::LocalTensor<float> &wide, uint32_t stride,
                                                          uint32_t kvBlock, uint32_t rows, uint32_t row0,
                                                          uint32_t stateRow)
{
    static_assert(sizeof(H) == 2, "the narrow softmax takes a 16-bit tile (128 columns per repeat)");
    const uint32_t n = stride;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(Min(td_->blockN, seqKv_ - col0), n);
    const bool masked = MaskScores(scores, n, rows, row0, col0, cols);
    const uint32_t elems = rows * n;
    const float scale = td_->scaleValue;
    AscendC::LocalTensor<float> rowMax = Slot(maxSlot_ == ROW_MAX_A ? ROW_MAX_B : ROW_MAX_A, stateRow);
    AscendC::LocalTensor<float> newMax = Slot(maxSlot_, stateRow);
    AscendC::LocalTensor<float> blockMax = Slot(BLOCK_MAX, stateRow);
    AscendC::LocalTensor<float> blockSum = Slot(BLOCK_SUM, stateRow);
    AscendC::LocalTensor<float> rowSum = Slot(ROW_SUM, stateRow);
    AscendC::LocalTensor<float> alpha = Slot(ALPHA_A + kvBlock % 2, stateRow);
    // [rows] H in BLOCK_SUM's slot (free until the row sum): rowmax(S), then the shift.
    AscendC::LocalTensor<H> shiftH = blockSum.template ReinterpretCast<H>();
    AscendC::LocalTensor<H> brcbH = brcb_.template ReinterpretCast<H>();  // [m, 16] H: same bytes as [m, 8] fp32

    attn_rows::ReduceRowsMaxB16(shiftH, scores, prob, rows, n);  // raw rowmax(S), exact in H
    AscendC::Cast(blockMax, shiftH, AscendC::RoundMode::CAST_NONE, rows);
    AscendC::Muls(newMax, rowMax, 1.0f / scale, rows);  // m_old in S's units (-inf before any key)
    AscendC::Max(newMax, newMax, blockMax, rows);
    if (masked) {
        // A row with no key so far and none here: -inf, which H cannot shift by.
        attn_rows::MaxsOnArch(newMax, newMax, HALF_LOWEST, rows, brcb_);
    }
    AscendC::Cast(shiftH, newMax, AscendC::RoundMode::CAST_RINT, rows);  // the shift, in H
    AscendC::Cast(newMax, shiftH, AscendC::RoundMode::CAST_NONE, rows);
    AscendC::Muls(newMax, newMax, scale, rows);      // m_new = scale * shift (fp32 state)
    AscendC::Sub(alpha, rowMax, newMax, rows);
    AscendC::Exp(alpha, alpha, rows);                // alpha = exp(m_old - m_new), 0 on the first block
    AscendC::Brcb(brcbH, shiftH, static_cast<uint8_t>(CeilDiv(rows, FP32_PER_BLOCK)), AscendC::BrcbRepeatParams(1, 8));
    attn_rows::SubtractRowsB16(scores, brcbH, rows, n);  // S - shift, in H
    if (scale != 1.0f) {  // 1: the caller scaled S already (the int8 forward's FixPipe), no pass
        AscendC::Muls(scores, scores, static_cast<H>(scale), static_cast<int32_t>(elems));
    }
    AscendC::Exp(prob, scores, static_cast<int32_t>(elems));  // P in H: the cube's operand as it is
    AscendC::Cast(wide, prob, AscendC::RoundMode::CAST_NONE, elems);
    ReduceTile<attn_rows::Reduce::SUM>(blockSum, wide, rows, n);
    AscendC::Mul(rowSum, rowSum, alpha, rows);
    AscendC::Add(rowSum, rowSum, blockSum, rows);    // l = alpha * l + rowsum(P)
}

__aicore__ inline void OnlineSoftmax::Accumulate(const AscendC::LocalTensor<float> &acc,
                                                 const AscendC::LocalTensor<float> &pv, uint32_t rows,
                                                 uint32_t kvBlock, uint32_t stateRow)
{
    const uint32_t d = td_->headDim;
    if constexpr (attn_rows::HAS_FUSED_MUL_ADD && attn_rows::HAS_BRCB) {
        // acc = alpha * acc + P . V in one pass (the same two roundings as Mul, then Add).
        attn_rows::BroadcastRows(brcb_, Slot(ALPHA_A + kvBlock % 2, stateRow), rows);
        attn_rows::RescaleAddRows(acc, brcb_, pv, rows, d);
    } else {
        ApplyRows<attn_rows::Op::MUL>(acc, Slot(ALPHA_A + kvBlock % 2, stateRow), rows, d, d);  // acc *= alpha
        AscendC::Add(acc, acc, pv, rows * d);                 // acc += P . V
    }
}

__aicore__ inline void OnlineSoftmax::Finish(const AscendC::LocalTensor<float> &acc,
                                             const AscendC::LocalTensor<float> &lse, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> rowSum = Slot(ROW_SUM);
    AscendC::Ln(lse, rowSum, rows);
    AscendC::Add(lse, lse, Slot(maxSlot_), rows);    // LSE = m + ln(l): -inf where l = 0
    if (td_->softcap > 0.0f) {
        AscendC::Adds(lse, lse, td_->softcap, rows);  // the capped scores' shift (ScoresToProbs)
    }
    // A row that saw a key has l >= 1 (its max term is exp(0)); one that saw none has l = 0 and
    // acc = 0, so O = 0 / FLT_MIN = 0.
    attn_rows::MaxsOnArch(rowSum, rowSum, SUM_FLOOR, rows, brcb_);
    ApplyRows<attn_rows::Op::DIV>(acc, rowSum, rows, d, d);  // O = acc / l
}

template <typename E>
__aicore__ inline bool OnlineSoftmax::MaskScores(const AscendC::LocalTensor<E> &scores, uint32_t stride,
                                                 uint32_t rows, uint32_t row0, uint32_t col0, uint32_t cols)
{
    const uint32_t n = stride;
    // Row r (query i = row0 + r) sees the block's columns [from(r), to(r)) with
    //   from(r) = i + diag - pre - col0,  to(r) = i + diag + next - col0 + 1   (diag = Skv - Sq)
    // clamped to [0, cols]; both grow by one per row.
    // (attention_band.h; an unbounded side lies beyond every column, so it cuts nothing).
    const int64_t diag = attn_band::Diagonal(seqQ_, seqKv_);
    const int64_t from0 = attn_band::KeyBegin(row0, diag, td_->preTokens) - col0;
    const int64_t to0 = attn_band::KeyEnd(row0, diag, td_->nextTokens) - col0;
    const bool cutsLeft = from0 + static_cast<int64_t>(rows) - 1 > 0;
    const bool cutsRight = to0 < static_cast<int64_t>(cols);
    if (!cutsLeft && !cutsRight && cols == n) {
        return false;  // every row sees every column: no mask work
    }
    for (uint32_t r = 0; r < rows; ++r) {
        int64_t from = cutsLeft ? from0 + r : 0;
        int64_t to = cutsRight ? to0 + r : static_cast<int64_t>(cols);
        to = to > static_cast<int64_t>(cols) ? static_cast<int64_t>(cols) : to;
        to = to < 0 ? 0 : to;
        from = from < 0 ? 0 : (from > to ? to : from);
        attn_rows::FillOutside(scores, r * n, static_cast<uint32_t>(from), static_cast<uint32_t>(to), n,
                               static_cast<E>(NEG_INF));
    }
    return true;
}

template <attn_rows::Op OP>
__aicore__ inline void OnlineSoftmax::ApplyRows(const AscendC::LocalTensor<float> &tile,
                                                const AscendC::LocalTensor<float> &rowValues, uint32_t rows,
                                                uint32_t width, uint32_t stride)
{
    attn_rows::ApplyRowValues<OP>(tile, brcb_, rowValues, rows, width, stride);
}

}  // namespace flash_attn
