// attention_quant.cpp -- kernel entry of the AttentionQuant op (op_host/attention_quant/attention_quant.json):
// reads the tiling and runs attention_quant_kernel.h for x's dtype (tiling key 0 float16, 1 bfloat16).
// Atlas A2/A3 (arch 2201): a vector-only launch (KERNEL_TYPE_AIV_ONLY); 310P (2002): the AI Cores'
// vector units (KERNEL_TYPE_AICORE, the inference series' type for a kernel on AI Cores:
// 设置Kernel类型.md); 910A (1001): no kernel type (op_host refuses the chip: no float ReduceMax).
#include "kernel_operator.h"

#include "attention_quant_kernel.h"
#include "attention_quant_tiling.h"

template <typename T>
__aicore__ inline void RunAttentionQuant(GM_ADDR x, GM_ADDR y, GM_ADDR scale, const AttentionQuantTilingData *td)
{
    AscendC::TPipe pipe;
    attn_quant::AttentionQuantKernel<T> op;
    op.Init(x, y, scale, td, &pipe);
    op.Process();
}

extern "C" __global__ __aicore__ void attention_quant(GM_ADDR x, GM_ADDR y, GM_ADDR scale, GM_ADDR workspace,
                                                      GM_ADDR tiling)
{
    (void)workspace;
    REGISTER_TILING_DEFAULT(AttentionQuantTilingData);
    GET_TILING_DATA(tilingData, tiling);
#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
#if __NPU_ARCH__ == 2002
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE);
#endif
    if (TILING_KEY_IS(0)) {
        RunAttentionQuant<half>(x, y, scale, &tilingData);  // float16 only: no bfloat16 on these archs
    }
#else
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    if (TILING_KEY_IS(0)) {
        RunAttentionQuant<half>(x, y, scale, &tilingData);
    } else if (TILING_KEY_IS(1)) {
        RunAttentionQuant<bfloat16_t>(x, y, scale, &tilingData);
    }
#endif
}
