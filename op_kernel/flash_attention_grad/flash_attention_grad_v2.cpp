// flash_attention_grad_v2.cpp -- kernel entry of the FlashAttentionGradV2 op (sliding-window
// bands, varlen TND, the attention mask and dropout on top of FlashAttentionGrad): read the
// tiling, pick the instance for the tiling key, run the one backward kernel
// (flash_attention_grad_entry.h, flash_attention_grad_kernel.h). Arguments in OpDef order:
// inputs (optional ones nullptr when absent), outputs, workspace, tiling.
#include "flash_attention_grad_entry.h"

extern "C" __global__ __aicore__ void flash_attention_grad_v2(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                              GM_ADDR attention_out, GM_ADDR dout,
                                                              GM_ADDR softmax_lse, GM_ADDR atten_mask,
                                                              GM_ADDR actual_seq_qlen, GM_ADDR actual_seq_kvlen,
                                                              GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                                              GM_ADDR tiling)
{
    // FlashAttentionGradV3's optional inputs and output, which this op does not have.
    GM_ADDR alibi_slopes = nullptr;
    GM_ADDR sinks = nullptr;
    GM_ADDR dsinks = nullptr;
    FAG_TILING_AND_CASES()
}
