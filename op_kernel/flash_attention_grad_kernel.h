// flash_attention_grad_kernel.h -- FlashAttention-2 backward for Atlas A2/A3 as a mixed
// AIC:AIV 1:2 kernel: dQ, dK, dV from Q, K, V, O, dO and the forward's LSE, recomputing the
// probabilities instead of storing them.
//
// Three phases, separated by SyncAll (all vector cores):
//   1. D = rowsum(dO * O) per query row (fp32, to the workspace); non-deterministic mode also
//      zeroes the dQ accumulator.
//   2. Each AIV runs its units (one K/V block j of one kv head, flash_attention_grad_tiling.h):
//      for every query head n of the kv head's group and every query block i that sees block j
//      (causal: only blocks at or below the diagonal),
//        S    = Q_i . K_j^T                       (cube)
//        dP   = dO_i . V_j^T                      (cube)
//        P    = exp(scale * S - LSE_i)            (vector; masked keys -> 0)
//        dS   = scale * P * (dP - D_i)            (vector)
//        dV_j += P^T . dO_i,  dK_j += dS^T . Q_i  (cube, A transposed, accumulated in GM fp32)
//        dQ_i += dS . K_j                         (cube; into this AIV's partial slot, or added
//                                                  with SetAtomicAdd<float> to one accumulator)
//      dK_j and dV_j belong to the unit alone: cast and written when its walk ends.
//   3. dQ = the partial slots summed in slot order (deterministic) or the accumulator, cast.
// Every per-row quantity (LSE, D) is a vector broadcast with Brcb: the scalar unit steers
// loops only and never touches score elements. The APIs beyond the forward's -- Matmul with A
// transposed and enAtomic, SetAtomicAdd / SetAtomicNone, SyncAll<true> -- behave as
// docs/cann-facts.md#ascend-c-kernel-apis records.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_row_ops.h"
#include "flash_attention_grad_tiling.h"
#include "flash_attention_tiling.h"

namespace flash_attn_grad {

using attn_rows::CeilDiv;
using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;
using attn_rows::Min;

constexpr float NEG_INF = -__builtin_inff();
// LSE of a row that sees no key is -inf; clamped to this, exp(-inf - LSE) stays 0 instead of NaN.
constexpr float FP32_LOWEST = -3.40282346638528859811704183484516925e+38f;

__aicore__ inline uint32_t Max(uint32_t a, uint32_t b) { return a > b ? a : b; }

// Orders the pipe named second after the pipe named first (e.g. V_MTE3: the copy out waits
// for the vector unit's last write).
template <AscendC::HardEvent EVENT>
__aicore__ inline void WaitForPipe()
{
    event_t eventId = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
    AscendC::SetFlag<EVENT>(eventId);
    AscendC::WaitFlag<EVENT>(eventId);
}

template <typename T>
class FlashAttentionGradKernel {
public:
    using RowsType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using TransType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, true>;
    using AccType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;

    AscendC::Matmul<RowsType, TransType, AccType> scoreMm;   // S = Q.K^T, dP = dO.V^T: [m, n] fp32
    AscendC::Matmul<TransType, RowsType, AccType> kvGradMm;  // dV += P^T.dO, dK += dS^T.Q: [n, D] fp32
    AscendC::Matmul<RowsType, RowsType, AccType> dqMm;       // dS.K: [m, D] fp32

    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut, GM_ADDR dout,
                                GM_ADDR softmaxLse, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                const FlashAttentionGradTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    // Phase 1 and 3, and the dK/dV write-out.
    __aicore__ inline void ComputeDelta();
    __aicore__ inline void ProcessUnits();
    __aicore__ inline void WriteDq();
    // Phase 2.
    __aicore__ inline void Step(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock, uint32_t kvBlock, bool first,
                                uint64_t dqRowsOffset, bool dqFirst);
    __aicore__ inline void ComputeProbs(uint32_t rows, uint32_t row0, uint32_t col0, uint32_t cols);
    __aicore__ inline void ComputeDs(uint32_t rows);
    __aicore__ inline void AddDqAtomically(uint64_t accOffset, uint32_t rows);
    __aicore__ inline void WriteKvGrads(uint32_t b, uint32_t h, uint32_t col0, uint32_t cols, bool computed);
    __aicore__ inline void MaskScores(uint32_t rows, uint32_t row0, uint32_t col0, uint32_t cols);

    // [rows, D] tiles between GM (rows `stride` elements apart) and contiguous UB.
    template <typename U>
    __aicore__ inline void LoadRows(const AscendC::LocalTensor<U> &dst, const AscendC::GlobalTensor<U> &src,
                                    uint32_t rows, uint32_t stride);
    template <typename U>
    __aicore__ inline void StoreRows(const AscendC::GlobalTensor<U> &dst, const AscendC::LocalTensor<U> &src,
                                     uint32_t rows, uint32_t stride);
    // tile[r, :] -= rowValues[r] for a [rows, width] fp32 tile with row stride `stride`.
    __aicore__ inline void SubtractRows(const AscendC::LocalTensor<float> &tile,
                                        const AscendC::LocalTensor<float> &rowValues, uint32_t rows, uint32_t width,
                                        uint32_t stride);

    // First query block whose rows see kv block j (numQBlocks when none does).
    __aicore__ inline uint32_t FirstQueryBlockSeeing(uint32_t kvBlock) const;
    __aicore__ inline uint64_t QueryOffset(uint32_t b, uint32_t n, uint32_t s) const;
    __aicore__ inline uint64_t KvOffset(uint32_t b, uint32_t h, uint32_t s) const;

    const FlashAttentionGradTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_, doutGm_, dqGm_, dkGm_, dvGm_;
    AscendC::GlobalTensor<float> lseGm_;
    AscendC::GlobalTensor<float> deltaGm_;   // [B, N, Sq] fp32
    AscendC::GlobalTensor<float> dqAccGm_;   // partial slots, or the [B, N, Sq, D] accumulator
    AscendC::GlobalTensor<float> scoreGm_;   // this AIV's scratch: S [m, n] fp32
    AscendC::GlobalTensor<float> gradGm_;    // dP [m, n] fp32
    AscendC::GlobalTensor<T> probGm_;        // P [m, n] T
    AscendC::GlobalTensor<T> dsGm_;          // dS * scale [m, n] T
    AscendC::GlobalTensor<float> dkAccGm_;   // dK_j [n, D] fp32
    AscendC::GlobalTensor<float> dvAccGm_;   // dV_j [n, D] fp32
    AscendC::GlobalTensor<float> dqPartGm_;  // dS.K_j of one step [m, D] fp32 (non-deterministic)

    AscendC::TBuf<AscendC::TPosition::VECCALC> scoreBuf_, gradBuf_, probBuf_, dsBuf_, lseBuf_, deltaBuf_, brcbBuf_,
        foldBuf_;
    AscendC::LocalTensor<float> score_;  // [m, n] fp32: S then P; row phases [rowChunk, D]
    AscendC::LocalTensor<float> grad_;   // [m, n] fp32: dP then dS
    AscendC::LocalTensor<T> prob_;       // [m, n] T
    AscendC::LocalTensor<T> ds_;         // [m, n] T
    AscendC::LocalTensor<float> lse_, delta_, brcb_, fold_;

    uint32_t aiv_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
};

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR attentionOut, GM_ADDR dout, GM_ADDR softmaxLse,
                                                         GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                                         const FlashAttentionGradTilingData *tiling,
                                                         AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->blockM;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;
    const uint64_t qRows = static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ;
    const uint64_t kvElems = static_cast<uint64_t>(td_->batch) * td_->numKvHeads * td_->seqKv * d;
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(query), qRows * d);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(key), kvElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qRows * d);
    doutGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dout), qRows * d);
    dqGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dq), qRows * d);
    dkGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dk), kvElems);
    dvGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dv), kvElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse), qRows);

    aiv_ = AscendC::GetBlockIdx();
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    deltaGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDeltaOffset), qRows);
    const uint64_t slotElems = static_cast<uint64_t>(td_->groupSize) * td_->seqQ * d;
    dqAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDqOffset),
                             td_->deterministic != 0 ? td_->numSlots * slotElems : qRows * d);
    GM_ADDR slice = user + td_->wsScratchOffset + aiv_ * td_->wsScratchBytes;
    scoreGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset), m * n);
    gradGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsGradOffset), m * n);
    probGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset), m * n);
    dsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsDsOffset), m * n);
    dkAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDkOffset), n * d);
    dvAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDvOffset), n * d);
    dqPartGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDqPartOffset), m * d);

    // UB, in the order and sizes op_host budgets (flash_attention_grad_tiling.h).
    const uint32_t rowVectorBytes = (m * sizeof(float) + 31) / 32 * 32;
    pipe_->InitBuffer(scoreBuf_, m * n * sizeof(float));
    pipe_->InitBuffer(gradBuf_, m * n * sizeof(float));
    pipe_->InitBuffer(probBuf_, m * n * sizeof(T));
    pipe_->InitBuffer(dsBuf_, m * n * sizeof(T));
    pipe_->InitBuffer(lseBuf_, rowVectorBytes);
    pipe_->InitBuffer(deltaBuf_, rowVectorBytes);
    pipe_->InitBuffer(brcbBuf_, m * FP32_PER_BLOCK * sizeof(float));
    pipe_->InitBuffer(foldBuf_, m * FP32_PER_REPEAT * sizeof(float));
    score_ = scoreBuf_.Get<float>();
    grad_ = gradBuf_.Get<float>();
    prob_ = probBuf_.Get<T>();
    ds_ = dsBuf_.Get<T>();
    lse_ = lseBuf_.Get<float>();
    delta_ = deltaBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::QueryOffset(uint32_t b, uint32_t n, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s) * d;
    }
    return ((static_cast<uint64_t>(b) * td_->seqQ + s) * td_->numHeads + n) * d;  // BSND, BSH
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::KvOffset(uint32_t b, uint32_t h, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numKvHeads + h) * td_->seqKv + s) * d;
    }
    return ((static_cast<uint64_t>(b) * td_->seqKv + s) * td_->numKvHeads + h) * d;
}

template <typename T>
__aicore__ inline uint32_t FlashAttentionGradKernel<T>::FirstQueryBlockSeeing(uint32_t kvBlock) const
{
    if (td_->causal == 0) {
        return 0;
    }
    // Row i sees key k iff k <= i + (Skv - Sq): the block's first key is seen from row
    // kvBlock * blockN - (Skv - Sq) on (bottom-right aligned mask).
    const int64_t firstRow = static_cast<int64_t>(kvBlock) * td_->blockN - (static_cast<int64_t>(td_->seqKv) - td_->seqQ);
    if (firstRow <= 0) {
        return 0;
    }
    if (firstRow >= static_cast<int64_t>(td_->seqQ)) {
        return td_->numQBlocks;
    }
    return static_cast<uint32_t>(firstRow) / td_->blockM;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Process()
{
    ComputeDelta();
    AscendC::SyncAll();  // D (and the zeroed dQ accumulator) complete before any core reads them
    ProcessUnits();
    AscendC::SyncAll();  // every dQ contribution has landed
    WriteDq();
    scoreMm.End();
    kvGradMm.End();
    dqMm.End();
}

// ---- phase 1: D = rowsum(dO * O) ---------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeDelta()
{
    const uint32_t d = td_->headDim;
    const uint32_t chunk = td_->rowChunk;
    const uint32_t chunksPerHead = CeilDiv(td_->seqQ, chunk);
    const uint32_t items = td_->batch * td_->numHeads * chunksPerHead;
    for (uint32_t item = aiv_; item < items; item += td_->aivNum) {
        const uint32_t headIndex = item / chunksPerHead;  // b * numHeads + n
        const uint32_t row0 = (item % chunksPerHead) * chunk;
        const uint32_t rows = Min(chunk, td_->seqQ - row0);
        const uint64_t offset = QueryOffset(headIndex / td_->numHeads, headIndex % td_->numHeads, row0);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        LoadRows(prob_, doutGm_[offset], rows, rowStrideQ_);
        LoadRows(ds_, outGm_[offset], rows, rowStrideQ_);
        WaitForPipe<AscendC::HardEvent::MTE2_V>();
        AscendC::Cast(score_, prob_, AscendC::RoundMode::CAST_NONE, rows * d);
        AscendC::Cast(grad_, ds_, AscendC::RoundMode::CAST_NONE, rows * d);
        AscendC::Mul(score_, score_, grad_, rows * d);  // dO * O, [rows, D] fp32
        attn_rows::ReduceRows<attn_rows::Reduce::SUM>(delta_, score_, fold_, rows, d, d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
        AscendC::DataCopyPad(deltaGm_[static_cast<uint64_t>(headIndex) * td_->seqQ + row0], delta_, params);
        if (td_->deterministic == 0) {
            // The dQ accumulator starts at 0: these rows, in BNSD order.
            AscendC::Duplicate(score_, 0.0f, rows * d);
            WaitForPipe<AscendC::HardEvent::V_MTE3>();
            AscendC::DataCopy(dqAccGm_[(static_cast<uint64_t>(headIndex) * td_->seqQ + row0) * d], score_, rows * d);
        }
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
    }
}

// ---- phase 2: the units ------------------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ProcessUnits()
{
    const uint32_t kvBlocks = td_->numKvBlocks;
    const uint32_t unitBegin = td_->unitStart[aiv_];
    const uint32_t unitEnd = td_->unitStart[aiv_ + 1];
    // Partial slots of this AIV (deterministic): one per kv head its range touches, numbered
    // after those of the AIVs before it.
    uint32_t slotBase = 0;
    for (uint32_t a = 0; a < aiv_; ++a) {
        if (td_->unitStart[a + 1] > td_->unitStart[a]) {
            slotBase += (td_->unitStart[a + 1] - 1) / kvBlocks - td_->unitStart[a] / kvBlocks + 1;
        }
    }
    const uint32_t firstKvHead = unitBegin / kvBlocks;  // b * numKvHeads + h of the first unit
    const uint64_t slotElems = static_cast<uint64_t>(td_->groupSize) * td_->seqQ * td_->headDim;

    for (uint32_t unit = unitBegin; unit < unitEnd; ++unit) {
        const uint32_t kvHeadIndex = unit / kvBlocks;
        const uint32_t b = kvHeadIndex / td_->numKvHeads;
        const uint32_t h = kvHeadIndex % td_->numKvHeads;
        const uint32_t j = unit % kvBlocks;
        // The first kv block of this head in the range writes the slot's rows, later ones add.
        const uint32_t firstJ = (unitBegin > kvHeadIndex * kvBlocks ? unitBegin : kvHeadIndex * kvBlocks) -
                                kvHeadIndex * kvBlocks;
        const uint64_t slot = slotBase + (kvHeadIndex - firstKvHead);
        const uint32_t qBegin = FirstQueryBlockSeeing(j);
        bool first = true;
        for (uint32_t g = 0; g < td_->groupSize; ++g) {
            const uint32_t n = h * td_->groupSize + g;
            for (uint32_t i = qBegin; i < td_->numQBlocks; ++i) {
                const uint64_t rowsOffset =
                    td_->deterministic != 0
                        ? slot * slotElems + (static_cast<uint64_t>(g) * td_->seqQ + i * td_->blockM) * td_->headDim
                        : ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + i * td_->blockM) * td_->headDim;
                Step(b, n, h, i, j, first, rowsOffset, j == firstJ);
                first = false;
            }
        }
        const uint32_t col0 = j * td_->blockN;
        WriteKvGrads(b, h, col0, Min(td_->blockN, td_->seqKv - col0), !first);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Step(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock,
                                                         uint32_t kvBlock, bool first, uint64_t dqRowsOffset,
                                                         bool dqFirst)
{
    const uint32_t d = td_->headDim;
    const uint32_t bn = td_->blockN;
    const uint32_t row0 = qBlock * td_->blockM;
    const uint32_t rows = Min(td_->blockM, td_->seqQ - row0);
    const uint32_t col0 = kvBlock * bn;
    const uint32_t cols = Min(bn, td_->seqKv - col0);
    const uint64_t qOffset = QueryOffset(b, n, row0);
    const uint64_t kvOffset = KvOffset(b, h, col0);

    // S and dP: A = Q / dO rows [rows, D], B^T = K / V rows [cols, D], C [rows, cols] with row stride blockN.
    scoreMm.SetOrgShape(rows, bn, rowStrideQ_, rowStrideKv_, bn);
    scoreMm.SetTail(rows, cols, d);
    scoreMm.SetTensorA(queryGm_[qOffset]);
    scoreMm.SetTensorB(keyGm_[kvOffset], true);
    scoreMm.IterateAll(scoreGm_);
    scoreMm.SetTensorA(doutGm_[qOffset]);
    scoreMm.SetTensorB(valueGm_[kvOffset], true);
    scoreMm.IterateAll(gradGm_);

    // Per-row LSE and D of these rows.
    const uint64_t rowIndex = (static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + row0;
    AscendC::DataCopyExtParams rowParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPadExtParams<float> noPad{false, 0, 0, 0.0f};
    WaitForPipe<AscendC::HardEvent::V_MTE2>();
    AscendC::DataCopyPad(lse_, lseGm_[rowIndex], rowParams, noPad);
    AscendC::DataCopyPad(delta_, deltaGm_[rowIndex], rowParams, noPad);
    AscendC::DataCopy(score_, scoreGm_, rows * bn);
    AscendC::DataCopy(grad_, gradGm_, rows * bn);
    WaitForPipe<AscendC::HardEvent::MTE2_V>();
    ComputeProbs(rows, row0, col0, cols);
    ComputeDs(rows);
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    AscendC::DataCopy(probGm_, prob_, rows * bn);
    AscendC::DataCopy(dsGm_, ds_, rows * bn);
    WaitForPipe<AscendC::HardEvent::MTE3_S>();  // P and dS are in GM before the cube is asked to read them

    // dV_j += P^T . dO_i and dK_j += dS^T . Q_i: A^T stored [rows, blockN] (row stride blockN),
    // B = dO / Q rows [rows, D], C [cols, D] fp32. The first step of the unit writes, later ones add.
    kvGradMm.SetOrgShape(bn, rowStrideQ_, td_->blockM, td_->blockM, d);
    kvGradMm.SetTail(cols, d, rows);
    kvGradMm.SetTensorA(probGm_, true);
    kvGradMm.SetTensorB(doutGm_[qOffset]);
    kvGradMm.IterateAll(dvAccGm_, first ? 0 : 1);
    kvGradMm.SetTensorA(dsGm_, true);
    kvGradMm.SetTensorB(queryGm_[qOffset]);
    kvGradMm.IterateAll(dkAccGm_, first ? 0 : 1);

    // dQ_i += dS . K_j: A = dS [rows, cols] (row stride blockN), B = K rows [cols, D], C [rows, D].
    dqMm.SetOrgShape(rows, rowStrideKv_, bn, bn, d);
    dqMm.SetTail(rows, d, cols);
    dqMm.SetTensorA(dsGm_);
    dqMm.SetTensorB(keyGm_[kvOffset]);
    if (td_->deterministic != 0) {
        dqMm.IterateAll(dqAccGm_[dqRowsOffset], dqFirst ? 0 : 1);  // this AIV's own slot
    } else {
        dqMm.IterateAll(dqPartGm_);
        AddDqAtomically(dqRowsOffset, rows);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeProbs(uint32_t rows, uint32_t row0, uint32_t col0,
                                                                 uint32_t cols)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    AscendC::Maxs(lse_, lse_, FP32_LOWEST, rows);  // rows that see no key: -inf -> lowest finite
    AscendC::Muls(score_, score_, td_->scaleValue, elems);
    MaskScores(rows, row0, col0, cols);
    SubtractRows(score_, lse_, rows, bn, bn);
    AscendC::Exp(score_, score_, elems);  // P = exp(scale * S - LSE), masked -> 0
    AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, elems);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeDs(uint32_t rows)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    SubtractRows(grad_, delta_, rows, bn, bn);  // dP - D
    AscendC::Mul(grad_, grad_, score_, elems);            // dS = P * (dP - D)
    AscendC::Muls(grad_, grad_, td_->scaleValue, elems);  // the scale of dQ and dK, applied once here
    AscendC::Cast(ds_, grad_, AscendC::RoundMode::CAST_RINT, elems);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::MaskScores(uint32_t rows, uint32_t row0, uint32_t col0,
                                                               uint32_t cols)
{
    const uint32_t n = td_->blockN;
    // visible(r) = keys of row (row0 + r) inside this block: all `cols` real columns, or fewer on
    // a block crossing the causal diagonal (key k visible iff k <= i + Skv - Sq).
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
        attn_rows::FillColumns(score_, r * n, visible, n, NEG_INF);  // columns [visible, n) of row r
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::AddDqAtomically(uint64_t accOffset, uint32_t rows)
{
    // The step's [rows, D] fp32 part, rowChunk rows at a time through UB, added to the accumulator.
    const uint32_t d = td_->headDim;
    for (uint32_t r = 0; r < rows; r += td_->rowChunk) {
        const uint32_t n = Min(td_->rowChunk, rows - r);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        AscendC::DataCopy(score_, dqPartGm_[r * d], n * d);
        WaitForPipe<AscendC::HardEvent::MTE2_MTE3>();
        AscendC::SetAtomicAdd<float>();
        AscendC::DataCopy(dqAccGm_[accOffset + r * d], score_, n * d);
        AscendC::SetAtomicNone();
        WaitForPipe<AscendC::HardEvent::MTE3_MTE2>();
    }
    WaitForPipe<AscendC::HardEvent::MTE3_V>();
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WriteKvGrads(uint32_t b, uint32_t h, uint32_t col0, uint32_t cols,
                                                                 bool computed)
{
    // dK_j and dV_j [cols, D] fp32 -> T, rowChunk rows at a time; zeros when no query row sees the block.
    const uint32_t d = td_->headDim;
    for (uint32_t r = 0; r < cols; r += td_->rowChunk) {
        const uint32_t n = Min(td_->rowChunk, cols - r);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        if (computed) {
            AscendC::DataCopy(score_, dkAccGm_[r * d], n * d);
            AscendC::DataCopy(grad_, dvAccGm_[r * d], n * d);
            WaitForPipe<AscendC::HardEvent::MTE2_V>();
        } else {
            AscendC::Duplicate(score_, 0.0f, n * d);
            AscendC::Duplicate(grad_, 0.0f, n * d);
        }
        AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, n * d);
        AscendC::Cast(ds_, grad_, AscendC::RoundMode::CAST_RINT, n * d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        StoreRows(dkGm_[KvOffset(b, h, col0 + r)], prob_, n, rowStrideKv_);
        StoreRows(dvGm_[KvOffset(b, h, col0 + r)], ds_, n, rowStrideKv_);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
    }
}

// ---- phase 3: dQ --------------------------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WriteDq()
{
    const uint32_t d = td_->headDim;
    const uint32_t kvBlocks = td_->numKvBlocks;
    const uint64_t slotElems = static_cast<uint64_t>(td_->groupSize) * td_->seqQ * d;
    const uint32_t items = td_->batch * td_->numHeads * td_->numQBlocks;
    for (uint32_t item = aiv_; item < items; item += td_->aivNum) {
        const uint32_t headIndex = item / td_->numQBlocks;  // b * numHeads + n
        const uint32_t qBlock = item % td_->numQBlocks;
        const uint32_t b = headIndex / td_->numHeads;
        const uint32_t n = headIndex % td_->numHeads;
        const uint32_t kvHeadIndex = b * td_->numKvHeads + n / td_->groupSize;
        const uint32_t g = n % td_->groupSize;
        const uint32_t blockRow0 = qBlock * td_->blockM;
        const uint32_t blockRows = Min(td_->blockM, td_->seqQ - blockRow0);
        for (uint32_t r = 0; r < blockRows; r += td_->rowChunk) {
            const uint32_t rows = Min(td_->rowChunk, blockRows - r);
            const uint32_t row0 = blockRow0 + r;
            WaitForPipe<AscendC::HardEvent::V_MTE2>();
            if (td_->deterministic == 0) {
                AscendC::DataCopy(score_, dqAccGm_[(static_cast<uint64_t>(headIndex) * td_->seqQ + row0) * d], rows * d);
                WaitForPipe<AscendC::HardEvent::MTE2_V>();
            } else {
                // Slots of this kv head, in slot order (AIV order): each AIV range that holds
                // one of the head's kv blocks seen by this query block wrote these rows.
                const uint32_t headBegin = kvHeadIndex * kvBlocks, headEnd = headBegin + kvBlocks;
                uint32_t slotBase = 0;
                bool any = false;
                for (uint32_t a = 0; a < td_->aivNum; ++a) {
                    const uint32_t begin = td_->unitStart[a], end = td_->unitStart[a + 1];
                    if (end <= begin) {
                        continue;
                    }
                    if (begin < headEnd && end > headBegin && FirstQueryBlockSeeing(Max(begin, headBegin) - headBegin) <= qBlock) {
                        const uint64_t slot = slotBase + (kvHeadIndex - begin / kvBlocks);
                        const uint64_t offset = slot * slotElems + (static_cast<uint64_t>(g) * td_->seqQ + row0) * d;
                        if (!any) {
                            AscendC::DataCopy(score_, dqAccGm_[offset], rows * d);
                            WaitForPipe<AscendC::HardEvent::MTE2_V>();
                        } else {
                            AscendC::DataCopy(grad_, dqAccGm_[offset], rows * d);
                            WaitForPipe<AscendC::HardEvent::MTE2_V>();
                            AscendC::Add(score_, score_, grad_, rows * d);
                            WaitForPipe<AscendC::HardEvent::V_MTE2>();
                        }
                        any = true;
                    }
                    slotBase += (end - 1) / kvBlocks - begin / kvBlocks + 1;
                }
                if (!any) {
                    AscendC::Duplicate(score_, 0.0f, rows * d);  // rows that see no key
                }
            }
            AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, rows * d);
            WaitForPipe<AscendC::HardEvent::V_MTE3>();
            StoreRows(dqGm_[QueryOffset(b, n, row0)], prob_, rows, rowStrideQ_);
            WaitForPipe<AscendC::HardEvent::MTE3_V>();
        }
    }
}

// ---- helpers ------------------------------------------------------------------------------------

template <typename T>
template <typename U>
__aicore__ inline void FlashAttentionGradKernel<T>::LoadRows(const AscendC::LocalTensor<U> &dst,
                                                             const AscendC::GlobalTensor<U> &src, uint32_t rows,
                                                             uint32_t stride)
{
    const uint32_t d = td_->headDim;
    if (stride == d) {
        AscendC::DataCopy(dst, src, rows * d);
        return;
    }
    // BSND / BSH: consecutive sequence rows are `stride` elements apart; D * sizeof(U) is whole
    // 32-B blocks, so the rows land contiguous in UB.
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(d * sizeof(U)),
                                      static_cast<uint32_t>((stride - d) * sizeof(U)), 0, 0};
    AscendC::DataCopyPad(dst, src, params, AscendC::DataCopyPadExtParams<U>{false, 0, 0, static_cast<U>(0)});
}

template <typename T>
template <typename U>
__aicore__ inline void FlashAttentionGradKernel<T>::StoreRows(const AscendC::GlobalTensor<U> &dst,
                                                              const AscendC::LocalTensor<U> &src, uint32_t rows,
                                                              uint32_t stride)
{
    const uint32_t d = td_->headDim;
    if (stride == d) {
        AscendC::DataCopy(dst, src, rows * d);
        return;
    }
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(d * sizeof(U)), 0,
                                      static_cast<uint32_t>((stride - d) * sizeof(U)), 0};
    AscendC::DataCopyPad(dst, src, params);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::SubtractRows(const AscendC::LocalTensor<float> &tile,
                                                                 const AscendC::LocalTensor<float> &rowValues,
                                                                 uint32_t rows, uint32_t width, uint32_t stride)
{
    attn_rows::BroadcastRows(brcb_, rowValues, rows);
    attn_rows::ApplyRows<attn_rows::Op::SUB>(tile, brcb_, rows, width, stride);
}

}  // namespace flash_attn_grad
