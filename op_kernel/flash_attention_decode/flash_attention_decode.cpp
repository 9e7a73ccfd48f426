// flash_attention_decode.cpp -- kernel entry of the FlashAttentionDecode op: read the tiling, pick
// the instance for the tiling key, run it (flash_attention_decode_entry.h). The math is in
// flash_attention_decode_kernel.h.
#include "flash_attention_decode_entry.h"

extern "C" __global__ __aicore__ void flash_attention_decode(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                             GM_ADDR block_table, GM_ADDR actual_seq_lengths_kv,
                                                             GM_ADDR attention_out, GM_ADDR softmax_lse,
                                                             GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionDecodeTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAD_CASES(nullptr, nullptr, nullptr)
}
