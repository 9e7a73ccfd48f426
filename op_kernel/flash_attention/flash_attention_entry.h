// flash_attention_entry.h -- what the kernel entries of FlashAttention (flash_attention.cpp) and
// FlashAttentionV2 (flash_attention_v2.cpp) share: the run of one instance of the forward kernel
// for the architecture being compiled (__NPU_ARCH__) and the dispatch over every tiling key
// op_host can produce. One kernel source serves both ops; V1 passes no sequence lengths, mask
// or dropout_mask.
//
// The build compiles each entry once per target architecture: 2201 for ascend910b /
// ascend910_93, 2002 for ascend310p, 1001 for ascend910. Each architecture's binary holds only
// the keys op_host produces for it (flash_attention_tiling.h: bit 7 says coupled) and declares
// the kernel type the architecture launches:
//   2201  KERNEL_TYPE_MIX_AIC_1_2 (one AIC + two AIVs per block)
//   2002  KERNEL_TYPE_AICORE (one AI Core per block; Atlas inference series)
//   1001  none: KERNEL_TASK_TYPE is not supported on the Atlas training series, every
//         kernel runs on the AI Cores
// (asc-devkit docs/zh/api/SIMD-API/基础API/Kernel-Tiling/设置Kernel类型.md, "kernel type取值约束").
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_tiling.h"
#include "score_mods.h"

#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
#include "flash_attention_coupled_kernel.h"

// S: the type of S between the matmuls, float on this path (its keys never set bit 8).
template <typename T, typename S = float>
__aicore__ inline void RunFlashAttention(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attenMask,
                                         GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen, GM_ADDR attentionOut,
                                         GM_ADDR softmaxLse, GM_ADDR dropoutMask, GM_ADDR workspace,
                                         const FlashAttentionTilingData *tilingData,
                                         const score_mods::ScoreModsGm &scoreMods)
{
    static_assert(AscendC::IsSameType<S, float>::value, "the coupled path keeps S in float32");
    (void)workspace;  // no user workspace: S, P and P.V stay inside the AI Core
    // op_host refuses atten_mask and dropout on the coupled chips (tiling_policy.cpp ComputePlan).
    (void)attenMask;
    (void)dropoutMask;
    (void)scoreMods;  // and FlashAttentionV5's score modifiers (ComputePlan)
    AscendC::TPipe pipe;
    flash_attn::FlashAttentionCoupledKernel<T> op;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm,
                      &tilingData->pvTiling);
    op.Init(query, key, value, actualSeqQlen, actualSeqKvlen, attentionOut, softmaxLse, tilingData, &pipe);
    op.Process();
}
#else
#include "flash_attention_kernel.h"

// S: the type of S in the workspace (float; T for the high-performance precision).
template <typename T, typename S = float>
__aicore__ inline void RunFlashAttention(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attenMask,
                                         GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen, GM_ADDR attentionOut,
                                         GM_ADDR softmaxLse, GM_ADDR dropoutMask, GM_ADDR workspace,
                                         const FlashAttentionTilingData *tilingData,
                                         const score_mods::ScoreModsGm &scoreMods)
{
    AscendC::TPipe pipe;
    flash_attn::FlashAttentionKernel<T, S> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm,
                      &tilingData->pvTiling);
    op.Init(query, key, value, attenMask, actualSeqQlen, actualSeqKvlen, attentionOut, softmaxLse, dropoutMask,
            workspace, tilingData, &pipe);
    if (tilingData->hasAlibi != 0 || tilingData->hasSinks != 0 || tilingData->hasBias != 0) {
        op.InitScoreMods(scoreMods);
    }
    op.Process();
}
#endif

// Every key op_host can produce for one dtype (flash_attention_tiling.h): band bit 1, layout
// bits 2-3, Sq/Skv tail bits 4-5 over the dtype and path bits in BASE. Causal, layout and tails
// are handled at run time by one instance per dtype; the keys exist so that each combination
// has its own binary on the chip.
#define FA_CASE(KEY, T, S)                                                                                \
    if (TILING_KEY_IS(KEY)) {                                                                             \
        RunFlashAttention<T, S>(query, key, value, atten_mask, actual_seq_qlen, actual_seq_kvlen,        \
                                attention_out, softmax_lse, dropout_mask, workspace, &tilingData,         \
                                FA_SCORE_MODS);                                                           \
        return;                                                                                           \
    }
// The score modifiers' GM inputs an entry passes (FlashAttentionV5 redefines it with its inputs).
#define FA_SCORE_MODS score_mods::ScoreModsGm{}
#define FA_CASES_WITH_TAILS(BASE, T, S) \
    FA_CASE((BASE), T, S)               \
    FA_CASE((BASE) + 16, T, S)          \
    FA_CASE((BASE) + 32, T, S)          \
    FA_CASE((BASE) + 48, T, S)
#define FA_CASES_FOR_TYPES(BASE, T, S)         \
    FA_CASES_WITH_TAILS((BASE) + 0, T, S)      \
    FA_CASES_WITH_TAILS((BASE) + 2, T, S)      \
    FA_CASES_WITH_TAILS((BASE) + 4, T, S)      \
    FA_CASES_WITH_TAILS((BASE) + 6, T, S)      \
    FA_CASES_WITH_TAILS((BASE) + 8, T, S)      \
    FA_CASES_WITH_TAILS((BASE) + 10, T, S)
#define FA_CASES_FOR_DTYPE(BASE, T) FA_CASES_FOR_TYPES(BASE, T, float)

// The cases of every tiling key for the architecture being compiled; expects query, key, value,
// atten_mask, actual_seq_qlen, actual_seq_kvlen, attention_out, softmax_lse, dropout_mask, workspace
// and tilingData in scope (the optional ones null when absent).
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 2002
#define FA_KERNEL_TYPE_AND_CASES()               \
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE); \
    FA_CASES_FOR_DTYPE(FA_KEY_COUPLED, half)  /* float16 only: no bfloat16, no float32 cube */
#elif defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
#define FA_KERNEL_TYPE_AND_CASES() FA_CASES_FOR_DTYPE(FA_KEY_COUPLED, half)  /* float16 only */
#else
#define FA_KERNEL_TYPE_AND_CASES()                    \
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2); \
    FA_CASES_FOR_DTYPE(0, half)                        \
    FA_CASES_FOR_DTYPE(FA_KEY_BF16, bfloat16_t)        \
    FA_CASES_FOR_DTYPE(FA_KEY_FP32, float)             \
    FA_CASES_FOR_TYPES(FA_KEY_NARROW_S, half, half)    \
    FA_CASES_FOR_TYPES(FA_KEY_NARROW_S + FA_KEY_BF16, bfloat16_t, bfloat16_t)
#endif
