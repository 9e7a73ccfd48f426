// flash_attention_grad_kernel.h -- FlashAttention-2 backward for Atlas A2/A3 as a mixed
// AIC:AIV 1:2 kernel: dQ, dK, dV from Q, K, V, O, dO and the forward's LSE, recomputing the
// probabilities instead of storing them.
//
// Three phases, separated by SyncAll (all vector cores):
//   1. D = rowsum(dO * O) per query row (fp32, to the workspace); the dQ accumulator and the
//      dQ flags (deterministic mode) are zeroed; with an attention mask, each AIV classifies
//      its share of the mask's blocks (attention_mask.h) into the workspace summary.
//   2. Each AIV runs its units (one K/V block j of one kv head of one sequence,
//      flash_attention_grad_tiling.h): for every query head n of the kv head's group and every
//      query block i whose band rows see block j (QueryBlocksSeeing: causal or windowed blocks
//      outside the band are never loaded),
//        S    = Q_i . K_j^T                       (cube)
//        dP   = dO_i . V_j^T                      (cube)
//        P    = exp(scale * S + bias - LSE_i)     (vector; keys outside the band -> 0, MaskScores;
//                                                  bias: the mask's 0 / -inf on BLOCK_MIXED blocks)
//        dropout: Pd = P o Z / keep_prob, dP := dP o Z / keep_prob (Z regenerated, ApplyDropout)
//        dS   = scale * P * (dP - D_i)            (vector)
//        dV_j += Pd^T . dO_i,  dK_j += dS^T . Q_i (cube, A transposed, accumulated in GM fp32)
//        dQ_i += dS . K_j                         (cube, added to the one fp32 accumulator)
//      dK_j and dV_j belong to the unit alone: cast and written when its walk ends. A step the
//      mask hides entirely (BLOCK_MASKED) is skipped: nothing is loaded or computed, only the
//      deterministic dQ hand-over passes through it.
//   3. dQ = the accumulator, cast.
// dQ_i gathers one contribution per K/V block j whose walk includes it, from units on any AIV.
// Atomic mode adds them with SetAtomicAdd<float> in whatever order the cores reach them.
// Deterministic mode adds them in descending j, whatever core holds which unit: the unit of
// block j waits (IBWait) until block j+1 has added its part, adds (Matmul enAtomic) and hands
// over (IBSet) to block j-1. So the fp32 sum order of every dQ element is fixed by j alone:
// bit-identical across runs, host threads and core counts. The blocks walking query block i
// are consecutive (QueryBlocksSeeing's ends are non-decreasing in j), so j's neighbours in
// the chain are j+1 and j-1 when they walk i too. The hand-over of query block i of head
// (b, n) uses eventID (b * N + n) * numQBlocks + i and, as blockIdx, the AIV that waits (the
// owner of block j-1's unit): one flag per chain and waiting core, so a flag never has two
// waiters at once -- with one flag per chain, the AIVs of j-1 and j-2 could both wait on it
// and the wrong one take block j's hand-over.
// Why this cannot deadlock: order the steps by (kv head, -j, query head, i); every AIV runs
// its steps in ascending order (ProcessUnits), and a step waits only for a step of smaller
// order (j+1 of the same head and rows). Among the steps still waiting, the one of smallest
// order waits for a step that is not waiting and whose AIV has only smaller steps before it,
// which are done -- so that step runs, sets the flag and the wait ends. IBSet itself never
// waits: the flag (chain, AIV A) is set for A's blocks of the chain in descending order, each
// set after the previous one was consumed (A consumed it before adding, and the next set comes
// after that add in the chain).
// Every per-row quantity (LSE, D) is a vector broadcast with Brcb: the scalar unit steers
// loops only and never touches score elements (IBSet/IBWait test their flag with two scalar
// accesses per call: per step, not per element). The APIs beyond the forward's -- Matmul with
// A transposed and enAtomic, SetAtomicAdd / SetAtomicNone, SyncAll<true>, IBSet / IBWait --
// behave as docs/cann-facts.md#ascend-c-kernel-apis records.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_band.h"
#include "attention_matmul.h"
#include "attention_mask.h"
#include "attention_row_ops.h"
#include "philox_dropout.h"
#include "flash_attention_grad_tiling.h"
#include "flash_attention_tiling.h"

namespace flash_attn_grad {

using attn_rows::CeilDiv;
using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;
using attn_rows::Min;

constexpr float NEG_INF = -__builtin_inff();
// An IBSet/IBWait flag: one 32-B block of int32 (docs/cann-facts.md#ascend-c-kernel-apis).
constexpr uint32_t FLAG_INT32S = 8;
// LSE of a row that sees no key is -inf; clamped to this, exp(-inf - LSE) stays 0 instead of NaN.
constexpr float FP32_LOWEST = -3.40282346638528859811704183484516925e+38f;

using attn_rows::WaitForPipe;  // orders the pipe named second after the one named first

template <typename T>
class FlashAttentionGradKernel {
public:
    attn_mm::RowsByColsT<T> scoreMm;  // S = Q.K^T, dP = dO.V^T: [m, n] fp32
    attn_mm::RowsTByB<T> kvGradMm;    // dV += P^T.dO, dK += dS^T.Q: [n, D] fp32
    attn_mm::RowsByB<T> dqMm;         // dS.K: [m, D] fp32

    // actualSeqQlen / actualSeqKvlen: int64 cumulative end offsets (varlen), else unused (nullptr).
    // attenMask: uint8 [maskB, maskN, maskQ, Skv] when tiling->hasMask, else unused (nullptr).
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut, GM_ADDR dout,
                                GM_ADDR softmaxLse, GM_ADDR attenMask, GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen,
                                GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                const FlashAttentionGradTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    // Phase 1 and 3, and the dK/dV write-out.
    __aicore__ inline void ComputeDelta();
    __aicore__ inline void ZeroFlags();
    __aicore__ inline void SummarizeMask();
    __aicore__ inline void ProcessUnits();
    __aicore__ inline void WalkUnit(uint32_t unit);
    __aicore__ inline void WriteDq();
    // Phase 2.
    // One (query block, kv block) step; waitFor / handTo: deterministic mode's chain neighbours
    // (block kvBlock + 1 added before this step; block kvBlock - 1 adds after it). False when
    // the mask hides the block entirely (nothing computed, dK_j / dV_j untouched).
    __aicore__ inline bool Step(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock, uint32_t kvBlock, bool first,
                                bool waitFor, bool handTo);
    // The summary class (attn_mask::BlockClass) of query block qBlock x kv block kvBlock of (b, n).
    __aicore__ inline uint8_t MaskClass(uint32_t b, uint32_t n, uint32_t qBlock, uint32_t kvBlock) const;
    __aicore__ inline void AddDqInOrder(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock, uint32_t kvBlock,
                                        uint64_t dqRowsOffset, bool waitFor, bool handTo);
    // The AIV whose range [unitStart[a], unitStart[a + 1]) holds `unit`.
    __aicore__ inline uint32_t AivOfUnit(uint32_t unit) const;
    __aicore__ inline void ComputeProbs(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0, uint32_t col0,
                                        uint32_t cols, bool maskBias);
    // prob_ = T(P o Z / keep_prob) and grad_ = dP o Z / keep_prob for the tile's rows row0.. and
    // keys col0.. of head (b, n); score_ keeps P.
    __aicore__ inline void ApplyDropout(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0, uint32_t col0);
    // Keys of rows row0.. outside the band (and the block's padding columns) -> -inf.
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

    // One sequence: batch b of a dense layout, or varlen sequence b.
    struct Seq {
        uint32_t sq = 0, skv = 0;           // its query and key rows
        uint64_t qStart = 0, kvStart = 0;   // its first row in the token dimension (BSND, BSH, TND)
        int64_t diag = 0;                   // skv - sq
    };
    // Makes seq_ sequence b's (varlen: two int64 reads from each of actual_seq_qlen / kvlen).
    __aicore__ inline void LoadSeq(uint32_t b);
    // Query blocks [*first, *end) of seq_ holding a row that sees one of the keys [keyBegin,
    // keyEnd) (both 0 when none does). For kv blocks both ends are non-decreasing in the block.
    __aicore__ inline void QueryBlocksSeeing(uint32_t keyBegin, uint32_t keyEnd, uint32_t *first,
                                             uint32_t *end) const;
    // Offsets in seq_ (b must be the loaded sequence for the token layouts).
    __aicore__ inline uint64_t QueryOffset(uint32_t b, uint32_t n, uint32_t s) const;
    __aicore__ inline uint64_t KvOffset(uint32_t b, uint32_t h, uint32_t s) const;
    __aicore__ inline uint64_t LseIndex(uint32_t b, uint32_t n, uint32_t s) const;

    const FlashAttentionGradTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_, doutGm_, dqGm_, dkGm_, dvGm_;
    AscendC::GlobalTensor<float> lseGm_;        // [B, N, Sq], varlen [N, Tq]
    AscendC::GlobalTensor<int64_t> seqQEndGm_;  // varlen: actual_seq_qlen [B], cumulative ends
    AscendC::GlobalTensor<int64_t> seqKvEndGm_;
    AscendC::GlobalTensor<float> deltaGm_;   // [B, N, Sq] fp32
    AscendC::GlobalTensor<float> dqAccGm_;   // the [B, N, Sq, D] fp32 accumulator
    AscendC::GlobalTensor<int32_t> flagGm_;  // deterministic: numDqFlags 32-B flags
    AscendC::GlobalTensor<float> scoreGm_;   // this AIV's scratch: S [m, n] fp32
    AscendC::GlobalTensor<float> gradGm_;    // dP [m, n] fp32
    AscendC::GlobalTensor<T> probGm_;        // P [m, n] T
    AscendC::GlobalTensor<T> dsGm_;          // dS * scale [m, n] T
    AscendC::GlobalTensor<float> dkAccGm_;   // dK_j [n, D] fp32
    AscendC::GlobalTensor<float> dvAccGm_;   // dV_j [n, D] fp32
    AscendC::GlobalTensor<float> dqPartGm_;  // dS.K_j of one step [m, D] fp32 (non-deterministic)
    AscendC::GlobalTensor<uint8_t> maskSummaryGm_;  // hasMask: one BlockClass byte per summary block

    attn_mask::MaskGeometry maskGeom_;
    attn_mask::MaskTiles mask_;            // hasMask only
    philox_dropout::PhiloxKeepMask keep_;  // dropout only

    AscendC::TBuf<AscendC::TPosition::VECCALC> scoreBuf_, gradBuf_, probBuf_, dsBuf_, lseBuf_, deltaBuf_, brcbBuf_,
        foldBuf_, flagBuf_;
    AscendC::LocalTensor<float> score_;  // [m, n] fp32: S then P; row phases [rowChunk, D]
    AscendC::LocalTensor<float> grad_;   // [m, n] fp32: dP then dS
    AscendC::LocalTensor<T> prob_;       // [m, n] T
    AscendC::LocalTensor<T> ds_;         // [m, n] T
    AscendC::LocalTensor<float> lse_, delta_, brcb_, fold_;
    AscendC::LocalTensor<int32_t> flagUb_;  // IBSet/IBWait's 32-B UB scratch

    uint32_t aiv_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    Seq seq_;
    uint32_t seqIndex_ = 0xFFFFFFFFu;  // the sequence seq_ holds
};

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR attentionOut, GM_ADDR dout, GM_ADDR softmaxLse,
                                                         GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                                         GM_ADDR actualSeqKvlen, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv,
                                                         GM_ADDR workspace,
                                                         const FlashAttentionGradTilingData *tiling,
                                                         AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->blockM;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;
    // Rows of every query head (the LSE's and dQ's), and the padded [B, N, Sq] rows of D.
    const uint64_t qRows = td_->varlen != 0 ? td_->totalQ * td_->numHeads
                                            : static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ;
    const uint64_t deltaRows = static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ;
    const uint64_t kvElems = (td_->varlen != 0 ? td_->totalKv : static_cast<uint64_t>(td_->batch) * td_->seqKv) *
                             td_->numKvHeads * d;
    if (td_->varlen != 0) {
        seqQEndGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqQlen), td_->batch);
        seqKvEndGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqKvlen), td_->batch);
    }
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
    deltaGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDeltaOffset), deltaRows);
    dqAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDqOffset), deltaRows * d);
    flagGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(user + td_->wsFlagOffset),
                            static_cast<uint64_t>(td_->numDqFlags) * FLAG_INT32S);
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
    pipe_->InitBuffer(flagBuf_, FLAG_INT32S * sizeof(int32_t));
    score_ = scoreBuf_.Get<float>();
    grad_ = gradBuf_.Get<float>();
    prob_ = probBuf_.Get<T>();
    ds_ = dsBuf_.Get<T>();
    lse_ = lseBuf_.Get<float>();
    delta_ = deltaBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();
    flagUb_ = flagBuf_.Get<int32_t>();
    if (td_->hasMask != 0) {
        maskGeom_.mb = td_->maskB;
        maskGeom_.mn = td_->maskN;
        maskGeom_.mq = td_->maskQ;
        maskGeom_.mk = td_->seqKv;
        maskGeom_.blockM = m;
        maskGeom_.blockN = n;
        mask_.Init(pipe_, maskGeom_, td_->maskRows);
        mask_.SetGlobal(attenMask);
        maskSummaryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(user + td_->wsMaskSummaryOffset),
                                       maskGeom_.SummaryBytes());
    }
    if (td_->dropout != 0) {
        keep_.Init(pipe_, td_->philoxLanes);
        keep_.SetWidth(n);
    }

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::LoadSeq(uint32_t b)
{
    if (b == seqIndex_) {
        return;
    }
    seqIndex_ = b;
    if (td_->varlen != 0) {
        const int64_t qBegin = b == 0 ? 0 : seqQEndGm_.GetValue(b - 1);
        const int64_t kvBegin = b == 0 ? 0 : seqKvEndGm_.GetValue(b - 1);
        seq_.qStart = static_cast<uint64_t>(qBegin);
        seq_.kvStart = static_cast<uint64_t>(kvBegin);
        seq_.sq = static_cast<uint32_t>(seqQEndGm_.GetValue(b) - qBegin);
        seq_.skv = static_cast<uint32_t>(seqKvEndGm_.GetValue(b) - kvBegin);
    } else {
        seq_.qStart = static_cast<uint64_t>(b) * td_->seqQ;
        seq_.kvStart = static_cast<uint64_t>(b) * td_->seqKv;
        seq_.sq = td_->seqQ;
        seq_.skv = td_->seqKv;
    }
    seq_.diag = attn_band::Diagonal(seq_.sq, seq_.skv);
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::QueryOffset(uint32_t b, uint32_t n, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s) * d;
    }
    return ((seq_.qStart + s) * td_->numHeads + n) * d;  // BSND, BSH, TND
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::KvOffset(uint32_t b, uint32_t h, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numKvHeads + h) * td_->seqKv + s) * d;
    }
    return ((seq_.kvStart + s) * td_->numKvHeads + h) * d;
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::LseIndex(uint32_t b, uint32_t n, uint32_t s) const
{
    if (td_->varlen != 0) {
        return static_cast<uint64_t>(n) * td_->totalQ + seq_.qStart + s;  // [N, Tq]
    }
    return (static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::QueryBlocksSeeing(uint32_t keyBegin, uint32_t keyEnd,
                                                                      uint32_t *first, uint32_t *end) const
{
    // Key k is seen by rows [k - diag - nextTokens, k - diag + preTokens]; as preTokens +
    // nextTokens >= 0 the rows of consecutive keys overlap or touch, so keys [keyBegin, keyEnd)
    // are seen by rows [keyBegin - diag - next, keyEnd - 1 - diag + pre], clamped to [0, sq).
    *first = 0;
    *end = 0;
    int64_t rowLo = 0, rowHi = 0;
    if (!attn_band::SeeingRows(keyBegin, Min(keyEnd, seq_.skv), seq_.diag, seq_.sq, td_->preTokens,
                               td_->nextTokens, &rowLo, &rowHi)) {
        return;
    }
    *first = static_cast<uint32_t>(rowLo) / td_->blockM;
    *end = CeilDiv(static_cast<uint32_t>(rowHi), td_->blockM);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Process()
{
    ComputeDelta();
    if (td_->deterministic != 0) {
        ZeroFlags();
    }
    if (td_->hasMask != 0) {
        SummarizeMask();
    }
    AscendC::SyncAll();  // D, the zeroed dQ accumulator and flags, the mask summary complete before any core uses them
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
        LoadSeq(headIndex / td_->numHeads);
        if (row0 >= seq_.sq) {
            continue;  // varlen: past this sequence's rows
        }
        const uint32_t rows = Min(chunk, seq_.sq - row0);
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
        // The dQ accumulator starts at 0 (rows no kv block sees stay 0): these rows, in BNSD order.
        AscendC::Duplicate(score_, 0.0f, rows * d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopy(dqAccGm_[(static_cast<uint64_t>(headIndex) * td_->seqQ + row0) * d], score_, rows * d);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ZeroFlags()
{
    // IBSet/IBWait need their flags at 0 (docs/cann-facts.md#ascend-c-kernel-apis): each AIV
    // zeroes an equal share, at most a score tile (m * n fp32, whole flags) per copy.
    const uint32_t perAiv = CeilDiv(td_->numDqFlags, td_->aivNum);
    const uint32_t begin = Min(aiv_ * perAiv, td_->numDqFlags);
    const uint32_t end = Min(begin + perAiv, td_->numDqFlags);
    const uint32_t flagsPerCopy = td_->blockM * td_->blockN / FLAG_INT32S;
    if (begin == end) {
        return;
    }
    AscendC::Duplicate(score_, 0.0f, Min(end - begin, flagsPerCopy) * FLAG_INT32S);  // 0.0f is all zero bits
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    const AscendC::LocalTensor<int32_t> zeros = score_.ReinterpretCast<int32_t>();
    for (uint32_t f = begin; f < end; f += flagsPerCopy) {
        AscendC::DataCopy(flagGm_[static_cast<uint64_t>(f) * FLAG_INT32S], zeros,
                          Min(flagsPerCopy, end - f) * FLAG_INT32S);
    }
    WaitForPipe<AscendC::HardEvent::MTE3_V>();
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::SummarizeMask()
{
    // An equal share of the summary rows per AIV (attention_mask.h: one DataCopyPad per row).
    const uint32_t rows = maskGeom_.SummaryRows();
    const uint32_t perAiv = CeilDiv(rows, td_->aivNum);
    const uint32_t first = Min(aiv_ * perAiv, rows);
    mask_.Summarize(maskSummaryGm_, first, Min(perAiv, rows - first));
}

// ---- phase 2: the units ------------------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ProcessUnits()
{
    // This AIV's units [unitStart[a], unitStart[a + 1]) in the order the deterministic dQ needs
    // (see the top of the file): kv heads ascending, within a head K/V blocks descending.
    const uint32_t kvBlocks = td_->numKvBlocks;
    const uint32_t unitBegin = td_->unitStart[aiv_];
    const uint32_t unitEnd = td_->unitStart[aiv_ + 1];
    for (uint32_t headBegin = unitBegin; headBegin < unitEnd;) {
        const uint32_t headEnd = Min((headBegin / kvBlocks + 1) * kvBlocks, unitEnd);
        for (uint32_t unit = headEnd; unit > headBegin; --unit) {
            WalkUnit(unit - 1);
        }
        headBegin = headEnd;
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WalkUnit(uint32_t unit)
{
    const uint32_t kvHeadIndex = unit / td_->numKvBlocks;
    const uint32_t b = kvHeadIndex / td_->numKvHeads;
    const uint32_t h = kvHeadIndex % td_->numKvHeads;
    const uint32_t j = unit % td_->numKvBlocks;
    const uint32_t bn = td_->blockN;
    const uint32_t col0 = j * bn;
    LoadSeq(b);
    if (col0 >= seq_.skv) {
        return;  // varlen: past this sequence's keys, an empty unit
    }
    // The query blocks this block walks, and those its chain neighbours j+1 and j-1 walk.
    uint32_t qBegin = 0, qEnd = 0, nextBegin = 0, nextEnd = 0, prevBegin = 0, prevEnd = 0;
    QueryBlocksSeeing(col0, col0 + bn, &qBegin, &qEnd);
    QueryBlocksSeeing(col0 + bn, col0 + 2 * bn, &nextBegin, &nextEnd);  // empty past the keys
    if (j > 0) {
        QueryBlocksSeeing(col0 - bn, col0, &prevBegin, &prevEnd);
    }
    bool first = true;  // no step has written dK_j / dV_j yet
    for (uint32_t g = 0; g < td_->groupSize; ++g) {
        for (uint32_t i = qBegin; i < qEnd; ++i) {
            if (Step(b, h * td_->groupSize + g, h, i, j, first, nextBegin <= i && i < nextEnd,
                     prevBegin <= i && i < prevEnd)) {
                first = false;
            }
        }
    }
    WriteKvGrads(b, h, col0, Min(bn, seq_.skv - col0), !first);
}

template <typename T>
__aicore__ inline uint8_t FlashAttentionGradKernel<T>::MaskClass(uint32_t b, uint32_t n, uint32_t qBlock,
                                                                 uint32_t kvBlock) const
{
    if (td_->hasMask == 0) {
        return attn_mask::BLOCK_VISIBLE;
    }
    const uint64_t row = maskGeom_.SummaryRow(b, n, qBlock * td_->blockM);
    return maskSummaryGm_.GetValue(row * maskGeom_.KeyBlocks() + kvBlock);
}

template <typename T>
__aicore__ inline bool FlashAttentionGradKernel<T>::Step(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock,
                                                         uint32_t kvBlock, bool first, bool waitFor, bool handTo)
{
    const uint8_t maskClass = MaskClass(b, n, qBlock, kvBlock);
    if (maskClass == attn_mask::BLOCK_MASKED) {
        // Every pair of the block is masked out: P = 0, so it adds nothing to dK_j, dV_j or dQ_i.
        // The dQ chain of query block i still runs through block j: take the hand-over from
        // j + 1 and give it to j - 1 (the sum's order stays the blocks' order).
        const int32_t chain = static_cast<int32_t>((b * td_->numHeads + n) * td_->numQBlocks + qBlock);
        if (td_->deterministic != 0 && waitFor) {
            AscendC::IBWait<false>(flagGm_, flagUb_, static_cast<int32_t>(aiv_), chain);
        }
        if (td_->deterministic != 0 && handTo) {
            const uint32_t nextUnit = (b * td_->numKvHeads + h) * td_->numKvBlocks + kvBlock - 1;
            AscendC::IBSet<false>(flagGm_, flagUb_, static_cast<int32_t>(AivOfUnit(nextUnit)), chain);
        }
        return false;
    }
    const uint32_t d = td_->headDim;
    const uint32_t bn = td_->blockN;
    const uint32_t col0 = kvBlock * bn;
    const uint32_t cols = Min(bn, seq_.skv - col0);
    // The step computes only the block's rows [lo, hi) that see a key of block j (a band's edge
    // blocks and the causal diagonal lose their blind rows: executed MACs follow the band).
    const uint32_t blockRow0 = qBlock * td_->blockM;
    const uint32_t blockRows = Min(td_->blockM, seq_.sq - blockRow0);
    const int64_t seenLo = attn_band::RowBegin(col0, seq_.diag, td_->nextTokens) - blockRow0;
    const int64_t seenHi = attn_band::RowEnd(static_cast<int64_t>(col0) + cols - 1, seq_.diag, td_->preTokens) - blockRow0;  // exclusive
    const uint32_t lo = seenLo <= 0 ? 0 : (seenLo >= blockRows ? blockRows - 1 : static_cast<uint32_t>(seenLo));
    const uint32_t hi = seenHi <= lo ? lo + 1 : (seenHi >= blockRows ? blockRows : static_cast<uint32_t>(seenHi));
    const uint32_t row0 = blockRow0 + lo;
    const uint32_t rows = hi - lo;
    const uint64_t dqRowsOffset = ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + row0) * d;  // BNSD
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
    AscendC::DataCopyPad(lse_, lseGm_[LseIndex(b, n, row0)], rowParams, noPad);
    AscendC::DataCopyPad(delta_, deltaGm_[rowIndex], rowParams, noPad);
    AscendC::DataCopy(score_, scoreGm_, rows * bn);
    AscendC::DataCopy(grad_, gradGm_, rows * bn);
    WaitForPipe<AscendC::HardEvent::MTE2_V>();
    ComputeProbs(b, n, rows, row0, col0, cols, maskClass == attn_mask::BLOCK_MIXED);
    if (td_->dropout != 0) {
        ApplyDropout(b, n, rows, row0, col0);
    }
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
        AddDqInOrder(b, n, h, qBlock, kvBlock, dqRowsOffset, waitFor, handTo);
    } else {
        dqMm.IterateAll(dqPartGm_);
        AddDqAtomically(dqRowsOffset, rows);
    }
    return true;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::AddDqInOrder(uint32_t b, uint32_t n, uint32_t h, uint32_t qBlock,
                                                                 uint32_t kvBlock, uint64_t dqRowsOffset,
                                                                 bool waitFor, bool handTo)
{
    // IBSet/IBWait<false> address flag (blockIdx, eventID) at gm[coreNum * 8 * eventID +
    // blockIdx * 8], coreNum = GetBlockNum() * 2 = aivNum in MIX mode: numDqFlags = aivNum x
    // the chains' eventIDs, as op_host sizes them.
    const int32_t chain = static_cast<int32_t>((b * td_->numHeads + n) * td_->numQBlocks + qBlock);
    if (waitFor) {
        AscendC::IBWait<false>(flagGm_, flagUb_, static_cast<int32_t>(aiv_), chain);  // block kvBlock + 1 added
    }
    dqMm.IterateAll(dqAccGm_[dqRowsOffset], 1);
    if (handTo) {
        const uint32_t nextUnit = (b * td_->numKvHeads + h) * td_->numKvBlocks + kvBlock - 1;
        AscendC::IBSet<false>(flagGm_, flagUb_, static_cast<int32_t>(AivOfUnit(nextUnit)), chain);
    }
}

template <typename T>
__aicore__ inline uint32_t FlashAttentionGradKernel<T>::AivOfUnit(uint32_t unit) const
{
    uint32_t lo = 0, hi = td_->aivNum;  // unitStart[lo] <= unit < unitStart[hi]
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (td_->unitStart[mid] <= unit) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;  // the last of several AIVs starting at `unit` (those before it have empty ranges)
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeProbs(uint32_t b, uint32_t n, uint32_t rows,
                                                                 uint32_t row0, uint32_t col0, uint32_t cols,
                                                                 bool maskBias)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    AscendC::Maxs(lse_, lse_, FP32_LOWEST, rows);  // rows that see no key: -inf -> lowest finite
    AscendC::Muls(score_, score_, td_->scaleValue, elems);
    MaskScores(rows, row0, col0, cols);
    if (maskBias) {
        mask_.AddBias(score_, bn, b, n, row0, rows, col0, cols);  // masked pairs -> -inf
    }
    SubtractRows(score_, lse_, rows, bn, bn);
    AscendC::Exp(score_, score_, elems);  // P = exp(scale * S - LSE), masked -> 0
    // prob_ feeds dV += P^T . dO; with dropout ApplyDropout writes it as P o Z / keep_prob.
    if (td_->dropout == 0) {
        AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, elems);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ApplyDropout(uint32_t b, uint32_t n, uint32_t rows,
                                                                 uint32_t row0, uint32_t col0)
{
    // The forward's keep mask of these positions (philox_dropout.h's key scheme: head b * N + n,
    // query row0 + r and key col0 + c of the sequence; col0 is a multiple of blockN, so of 16),
    // generated once per chunk of rows and applied to P (into fold_, then prob_) and to dP.
    const uint32_t bn = td_->blockN;
    const philox_dropout::DropoutStream stream = philox_dropout::MakeStream(
        td_->seed, td_->offset, static_cast<uint64_t>(b) * td_->numHeads + n, td_->keepThreshold, td_->invKeepProb);
    const uint32_t chunkRows = keep_.ChunkRows();
    for (uint32_t r = 0; r < rows; r += chunkRows) {
        const uint32_t count = Min(chunkRows, rows - r) * bn;  // <= 16 x philoxLanes <= foldBuf's m * 64
        keep_.KeepBits(stream, row0 + r, col0);
        const AscendC::LocalTensor<uint8_t> &bits = keep_.KeepBitsTensor();
        AscendC::Muls(fold_, score_[r * bn], td_->invKeepProb, static_cast<int32_t>(count));
        AscendC::Select(fold_, bits, fold_, 0.0f, AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, count);
        AscendC::Cast(prob_[r * bn], fold_, AscendC::RoundMode::CAST_RINT, count);
        const AscendC::LocalTensor<float> dp = grad_[r * bn];
        AscendC::Muls(dp, dp, td_->invKeepProb, static_cast<int32_t>(count));
        AscendC::Select(dp, bits, dp, 0.0f, AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, count);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeDs(uint32_t rows)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    // With dropout dP is first multiplied by Z / keep_prob (the same keep mask as P's): dS =
    // P o (dP o Z / keep_prob - D), D = rowsum(dO o O) as computed.
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
    // Row r = row0 + r' sees the block's columns [lo(r), hi(r)): its band [r + diag - pre,
    // r + diag + next] minus col0, within the `cols` real columns. lo and hi grow by one per row,
    // so the block needs no mask when its first row's hi and its last row's lo allow all n.
    const int64_t loFirst = attn_band::KeyBegin(row0, seq_.diag, td_->preTokens) - col0;
    const int64_t hiFirst = attn_band::KeyEnd(row0, seq_.diag, td_->nextTokens) - col0;
    if (cols == n && loFirst + static_cast<int64_t>(rows) - 1 <= 0 && hiFirst >= static_cast<int64_t>(n)) {
        return;  // every column of every row visible: no mask work
    }
    for (uint32_t r = 0; r < rows; ++r) {
        int64_t lo = loFirst + r, hi = hiFirst + r;
        lo = lo < 0 ? 0 : (lo > cols ? cols : lo);
        hi = hi > cols ? cols : (hi < lo ? lo : hi);
        if (lo > 0) {
            attn_rows::FillColumns(score_, r * n, 0, static_cast<uint32_t>(lo), NEG_INF);
        }
        if (hi < static_cast<int64_t>(n)) {
            attn_rows::FillColumns(score_, r * n, static_cast<uint32_t>(hi), n, NEG_INF);
        }
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
    const uint32_t items = td_->batch * td_->numHeads * td_->numQBlocks;
    for (uint32_t item = aiv_; item < items; item += td_->aivNum) {
        const uint32_t headIndex = item / td_->numQBlocks;  // b * numHeads + n
        const uint32_t b = headIndex / td_->numHeads;
        const uint32_t n = headIndex % td_->numHeads;
        const uint32_t blockRow0 = (item % td_->numQBlocks) * td_->blockM;
        LoadSeq(b);
        if (blockRow0 >= seq_.sq) {
            continue;  // varlen: past this sequence's rows
        }
        const uint32_t blockRows = Min(td_->blockM, seq_.sq - blockRow0);
        for (uint32_t r = 0; r < blockRows; r += td_->rowChunk) {
            const uint32_t rows = Min(td_->rowChunk, blockRows - r);
            const uint32_t row0 = blockRow0 + r;
            WaitForPipe<AscendC::HardEvent::V_MTE2>();
            AscendC::DataCopy(score_, dqAccGm_[(static_cast<uint64_t>(headIndex) * td_->seqQ + row0) * d], rows * d);
            WaitForPipe<AscendC::HardEvent::MTE2_V>();
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

// ---- entry ----------------------------------------------------------------------------------

// One run of the kernel for dtype T, as the ops' kernel entries (flash_attention_grad.cpp,
// flash_attention_grad_v2.cpp) call it for their tiling keys.
template <typename T>
__aicore__ inline void RunFlashAttentionGrad(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut,
                                             GM_ADDR dout, GM_ADDR softmaxLse, GM_ADDR attenMask,
                                             GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen, GM_ADDR dq, GM_ADDR dk,
                                             GM_ADDR dv, GM_ADDR workspace,
                                             const FlashAttentionGradTilingData *tilingData)
{
    AscendC::TPipe pipe;
    FlashAttentionGradKernel<T> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.scoreMm, &tilingData->scoreTiling, op.kvGradMm,
                      &tilingData->kvGradTiling, op.dqMm, &tilingData->dqTiling);
    op.Init(query, key, value, attentionOut, dout, softmaxLse, attenMask, actualSeqQlen, actualSeqKvlen, dq, dk, dv,
            workspace, tilingData, &pipe);
    op.Process();
}

}  // namespace flash_attn_grad
