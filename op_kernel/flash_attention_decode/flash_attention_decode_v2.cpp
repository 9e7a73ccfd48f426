// flash_attention_decode_v2.cpp -- kernel entry of the FlashAttentionDecodeV2 op
// (op_host/flash_attention_decode/flash_attention_decode_v2.json): FlashAttentionDecode's inputs
// and the optional alibi_slopes [B, N], sinks [N] (fp32) and cache_leftpad [B] (int32), its attr
// softcap in the tiling (FlashAttentionDecodeTilingData::softcap, hasAlibi, hasSinks, hasLeftpad).
// The same kernel and keys.
#include "flash_attention_decode_entry.h"

extern "C" __global__ __aicore__ void flash_attention_decode_v2(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                                GM_ADDR block_table, GM_ADDR actual_seq_lengths_kv,
                                                                GM_ADDR alibi_slopes, GM_ADDR sinks,
                                                                GM_ADDR cache_leftpad, GM_ADDR attention_out, GM_ADDR softmax_lse,
                                                                GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionDecodeTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAD_CASES(alibi_slopes, sinks, cache_leftpad)
}
