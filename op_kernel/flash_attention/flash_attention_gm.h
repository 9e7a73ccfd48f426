// flash_attention_gm.h -- the GM tensors both forward kernels (MIX, coupled) bind in Init, one way.
#pragma once

#include "kernel_operator.h"

#include "flash_attention_tiling.h"

namespace flash_attn {

// query [tokensQ, N, D], key and value [tokensKv, Nkv, D], attention_out like query (T), and
// softmax_lse [tokensQ, N] fp32, each bound to its size so that an access past it is caught.
// QK: the element type of query and key (T; int8_t for FlashAttentionInt8's kernels).
template <typename T, typename QK = T>
__aicore__ inline void BindForwardGm(const FlashAttentionTilingData *td, GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                     GM_ADDR attentionOut, GM_ADDR softmaxLse, AscendC::GlobalTensor<QK> &queryGm,
                                     AscendC::GlobalTensor<QK> &keyGm, AscendC::GlobalTensor<T> &valueGm,
                                     AscendC::GlobalTensor<T> &outGm, AscendC::GlobalTensor<float> &lseGm)
{
    const uint64_t qElems = static_cast<uint64_t>(td->tokensQ) * td->numHeads * td->headDim;
    const uint64_t kvElems = static_cast<uint64_t>(td->tokensKv) * td->numKvHeads * td->headDim;
    queryGm.SetGlobalBuffer(reinterpret_cast<__gm__ QK *>(query), qElems);
    keyGm.SetGlobalBuffer(reinterpret_cast<__gm__ QK *>(key), kvElems);
    valueGm.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qElems);
    lseGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse),
                          static_cast<uint64_t>(td->tokensQ) * td->numHeads);
}

}  // namespace flash_attn
