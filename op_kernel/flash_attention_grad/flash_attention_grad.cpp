// flash_attention_grad.cpp -- kernel entry of the FlashAttentionGrad op: read the tiling, pick
// the instance for the tiling key, run it. The math is in flash_attention_grad_kernel.h (shared
// with FlashAttentionGradV2's entry, flash_attention_grad_v2.cpp).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_grad_kernel.h"
#include "flash_attention_grad_tiling.h"

// Every key op_host can produce (flash_attention_grad_tiling.h): dtype bit 0, band bit 1,
// layout bits 2-3 (BNSD 0, BSND 1; BSH runs BSND's path), deterministic bit 4. The band, layout
// and mode are handled at run time by one instance per dtype; each key has its own binary.
#define FAG_CASE(KEY, T)                                                                                     \
    if (TILING_KEY_IS(KEY)) {                                                                                \
        flash_attn_grad::RunFlashAttentionGrad<T>(query, key, value, attention_out, dout, softmax_lse, nullptr, \
                                                  nullptr, nullptr, dq, dk, dv, workspace, &tilingData);         \
        return;                                                                                              \
    }
#define FAG_CASES_FOR_DTYPE(DTYPE_BIT, T) \
    FAG_CASE((DTYPE_BIT) + 0, T)          \
    FAG_CASE((DTYPE_BIT) + 2, T)          \
    FAG_CASE((DTYPE_BIT) + 4, T)          \
    FAG_CASE((DTYPE_BIT) + 6, T)          \
    FAG_CASE((DTYPE_BIT) + 16, T)         \
    FAG_CASE((DTYPE_BIT) + 18, T)         \
    FAG_CASE((DTYPE_BIT) + 20, T)         \
    FAG_CASE((DTYPE_BIT) + 22, T)

extern "C" __global__ __aicore__ void flash_attention_grad(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                           GM_ADDR attention_out, GM_ADDR dout, GM_ADDR softmax_lse,
                                                           GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR workspace,
                                                           GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionGradTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAG_CASES_FOR_DTYPE(0, half)
    FAG_CASES_FOR_DTYPE(1, bfloat16_t)
}
