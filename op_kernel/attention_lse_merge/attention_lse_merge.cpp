// attention_lse_merge.cpp -- kernel entry of the AttentionLseMerge op: read the tiling, pick the
// instance for the tiling key, run it. The math is in attention_lse_merge_kernel.h.
//
// The build compiles this entry once per target architecture, as flash_attention.cpp: a vector-only
// kernel, it declares KERNEL_TYPE_AIV_ONLY on dav-c220 (2201: ascend910b, ascend910_93),
// KERNEL_TYPE_AICORE on dav-m200 (2002: ascend310p) and no type on dav-c100 (1001: ascend910, where
// KERNEL_TASK_TYPE is not supported) (asc-devkit docs/zh/api/SIMD-API/基础API/Kernel-Tiling/设置Kernel类型.md).
// The coupled architectures' vector units have no bfloat16, so their binaries hold the float16 and
// float32 keys only (op_host refuses bfloat16 there, naming the chip).
#include "kernel_operator.h"

#include "attention_lse_merge_kernel.h"
#include "attention_lse_merge_tiling.h"

template <typename A, typename B, typename O>
__aicore__ inline void RunAttentionLseMerge(GM_ADDR outA, GM_ADDR lseA, GM_ADDR outB, GM_ADDR lseB,
                                            GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                            const AttentionLseMergeTilingData *tilingData)
{
    AscendC::TPipe pipe;
    lse_merge::AttentionLseMergeKernel<A, B, O> op;
    op.Init(outA, lseA, outB, lseB, attentionOut, softmaxLse, tilingData, &pipe);
    op.Process();
}

#define ALM_CASE(KEY, A, B, O)                                                                          \
    if (TILING_KEY_IS(KEY)) {                                                                           \
        RunAttentionLseMerge<A, B, O>(out_a, lse_a, out_b, lse_b, attention_out, softmax_lse, &tilingData); \
        return;                                                                                         \
    }
// The four keys of a half type T (float16 or bfloat16): out_a and attention_out each T or float32.
#define ALM_CASES_FOR_HALF(B_CODE, T)                                                          \
    ALM_CASE((B_CODE) << ALM_KEY_B_SHIFT, T, T, T)                                             \
    ALM_CASE(((B_CODE) << ALM_KEY_B_SHIFT) | ALM_KEY_A_FP32, float, T, T)                      \
    ALM_CASE(((B_CODE) << ALM_KEY_B_SHIFT) | ALM_KEY_OUT_FP32, T, T, float)                    \
    ALM_CASE(((B_CODE) << ALM_KEY_B_SHIFT) | ALM_KEY_A_FP32 | ALM_KEY_OUT_FP32, float, T, float)
#define ALM_CASE_FP32() \
    ALM_CASE((ALM_KEY_B_FP32 << ALM_KEY_B_SHIFT) | ALM_KEY_A_FP32 | ALM_KEY_OUT_FP32, float, float, float)

extern "C" __global__ __aicore__ void attention_lse_merge(GM_ADDR out_a, GM_ADDR lse_a, GM_ADDR out_b,
                                                          GM_ADDR lse_b, GM_ADDR attention_out,
                                                          GM_ADDR softmax_lse, GM_ADDR workspace, GM_ADDR tiling)
{
    (void)workspace;  // none: no library API of the kernel needs one
    REGISTER_TILING_DEFAULT(AttentionLseMergeTilingData);
    GET_TILING_DATA(tilingData, tiling);
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 2002
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE);
    ALM_CASES_FOR_HALF(ALM_KEY_B_FP16, half)
    ALM_CASE_FP32()
#elif defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
    ALM_CASES_FOR_HALF(ALM_KEY_B_FP16, half)
    ALM_CASE_FP32()
#else
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    ALM_CASES_FOR_HALF(ALM_KEY_B_FP16, half)
    ALM_CASES_FOR_HALF(ALM_KEY_B_BF16, bfloat16_t)
    ALM_CASE_FP32()
#endif
}
