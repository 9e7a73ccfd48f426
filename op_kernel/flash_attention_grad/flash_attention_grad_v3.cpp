// flash_attention_grad_v3.cpp -- kernel entry of the FlashAttentionGradV3 op (FlashAttentionGradV2
// plus ALiBi, soft-capping and attention sinks: docs/attention_options.md "Score modifiers"): read
// the tiling, pick the instance for the tiling key, run the one backward kernel
// (flash_attention_grad_entry.h, flash_attention_grad_kernel.h). Arguments in OpDef order:
// inputs (optional ones nullptr when absent), outputs (dsinks nullptr when absent), workspace, tiling.
#include "flash_attention_grad_entry.h"

extern "C" __global__ __aicore__ void flash_attention_grad_v3(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                              GM_ADDR attention_out, GM_ADDR dout,
                                                              GM_ADDR softmax_lse, GM_ADDR atten_mask,
                                                              GM_ADDR actual_seq_qlen, GM_ADDR actual_seq_kvlen,
                                                              GM_ADDR alibi_slopes, GM_ADDR sinks, GM_ADDR dq,
                                                              GM_ADDR dk, GM_ADDR dv, GM_ADDR dsinks,
                                                              GM_ADDR workspace, GM_ADDR tiling)
{
    FAG_TILING_AND_CASES()
}
