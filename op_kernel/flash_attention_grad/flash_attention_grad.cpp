// flash_attention_grad.cpp -- kernel entry of the FlashAttentionGrad op: read the tiling, pick
// the instance for the tiling key, run it (flash_attention_grad_entry.h, shared with
// FlashAttentionGradV2's entry). The math is in flash_attention_grad_kernel.h.
#include "flash_attention_grad_entry.h"

extern "C" __global__ __aicore__ void flash_attention_grad(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                           GM_ADDR attention_out, GM_ADDR dout, GM_ADDR softmax_lse,
                                                           GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                                           GM_ADDR tiling)
{
    // FlashAttentionGradV2's and V3's optional inputs and output, which this op does not have.
    GM_ADDR atten_mask = nullptr;
    GM_ADDR actual_seq_qlen = nullptr;
    GM_ADDR actual_seq_kvlen = nullptr;
    GM_ADDR alibi_slopes = nullptr;
    GM_ADDR sinks = nullptr;
    GM_ADDR dsinks = nullptr;
    FAG_TILING_AND_CASES()
}
