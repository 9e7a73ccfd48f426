// flash_attention_kernel.h -- FlashAttention-2 forward for Atlas A2/A3 as a mixed AIC:AIV 1:2 kernel.
//
// Per work item (b, n, query block of blockM rows) the two AIVs of one AIC each take half of the
// rows. For its rows [row0, row0 + rows) an AIV keeps Q in place and streams the K/V blocks of
// blockN rows through the cube:
//   S_j   = Q . K_j^T                (cube, Matmul API, fp32 to a double-buffered GM workspace slot;
//                                     QK of block j+1 runs on the cube while block j is softmaxed)
//   S_j  *= scale; mask              (vector; only on blocks crossing the causal diagonal or the Skv tail)
//   m_new = max(m, rowmax(S_j));  alpha = exp(m - m_new)
//   P_j   = exp(S_j - m_new);  l = alpha * l + rowsum(P_j)          (fp32)
//   acc   = alpha * acc + P_j . V_j  (cube for P.V, vector for the update)
// and finally O = acc / l, LSE = m + ln(l). Blocks entirely above the causal diagonal are never
// computed. All row-wise statistics are vectors in UB, broadcast with Brcb: the scalar unit only
// steers loops and never touches score elements.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_tiling.h"

namespace flash_attn {

constexpr uint32_t FP32_PER_REPEAT = 64;  // one 256-B vector repeat of fp32
constexpr uint32_t FP32_PER_BLOCK = 8;    // one 32-B data block of fp32
constexpr uint32_t STAT_SLOTS = 6;        // per-row fp32 vectors kept in statBuf (see StatSlot)
constexpr uint32_t AIV_PER_AIC = 2;       // KERNEL_TYPE_MIX_AIC_1_2: AIV block idx / 2 = its AIC's block idx
constexpr float NEG_INF = -__builtin_inff();

__aicore__ inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__aicore__ inline uint32_t Align32Bytes(uint32_t bytes) { return (bytes + 31) / 32 * 32; }
__aicore__ inline uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Orders the pipe named second after the pipe named first (e.g. MTE3_S: the scalar unit waits
// until the last GM write of MTE3 has landed).
template <AscendC::HardEvent EVENT>
__aicore__ inline void WaitForPipe()
{
    event_t eventId = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
    AscendC::SetFlag<EVENT>(eventId);
    AscendC::WaitFlag<EVENT>(eventId);
}

template <typename T>
class FlashAttentionKernel {
public:
    using QType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using KTransType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, true>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using AccType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;

    AscendC::Matmul<QType, KTransType, AccType> qkMm;  // S = Q . K^T, [rows, cols] fp32
    AscendC::Matmul<QType, VType, AccType> pvMm;       // P . V, [rows, D] fp32

    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut,
                                GM_ADDR softmaxLse, GM_ADDR workspace,
                                const FlashAttentionTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    // Per-row fp32 vectors of statBuf, each align32(subBlockM * 4) bytes.
    enum StatSlot : uint32_t { ROW_MAX_A = 0, ROW_MAX_B, ROW_SUM, BLOCK_MAX, BLOCK_SUM, ALPHA };
    // Row-wise updates of a tile by a per-row value.
    enum class RowOp { SUB, MUL, DIV };
    // Row-wise reductions of a tile.
    enum class RowReduce { MAX, SUM };

    __aicore__ inline void ProcessItem(uint32_t item);
    __aicore__ inline void IssueScores(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0,
                                        AscendC::LocalTensor<float> &rowMax,
                                        AscendC::LocalTensor<float> &newMax);
    __aicore__ inline void MaskScores(AscendC::LocalTensor<float> &scores, uint32_t rows,
                                      uint32_t row0, uint32_t col0, uint32_t cols);
    __aicore__ inline void AccumulateValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void WriteOutput(uint32_t rows, uint32_t row0, uint64_t outOffset,
                                       uint64_t lseOffset, AscendC::LocalTensor<float> &rowMax);

    // Row-wise reductions of a [rows, width] fp32 tile with row stride `stride` into dst[rows].
    template <RowReduce OP>
    __aicore__ inline void ReduceRows(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &tile,
                                      uint32_t rows, uint32_t width, uint32_t stride);
    // brcb_[r, 0:8] = rowValues[r], then tile[r, :] = tile[r, :] (OP) brcb_[r] for a
    // [rows, width] tile with row stride `stride`.
    __aicore__ inline void BroadcastRows(const AscendC::LocalTensor<float> &rowValues, uint32_t rows);
    template <RowOp OP>
    __aicore__ inline void ApplyRows(const AscendC::LocalTensor<float> &tile, uint32_t rows, uint32_t width,
                                     uint32_t stride);

    __aicore__ inline uint64_t QueryOffset(uint32_t b, uint32_t n, uint32_t s) const;
    __aicore__ inline uint64_t KvOffset(uint32_t b, uint32_t h, uint32_t s) const;

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;
    AscendC::GlobalTensor<float> scoreGm_[2];  // [subBlockM, blockN] fp32 each, this AIV's slots
    AscendC::GlobalTensor<T> probGm_;          // [subBlockM, blockN] T
    AscendC::GlobalTensor<float> pvGm_;        // [subBlockM, headDim] fp32

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;   // [m, n] fp32
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> probQue_;   // [m, n] T
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pvQue_;      // [m, d] fp32
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;    // [m, d] T
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue_;    // [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_;      // [m, d] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf_;     // STAT_SLOTS x [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> foldBuf_;     // [m, 64] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> brcbBuf_;     // [m, 8] fp32

    AscendC::LocalTensor<float> acc_, stat_, fold_, brcb_;

    // Current item (this AIV's share of it).
    uint32_t core_ = 0, subBlock_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    uint64_t queryOffset_ = 0, kvOffset_ = 0;    // element offsets of (b, n, row0) and (b, h, 0)
    uint32_t statStride_ = 0;                    // elements between StatSlot vectors
};

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                     GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                                     GM_ADDR workspace,
                                                     const FlashAttentionTilingData *tiling,
                                                     AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->subBlockM;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;

    const uint64_t qElems = static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ * d;
    const uint64_t kvElems = static_cast<uint64_t>(td_->batch) * td_->numKvHeads * td_->seqKv * d;
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(query), qElems);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(key), kvElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse),
                           static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ);

    // This AIV's slice of the user workspace.
    const uint32_t aiv = AscendC::GetBlockIdx();
    core_ = aiv / AIV_PER_AIC;
    subBlock_ = AscendC::GetSubBlockIdx();
    GM_ADDR slice = AscendC::GetUserWorkspace(workspace) + aiv * td_->wsBytesPerAiv;
    scoreGm_[0].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset), m * n);
    scoreGm_[1].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset) + m * n,
                                m * n);
    probGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset), m * n);
    pvGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset), m * d);

    // UB, in the order and sizes op_host budgets (flash_attention_tiling.h).
    statStride_ = Align32Bytes(m * sizeof(float)) / sizeof(float);
    pipe_->InitBuffer(scoreQue_, 1, m * n * sizeof(float));
    pipe_->InitBuffer(probQue_, 1, m * n * sizeof(T));
    pipe_->InitBuffer(pvQue_, 1, m * d * sizeof(float));
    pipe_->InitBuffer(outQue_, 1, m * d * sizeof(T));
    pipe_->InitBuffer(accBuf_, m * d * sizeof(float));
    pipe_->InitBuffer(statBuf_, STAT_SLOTS * statStride_ * sizeof(float));
    pipe_->InitBuffer(lseQue_, 1, statStride_ * sizeof(float));
    pipe_->InitBuffer(foldBuf_, m * FP32_PER_REPEAT * sizeof(float));
    pipe_->InitBuffer(brcbBuf_, m * FP32_PER_BLOCK * sizeof(float));
    acc_ = accBuf_.Get<float>();
    stat_ = statBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionKernel<T>::QueryOffset(uint32_t b, uint32_t n, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s) * d;
    }
    return ((static_cast<uint64_t>(b) * td_->seqQ + s) * td_->numHeads + n) * d;  // BSND, BSH
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionKernel<T>::KvOffset(uint32_t b, uint32_t h, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numKvHeads + h) * td_->seqKv + s) * d;
    }
    return ((static_cast<uint64_t>(b) * td_->seqKv + s) * td_->numKvHeads + h) * d;
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::Process()
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
__aicore__ inline void FlashAttentionKernel<T>::ProcessItem(uint32_t item)
{
    const uint32_t nq = td_->numQBlocks;
    const uint32_t headIndex = item / nq;  // b * numHeads + n
    const uint32_t pos = item % nq;
    const uint32_t qBlock = td_->qZigzag == 0 ? pos : (pos % 2 == 0 ? pos / 2 : nq - 1 - pos / 2);
    const uint32_t b = headIndex / td_->numHeads;
    const uint32_t n = headIndex % td_->numHeads;
    const uint32_t kvHead = n / td_->groupSize;

    // Rows of this item, split between the two AIVs: sub-block 0 takes ceil(itemRows / 2).
    const uint32_t itemRow0 = qBlock * td_->blockM;
    const uint32_t itemRows = Min(td_->blockM, td_->seqQ - itemRow0);
    const uint32_t firstHalf = (itemRows + 1) / 2;
    const uint32_t row0 = itemRow0 + (subBlock_ == 0 ? 0 : firstHalf);
    const uint32_t rows = subBlock_ == 0 ? firstHalf : itemRows - firstHalf;
    if (rows == 0) {
        return;
    }

    // Keys this AIV's rows can see: all, or (causal, bottom-right aligned) keys
    // j <= i + (Skv - Sq) for its last row i.
    uint32_t kvEnd = td_->seqKv;
    if (td_->causal != 0) {
        const int64_t lastVisible = static_cast<int64_t>(row0) + rows + td_->seqKv - td_->seqQ;
        kvEnd = lastVisible <= 0 ? 0 : Min(static_cast<uint32_t>(lastVisible), td_->seqKv);
    }
    const uint32_t kvBlocks = CeilDiv(kvEnd, td_->blockN);

    queryOffset_ = QueryOffset(b, n, row0);
    kvOffset_ = KvOffset(b, kvHead, 0);

    // Running statistics: two max slots swap roles every block (old -> new).
    AscendC::LocalTensor<float> rowMax = stat_[ROW_MAX_A * statStride_];
    AscendC::LocalTensor<float> newMax = stat_[ROW_MAX_B * statStride_];
    AscendC::Duplicate(rowMax, NEG_INF, rows);
    AscendC::Duplicate(stat_[ROW_SUM * statStride_], 0.0f, rows);
    AscendC::Duplicate(acc_, 0.0f, rows * td_->headDim);

    if (kvBlocks > 0) {
        // qk: A = Q rows [rows, D] (row stride rowStrideQ_), B^T = K rows [cols, D] (row stride
        // rowStrideKv_), C = S [rows, cols] with row stride blockN.
        qkMm.SetOrgShape(rows, td_->blockN, rowStrideQ_, rowStrideKv_, td_->blockN);
        qkMm.SetTensorA(queryGm_[queryOffset_]);
        // pv: A = P [rows, cols] (row stride blockN), B = V rows [cols, D] (row stride
        // rowStrideKv_), C = [rows, D] with row stride D.
        pvMm.SetOrgShape(rows, rowStrideKv_, td_->blockN, td_->seqKv, td_->headDim);
        pvMm.SetTensorA(probGm_);
        IssueScores(0, rows);
    }
    for (uint32_t j = 0; j < kvBlocks; ++j) {
        qkMm.WaitIterateAll();
        if (j + 1 < kvBlocks) {
            IssueScores(j + 1, rows);  // the cube computes S_{j+1} while the vector units work on S_j
        }
        SoftmaxBlock(j, rows, row0, rowMax, newMax);
        AccumulateValues(j, rows);
        AscendC::LocalTensor<float> swap = rowMax;
        rowMax = newMax;
        newMax = swap;
    }
    const uint64_t lseOffset = static_cast<uint64_t>(headIndex) * td_->seqQ + row0;
    WriteOutput(rows, row0, QueryOffset(b, n, row0), lseOffset, rowMax);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::IssueScores(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, td_->seqKv - col0);
    qkMm.SetTensorB(keyGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_], true);
    qkMm.SetTail(rows, cols, td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[kvBlock % 2], 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0,
                                                             AscendC::LocalTensor<float> &rowMax,
                                                             AscendC::LocalTensor<float> &newMax)
{
    const uint32_t n = td_->blockN;
    const uint32_t col0 = kvBlock * n;
    const uint32_t cols = Min(n, td_->seqKv - col0);
    const uint32_t elems = rows * n;  // [rows, n]; columns >= cols are masked below

    AscendC::LocalTensor<float> scores = scoreQue_.AllocTensor<float>();
    AscendC::DataCopy(scores, scoreGm_[kvBlock % 2], elems);
    scoreQue_.EnQue(scores);
    scores = scoreQue_.DeQue<float>();

    AscendC::Muls(scores, scores, td_->scaleValue, elems);
    MaskScores(scores, rows, row0, col0, cols);

    AscendC::LocalTensor<float> blockMax = stat_[BLOCK_MAX * statStride_];
    AscendC::LocalTensor<float> blockSum = stat_[BLOCK_SUM * statStride_];
    AscendC::LocalTensor<float> rowSum = stat_[ROW_SUM * statStride_];
    AscendC::LocalTensor<float> alpha = stat_[ALPHA * statStride_];

    ReduceRows<RowReduce::MAX>(blockMax, scores, rows, n, n);
    AscendC::Max(newMax, rowMax, blockMax, rows);    // m_new = max(m_old, rowmax(S))
    AscendC::Sub(alpha, rowMax, newMax, rows);
    AscendC::Exp(alpha, alpha, rows);                // alpha = exp(m_old - m_new), 0 on the first block
    BroadcastRows(newMax, rows);
    ApplyRows<RowOp::SUB>(scores, rows, n, n);
    AscendC::Exp(scores, scores, elems);             // P = exp(S - m_new), masked entries -> 0
    ReduceRows<RowReduce::SUM>(blockSum, scores, rows, n, n);
    AscendC::Mul(rowSum, rowSum, alpha, rows);
    AscendC::Add(rowSum, rowSum, blockSum, rows);    // l = alpha * l + rowsum(P)

    AscendC::LocalTensor<T> prob = probQue_.AllocTensor<T>();
    AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, elems);
    scoreQue_.FreeTensor(scores);
    probQue_.EnQue(prob);
    prob = probQue_.DeQue<T>();
    AscendC::DataCopy(probGm_, prob, elems);
    probQue_.FreeTensor(prob);
    WaitForPipe<AscendC::HardEvent::MTE3_S>();      // P is in GM before the cube is asked to read it
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::MaskScores(AscendC::LocalTensor<float> &scores, uint32_t rows,
                                                           uint32_t row0, uint32_t col0, uint32_t cols)
{
    const uint32_t n = td_->blockN;
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
        // Columns [visible, n) of row r become -inf: the 64-wide repeat holding `visible` through a
        // bit mask, whole repeats after it as one contiguous run.
        const uint32_t rowBase = r * n;
        const uint32_t chunk = visible / FP32_PER_REPEAT * FP32_PER_REPEAT;
        const uint32_t chunkWidth = Min(FP32_PER_REPEAT, n - chunk);
        const uint32_t skip = visible - chunk;
        if (skip == 0) {
            AscendC::Duplicate(scores[rowBase + chunk], NEG_INF, n - chunk);
            continue;
        }
        const uint64_t widthBits = chunkWidth == 64 ? ~0ULL : ((1ULL << chunkWidth) - 1);
        uint64_t mask[2] = {widthBits & ~((1ULL << skip) - 1), 0};
        AscendC::Duplicate(scores[rowBase + chunk], NEG_INF, mask, 1, 1, 8);
        if (chunk + FP32_PER_REPEAT < n) {
            AscendC::Duplicate(scores[rowBase + chunk + FP32_PER_REPEAT], NEG_INF,
                               n - chunk - FP32_PER_REPEAT);
        }
    }
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::AccumulateValues(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, td_->seqKv - col0);

    pvMm.SetTensorB(valueGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_]);
    pvMm.SetTail(rows, d, cols);
    pvMm.IterateAll(pvGm_);

    AscendC::LocalTensor<float> pv = pvQue_.AllocTensor<float>();
    AscendC::DataCopy(pv, pvGm_, rows * d);
    pvQue_.EnQue(pv);
    pv = pvQue_.DeQue<float>();
    BroadcastRows(stat_[ALPHA * statStride_], rows);
    ApplyRows<RowOp::MUL>(acc_, rows, d, d);         // acc *= alpha
    AscendC::Add(acc_, acc_, pv, rows * d);          // acc += P . V
    pvQue_.FreeTensor(pv);
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::WriteOutput(uint32_t rows, uint32_t row0, uint64_t outOffset,
                                                            uint64_t lseOffset,
                                                            AscendC::LocalTensor<float> &rowMax)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> rowSum = stat_[ROW_SUM * statStride_];

    BroadcastRows(rowSum, rows);
    ApplyRows<RowOp::DIV>(acc_, rows, d, d);         // O = acc / l

    AscendC::LocalTensor<T> out = outQue_.AllocTensor<T>();
    AscendC::Cast(out, acc_, AscendC::RoundMode::CAST_RINT, rows * d);
    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    AscendC::Ln(lse, rowSum, rows);
    AscendC::Add(lse, lse, rowMax, rows);            // LSE = m + ln(l)

    // Rows that see no key at all (causal with Sq > Skv): output 0, LSE -inf. They are the
    // first rows i with i + Skv - Sq < 0.
    if (td_->causal != 0 && td_->seqQ > td_->seqKv) {
        const uint32_t blind = td_->seqQ - td_->seqKv;  // rows [0, blind) of the sequence see nothing
        if (row0 < blind) {
            const uint32_t masked = Min(blind - row0, rows);
            AscendC::Duplicate(out, static_cast<T>(0), masked * d);
            AscendC::Duplicate(lse, NEG_INF, masked);
        }
    }

    outQue_.EnQue(out);
    out = outQue_.DeQue<T>();
    if (td_->layout == FA_LAYOUT_BNSD) {
        AscendC::DataCopy(outGm_[outOffset], out, rows * d);
    } else {
        // BSND / BSH: consecutive sequence rows are numHeads * D elements apart in GM.
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

// ---- row-wise helpers -----------------------------------------------------------------------
// A [rows, width] fp32 tile with row stride `stride` (elements, multiple of 8) is processed 64
// columns (one repeat) at a time with one repeat per row: repeat strides are in 32-B blocks.

template <typename T>
template <typename FlashAttentionKernel<T>::RowReduce OP>
__aicore__ inline void FlashAttentionKernel<T>::ReduceRows(const AscendC::LocalTensor<float> &dst,
                                                           const AscendC::LocalTensor<float> &tile, uint32_t rows,
                                                           uint32_t width, uint32_t stride)
{
    // fold[r, 0:64] = max (sum) over the 64-column chunks of tile[r, :], starting from the
    // identity (-inf, 0) so a chunk narrower than 64 leaves the rest neutral; then one
    // WholeReduce per row.
    const uint8_t tileRep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 1, 8, 8, tileRep);
    AscendC::Duplicate(fold_, OP == RowReduce::MAX ? NEG_INF : 0.0f, rows * FP32_PER_REPEAT);
    for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
        const uint64_t w = Min(FP32_PER_REPEAT, width - c);
        if constexpr (OP == RowReduce::MAX) {
            AscendC::Max(fold_, fold_, tile[c], w, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Add(fold_, fold_, tile[c], w, static_cast<uint8_t>(rows), params);
        }
    }
    if constexpr (OP == RowReduce::MAX) {
        AscendC::WholeReduceMax(dst, fold_, FP32_PER_REPEAT, rows, 1, 1, 8, AscendC::ReduceOrder::ORDER_ONLY_VALUE);
    } else {
        AscendC::WholeReduceSum(dst, fold_, FP32_PER_REPEAT, rows, 1, 1, 8);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionKernel<T>::BroadcastRows(const AscendC::LocalTensor<float> &rowValues,
                                                              uint32_t rows)
{
    // brcb[r, 0:8] = rowValues[r]: one 32-B block per row, read back with block stride 0.
    AscendC::Brcb(brcb_, rowValues, static_cast<uint8_t>(CeilDiv(rows, FP32_PER_BLOCK)),
                  AscendC::BrcbRepeatParams(1, 8));
}

template <typename T>
template <typename FlashAttentionKernel<T>::RowOp OP>
__aicore__ inline void FlashAttentionKernel<T>::ApplyRows(const AscendC::LocalTensor<float> &tile, uint32_t rows,
                                                          uint32_t width, uint32_t stride)
{
    // One repeat per row; the per-row value is read with block stride 0 from brcb_.
    const uint8_t tileRep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 0, tileRep, tileRep, 1);
    for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
        const uint64_t w = Min(FP32_PER_REPEAT, width - c);
        if constexpr (OP == RowOp::SUB) {
            AscendC::Sub(tile[c], tile[c], brcb_, w, static_cast<uint8_t>(rows), params);
        } else if constexpr (OP == RowOp::MUL) {
            AscendC::Mul(tile[c], tile[c], brcb_, w, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Div(tile[c], tile[c], brcb_, w, static_cast<uint8_t>(rows), params);
        }
    }
}

}  // namespace flash_attn
