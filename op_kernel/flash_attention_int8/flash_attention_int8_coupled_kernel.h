// flash_attention_int8_coupled_kernel.h -- FlashAttention-2 forward with QK^T in int8 for the
// coupled-core chips: Atlas 300I Duo / 310P (arch 2002, dav-m200) and 910A (arch 1001, dav-c100),
// where one AI Core holds the cube and the vector unit and cube results reach UB directly (L0C -> UB).
//
// The fp16 coupled forward (flash_attention/flash_attention_coupled_kernel.h, read its header
// comment) with its QK matmul on int8 operands. Per work item (b, n, query block qb), on one AI
// Core, for each K/V block j the item's band lets it see:
//   S_j  = Q8 . K8_j^T                 (Matmul API: int8 x int8 -> int32, C in VECCALC: straight
//                                       into UB, rows padded to 32 B = 8 int32 as fp32's)
//   S_j  = float(S_j)                  (vector Cast int32 -> fp32 in place, CAST_NONE: exact below
//                                       2^24 and |S| <= D * 127 * 127 < 2^22 for D <= 256)
//   the online softmax with scale * q_scale[qb] * k_scale[j] as its scale (the dequantization
//   rides on the softmax's own scale multiply, as on the MIX path), P in half in UB,
//   PV_j = P_j . V_j (Matmul API, half, A from UB, C fp32 into UB), acc = alpha * acc + PV_j
// and finally O = acc / l, LSE = m + ln(l) (OnlineSoftmax, flash_attention_rows.h).
// Operand types: Matmul使用说明.md (asc-devkit, Matmul-Kernel侧接口): the Atlas inference series
// AI Core takes int8_t A and B with int32_t C; Mmad's int8 operands on dav-m200 and dav-c100:
// impl/basic_api/dav_{m200,c100}/kernel_operator_mm_impl.h; the int32 -> float Cast (CAST_NONE) is
// in Cast.md's tables for both (docs/cann-facts.md, docs/int8.md).
// UB: the fp16 coupled kernel's map with S in int32 (as wide as its fp32 S), so op_host's budget of
// that kernel holds; the Matmul API's ND <-> NZ space (mmUbBytes) is sized for half operands and an
// fp32 C, at least the int8 operands' and the int32 C's bytes.
// No DataCopyPad on these archs: O and the LSE leave as the fp16 coupled kernel's do
// (flash_attention_coupled_kernel.h WriteCoupledOutput: whole 32-B blocks, the LSE tail by the scalar unit).
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_coupled_kernel.h"
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

template <typename T>
class FlashAttentionInt8CoupledKernel {
public:
    using Q8Type = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, int8_t>;
    using K8TransType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, int8_t, true>;
    using ScoreType = AscendC::MatmulType<AscendC::TPosition::VECCALC, CubeFormat::ND, int32_t>;
    using ProbType = AscendC::MatmulType<AscendC::TPosition::VECCALC, CubeFormat::ND, T>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using AccType = AscendC::MatmulType<AscendC::TPosition::VECCALC, CubeFormat::ND, float>;

    AscendC::Matmul<Q8Type, K8TransType, ScoreType> qkMm;  // S = Q8 . K8^T, [rows, cols] int32 in UB
    AscendC::Matmul<ProbType, VType, AccType> pvMm;        // P . V, [rows, D] fp32 in UB

    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR qScale, GM_ADDR kScale,
                                GM_ADDR attentionOut, GM_ADDR softmaxLse, const FlashAttentionTilingData *tiling,
                                AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    __aicore__ inline void ProcessItem(uint32_t item);
    __aicore__ inline void ComputeBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0);

    const FlashAttentionTilingData *td_ = nullptr;
    // The softmax reads its scale from here: the tiling's, with scaleValue set per K/V block to
    // scale * q_scale * k_scale (the dequantization) before the block's softmax.
    FlashAttentionTilingData softmaxTd_;
    AscendC::TPipe *pipe_ = nullptr;
    flash_attn::OnlineSoftmax softmax_;
    flash_attn::ItemMap items_;

    AscendC::GlobalTensor<int8_t> queryGm_, keyGm_;
    AscendC::GlobalTensor<T> valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;
    BlockScales scales_;

    flash_attn::CoupledUb<T> ub_;           // ub_.scores holds QK's int32 C (sums_), cast to fp32 in place
    AscendC::LocalTensor<int32_t> sums_;    // [m, n] int32: ub_.scores' bytes

    uint32_t core_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    uint64_t kvOffset_ = 0;                      // element offset of (b, h, 0) in K and V
    uint32_t seqKv_ = 0;                         // keys of the current item's sequence
};

template <typename T>
__aicore__ inline void FlashAttentionInt8CoupledKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                                GM_ADDR qScale, GM_ADDR kScale, GM_ADDR attentionOut,
                                                                GM_ADDR softmaxLse,
                                                                const FlashAttentionTilingData *tiling,
                                                                AscendC::TPipe *pipe)
{
    td_ = tiling;
    softmaxTd_ = *tiling;
    pipe_ = pipe;
    flash_attn::BindForwardGm<T>(td_, query, key, value, attentionOut, softmaxLse, queryGm_, keyGm_, valueGm_, outGm_,
                                 lseGm_);
    scales_.Init(qScale, kScale, td_);
    items_.Init(td_, nullptr, nullptr);
    core_ = AscendC::GetBlockIdx();

    // UB: the fp16 coupled kernel's map (op_host budgets it); S int32 is as wide as its fp32 S.
    ub_.Init(pipe_, td_, softmax_, &softmaxTd_, qkMm, pvMm);
    sums_ = ub_.scores.template ReinterpretCast<int32_t>();
    flash_attn::SequenceRowStrides(td_, &rowStrideQ_, &rowStrideKv_);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8CoupledKernel<T>::Process()
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
__aicore__ inline void FlashAttentionInt8CoupledKernel<T>::ProcessItem(uint32_t item)
{
    flash_attn::ItemPlace place;
    items_.Locate(item, &place);
    const flash_attn::ItemSpan span = flash_attn::SpanOfItem(td_, place);
    const uint32_t row0 = span.row0;
    const uint32_t rows = span.rows;
    const uint64_t queryOffset = items_.QueryOffset(place, row0);
    kvOffset_ = items_.KvOffset(place, 0);
    seqKv_ = place.seqKv;
    scales_.StartItem(place);  // the item's dequantization scalars
    softmax_.Reset(ub_.acc, rows, place.seqQ, place.seqKv);

    if (span.kvEnd > span.kvBegin) {
        // qk: A = Q8 rows [rows, D] (row stride rowStrideQ_), B^T = K8 rows [cols, D] (row stride
        // rowStrideKv_); C [rows, cols] int32 into UB.
        qkMm.SetOrgShape(rows, td_->blockN, rowStrideQ_, rowStrideKv_);
        qkMm.SetTensorA(queryGm_[queryOffset]);
    }
    for (uint32_t j = span.kvBegin; j < span.kvEnd; ++j) {
        ComputeBlock(j, rows, row0);
    }
    flash_attn::WriteCoupledOutput<T>(td_, softmax_, ub_.acc, ub_.outQue, ub_.lseQue, outGm_, lseGm_, rows, queryOffset,
                                      place.lseRow0 + row0);
}

template <typename T>
__aicore__ inline void FlashAttentionInt8CoupledKernel<T>::ComputeBlock(uint32_t kvBlock, uint32_t rows,
                                                                        uint32_t row0)
{
    const uint32_t d = td_->headDim;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seqKv_ - col0);
    // The cube writes C to UB in rows padded to 32 bytes: [rows, align8(cols)] int32.
    const uint32_t stride = CeilDiv(cols, flash_attn::FP32_PER_BLOCK) * flash_attn::FP32_PER_BLOCK;
    const uint64_t kvRow0 = kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_;

    qkMm.SetTensorB(keyGm_[kvRow0], true);
    qkMm.SetTail(rows, cols, d);
    qkMm.IterateAll(sums_);

    // int32 -> fp32 in place (same width), then the softmax with the block's dequantization scale.
    AscendC::Cast(ub_.scores, sums_, AscendC::RoundMode::CAST_NONE, rows * stride);
    softmaxTd_.scaleValue = scales_.BlockScale(kvBlock);
    flash_attn::CoupledBlockValues<T>(&softmaxTd_, softmax_, pvMm, ub_.scores, ub_.prob, ub_.pv, ub_.acc, valueGm_[kvRow0],
                                      rowStrideKv_, seqKv_, kvBlock, rows, row0, cols, stride);
}

}  // namespace flash_attn_int8
