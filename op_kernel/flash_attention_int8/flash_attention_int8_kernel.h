// flash_attention_int8_kernel.h -- FlashAttention-2 forward with QK^T in int8 for Atlas A2/A3
// (arch 2201), a mixed AIC:AIV 1:2 kernel (the FlashAttentionInt8 op; docs/int8.md).
//
// Inputs: query and key int8, quantized per block (AttentionQuant: query per blockM rows, key per
// blockN keys, key smoothed first), their fp32 scales q_scale [B, N, numQBlocks] and k_scale
// [B, Nkv, numKvBlocks], and value in T (half / bfloat16). Per work item (b, n, query block qb)
// and K/V block j:
//   S_j   = Q8 . K8_j^T               (cube: int8 x int8 -> int32, Matmul API, into the workspace)
//   S_j   = float(S_j) * (scale * q_scale[qb] * k_scale[j])   (vector: the cast, then the
//                                      softmax's own scale multiply with the block's dequant folded in)
//   then the online softmax, P in T, acc += P . V_j in fp32 (cube), O = acc / l, LSE, exactly as
//   the fp16 forward (flash_attention_rows.h OnlineSoftmax).
// Per-block scales make the dequantization one scalar per (query block, key block): it rides on
// the Muls the softmax does anyway, so the vector work per score tile is the fp16 forward's plus
// one Cast int32 -> fp32 (in place: same element width).
// Pipeline and workspace as flash_attention_kernel.h (read its header comment): the issuer
// (sub-block 0) requests QK_{j+1} while both AIVs softmax block j; P_j goes over S_j's rows (S is
// int32, 4 bytes, as the fp32 forward's S: P row r starts at S row r, row stride 2 * blockN of T);
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

// Q8 . K8^T: [rows, cols] int32 (asc-devkit Matmul使用说明.md: A2/A3 take int8_t A and B with C int32_t).
using QkInt8 = AscendC::Matmul<attn_mm::GmOperand<int8_t>, attn_mm::GmOperand<int8_t, true>,
                               attn_mm::GmOperand<int32_t>>;

template <typename T>
class FlashAttentionInt8Kernel {
public:
    QkInt8 qkMm;                 // S = Q8 . K8^T, [rows, cols] int32
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
    __aicore__ inline void IssueValues(uint32_t kvBlock, uint32_t mmRows);
    __aicore__ inline void FinishValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void AccumulateValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset);
    // Columns of block kvBlock's tile: those QK computed (BlockCols) rounded up to 16.
    __aicore__ inline uint32_t TileWidth(uint32_t kvBlock) const
    {
        return Min(td_->blockN, CeilDiv(BlockCols(kvBlock), VISIBLE_COL_ALIGN) * VISIBLE_COL_ALIGN);
    }
    __aicore__ inline uint32_t BlockCols(uint32_t kvBlock) const
    {
        return Min(td_->blockN, keyEnd_ - kvBlock * td_->blockN);
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
    AscendC::GlobalTensor<int32_t> scoreGm_[2];  // [blockM, blockN] int32
    AscendC::GlobalTensor<T> probGm_[2];         // [blockM, blockN] T, row stride probStride_ (in S's rows)
    AscendC::GlobalTensor<float> pvGm_[2];       // [blockM, headDim] fp32
    uint32_t probStride_ = 0;                    // 2 * blockN: one int32 S row in T elements

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;   // SCORE_BUFFERS x [c, n] int32, cast to fp32 in place
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

    const uint64_t qElems = static_cast<uint64_t>(td_->tokensQ) * td_->numHeads * d;
    const uint64_t kvElems = static_cast<uint64_t>(td_->tokensKv) * td_->numKvHeads * d;
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int8_t *>(query), qElems);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int8_t *>(key), kvElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse), static_cast<uint64_t>(td_->tokensQ) * td_->numHeads);
    scales_.Init(qScale, kScale, td_);
    items_.Init(td_, nullptr, nullptr);

    // UB in the forward's order and sizes (op_host budgets S = float32 tiles; int32 is as wide).
    const bool shareTiles = n >= d;
    pipe_->InitBuffer(scoreQue_, SCORE_BUFFERS, c * n * sizeof(int32_t));
    for (uint32_t i = 0; i < PROB_BUFFERS; ++i) {
        pipe_->InitBuffer(probQue_[i], 1, c * n * sizeof(T));
    }
    if (shareTiles) {
        pvIn_ = &scoreQue_;
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
    probStride_ = n * sizeof(int32_t) / sizeof(T);
    for (uint32_t slot = 0; slot < 2; ++slot) {
        __gm__ int32_t *scores =
            reinterpret_cast<__gm__ int32_t *>(slice + td_->wsScoreOffset + slot * mi * n * sizeof(int32_t));
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
    const uint32_t itemRow0 = place.qBlock * td_->blockM;
    const uint32_t itemRows = Min(td_->blockM, place.seqQ - itemRow0);
    const uint32_t firstHalf = (itemRows + 1) / 2;
    halfRow_ = subBlock_ == 0 ? 0 : firstHalf;
    const uint32_t row0 = itemRow0 + halfRow_;
    const uint32_t rows = subBlock_ == 0 ? firstHalf : itemRows - firstHalf;

    uint32_t keyFirst = 0, keyEnd = 0;
    flash_attn::VisibleKeys(td_, place.seqQ, place.seqKv, itemRow0, itemRows, &keyFirst, &keyEnd);
    const uint32_t kvBegin = keyFirst / td_->blockN;
    const uint32_t kvEnd = keyEnd == 0 ? kvBegin : CeilDiv(keyEnd, td_->blockN);
    keyEnd_ = keyEnd;
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
    qkMm.SetTensorB(keyGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_], true);
    qkMm.SetTail(mmRows, BlockCols(kvBlock), td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[kvBlock % 2][0], 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    softmax_.StartBlock();
    // Dequantization: S = S_int32 * q_scale * k_scale, folded into the softmax's scale multiply.
    softmaxTd_.scaleValue = scales_.BlockScale(kvBlock);
    const uint32_t c = td_->chunkRows;
    const uint32_t w = TileWidth(kvBlock);
    LoadScores(kvBlock, 0, Min(c, rows));
    for (uint32_t r0 = 0; r0 < rows; r0 += c) {
        const uint32_t chunk = Min(c, rows - r0);
        AscendC::LocalTensor<int32_t> staged = scoreQue_.DeQue<int32_t>();
        if (r0 + c < rows) {
            LoadScores(kvBlock, r0 + c, Min(c, rows - r0 - c));
        }
        // int32 -> fp32 in place (same width; exact below 2^24, and |S| <= D * 127 * 128).
        AscendC::LocalTensor<float> scores = staged.template ReinterpretCast<float>();
        AscendC::Cast(scores, staged, AscendC::RoundMode::CAST_NONE, chunk * w);
        SoftmaxChunk(scores, kvBlock, r0, chunk, row0 + r0);
        scoreQue_.FreeTensor(staged);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionInt8Kernel<T>::LoadScores(uint32_t kvBlock, uint32_t r0, uint32_t rows)
{
    const uint32_t n = td_->blockN;
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t at = (halfRow_ + r0) * n;
    constexpr uint32_t perBlock = 32 / sizeof(int32_t);
    AscendC::LocalTensor<int32_t> scores = scoreQue_.AllocTensor<int32_t>();
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
    const uint32_t probAt = (halfRow_ + r0) * probStride_;
    AscendC::LocalTensor<T> prob = probQue_[probTurn_].template AllocTensor<T>();
    if (foldInProb_) {
        softmax_.UseFold(prob.template ReinterpretCast<float>());
    }
    softmax_.ScoresToProbs(scores, w, kvBlock, rows, row0, r0);
    AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, rows * w);
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
