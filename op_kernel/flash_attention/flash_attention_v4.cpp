// flash_attention_v4.cpp -- kernel entry of the FlashAttentionV4 op (op_host/flash_attention/flash_attention_v4.json):
// FlashAttentionV3's inputs and outputs (flash_attention_v3.cpp) and the same kernel; its attr
// inner_precise arrives as the tiling key's bit 8 (FA_KEY_NARROW_S: S in the input dtype in the
// workspace) and FlashAttentionTilingData::innerPrecise.
#include "flash_attention_entry.h"

extern "C" __global__ __aicore__ void flash_attention_v4(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR atten_mask, GM_ADDR actual_seq_qlen,
                                                         GM_ADDR actual_seq_kvlen, GM_ADDR attention_out,
                                                         GM_ADDR softmax_lse, GM_ADDR dropout_mask,
                                                         GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionTilingData);
    GET_TILING_DATA(tilingData, tiling);
    FA_KERNEL_TYPE_AND_CASES()
}
