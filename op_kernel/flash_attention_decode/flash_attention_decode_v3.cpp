// flash_attention_decode_v3.cpp -- kernel entry of the FlashAttentionDecodeV3 op
// (op_host/flash_attention_decode/flash_attention_decode_v3.json): FlashAttentionDecodeV2's inputs
// with an int8 key/value cache, then key_antiquant_scale [Nkv, D] and value_antiquant_scale
// [numBlocks, Nkv, blockSize] (fp32). The same kernel class with KV = int8_t (its "V3" parts).
#include "flash_attention_decode_entry.h"

extern "C" __global__ __aicore__ void flash_attention_decode_v3(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                                GM_ADDR block_table, GM_ADDR actual_seq_lengths_kv,
                                                                GM_ADDR alibi_slopes, GM_ADDR sinks,
                                                                GM_ADDR cache_leftpad, GM_ADDR key_antiquant_scale,
                                                                GM_ADDR value_antiquant_scale, GM_ADDR attention_out,
                                                                GM_ADDR softmax_lse, GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionDecodeTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAD_INT8_CASES
}
