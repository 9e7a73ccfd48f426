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

private:
    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::GlobalTensor<float> qScaleGm_, kScaleGm_;  // [B, N, numQBlocks], [B, Nkv, numKvBlocks] fp32
    float itemScale_ = 0.0f;  // scale * q_scale of the item's query block
    uint64_t kScaleRow_ = 0;  // k_scale index of (b, kvHead, block 0)
};

}  // namespace flash_attn_int8
