// flash_attention_int8_kernel.h -- FlashAttention-2 forward with QK^T in int8 for Atlas A2/A3
// (arch 2201), a mixed AIC:AIV 1:2 kernel (the FlashAttentionInt8 op; docs/int8.md).
//
// Inputs: query and key int8, quantized per block (AttentionQuant: query per blockM rows, key per
// blockN keys, key smoothed first), their fp32 scales q_scale [B, N, numQBlocks] and k_scale
// [B, Nkv, numKvBlocks], and value in T (half / bfloat16). Per work item (b, n, query block qb)
// and K/V block j:
//   S_j   = half(Q8 . K8_j^T * cut(scale * q_scale[qb] * k_scale[j]))
//                                     (cube: int8 x int8 -> int32 in L0C, dequantized to half by
//                                      FixPipe on its way to the workspace: the Matmul API's
//                                      SetQuantScalar, QuantMode_t DEQF16; cut = the scale's top 19
//                                      bits, FixPipe's, BlockScales::SplitBlockScale)
//   then the online softmax with scale rest = full / cut (~1; when the half softmax takes every
//   block, FixPipe's scale is full rounded to its 19 bits and rest is 1: no scale pass), P in T, acc += P . V_j in fp32
//   (cube), O = acc / l, LSE, as the fp16 forward (flash_attention_rows.h OnlineSoftmax). With T
//   half, a block whose tile is whole 128-column repeats takes the half softmax of the forward's high-performance precision
//   (OnlineSoftmax::ScoresToProbsNarrow: max, subtract, scale and Exp in half, Exp writing P
//   straight into P's buffer; the band's edges masked in half, so the causal diagonal's blocks
//   too); every chunk with T bfloat16 casts S to fp32 (workQue_) and takes the fp32 softmax.
// Per-block scales make the dequantization one scalar per (query block, key block), so it can ride
// on the cube's output conversion: no vector pass is spent on it, S moves through GM and UB in 2
// bytes an element instead of 4, and the half softmax takes 128 elements per repeat.
// Pipeline and workspace as flash_attention_kernel.h (read its header comment): the issuer
// (sub-block 0) requests QK_{j+1} while both AIVs softmax block j; P_j goes over S_j's rows (S is
// half, 2 bytes, as P: P row r is S row r, row stride blockN);
// P_{j-1} . V_{j-1} runs on the cube during the softmax and is added after the PAIR_PROBS meeting.
// The invariants that make P-over-S and the slot reuse race-free are that kernel's; this kernel
// has no mask, dropout, varlen or solo-row path (op_host refuses the plans that would need them),
// so consecutive computed blocks always alternate slot parity.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_matmul.h"
#include "flash_attention_gm.h"
#include "flash_attention_int8_scales.h"
#include "flash_attention_items.h"
#include "flash_attention_rows.h"
#include "flash_attention_tiling.h"

namespace flash_attn_int8 {

using flash_attn::Align32Bytes;
using flash_attn::CeilDiv;
using flash_attn::Min;
using flash_attn::WaitForPipe;

constexpr uint32_t AIV_PER_AIC = 2;      // KERNEL_TYPE_MIX_AIC_1_2
constexpr uint32_t VISIBLE_COL_ALIGN = 16;  // tile columns: whole 32-B blocks of S (int32) and of P (T)
constexpr uint8_t SCORE_BUFFERS = 2;     // op_host's budget (tiling_policy.cpp kScoreBuffers)
constexpr uint32_t PROB_BUFFERS = 2;     // op_host: kProbBuffers
// Mode-1 cross-core flag ids of the pair's meetings (0..10 are the kernel's; docs/cann-facts.md).
constexpr uint16_t PAIR_SCORES = 4;
constexpr uint16_t PAIR_PROBS = 5;
constexpr uint16_t PAIR_VALUES = 6;

// Q8 . K8^T dequantized: [rows, cols] half (asc-devkit Matmul使用说明.md: A2/A3 take int8_t A and B;
// quant_processor_utils.h IsQuantSenario: an int32 L0C with a half C is dequantized by FixPipe
// with the SetQuantScalar scale).
using QkInt8 = attn_mm::RowsByColsTo<int8_t, half>;

template <typename T>
class FlashAttentionInt8Kernel {
public:
    QkInt8 qkMm;                 // S = Q8 . K8^T * cut scale, [rows, cols] half
    attn_mm::RowsByB<T> pvMm;    // P . V, [rows, D] fp32

    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR qScale, GM_ADDR kScale,
                                GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR workspace,
                                const FlashAttentionTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    __aicore__ inline void ProcessItem(uint32_t item);
    template <pipe_t pipe>
    __aicore__ inline void MeetPair(uint16_t flagId)
    {
        AscendC::CrossCoreSetFlag<1, pipe>(flagId);
        AscendC::CrossCoreWaitFlag<1>(flagId);
    }
    __aicore__ inline void IssueScores(uint32_t kvBlock, uint32_t mmRows);
    __aicore__ inline void SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0);
    __aicore__ inline void LoadScores(uint32_t kvBlock, uint32_t r0, uint32_t rows);
    __aicore__ inline void SoftmaxChunk(const AscendC::LocalTensor<float> &scores, uint32_t kvBlock, uint32_t r0,
                                        uint32_t rows, uint32_t row0);
    // Whether the chunks of block kvBlock take the half softmax (T half only).
    __aicore__ inline bool NarrowChunk(uint32_t kvBlock) const;
    // The half softmax of a chunk's staged S [rows, TileWidth] half (freed here; row0 its first
    // query row in the sequence); P goes out as in SoftmaxChunk.
    __aicore__ inline void SoftmaxChunkNarrow(AscendC::LocalTensor<half> &staged, uint32_t kvBlock, uint32_t r0,
                                              uint32_t rows, uint32_t row0);
    __aicore__ inline void StoreProbs(AscendC::LocalTensor<T> &prob, uint32_t kvBlock, uint32_t r0, uint32_t rows);
    __aicore__ inline void IssueValues(uint32_t kvBlock, uint32_t mmRows);
    __aicore__ inline void FinishValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void AccumulateValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset);
    // Columns of block kvBlock's tile: those QK computed (BlockCols) rounded up to 16, or with T
    // half and blockN a multiple of 128 to whole 128-column repeats of the half softmax (the extra
    // columns lie past every row's band end: ScoresToProbsNarrow masks them to -inf with the rest
    // of the cut, as the forward's FlashAttentionKernel::TileWidth).
    __aicore__ inline uint32_t TileWidth(uint32_t kvBlock) const
    {
        const uint32_t n = td_->blockN;
        const uint32_t align = AscendC::IsSameType<T, half>::value && n % attn_rows::B16_PER_REPEAT == 0
                                   ? attn_rows::B16_PER_REPEAT
                                   : VISIBLE_COL_ALIGN;
        return Min(n, CeilDiv(BlockCols(kvBlock), align) * align);
    }
    __aicore__ inline uint32_t BlockCols(uint32_t kvBlock) const
    {
        return Min(td_->blockN, keyEnd_ - kvBlock * td_->blockN);
    }
    // Whether every block takes the half softmax (NarrowChunk true for each: T half and blockN
    // whole 128-column repeats, so every TileWidth is too and P's buffer is wide enough to fold
    // in). Both the AIC (IssueScores) and the AIVs (SoftmaxBlock) split the block scale by it:
    // then FixPipe carries all of it and the softmax's scale is 1 (BlockScales::SplitBlockScale).
    __aicore__ inline bool HalfSoftmaxEverywhere() const
    {
        return AscendC::IsSameType<T, half>::value && td_->blockN % attn_rows::B16_PER_REPEAT == 0;
    }

    const FlashAttentionTilingData *td_ = nullptr;
    // The softmax reads its scale from here: the tiling's, with scaleValue set per K/V block to
    // scale * q_scale * k_scale (the dequantization) before the block's chunks.
    FlashAttentionTilingData softmaxTd_;
    AscendC::TPipe *pipe_ = nullptr;
    flash_attn::OnlineSoftmax softmax_;
    flash_attn::ItemMap items_;

    AscendC::GlobalTensor<int8_t> queryGm_, keyGm_;
    AscendC::GlobalTensor<T> valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;
    BlockScales scales_;
    AscendC::GlobalTensor<half> scoreGm_[2];     // [blockM, blockN] half
    AscendC::GlobalTensor<T> probGm_[2];         // [blockM, blockN] T over S's rows (both 2 bytes)
    AscendC::GlobalTensor<float> pvGm_[2];       // [blockM, headDim] fp32
    uint32_t probStride_ = 0;                    // blockN: one half S row in T elements

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;   // SCORE_BUFFERS x [c, n] half
    AscendC::TQue<AscendC::TPosition::VECIN, 1> workQue_;    // [c, n] fp32: S cast for the fp32 softmax,
                                                             // the half softmax's row-sum tile, P.V rows (n >= d)
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> probQue_[PROB_BUFFERS];  // [c, n] T each
    uint32_t probTurn_ = 0;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pvQue_;      // [c, d] fp32 (only when n < d)
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;    // [c, d] T (only when n < d)
    AscendC::TQue<AscendC::TPosition::VECIN, 1> *pvIn_ = &pvQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> *outOut_ = &outQue_;
    uint32_t pvRows_ = 0, outRows_ = 0;
    bool foldInProb_ = false;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue_;    // [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_;      // [m, d] fp32
    AscendC::LocalTensor<float> acc_;

    uint32_t core_ = 0, subBlock_ = 0;
    bool issuer_ = false;
    uint32_t halfRow_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;
    uint64_t queryOffset_ = 0, kvOffset_ = 0, itemQueryOffset_ = 0;
    uint32_t keyEnd_ = 0;
};

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR qScale,
                                                         GM_ADDR kScale, GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                                         GM_ADDR workspace, const FlashAttentionTilingData *tiling,
                                                         AscendC::TPipe *pipe)
{
    td_ = tiling;
    softmaxTd_ = *tiling;
    pipe_ = pipe;
    const uint32_t m = td_->subBlockM;
    const uint32_t c = td_->chunkRows;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;

    flash_attn::BindForwardGm<T>(td_, query, key, value, attentionOut, softmaxLse, queryGm_, keyGm_, valueGm_, outGm_,
                                 lseGm_);
    scales_.Init(qScale, kScale, td_);
    items_.Init(td_, nullptr, nullptr);

    // UB in the forward's sizes: op_host budgets SCORE_BUFFERS float32 [c, n] tiles for S, which
    // hold SCORE_BUFFERS half tiles and one float32 tile (the high-performance forward's split).
    static_assert(SCORE_BUFFERS == 2, "two half S tiles and one fp32 tile fill two fp32 tiles");
    const bool shareTiles = n >= d;
    pipe_->InitBuffer(scoreQue_, SCORE_BUFFERS, c * n * sizeof(half));
    pipe_->InitBuffer(workQue_, 1, c * n * sizeof(float));
    for (uint32_t i = 0; i < PROB_BUFFERS; ++i) {
        pipe_->InitBuffer(probQue_[i], 1, c * n * sizeof(T));
    }
    if (shareTiles) {
        pvIn_ = &workQue_;
        outOut_ = &probQue_[0];
    } else {
        pipe_->InitBuffer(pvQue_, 1, c * d * sizeof(float));
        pipe_->InitBuffer(outQue_, 1, c * d * sizeof(T));
    }
    const uint32_t sharedRows = Min(m, c * n / d / flash_attn::FP32_PER_BLOCK * flash_attn::FP32_PER_BLOCK);
    pvRows_ = shareTiles ? sharedRows : c;
    outRows_ = shareTiles ? sharedRows : c;
    pipe_->InitBuffer(accBuf_, m * d * sizeof(float));
    foldInProb_ = n * sizeof(T) >= flash_attn::FP32_PER_REPEAT * sizeof(float);
    softmax_.Init(pipe_, &softmaxTd_, m, c, !foldInProb_, true);
    pipe_->InitBuffer(lseQue_, 1, Align32Bytes(m * sizeof(float)));
    acc_ = accBuf_.Get<float>();

    const uint32_t aiv = AscendC::GetBlockIdx();
    core_ = aiv / AIV_PER_AIC;
    subBlock_ = AscendC::GetSubBlockIdx();
    issuer_ = subBlock_ == 0;
    const uint32_t mi = td_->blockM;
    GM_ADDR slice = AscendC::GetUserWorkspace(workspace) + static_cast<uint64_t>(core_) * td_->wsBytesPerCore;
    static_assert(sizeof(T) == sizeof(half), "P goes over S's rows element for element");
    probStride_ = n;
    for (uint32_t slot = 0; slot < 2; ++slot) {
        // The slots op_host sizes for fp32 S: a half S takes the first half of each.
        __gm__ half *scores =
            reinterpret_cast<__gm__ half *>(slice + td_->wsScoreOffset + slot * mi * n * sizeof(float));
        scoreGm_[slot].SetGlobalBuffer(scores, mi * n);
        probGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(scores), mi * probStride_);
        pvGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset) + slot * mi * d, mi * d);
    }
    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::Process()
{
    if (core_ >= td_->usedCoreNum) {
        return;
    }
    for (uint32_t item = td_->coreItemStart[core_]; item < td_->coreItemStart[core_ + 1]; ++item) {
        ProcessItem(item);
    }
    qkMm.End();
    pvMm.End();
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::ProcessItem(uint32_t item)
{
    flash_attn::ItemPlace place;
    items_.Locate(item, &place);
    const flash_attn::ItemSpan span = flash_attn::SpanOfItem(td_, place);
    const uint32_t itemRow0 = span.row0;
    const uint32_t itemRows = span.rows;
    const uint32_t firstHalf = (itemRows + 1) / 2;
    halfRow_ = subBlock_ == 0 ? 0 : firstHalf;
    const uint32_t row0 = itemRow0 + halfRow_;
    const uint32_t rows = subBlock_ == 0 ? firstHalf : itemRows - firstHalf;

    const uint32_t kvBegin = span.kvBegin;
    const uint32_t kvEnd = span.kvEnd;
    keyEnd_ = span.keyEnd;
    itemQueryOffset_ = items_.QueryOffset(place, itemRow0);
    queryOffset_ = items_.QueryOffset(place, row0);
    kvOffset_ = items_.KvOffset(place, 0);
    scales_.StartItem(place);  // the item's dequantization scalars
    if (rows != 0) {
        softmax_.Reset(acc_, rows, place.seqQ, place.seqKv);
    }

    uint32_t j = kvBegin;
    if (j < kvEnd && issuer_) {
        qkMm.SetOrgShape(itemRows, td_->blockN, rowStrideQ_, rowStrideKv_, td_->blockN);
        qkMm.SetTensorA(queryGm_[itemQueryOffset_]);
        pvMm.SetOrgShape(itemRows, rowStrideKv_, probStride_, place.seqKv, td_->headDim);
        IssueScores(j, itemRows);
    }
    bool pending = false;  // P_prev . V_prev issued, not yet added
    uint32_t prev = 0;
    while (j < kvEnd) {
        if (issuer_) {
            qkMm.WaitIterateAll();
        }
        MeetPair<PIPE_MTE2>(PAIR_SCORES);
        const uint32_t next = j + 1;
        if (next < kvEnd && issuer_) {
            IssueScores(next, itemRows);  // the cube computes S_{j+1} while the vector units work on S_j
        }
        if (rows != 0) {
            SoftmaxBlock(j, rows, row0);
        }
        if (pending && issuer_) {
            pvMm.WaitIterateAll();
        }
        MeetPair<PIPE_MTE3>(PAIR_PROBS);
        if (issuer_) {
            IssueValues(j, itemRows);
        }
        if (pending && rows != 0) {
            AccumulateValues(prev, rows);
        }
        prev = j;
        pending = true;
        j = next;
    }
    if (pending) {
        FinishValues(prev, rows);
    }
    if (rows != 0) {
        WriteOutput(rows, queryOffset_, place.lseRow0 + row0);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::IssueScores(uint32_t kvBlock, uint32_t mmRows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    uint64_t quantScalar = 0;
    float rest = 0.0f;
    scales_.SplitBlockScale(kvBlock, &quantScalar, &rest, HalfSoftmaxEverywhere());
    qkMm.SetQuantScalar(quantScalar);  // S leaves L0C as half(S_int32 * cut scale)
    qkMm.SetTensorB(keyGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_], true);
    qkMm.SetTail(mmRows, BlockCols(kvBlock), td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[kvBlock % 2][0], 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    softmax_.StartBlock();
    // S arrives dequantized by the cut scale; the softmax's scale completes it (rest, ~1; exactly
    // 1 when the half softmax takes every block, which then skips its scale pass).
    uint64_t quantScalar = 0;
    float rest = 0.0f;
    scales_.SplitBlockScale(kvBlock, &quantScalar, &rest, HalfSoftmaxEverywhere());
    softmaxTd_.scaleValue = rest;
    const uint32_t c = td_->chunkRows;
    const uint32_t w = TileWidth(kvBlock);
    LoadScores(kvBlock, 0, Min(c, rows));
    for (uint32_t r0 = 0; r0 < rows; r0 += c) {
        const uint32_t chunk = Min(c, rows - r0);
        AscendC::LocalTensor<half> staged = scoreQue_.DeQue<half>();
        if (r0 + c < rows) {
            LoadScores(kvBlock, r0 + c, Min(c, rows - r0 - c));
        }
        if constexpr (AscendC::IsSameType<T, half>::value) {
            if (NarrowChunk(kvBlock)) {
                SoftmaxChunkNarrow(staged, kvBlock, r0, chunk, row0 + r0);
                continue;
            }
        }
        // S half -> fp32 (exact), the softmax's tile; scoreQue's buffer is free for the next load.
        AscendC::LocalTensor<float> scores = workQue_.AllocTensor<float>();
        AscendC::Cast(scores, staged, AscendC::RoundMode::CAST_NONE, chunk * w);
        scoreQue_.FreeTensor(staged);
        SoftmaxChunk(scores, kvBlock, r0, chunk, row0 + r0);
        workQue_.FreeTensor(scores);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::LoadScores(uint32_t kvBlock, uint32_t r0, uint32_t rows)
{
    const uint32_t n = td_->blockN;
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t at = (halfRow_ + r0) * n;
    constexpr uint32_t perBlock = 32 / sizeof(half);
    AscendC::LocalTensor<half> scores = scoreQue_.AllocTensor<half>();
    if (w == n) {
        AscendC::DataCopy(scores, scoreGm_[kvBlock % 2][at], rows * w);
    } else {
        const AscendC::DataCopyParams params{static_cast<uint16_t>(rows), static_cast<uint16_t>(w / perBlock),
                                             static_cast<uint16_t>((n - w) / perBlock), 0};
        AscendC::DataCopy(scores, scoreGm_[kvBlock % 2][at], params);
    }
    scoreQue_.EnQue(scores);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::SoftmaxChunk(const AscendC::LocalTensor<float> &scores,
                                                                 uint32_t kvBlock, uint32_t r0, uint32_t rows,
                                                                 uint32_t row0)
{
    const uint32_t w = TileWidth(kvBlock);
    AscendC::LocalTensor<T> prob = probQue_[probTurn_].template AllocTensor<T>();
    if (foldInProb_) {
        softmax_.UseFold(prob.template ReinterpretCast<float>());
    }
    softmax_.ScoresToProbs(scores, w, kvBlock, rows, row0, r0);
    AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, rows * w);
    StoreProbs(prob, kvBlock, r0, rows);
}

// The half softmax takes every block of an item (this kernel has no mask bias, dropout or
// softcap) whose tile is whole 128-column repeats of half (TileWidth rounds a cut block up to
// them), with scale > 0 and P's buffer free to fold in (foldInProb_): the band's edges and the
// Skv tail are masked in half (OnlineSoftmax::ScoresToProbsNarrow), so the causal diagonal's
// blocks take it too. As the forward's FlashAttentionKernel::NarrowChunk.
template <typename T>
__aicore__ inline bool FlashAttentionInt8Kernel<T>::NarrowChunk(uint32_t kvBlock) const
{
    return foldInProb_ && softmaxTd_.scaleValue > 0.0f && TileWidth(kvBlock) % attn_rows::B16_PER_REPEAT == 0;
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::SoftmaxChunkNarrow(AscendC::LocalTensor<half> &staged,
                                                                       uint32_t kvBlock, uint32_t r0, uint32_t rows,
                                                                       uint32_t row0)
{
    const uint32_t w = TileWidth(kvBlock);
    AscendC::LocalTensor<T> prob = probQue_[probTurn_].template AllocTensor<T>();
    AscendC::LocalTensor<float> wide = workQue_.AllocTensor<float>();
    // staged holds [c, n] half = [c, n / 2] fp32 bytes >= the [c, 64] fp32 fold (w >= 128).
    softmax_.UseFold(staged.template ReinterpretCast<float>());
    softmax_.ScoresToProbsNarrow(staged, prob, wide, w, kvBlock, rows, row0, r0);
    workQue_.FreeTensor(wide);
    scoreQue_.FreeTensor(staged);
    StoreProbs(prob, kvBlock, r0, rows);
}

// P rows [r0, r0 + rows) of this AIV's half to the workspace, over S_kvBlock's rows.
template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::StoreProbs(AscendC::LocalTensor<T> &prob, uint32_t kvBlock,
                                                               uint32_t r0, uint32_t rows)
{
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t probAt = (halfRow_ + r0) * probStride_;
    probQue_[probTurn_].EnQue(prob);
    prob = probQue_[probTurn_].template DeQue<T>();
    const AscendC::DataCopyParams probParams{static_cast<uint16_t>(rows), static_cast<uint16_t>(w * sizeof(T) / 32), 0,
                                             static_cast<uint16_t>((probStride_ - w) * sizeof(T) / 32)};
    AscendC::DataCopy(probGm_[kvBlock % 2][probAt], prob, probParams);
    probQue_[probTurn_].FreeTensor(prob);
    probTurn_ = (probTurn_ + 1) % PROB_BUFFERS;
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::IssueValues(uint32_t kvBlock, uint32_t mmRows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    pvMm.SetTensorA(probGm_[kvBlock % 2][0]);
    pvMm.SetTensorB(valueGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_]);
    pvMm.SetTail(mmRows, td_->headDim, BlockCols(kvBlock));
    pvMm.template IterateAll<false>(pvGm_[kvBlock % 2][0], 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::FinishValues(uint32_t kvBlock, uint32_t rows)
{
    if (issuer_) {
        pvMm.WaitIterateAll();
    }
    MeetPair<PIPE_MTE2>(PAIR_VALUES);
    if (rows != 0) {
        AccumulateValues(kvBlock, rows);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::AccumulateValues(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    for (uint32_t r0 = 0; r0 < rows; r0 += pvRows_) {
        const uint32_t chunk = Min(pvRows_, rows - r0);
        AscendC::LocalTensor<float> pv = pvIn_->template AllocTensor<float>();
        AscendC::DataCopy(pv, pvGm_[kvBlock % 2][(halfRow_ + r0) * d], chunk * d);
        pvIn_->EnQue(pv);
        pv = pvIn_->template DeQue<float>();
        softmax_.Accumulate(acc_[r0 * d], pv, chunk, kvBlock, r0);
        pvIn_->FreeTensor(pv);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    softmax_.Finish(acc_, lse, rows);
    const uint32_t rowStride = td_->layout == FA_LAYOUT_BNSD ? d : td_->numHeads * d;
    for (uint32_t r0 = 0; r0 < rows; r0 += outRows_) {
        const uint32_t chunk = Min(outRows_, rows - r0);
        AscendC::LocalTensor<T> out = outOut_->template AllocTensor<T>();
        AscendC::Cast(out, acc_[r0 * d], AscendC::RoundMode::CAST_RINT, chunk * d);
        outOut_->EnQue(out);
        out = outOut_->template DeQue<T>();
        const uint64_t at = outOffset + static_cast<uint64_t>(r0) * rowStride;
        if (td_->layout == FA_LAYOUT_BNSD) {
            AscendC::DataCopy(outGm_[at], out, chunk * d);
        } else {
            const AscendC::DataCopyExtParams params{static_cast<uint16_t>(chunk), static_cast<uint32_t>(d * sizeof(T)),
                                                    0, static_cast<uint32_t>((td_->numHeads - 1) * d * sizeof(T)), 0};
            AscendC::DataCopyPad(outGm_[at], out, params);
        }
        outOut_->FreeTensor(out);
    }
    lseQue_.EnQue(lse);
    lse = lseQue_.DeQue<float>();
    const AscendC::DataCopyExtParams lseParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPad(lseGm_[lseOffset], lse, lseParams);
    lseQue_.FreeTensor(lse);
}

}  // namespace flash_attn_int8
