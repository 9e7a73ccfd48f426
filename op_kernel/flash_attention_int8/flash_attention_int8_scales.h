// flash_attention_int8_scales.h -- the per-block dequantization scales both FlashAttentionInt8
// kernels read (flash_attention_int8_kernel.h on A2/A3, flash_attention_int8_coupled_kernel.h on
// 310P): q_scale [B, N, numQBlocks] and k_scale [B, Nkv, numKvBlocks] fp32 (AttentionQuant's
// per-block scheme, docs/int8.md). A block of S = Q8 . K8_j^T dequantizes with one scalar,
// scale * q_scale[qb] * k_scale[j], which the kernels give the softmax as its scale.
#pragma once

#include "kernel_operator.h"

#include "flash_attention_items.h"
#include "flash_attention_tiling.h"

namespace flash_attn_int8 {

class BlockScales {
public:
    __aicore__ inline void Init(GM_ADDR qScale, GM_ADDR kScale, const FlashAttentionTilingData *tiling)
    {
        td_ = tiling;
        qScaleGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(qScale),
                                  static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->numQBlocks);
        kScaleGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(kScale),
                                  static_cast<uint64_t>(td_->batch) * td_->numKvHeads * td_->numKvBlocks);
    }
    // Starts a work item: reads scale * q_scale of its query block (one scalar GM read per item).
    __aicore__ inline void StartItem(const flash_attn::ItemPlace &place)
    {
        const uint64_t headIndex = static_cast<uint64_t>(place.seq) * td_->numHeads + place.head;
        itemScale_ = td_->scaleValue * qScaleGm_.GetValue(headIndex * td_->numQBlocks + place.qBlock);
        kScaleRow_ = (static_cast<uint64_t>(place.seq) * td_->numKvHeads + place.kvHead) * td_->numKvBlocks;
    }
    // The softmax scale of K/V block kvBlock of the item: scale * q_scale * k_scale[kvBlock].
    __aicore__ inline float BlockScale(uint32_t kvBlock)
    {
        return itemScale_ * kScaleGm_.GetValue(kScaleRow_ + kvBlock);
    }
    // BlockScale split for a dequantization on the cube's way out (FixPipe DEQF16, the Matmul
    // API's SetQuantScalar): FixPipe keeps the top 19 bits of the fp32 scale (sign, exponent and
    // 10 mantissa bits; asc-devkit SetQuantScalar.md), so
    // *quantScalar carries that cut scale and *rest = BlockScale / cut (in [1, 1 + 2^-10)) is what
    // the softmax multiplies by to complete it. BlockScale > 0 and normal (op_host / the Python
    // face refuse zero and non-finite scales; a product below 2^-126 is not handled).
    // whole: FixPipe carries all of it instead -- BlockScale rounded to nearest on its 19 bits
    // (within 2^-11 of it, relative: the rounding S takes into half anyway), and *rest exactly 1,
    // so the half softmax spends no pass on its scale (OnlineSoftmax::ScoresToProbsNarrow).
    __aicore__ inline void SplitBlockScale(uint32_t kvBlock, uint64_t *quantScalar, float *rest, bool whole = false)
    {
        const float full = BlockScale(kvBlock);
        const uint32_t bits = *reinterpret_cast<const uint32_t *>(&full);
        // Round half up on the dropped 13 bits: a carry into the exponent stays the nearest value.
        const uint32_t cutBits = (whole ? bits + FIXPIPE_SCALE_HALF_ULP : bits) & FIXPIPE_SCALE_MASK;
        *quantScalar = static_cast<uint64_t>(cutBits) | FIXPIPE_SCALE_FLAG;
        *rest = whole ? 1.0f : full / *reinterpret_cast<const float *>(&cutBits);
    }

    // The bits of an fp32 scale FixPipe's dequantization keeps, and the bit SetQuantScalar.md's
    // conversion sets beside them (quantScalar = (scale & 0xFFFFE000) | (1 << 46), no offset).
    static constexpr uint32_t FIXPIPE_SCALE_MASK = 0xFFFFE000u;
    static constexpr uint32_t FIXPIPE_SCALE_HALF_ULP = 0x00001000u;  // half of the kept bits' last place
    static constexpr uint64_t FIXPIPE_SCALE_FLAG = 1ULL << 46;

private:
    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::GlobalTensor<float> qScaleGm_, kScaleGm_;  // [B, N, numQBlocks], [B, Nkv, numKvBlocks] fp32
    float itemScale_ = 0.0f;  // scale * q_scale of the item's query block
    uint64_t kScaleRow_ = 0;  // k_scale index of (b, kvHead, block 0)
};

}  // namespace flash_attn_int8
