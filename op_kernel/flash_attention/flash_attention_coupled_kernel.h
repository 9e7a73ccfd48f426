// flash_attention_coupled_kernel.h -- FlashAttention-2 forward for the coupled-core chips:
// Atlas 300I Duo / 310P (arch 2002, dav-m200) and 910A (arch 1001, dav-c100), where one AI Core
// holds the cube and the vector unit and cube results reach UB directly (L0C -> UB).
//
// One AI Core takes a whole work item (b, n, query block of blockM rows). For its rows it keeps
// Q in place and streams the K/V blocks of blockN rows:
//   S_j  = Q . K_j^T        (Matmul API, C in VECCALC: fp32 straight into UB)
//   P_j  = online softmax of S_j in place (flash_attention_rows.h), cast to T in UB
//   PV_j = P_j . V_j        (Matmul API, A from VECCALC: P goes UB -> L1, C fp32 into UB)
//   acc  = alpha * acc + PV_j
// and finally O = acc / l, LSE = m + ln(l), over the K/V blocks the rows' band lets them see
// (flash_attention_items.h, as on the MIX path). Nothing passes between cube and vector through GM:
// the kernel has no user workspace. The Matmul API converts ND data through a UB workspace
// the kernel provides (SetLocalWorkspace; these architectures have no Fixpipe).
//
// Neither architecture has DataCopyPad (asc-devkit impl/basic_api/dav_m200 and dav_c100
// kernel_operator_data_copy_impl.h report it unsupported): GM copies move whole 32-B blocks.
// O rows are D * sizeof(T) bytes (D a multiple of 16), so O is copied with DataCopy and
// block strides; the LSE rows of an item are copied in whole 8-float blocks and the last
// rows % 8 values are written by the scalar unit (at most 7 per item).
// T is half: the cube of these architectures takes float16 operands only.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_gm.h"
#include "flash_attention_items.h"
#include "flash_attention_rows.h"
#include "flash_attention_tiling.h"

namespace flash_attn {

// The end of a coupled kernel's work item (also FlashAttentionInt8's coupled kernel): O = acc / l
// and the LSE from the softmax's state of `rows` rows, O cast to T into outQue ([m, d] T) and
// copied to outGm at outOffset (sequence rows numHeads * D elements apart unless BNSD), the LSE
// through lseQue ([m] fp32) to lseGm at lseOffset. Whole 32-B blocks only (no DataCopyPad on
// these archs): O rows are D * sizeof(T) bytes, whole blocks; the last rows % 8 LSE values are
// written by the scalar unit.
template <typename T>
__aicore__ inline void WriteCoupledOutput(const FlashAttentionTilingData *td, OnlineSoftmax &softmax,
                                          const AscendC::LocalTensor<float> &acc,
                                          AscendC::TQue<AscendC::TPosition::VECOUT, 1> &outQue,
                                          AscendC::TQue<AscendC::TPosition::VECOUT, 1> &lseQue,
                                          const AscendC::GlobalTensor<T> &outGm, AscendC::GlobalTensor<float> &lseGm,
                                          uint32_t rows, uint64_t outOffset, uint64_t lseOffset)
{
    const uint32_t d = td->headDim;
    AscendC::LocalTensor<float> lse = lseQue.AllocTensor<float>();
    softmax.Finish(acc, lse, rows);

    AscendC::LocalTensor<T> out = outQue.AllocTensor<T>();
    // float -> half: CAST_NONE rounds to nearest even; these architectures have no CAST_RINT for
    // the pair (asc-devkit Cast.md, the 310P AI Core and training-series tables).
    AscendC::Cast(out, acc, AscendC::RoundMode::CAST_NONE, rows * d);
    outQue.EnQue(out);
    out = outQue.DeQue<T>();
    if (td->layout == FA_LAYOUT_BNSD) {
        AscendC::DataCopy(outGm[outOffset], out, rows * d);
    } else {
        // BSND / BSH / TND: consecutive sequence rows are numHeads * D elements apart in GM; a row is
        // D * sizeof(T) bytes, a whole number of 32-B blocks.
        const uint16_t rowBlocks = static_cast<uint16_t>(d * sizeof(T) / 32);
        AscendC::DataCopyParams params{static_cast<uint16_t>(rows), rowBlocks, 0,
                                       static_cast<uint16_t>((td->numHeads - 1) * rowBlocks)};
        AscendC::DataCopy(outGm[outOffset], out, params);
    }
    outQue.FreeTensor(out);

    lseQue.EnQue(lse);
    lse = lseQue.DeQue<float>();
    const uint32_t whole = rows / FP32_PER_BLOCK * FP32_PER_BLOCK;
    if (whole > 0) {
        AscendC::DataCopy(lseGm[lseOffset], lse, whole);
    }
    if (whole < rows) {
        // The last rows % 8 LSE values: a whole block would overwrite the next item's rows.
        WaitForPipe<AscendC::HardEvent::V_S>();
        for (uint32_t r = whole; r < rows; ++r) {
            lseGm.SetValue(lseOffset + r, lse.GetValue(r));
        }
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 2002
        // dav-m200 caches scalar GM writes: write them back (the GM form has no dcciDst there;
        // dav-c100 has no GM form at all).
        AscendC::DataCacheCleanAndInvalid<float, AscendC::CacheLine::ENTIRE_DATA_CACHE>(lseGm);
#endif
    }
    lseQue.FreeTensor(lse);
}

// The UB of a coupled kernel (also the int8 one), placed by Init in the order and sizes op_host
// budgets (flash_attention_tiling.h; m = subBlockM = blockM rows, n = blockN, d = headDim), with the
// online softmax's buffers between acc and the LSE; the Matmul API's ND <-> NZ space is lent to both
// matmuls, which run one after the other.
template <typename T>
struct CoupledUb {
    AscendC::TBuf<AscendC::TPosition::VECCALC> scoreBuf;   // [m, n] fp32: QK's C (the int8 kernel's int32, as wide)
    AscendC::TBuf<AscendC::TPosition::VECCALC> probBuf;    // [m, n] T: PV's A
    AscendC::TBuf<AscendC::TPosition::VECCALC> pvBuf;      // [m, d] fp32: PV's C
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue;   // [m, d] T
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf;     // [m, d] fp32
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue;   // [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> mmWorkBuf;  // mmUbBytes: the Matmul API's ND <-> NZ space
    AscendC::LocalTensor<float> scores, pv, acc;
    AscendC::LocalTensor<T> prob;

    // softmaxTiling: the tiling the softmax reads (its scale; the int8 kernel's per-block copy).
    template <class QkMatmul, class PvMatmul>
    __aicore__ inline void Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *td, OnlineSoftmax &softmax,
                                const FlashAttentionTilingData *softmaxTiling, QkMatmul &qkMm, PvMatmul &pvMm)
    {
        const uint32_t m = td->subBlockM;  // == blockM: the AI Core takes all rows of an item
        const uint32_t n = td->blockN;
        const uint32_t d = td->headDim;
        pipe->InitBuffer(scoreBuf, m * n * sizeof(float));
        pipe->InitBuffer(probBuf, m * n * sizeof(T));
        pipe->InitBuffer(pvBuf, m * d * sizeof(float));
        pipe->InitBuffer(outQue, 1, m * d * sizeof(T));
        pipe->InitBuffer(accBuf, m * d * sizeof(float));
        softmax.Init(pipe, softmaxTiling, m, m);  // the scores of all m rows are one tile
        pipe->InitBuffer(lseQue, 1, Align32Bytes(m * sizeof(float)));
        pipe->InitBuffer(mmWorkBuf, td->mmUbBytes);
        scores = scoreBuf.Get<float>();
        prob = probBuf.Get<T>();
        pv = pvBuf.Get<float>();
        acc = accBuf.Get<float>();
        qkMm.SetLocalWorkspace(mmWorkBuf.Get<uint8_t>());
        pvMm.SetLocalWorkspace(mmWorkBuf.Get<uint8_t>());
    }
};

// Elements between consecutive sequence rows of Q (and O) and of K / V: D in BNSD, else heads x D.
__aicore__ inline void SequenceRowStrides(const FlashAttentionTilingData *td, uint32_t *q, uint32_t *kv)
{
    const bool bnsd = td->layout == FA_LAYOUT_BNSD;
    *q = bnsd ? td->headDim : td->numHeads * td->headDim;
    *kv = bnsd ? td->headDim : td->numKvHeads * td->headDim;
}

// A coupled kernel's block once S [rows, stride] fp32 of K/V block kvBlock is in `scores` (stride
// = cols rounded up to 8, the cube's UB row): the online softmax in place, P cast to T into `prob`
// (nearest even: CAST_NONE, see WriteCoupledOutput), PV = P . V on the cube (A = prob from UB, B = the
// block's value rows at `value`, row stride rowStrideKv; C fp32 into `pv`), acc = alpha acc + PV.
// Shared by the fp16 and the int8 coupled kernels.
template <typename T, class PvMatmul>
__aicore__ inline void CoupledBlockValues(const FlashAttentionTilingData *td, OnlineSoftmax &softmax, PvMatmul &pvMm,
                                          const AscendC::LocalTensor<float> &scores,
                                          const AscendC::LocalTensor<T> &prob, const AscendC::LocalTensor<float> &pv,
                                          const AscendC::LocalTensor<float> &acc, const AscendC::GlobalTensor<T> &value,
                                          uint32_t rowStrideKv, uint32_t seqKv, uint32_t kvBlock, uint32_t rows,
                                          uint32_t row0, uint32_t cols, uint32_t stride)
{
    softmax.StartBlock();
    softmax.ScoresToProbs(scores, stride, kvBlock, rows, row0, 0);
    // P [rows, stride] fp32 is final here (l and the LSE already hold its undropped sums): the
    // one point where it may still change before P.V.
    AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_NONE, rows * stride);
    WaitForPipe<AscendC::HardEvent::V_MTE3>();  // P is complete in UB before it moves to L1

    // pv: A = P [rows, cols] in UB (row stride `stride`), B = V rows [cols, D] (row stride
    // rowStrideKv); C [rows, D] into UB.
    pvMm.SetOrgShape(rows, rowStrideKv, stride, seqKv);
    pvMm.SetTensorA(prob);
    pvMm.SetTensorB(value);
    pvMm.SetTail(rows, td->headDim, cols);
    pvMm.IterateAll(pv);
    softmax.Accumulate(acc, pv, rows, kvBlock);
}

template <typename T>
class FlashAttentionCoupledKernel {
public:
    using QType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using KTransType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, true>;
    using ProbType = AscendC::MatmulType<AscendC::TPosition::VECCALC, CubeFormat::ND, T>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using AccType = AscendC::MatmulType<AscendC::TPosition::VECCALC, CubeFormat::ND, float>;

    AscendC::Matmul<QType, KTransType, AccType> qkMm;  // S = Q . K^T, [rows, cols] fp32 in UB
    AscendC::Matmul<ProbType, VType, AccType> pvMm;    // P . V, [rows, D] fp32 in UB

    // actualSeqQlen / actualSeqKvlen: the varlen cumulative ends (int64 GM), unused otherwise.
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR actualSeqQlen,
                                GM_ADDR actualSeqKvlen, GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                const FlashAttentionTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    __aicore__ inline void ProcessItem(uint32_t item);
    __aicore__ inline void ComputeBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0);

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;
    OnlineSoftmax softmax_;
    ItemMap items_;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;

    CoupledUb<T> ub_;

    uint32_t core_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    uint64_t kvOffset_ = 0;                      // element offset of (b, h, 0) in K and V
    uint32_t seqKv_ = 0;                         // keys of the current item's sequence
};

template <typename T>
__aicore__ inline void FlashAttentionCoupledKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                            GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen,
                                                            GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                                            const FlashAttentionTilingData *tiling,
                                                            AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    BindForwardGm<T>(td_, query, key, value, attentionOut, softmaxLse, queryGm_, keyGm_, valueGm_, outGm_, lseGm_);
    items_.Init(td_, actualSeqQlen, actualSeqKvlen);
    core_ = AscendC::GetBlockIdx();

    // UB, in the order and sizes op_host budgets (flash_attention_tiling.h).
    ub_.Init(pipe_, td_, softmax_, td_, qkMm, pvMm);
    SequenceRowStrides(td_, &rowStrideQ_, &rowStrideKv_);
}

template <typename T>
__aicore__ inline void FlashAttentionCoupledKernel<T>::Process()
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
__aicore__ inline void FlashAttentionCoupledKernel<T>::ProcessItem(uint32_t item)
{
    ItemPlace place;
    items_.Locate(item, &place);
    // Only the K/V blocks holding a key some row of the item sees under the band.
    const ItemSpan span = SpanOfItem(td_, place);
    const uint32_t row0 = span.row0;
    const uint32_t rows = span.rows;
    const uint64_t queryOffset = items_.QueryOffset(place, row0);
    kvOffset_ = items_.KvOffset(place, 0);
    seqKv_ = place.seqKv;
    softmax_.Reset(ub_.acc, rows, place.seqQ, place.seqKv);

    if (span.kvEnd > span.kvBegin) {
        // qk: A = Q rows [rows, D] (row stride rowStrideQ_), B^T = K rows [cols, D] (row stride
        // rowStrideKv_); C [rows, cols] into UB.
        qkMm.SetOrgShape(rows, td_->blockN, rowStrideQ_, rowStrideKv_);
        qkMm.SetTensorA(queryGm_[queryOffset]);
    }
    for (uint32_t j = span.kvBegin; j < span.kvEnd; ++j) {
        ComputeBlock(j, rows, row0);
    }
    WriteCoupledOutput<T>(td_, softmax_, ub_.acc, ub_.outQue, ub_.lseQue, outGm_, lseGm_, rows, queryOffset,
                          place.lseRow0 + row0);
}

template <typename T>
__aicore__ inline void FlashAttentionCoupledKernel<T>::ComputeBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    const uint32_t d = td_->headDim;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seqKv_ - col0);
    // The cube writes C to UB in rows padded to 32 bytes: [rows, align8(cols)] fp32.
    const uint32_t stride = (cols + FP32_PER_BLOCK - 1) / FP32_PER_BLOCK * FP32_PER_BLOCK;
    const uint64_t kvRow0 = kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_;

    qkMm.SetTensorB(keyGm_[kvRow0], true);
    qkMm.SetTail(rows, cols, d);
    qkMm.IterateAll(ub_.scores);
    CoupledBlockValues<T>(td_, softmax_, pvMm, ub_.scores, ub_.prob, ub_.pv, ub_.acc, valueGm_[kvRow0], rowStrideKv_, seqKv_,
                          kvBlock, rows, row0, cols, stride);
}

}  // namespace flash_attn
