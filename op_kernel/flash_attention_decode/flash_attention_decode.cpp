// flash_attention_decode.cpp -- kernel entry of the FlashAttentionDecode op: read the tiling, pick
// the instance for the tiling key, run it. The math is in flash_attention_decode_kernel.h.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_decode_kernel.h"
#include "flash_attention_decode_tiling.h"

template <typename T>
__aicore__ inline void RunFlashAttentionDecode(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR blockTable,
                                               GM_ADDR actualSeqLengthsKv, GM_ADDR attentionOut,
                                               GM_ADDR softmaxLse, GM_ADDR workspace,
                                               const FlashAttentionDecodeTilingData *tilingData)
{
    AscendC::TPipe pipe;
    flash_attn_decode::FlashAttentionDecodeKernel<T> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm,
                      &tilingData->pvTiling);
    op.Init(query, key, value, blockTable, actualSeqLengthsKv, attentionOut, softmaxLse, workspace, tilingData,
            &pipe);
    op.Process();
}

// Keys op_host produces (flash_attention_decode_tiling.h): dtype bit 0, split bit 1. The split
// is a run-time branch of one instance per dtype; the key gives each its own binary.
#define FAD_CASE(KEY, T)                                                                                    \
    if (TILING_KEY_IS(KEY)) {                                                                               \
        RunFlashAttentionDecode<T>(query, key, value, block_table, actual_seq_lengths_kv, attention_out,   \
                                   softmax_lse, workspace, &tilingData);                                    \
        return;                                                                                             \
    }

extern "C" __global__ __aicore__ void flash_attention_decode(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                             GM_ADDR block_table, GM_ADDR actual_seq_lengths_kv,
                                                             GM_ADDR attention_out, GM_ADDR softmax_lse,
                                                             GM_ADDR workspace, GM_ADDR tiling)
{
    REGISTER_TILING_DEFAULT(FlashAttentionDecodeTilingData);
    GET_TILING_DATA(tilingData, tiling);
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    FAD_CASE(0, half)
    FAD_CASE(FAD_KEY_SPLIT, half)
    FAD_CASE(FAD_KEY_BF16, bfloat16_t)
    FAD_CASE(FAD_KEY_BF16 | FAD_KEY_SPLIT, bfloat16_t)
}
