// flash_attention_kernel.h -- FlashAttention-2 forward for Atlas A2/A3 (arch 2201) as a mixed
// AIC:AIV 1:2 kernel. The coupled-core chips run flash_attention_coupled_kernel.h instead.
//
// Per work item (b, n, query block of blockM rows) the two AIVs of one AIC each take half of the
// rows. For its rows [row0, row0 + rows) an AIV keeps Q in place and streams the K/V blocks of
// blockN rows through the cube:
//   S_j   = Q . K_j^T                (cube, Matmul API, fp32 to a double-buffered GM workspace slot;
//                                     QK of block j+1 runs on the cube while block j is softmaxed)
//   S_j  *= scale; mask              (vector; only on blocks the band's edges or the Skv tail cross)
//   m_new = max(m, rowmax(S_j));  alpha = exp(m - m_new)
//   P_j   = exp(S_j - m_new);  l = alpha * l + rowsum(P_j)          (fp32)
//   acc   = alpha_j * acc + P_j . V_j  (cube for P.V, vector for the update)
// and finally O = acc / l, LSE = m + ln(l) (the vector half is flash_attention_rows.h).
// Software pipeline per AIV, step j: wait S_j; issue QK_{j+1}; softmax S_j -> P_j (GM slot j % 2);
// wait P_{j-1} . V_{j-1} and add it with alpha_{j-1}; issue P_j . V_j. So the cube computes
// P_{j-1} . V_{j-1} and S_{j+1} while the vector unit softmaxes block j, and each Matmul object
// has at most one request outstanding. Only the
// K/V blocks holding a key the rows' band (pre_tokens / next_tokens; causal is next_tokens 0)
// lets them see are loaded and computed (flash_attention_items.h); a varlen batch (TND) gives
// each sequence its own lengths and packed rows.
// FlashAttentionV2's options (docs/dropout_and_mask.md): with an atten_mask the AIVs first
// classify its blocks (attention_mask.h, then SyncAll); blocks it hides completely are neither
// loaded nor computed, mixed ones add its bias before the row max. With dropout, P is dropped
// out (philox_dropout.h) after l took the undropped P and before P.V; the keep mask goes to
// dropout_mask when that output is given. All row-wise statistics are vectors in
// UB, broadcast with Brcb: the scalar unit only steers loops and never touches score elements.
// T is half, bfloat16_t or float (float: fp32 operands on the cube, P handed over in fp32).
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_mask.h"
#include "flash_attention_items.h"
#include "flash_attention_rows.h"
#include "flash_attention_tiling.h"
#include "philox_dropout.h"

namespace flash_attn {

constexpr uint32_t AIV_PER_AIC = 2;  // KERNEL_TYPE_MIX_AIC_1_2: AIV block idx / 2 = its AIC's block idx

template <typename T>
class FlashAttentionKernel {
public:
    using QType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using KTransType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, true>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using AccType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;

    AscendC::Matmul<QType, KTransType, AccType> qkMm;  // S = Q . K^T, [rows, cols] fp32
    AscendC::Matmul<QType, VType, AccType> pvMm;       // P . V, [rows, D] fp32

    // actualSeqQlen / actualSeqKvlen: the varlen cumulative ends (int64 GM), unused otherwise;
    // attenMask (uint8, 1 = masked out) and dropoutMask (uint8 out, 1 = kept): null when absent.
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                GM_ADDR actualSeqKvlen, GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR dropoutMask,
                                GM_ADDR workspace, const FlashAttentionTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    static constexpr bool FP32_IO = AscendC::IsSameType<T, float>::value;  // P and O need no Cast

    // The explicit mask's bias on the current item's BLOCK_MIXED blocks (OnlineSoftmax::ScoresToProbs).
    struct ItemMaskBias {
        attn_mask::MaskTiles *tiles;
        uint32_t b, n;
        __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t row0,
                                       uint32_t rows, uint32_t col0, uint32_t cols)
        {
            tiles->AddBias(scores, stride, b, n, row0, rows, col0, cols);
        }
    };

    __aicore__ inline void SummarizeMask();
    __aicore__ inline void ProcessItem(uint32_t item);
    // The first K/V block in [kvBlock, kvEnd) the mask does not hide completely (kvEnd: none).
    __aicore__ inline uint32_t NextComputedBlock(uint32_t kvBlock, uint32_t kvEnd) const;
    __aicore__ inline uint32_t BlockClass(uint32_t kvBlock) const;
    // P [rows, blockN] fp32 of K/V block kvBlock: dropped out in place, the keep mask to dropoutGm_.
    __aicore__ inline void DropOut(const AscendC::LocalTensor<float> &probs, uint32_t kvBlock, uint32_t rows,
                                   uint32_t row0);
    __aicore__ inline void WriteKeepMask(const philox_dropout::DropoutStream &stream, uint32_t kvBlock, uint32_t rows,
                                         uint32_t row0);
    __aicore__ inline void IssueScores(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0);
    __aicore__ inline void IssueValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void AccumulateValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset);

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;
    OnlineSoftmax softmax_;
    ItemMap items_;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;
    // This AIV's workspace slots; block j uses slot j % 2 of each.
    AscendC::GlobalTensor<float> scoreGm_[2];  // [subBlockM, blockN] fp32
    AscendC::GlobalTensor<T> probGm_[2];       // [subBlockM, blockN] T
    AscendC::GlobalTensor<float> pvGm_[2];     // [subBlockM, headDim] fp32

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;   // [m, n] fp32
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> probQue_;   // [m, n] T (not for T = float)
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pvQue_;      // [m, d] fp32
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;    // [m, d] T
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue_;    // [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_;      // [m, d] fp32

    AscendC::LocalTensor<float> acc_;

    // V2 options (unused when off: hasMask 0, philoxLanes 0).
    attn_mask::MaskGeometry maskGeom_;
    attn_mask::MaskTiles maskTiles_;
    AscendC::GlobalTensor<uint8_t> summaryGm_;  // [SummaryRows, KeyBlocks] BlockClass bytes
    philox_dropout::PhiloxKeepMask keep_;
    AscendC::GlobalTensor<uint8_t> dropoutGm_;  // [B, N, Sq, Skv] uint8, 1 = kept (when given)
    AscendC::TBuf<AscendC::TPosition::VECCALC> keepBuf_;  // a chunk's keep bytes [16 L] and as half, rows [m, align32(n)]
    AscendC::LocalTensor<uint8_t> keepBytes_, keepRows_;
    AscendC::LocalTensor<half> keepHalf_;

    // Current item (this AIV's share of it).
    uint32_t core_ = 0, subBlock_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    uint64_t queryOffset_ = 0, kvOffset_ = 0;    // element offsets of (b, n, row0) and (b, h, 0)
    uint32_t seqKv_ = 0;                         // keys of the current item's sequence
    uint32_t seq_ = 0, head_ = 0;                // the item's sequence (batch index) and query head
    uint64_t summaryRow_ = 0;                    // the item's first summary byte (mask)
};

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                     GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                                     GM_ADDR actualSeqKvlen, GM_ADDR attentionOut,
                                                     GM_ADDR softmaxLse, GM_ADDR dropoutMask, GM_ADDR workspace,
                                                     const FlashAttentionTilingData *tiling,
                                                     AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->subBlockM;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;

    const uint64_t qElems = static_cast<uint64_t>(td_->tokensQ) * td_->numHeads * d;
    const uint64_t kvElems = static_cast<uint64_t>(td_->tokensKv) * td_->numKvHeads * d;
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(query), qElems);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(key), kvElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse),
                           static_cast<uint64_t>(td_->tokensQ) * td_->numHeads);
    items_.Init(td_, actualSeqQlen, actualSeqKvlen);

    // UB, in the order and sizes op_host budgets (flash_attention_tiling.h); before the workspace
    // slices, so that blocks too large for UB stop every AIV here, ahead of any GM range.
    pipe_->InitBuffer(scoreQue_, 1, m * n * sizeof(float));
    if constexpr (!FP32_IO) {
        pipe_->InitBuffer(probQue_, 1, m * n * sizeof(T));
    }
    pipe_->InitBuffer(pvQue_, 1, m * d * sizeof(float));
    pipe_->InitBuffer(outQue_, 1, m * d * sizeof(T));
    pipe_->InitBuffer(accBuf_, m * d * sizeof(float));
    softmax_.Init(pipe_, td_, m);
    pipe_->InitBuffer(lseQue_, 1, Align32Bytes(m * sizeof(float)));
    acc_ = accBuf_.Get<float>();
    if (td_->hasMask != 0) {
        maskGeom_.mb = td_->maskB;
        maskGeom_.mn = td_->maskN;
        maskGeom_.mq = td_->maskQ;
        maskGeom_.mk = td_->seqKv;
        maskGeom_.blockM = td_->blockM;
        maskGeom_.blockN = n;
        maskTiles_.Init(pipe_, maskGeom_, td_->maskRows);
        maskTiles_.SetGlobal(attenMask);
    }
    if (td_->philoxLanes != 0) {
        keep_.Init(pipe_, td_->philoxLanes);
    }
    if (td_->hasDropoutMask != 0) {
        // A chunk covers at most 16 philoxLanes elements (PhiloxKeepMask::Init's capacity).
        const uint32_t chunk = 16 * td_->philoxLanes;
        pipe_->InitBuffer(keepBuf_, chunk * (sizeof(uint8_t) + sizeof(half)) + m * Align32Bytes(n));
        AscendC::LocalTensor<uint8_t> all = keepBuf_.Get<uint8_t>();
        keepBytes_ = all;
        keepHalf_ = all[chunk].ReinterpretCast<half>();
        keepRows_ = all[chunk * (sizeof(uint8_t) + sizeof(half))];
        dropoutGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(dropoutMask),
                                   static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ * td_->seqKv);
    }

    // This AIV's slice of the user workspace.
    const uint32_t aiv = AscendC::GetBlockIdx();
    core_ = aiv / AIV_PER_AIC;
    subBlock_ = AscendC::GetSubBlockIdx();
    GM_ADDR slice = AscendC::GetUserWorkspace(workspace) + aiv * td_->wsBytesPerAiv;
    for (uint32_t slot = 0; slot < 2; ++slot) {
        scoreGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset) + slot * m * n,
                                       m * n);
        probGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset) + slot * m * n, m * n);
        pvGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset) + slot * m * d, m * d);
    }
    if (td_->hasMask != 0) {
        summaryGm_.SetGlobalBuffer(
            reinterpret_cast<__gm__ uint8_t *>(AscendC::GetUserWorkspace(workspace) + td_->wsMaskSummaryOffset),
            maskGeom_.SummaryBytes());
    }

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::Process()
{
    if (td_->hasMask != 0) {
        SummarizeMask();  // every AIV of the launch, before any reads the summary
    }
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
__aicore__ inline void FlashAttentionKernel<T>::SummarizeMask()
{
    // Each AIV classifies a contiguous share of the summary rows; SyncAll<true> (vector cores
    // only) then makes the whole summary visible to every AIV.
    const uint32_t aivs = AscendC::GetBlockNum() * AIV_PER_AIC;
    const uint32_t aiv = AscendC::GetBlockIdx();
    const uint32_t rows = maskGeom_.SummaryRows();
    const uint32_t per = CeilDiv(rows, aivs);
    const uint32_t first = Min(aiv * per, rows);
    maskTiles_.Summarize(summaryGm_, first, Min(per, rows - first));
    AscendC::SyncAll();
}

template <typename T>
__aicore__ inline uint32_t FlashAttentionKernel<T>::BlockClass(uint32_t kvBlock) const
{
    if (td_->hasMask == 0) {
        return attn_mask::BLOCK_VISIBLE;
    }
    return summaryGm_.GetValue(summaryRow_ + kvBlock);
}

template <typename T>
__aicore__ inline uint32_t FlashAttentionKernel<T>::NextComputedBlock(uint32_t kvBlock, uint32_t kvEnd) const
{
    while (kvBlock < kvEnd && BlockClass(kvBlock) == attn_mask::BLOCK_MASKED) {
        ++kvBlock;
    }
    return kvBlock;
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::ProcessItem(uint32_t item)
{
    ItemPlace place;
    items_.Locate(item, &place);

    // Rows of this item, split between the two AIVs: sub-block 0 takes ceil(itemRows / 2).
    const uint32_t itemRow0 = place.qBlock * td_->blockM;
    const uint32_t itemRows = Min(td_->blockM, place.seqQ - itemRow0);
    const uint32_t firstHalf = (itemRows + 1) / 2;
    const uint32_t row0 = itemRow0 + (subBlock_ == 0 ? 0 : firstHalf);
    const uint32_t rows = subBlock_ == 0 ? firstHalf : itemRows - firstHalf;
    if (rows == 0) {
        return;
    }

    // Only the K/V blocks holding a key some row of this AIV sees under the band.
    uint32_t keyFirst = 0, keyEnd = 0;
    VisibleKeys(td_, place.seqQ, place.seqKv, row0, rows, &keyFirst, &keyEnd);
    const uint32_t kvBegin = keyFirst / td_->blockN;
    const uint32_t kvEnd = keyEnd == 0 ? kvBegin : CeilDiv(keyEnd, td_->blockN);

    seqKv_ = place.seqKv;
    seq_ = place.seq;
    head_ = place.head;
    if (td_->hasMask != 0) {
        summaryRow_ = static_cast<uint64_t>(maskGeom_.SummaryRow(seq_, head_, row0)) * maskGeom_.KeyBlocks();
    }
    queryOffset_ = items_.QueryOffset(place, row0);
    kvOffset_ = items_.KvOffset(place, 0);
    softmax_.Reset(acc_, rows, place.seqQ, place.seqKv);

    // Blocks the mask hides completely are skipped: the next issued block is the next computed one.
    uint32_t j = NextComputedBlock(kvBegin, kvEnd);
    if (j < kvEnd) {
        // qk: A = Q rows [rows, D] (row stride rowStrideQ_), B^T = K rows [cols, D] (row stride
        // rowStrideKv_), C = S [rows, cols] with row stride blockN.
        qkMm.SetOrgShape(rows, td_->blockN, rowStrideQ_, rowStrideKv_, td_->blockN);
        qkMm.SetTensorA(queryGm_[queryOffset_]);
        // pv: A = P [rows, cols] (row stride blockN), B = V rows [cols, D] (row stride
        // rowStrideKv_), C = [rows, D] with row stride D.
        pvMm.SetOrgShape(rows, rowStrideKv_, td_->blockN, place.seqKv, td_->headDim);
        IssueScores(j, rows);
    }
    // Workspace and alpha slots are per block parity (j % 2). Without skipped blocks consecutive
    // computed blocks alternate and the pipeline overlaps fully; after a skip the next computed
    // block may share the current one's parity, and then the step waits where it would overwrite
    // a slot still in use (S of the next block issued after this softmax; the previous P.V added
    // before it).
    bool pending = false;  // P_prev . V_prev issued, not yet added
    uint32_t prev = 0;
    while (j < kvEnd) {
        qkMm.WaitIterateAll();
        const uint32_t next = NextComputedBlock(j + 1, kvEnd);
        const bool overlapNext = next < kvEnd && next % 2 != j % 2;
        if (overlapNext) {
            IssueScores(next, rows);  // the cube computes the next S while the vector units work on S_j
        }
        if (pending && prev % 2 == j % 2) {
            AccumulateValues(prev, rows);
            pending = false;
        }
        SoftmaxBlock(j, rows, row0);
        if (pending) {
            AccumulateValues(prev, rows);  // P_prev . V_prev ran on the cube during the softmax
        }
        IssueValues(j, rows);
        if (next < kvEnd && !overlapNext) {
            IssueScores(next, rows);
        }
        prev = j;
        pending = true;
        j = next;
    }
    if (pending) {
        AccumulateValues(prev, rows);
    }
    WriteOutput(rows, queryOffset_, place.lseRow0 + row0);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::IssueScores(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seqKv_ - col0);
    qkMm.SetTensorB(keyGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_], true);
    qkMm.SetTail(rows, cols, td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[kvBlock % 2], 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    const uint32_t elems = rows * td_->blockN;  // [rows, blockN]

    AscendC::LocalTensor<float> scores = scoreQue_.AllocTensor<float>();
    AscendC::DataCopy(scores, scoreGm_[kvBlock % 2], elems);
    scoreQue_.EnQue(scores);
    scores = scoreQue_.DeQue<float>();
    if (BlockClass(kvBlock) == attn_mask::BLOCK_MIXED) {
        ItemMaskBias bias{&maskTiles_, seq_, head_};
        softmax_.ScoresToProbs(scores, td_->blockN, kvBlock, rows, row0, &bias);
    } else {
        softmax_.ScoresToProbs(scores, td_->blockN, kvBlock, rows, row0);
    }
    // P [rows, blockN] fp32 is final here (l and the LSE already hold its undropped sums): the
    // one point where it may still change before P.V.
    if (td_->philoxLanes != 0) {
        DropOut(scores, kvBlock, rows, row0);
    }

    if constexpr (FP32_IO) {
        // P is already the cube's operand type: the fp32 tile goes to GM as it is (no probQue).
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopy(probGm_[kvBlock % 2], scores, elems);
        scoreQue_.FreeTensor(scores);
    } else {
        AscendC::LocalTensor<T> prob = probQue_.AllocTensor<T>();
        AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, elems);
        scoreQue_.FreeTensor(scores);
        probQue_.EnQue(prob);
        prob = probQue_.DeQue<T>();
        AscendC::DataCopy(probGm_[kvBlock % 2], prob, elems);
        probQue_.FreeTensor(prob);
    }
    WaitForPipe<AscendC::HardEvent::MTE3_S>();      // P is in GM before the cube is asked to read it
}

// P_j . V_j on the cube into pv slot j % 2, asynchronously. P_j's slot was last read by
// P_{j-2} . V_{j-2}, waited for in AccumulateValues(j - 2); the pv slot was last read by that
// AccumulateValues' copy, which the vector work of SoftmaxBlock(j) and its MTE3_S wait follow.
template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::DropOut(const AscendC::LocalTensor<float> &probs, uint32_t kvBlock,
                                                        uint32_t rows, uint32_t row0)
{
    // Stream of (sequence, query head); counters from the positions in the sequence.
    const uint64_t headIndex = static_cast<uint64_t>(seq_) * td_->numHeads + head_;
    const philox_dropout::DropoutStream stream = philox_dropout::MakeStream(
        td_->seed, td_->offset, headIndex, td_->keepThreshold, td_->invKeepProb);
    const uint32_t col0 = kvBlock * td_->blockN;  // a multiple of 16
    keep_.Apply(probs, stream, row0, col0, rows, td_->blockN);
    if (td_->hasDropoutMask != 0) {
        WriteKeepMask(stream, kvBlock, rows, row0);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::WriteKeepMask(const philox_dropout::DropoutStream &stream,
                                                              uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    // The testing aid regenerates the keep mask chunk by chunk (Apply's chunks of ChunkRows()
    // rows): the bytes of a chunk [chunk, blockN] have rows of blockN bytes, not 32-B aligned when
    // blockN % 32 == 16, which DataCopyPad's UB side needs, so they are re-laid out through half
    // (rows of 2 blockN bytes) into keepRows_ [rows, align32(blockN)].
    const uint32_t n = td_->blockN;
    const uint32_t pitch = Align32Bytes(n);
    const uint32_t col0 = kvBlock * n;
    const uint32_t cols = Min(n, seqKv_ - col0);
    for (uint32_t r0 = 0; r0 < rows; r0 += keep_.ChunkRows()) {
        const uint32_t chunk = Min(keep_.ChunkRows(), rows - r0);
        keep_.KeepBits(stream, row0 + r0, col0);
        keep_.KeepBytes(keepBytes_, chunk * n);
        AscendC::Cast(keepHalf_, keepBytes_, AscendC::RoundMode::CAST_NONE, chunk * n);
        for (uint32_t r = 0; r < chunk; ++r) {
            AscendC::Cast(keepRows_[(r0 + r) * pitch], keepHalf_[r * n], AscendC::RoundMode::CAST_NONE, n);
        }
    }
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    const uint64_t at = ((static_cast<uint64_t>(seq_) * td_->numHeads + head_) * td_->seqQ + row0) * td_->seqKv + col0;
    const AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), cols, (pitch - Align32Bytes(cols)) / 32,
                                            td_->seqKv - cols, 0};
    AscendC::DataCopyPad(dropoutGm_[at], keepRows_, params);
    WaitForPipe<AscendC::HardEvent::MTE3_V>();  // the next block rewrites keepRows_
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::IssueValues(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seqKv_ - col0);
    pvMm.SetTensorA(probGm_[kvBlock % 2]);
    pvMm.SetTensorB(valueGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_]);
    pvMm.SetTail(rows, td_->headDim, cols);
    pvMm.template IterateAll<false>(pvGm_[kvBlock % 2], 0, false, true);
}

// acc = alpha_j * acc + P_j . V_j once the cube has written P_j . V_j (issued by IssueValues(j)).
template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::AccumulateValues(uint32_t kvBlock, uint32_t rows)
{
    pvMm.WaitIterateAll();
    AscendC::LocalTensor<float> pv = pvQue_.AllocTensor<float>();
    AscendC::DataCopy(pv, pvGm_[kvBlock % 2], rows * td_->headDim);
    pvQue_.EnQue(pv);
    pv = pvQue_.DeQue<float>();
    softmax_.Accumulate(acc_, pv, rows, kvBlock);
    pvQue_.FreeTensor(pv);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    softmax_.Finish(acc_, lse, rows);

    AscendC::LocalTensor<T> out = outQue_.AllocTensor<T>();
    if constexpr (FP32_IO) {
        AscendC::DataCopy(out, acc_, rows * d);
    } else {
        AscendC::Cast(out, acc_, AscendC::RoundMode::CAST_RINT, rows * d);
    }
    outQue_.EnQue(out);
    out = outQue_.DeQue<T>();
    if (td_->layout == FA_LAYOUT_BNSD) {
        AscendC::DataCopy(outGm_[outOffset], out, rows * d);
    } else {
        // BSND / BSH / TND: consecutive sequence rows are numHeads * D elements apart in GM.
        const uint32_t gapBytes = (td_->numHeads - 1) * d * sizeof(T);
        AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(d * sizeof(T)),
                                          0, gapBytes, 0};
        AscendC::DataCopyPad(outGm_[outOffset], out, params);
    }
    outQue_.FreeTensor(out);

    lseQue_.EnQue(lse);
    lse = lseQue_.DeQue<float>();
    AscendC::DataCopyExtParams lseParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPad(lseGm_[lseOffset], lse, lseParams);
    lseQue_.FreeTensor(lse);
}

}  // namespace flash_attn
