// flash_attention_int8.cpp -- kernel entry of the FlashAttentionInt8 op
// (op_host/flash_attention_int8/flash_attention_int8.json): int8 query and key with their per-block
// fp32 scales, value in float16 / bfloat16. Reads the tiling and dispatches on its key.
//   2201 (Atlas A2/A3): flash_attention_int8_kernel.h, KERNEL_TYPE_MIX_AIC_1_2, half and bfloat16.
//   2002 (310P) and 1001 (910A): flash_attention_int8_coupled_kernel.h, one AI Core per block,
//   half only (their keys carry FA_KEY_COUPLED; KERNEL_TYPE_AICORE on 2002, no kernel type on
//   1001: flash_attention/flash_attention_entry.h gives the sources).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_tiling.h"

#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
#include "flash_attention_int8_coupled_kernel.h"

template <typename T>
__aicore__ inline void RunFlashAttentionInt8(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR qScale, GM_ADDR kScale,
                                             GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR workspace,
                                             const FlashAttentionTilingData *tilingData)
{
    (void)workspace;  // no user workspace: S, P and P.V stay inside the AI Core
    AscendC::TPipe pipe;
    flash_attn_int8::FlashAttentionInt8CoupledKernel<T> op;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm, &tilingData->pvTiling);
    op.Init(query, key, value, qScale, kScale, attentionOut, softmaxLse, tilingData, &pipe);
    op.Process();
}
#else
#include "flash_attention_int8_kernel.h"

template <typename T>
__aicore__ inline void RunFlashAttentionInt8(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR qScale, GM_ADDR kScale,
                                             GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR workspace,
                                             const FlashAttentionTilingData *tilingData)
{
    AscendC::TPipe pipe;
    flash_attn_int8::FlashAttentionInt8Kernel<T> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm, &tilingData->pvTiling);
    op.Init(query, key, value, qScale, kScale, attentionOut, softmaxLse, workspace, tilingData, &pipe);
    op.Process();
}
#endif

// Every key op_host produces for one value dtype (flash_attention_tiling.h): causal bit 1, layout
// bits 2-3 (BNSD, BSND, BSH), Sq / Skv tail bits 4-5; one instance per dtype serves them all.
#define FA_INT8_CASE(KEY, T)                                                                                 \
    if (TILING_KEY_IS(KEY)) {                                                                                \
        RunFlashAttentionInt8<T>(query, key, value, q_scale, k_scale, attention_out, softmax_lse, workspace, \
                                 &tilingData);                                                               \
        return;                                                                                              \
    }
#define FA_INT8_CASES_WITH_TAILS(BASE, T) \
    FA_INT8_CASE((BASE), T)               \
    FA_INT8_CASE((BASE) + 16, T)          \
    FA_INT8_CASE((BASE) + 32, T)          \
    FA_INT8_CASE((BASE) + 48, T)
#define FA_INT8_CASES_FOR_DTYPE(BASE, T)     \
    FA_INT8_CASES_WITH_TAILS((BASE) + 0, T)  \
    FA_INT8_CASES_WITH_TAILS((BASE) + 2, T)  \
    FA_INT8_CASES_WITH_TAILS((BASE) + 4, T)  \
    FA_INT8_CASES_WITH_TAILS((BASE) + 6, T)  \
    FA_INT8_CASES_WITH_TAILS((BASE) + 8, T)  \
    FA_INT8_CASES_WITH_TAILS((BASE) + 10, T)

extern "C" __global__ __aicore__ void flash_attention_int8(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                           GM_ADDR q_scale, GM_ADDR k_scale, GM_ADDR attention_out,
                                                           GM_ADDR softmax_lse, GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionTilingData);
    GET_TILING_DATA(tilingData, tiling);
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 2002
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE);
    FA_INT8_CASES_FOR_DTYPE(FA_KEY_COUPLED, half)  // float16 only: no bfloat16 on these archs
#elif defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
    FA_INT8_CASES_FOR_DTYPE(FA_KEY_COUPLED, half)
#else
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FA_INT8_CASES_FOR_DTYPE(0, half)
    FA_INT8_CASES_FOR_DTYPE(FA_KEY_BF16, bfloat16_t)
#endif
}
