// flash_attention_grad_v2.cpp -- kernel entry of the FlashAttentionGradV2 op (sliding-window
// bands, varlen TND, the attention mask and dropout on top of FlashAttentionGrad): read the tiling, pick the instance for the
// tiling key, run the one backward kernel (flash_attention_grad_kernel.h). Arguments in OpDef
// order: inputs (optional ones nullptr when absent), outputs, workspace, tiling.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_grad_kernel.h"
#include "flash_attention_grad_tiling.h"

// Keys as FlashAttentionGrad's (flash_attention_grad_tiling.h); TND runs BSND's path.
#define FAG_V2_CASE(KEY, T)                                                                                      \
    if (TILING_KEY_IS(KEY)) {                                                                                    \
        flash_attn_grad::RunFlashAttentionGrad<T>(query, key, value, attention_out, dout, softmax_lse,            \
                                                  atten_mask, actual_seq_qlen, actual_seq_kvlen, dq, dk, dv,      \
                                                  workspace, &tilingData);                                       \
        return;                                                                                                  \
    }
#define FAG_V2_CASES_FOR_DTYPE(DTYPE_BIT, T) \
    FAG_V2_CASE((DTYPE_BIT) + 0, T)          \
    FAG_V2_CASE((DTYPE_BIT) + 2, T)          \
    FAG_V2_CASE((DTYPE_BIT) + 4, T)          \
    FAG_V2_CASE((DTYPE_BIT) + 6, T)          \
    FAG_V2_CASE((DTYPE_BIT) + 16, T)         \
    FAG_V2_CASE((DTYPE_BIT) + 18, T)         \
    FAG_V2_CASE((DTYPE_BIT) + 20, T)         \
    FAG_V2_CASE((DTYPE_BIT) + 22, T)

extern "C" __global__ __aicore__ void flash_attention_grad_v2(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                              GM_ADDR attention_out, GM_ADDR dout,
                                                              GM_ADDR softmax_lse, GM_ADDR atten_mask,
                                                              GM_ADDR actual_seq_qlen, GM_ADDR actual_seq_kvlen,
                                                              GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                                              GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionGradTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAG_V2_CASES_FOR_DTYPE(0, half)
    FAG_V2_CASES_FOR_DTYPE(1, bfloat16_t)
}
