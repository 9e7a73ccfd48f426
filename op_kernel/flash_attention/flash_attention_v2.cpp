// flash_attention_v2.cpp -- kernel entry of the FlashAttentionV2 op (op_host/flash_attention/flash_attention_v2.json):
// the FlashAttention forward kernel (flash_attention_entry.h) with the band of pre_tokens /
// next_tokens and, for layout TND, the varlen sequences whose cumulative ends arrive in
// actual_seq_qlen / actual_seq_kvlen, the attention mask atten_mask and dropout (keep_prob, seed,
// offset; the keep mask to dropout_mask when given). Optional inputs and outputs the caller did
// not give arrive as null addresses.
#include "flash_attention_entry.h"

extern "C" __global__ __aicore__ void flash_attention_v2(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR atten_mask, GM_ADDR actual_seq_qlen,
                                                         GM_ADDR actual_seq_kvlen, GM_ADDR attention_out,
                                                         GM_ADDR softmax_lse, GM_ADDR dropout_mask,
                                                         GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionTilingData);
    GET_TILING_DATA(tilingData, tiling);
    FA_KERNEL_TYPE_AND_CASES()
}
