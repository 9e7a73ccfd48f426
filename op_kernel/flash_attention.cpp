// flash_attention.cpp -- kernel entry of the FlashAttention op: read the tiling, pick the
// instance for the tiling key, run it. The math is in flash_attention_kernel.h.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_kernel.h"
#include "flash_attention_tiling.h"

template <typename T>
__aicore__ inline void RunFlashAttention(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut,
                                         GM_ADDR softmaxLse, GM_ADDR workspace,
                                         const FlashAttentionTilingData *tilingData)
{
    AscendC::TPipe pipe;
    flash_attn::FlashAttentionKernel<T> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm,
                      &tilingData->pvTiling);
    op.Init(query, key, value, attentionOut, softmaxLse, workspace, tilingData, &pipe);
    op.Process();
}

// Every key op_host can produce (flash_attention_tiling.h): dtype bit 0, causal bit 1, layout
// bits 2-3, Sq/Skv tail bits 4-5. Causal, layout and tails are handled at run time by one
// instance per dtype; the keys exist so that each combination has its own binary on the chip.
#define FA_CASE(KEY, T)                                                                                   \
    if (TILING_KEY_IS(KEY)) {                                                                             \
        RunFlashAttention<T>(query, key, value, attention_out, softmax_lse, workspace, &tilingData);     \
        return;                                                                                           \
    }
#define FA_CASES_WITH_TAILS(BASE, T) \
    FA_CASE((BASE), T)               \
    FA_CASE((BASE) + 16, T)          \
    FA_CASE((BASE) + 32, T)          \
    FA_CASE((BASE) + 48, T)
#define FA_CASES_FOR_DTYPE(DTYPE_BIT, T)         \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 0, T)      \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 2, T)      \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 4, T)      \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 6, T)      \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 8, T)      \
    FA_CASES_WITH_TAILS((DTYPE_BIT) + 10, T)

extern "C" __global__ __aicore__ void flash_attention(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                      GM_ADDR attention_out, GM_ADDR softmax_lse,
                                                      GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FA_CASES_FOR_DTYPE(0, half)
    FA_CASES_FOR_DTYPE(1, bfloat16_t)
}
