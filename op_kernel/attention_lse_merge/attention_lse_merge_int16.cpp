// attention_lse_merge_int16.cpp -- kernel entry of the AttentionLseMergeInt16 op: the merge of
// attention_lse_merge_kernel.h with out_a an int16 running result in units of its row bounds.
// Registered for dav-c220 only (ascend910b, ascend910_93: the chips whose vector Cast converts
// between float and int16_t), so it is a vector-only kernel of KERNEL_TYPE_AIV_ONLY; its keys
// are out_b's dtype x attention_out int16 (a running merge) or out_b's dtype (the last merge).
#include "kernel_operator.h"

#include "attention_lse_merge_kernel.h"
#include "attention_lse_merge_tiling.h"

template <typename B, typename O>
__aicore__ inline void RunAttentionLseMergeInt16(GM_ADDR outA, GM_ADDR boundA, GM_ADDR lseA, GM_ADDR outB,
                                                 GM_ADDR lseB, GM_ADDR attentionOut, GM_ADDR boundOut,
                                                 GM_ADDR softmaxLse, const AttentionLseMergeTilingData *tilingData)
{
    AscendC::TPipe pipe;
    lse_merge::AttentionLseMergeKernel<int16_t, B, O> op;
    op.Init(outA, lseA, outB, lseB, attentionOut, softmaxLse, tilingData, &pipe, boundA, boundOut);
    op.Process();
}

#define ALM16_CASE(KEY, B, O)                                                                                      \
    if (TILING_KEY_IS(KEY)) {                                                                                      \
        RunAttentionLseMergeInt16<B, O>(out_a, bound_a, lse_a, out_b, lse_b, attention_out, bound_out, softmax_lse, \
                                        &tilingData);                                                              \
        return;                                                                                                    \
    }
// The two keys of a partial dtype B: a running merge (int16 out) and the last one (B out).
#define ALM16_CASES(B_CODE, B, OUT_B_BITS)                                                         \
    ALM16_CASE(((B_CODE) << ALM_KEY_B_SHIFT) | ALM_KEY_A_FIXED16 | ALM_KEY_OUT_FIXED16, B, int16_t) \
    ALM16_CASE(((B_CODE) << ALM_KEY_B_SHIFT) | ALM_KEY_A_FIXED16 | (OUT_B_BITS), B, B)

extern "C" __global__ __aicore__ void attention_lse_merge_int16(GM_ADDR out_a, GM_ADDR bound_a, GM_ADDR lse_a,
                                                                GM_ADDR out_b, GM_ADDR lse_b, GM_ADDR attention_out,
                                                                GM_ADDR bound_out, GM_ADDR softmax_lse,
                                                                GM_ADDR workspace, GM_ADDR tiling)
{
    (void)workspace;  // none: no library API of the kernel needs one
    REGISTER_TILING_DEFAULT(AttentionLseMergeTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    ALM16_CASES(ALM_KEY_B_FP16, half, 0)
    ALM16_CASES(ALM_KEY_B_BF16, bfloat16_t, 0)
    ALM16_CASES(ALM_KEY_B_FP32, float, ALM_KEY_OUT_FP32)
}
