// flash_attention_v5.cpp -- kernel entry of the FlashAttentionV5 op (op_host/flash_attention/flash_attention_v5.json):
// FlashAttentionV4's inputs and outputs (flash_attention_v4.cpp) and the same kernel, plus the
// optional inputs alibi_slopes (float32 [B, N]), sinks (float32 [N]) and atten_bias (the input
// dtype, [1 or B, 1 or N, 1 or Sq, Skv]), which reach the kernel's score stage as
// score_mods::ScoreModsGm (op_kernel/common/score_mods.h); their presence and shapes arrive in the
// tiling data (FlashAttentionTilingData::hasAlibi, hasSinks, hasBias, bias*).
#include "flash_attention_entry.h"

#undef FA_SCORE_MODS
#define FA_SCORE_MODS score_mods::ScoreModsGm{alibi_slopes, sinks, atten_bias}

extern "C" __global__ __aicore__ void flash_attention_v5(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR atten_mask, GM_ADDR actual_seq_qlen,
                                                         GM_ADDR actual_seq_kvlen, GM_ADDR alibi_slopes,
                                                         GM_ADDR sinks, GM_ADDR atten_bias, GM_ADDR attention_out,
                                                         GM_ADDR softmax_lse, GM_ADDR dropout_mask,
                                                         GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionTilingData);
    GET_TILING_DATA(tilingData, tiling);
    FA_KERNEL_TYPE_AND_CASES()
}
