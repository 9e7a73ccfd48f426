// flash_attention_decode_entry.h -- what the kernel entries of FlashAttentionDecode and
// FlashAttentionDecodeV2 share: read the tiling, pick the instance for the tiling key, run it.
// The math is in flash_attention_decode_kernel.h.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_decode_kernel.h"
#include "flash_attention_decode_tiling.h"

// alibiSlopes / sinks / cacheLeftpad: V2's optional inputs (nullptr for V1 or when absent; the
// tiling's hasAlibi / hasSinks / hasLeftpad say which are given). keyScale / valueScale: V3's
// antiquant scales (KV = int8_t; nullptr before V3).
template <typename T, typename KV = T>
__aicore__ inline void RunFlashAttentionDecode(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR blockTable,
                                               GM_ADDR actualSeqLengthsKv, GM_ADDR alibiSlopes, GM_ADDR sinks,
                                               GM_ADDR cacheLeftpad, GM_ADDR keyScale, GM_ADDR valueScale,
                                               GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR workspace,
                                               const FlashAttentionDecodeTilingData *tilingData)
{
    AscendC::TPipe pipe;
    flash_attn_decode::FlashAttentionDecodeKernel<T, KV> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.qkMm, &tilingData->qkTiling, op.pvMm,
                      &tilingData->pvTiling);
    op.Init(query, key, value, blockTable, actualSeqLengthsKv, alibiSlopes, sinks, cacheLeftpad, keyScale,
            valueScale, attentionOut, softmaxLse, workspace, tilingData, &pipe);
    op.Process();
}

// Keys op_host produces (flash_attention_decode_tiling.h): dtype bit 0, split bit 1. The split
// is a run-time branch of one instance per dtype; the key gives each its own binary. Expects the
// entry's parameters query ... softmax_lse, workspace and `tilingData` in scope.
#define FAD_CASE(KEY, T, ALIBI, SINKS, LEFTPAD)                                                              \
    if (TILING_KEY_IS(KEY)) {                                                                               \
        RunFlashAttentionDecode<T>(query, key, value, block_table, actual_seq_lengths_kv, ALIBI, SINKS,    \
                                   LEFTPAD, nullptr, nullptr, attention_out, softmax_lse, workspace,       \
                                   &tilingData);                                                            \
        return;                                                                                             \
    }
#define FAD_CASES(ALIBI, SINKS, LEFTPAD)                                      \
    FAD_CASE(0, half, ALIBI, SINKS, LEFTPAD)                                  \
    FAD_CASE(FAD_KEY_SPLIT, half, ALIBI, SINKS, LEFTPAD)                      \
    FAD_CASE(FAD_KEY_BF16, bfloat16_t, ALIBI, SINKS, LEFTPAD)                 \
    FAD_CASE(FAD_KEY_BF16 | FAD_KEY_SPLIT, bfloat16_t, ALIBI, SINKS, LEFTPAD)

// V3's keys: the int8 bit with the dtype and split bits; the entry's parameters as FAD_CASES's plus
// key_antiquant_scale, value_antiquant_scale.
#define FAD_INT8_CASE(KEY, T)                                                                                \
    if (TILING_KEY_IS(KEY)) {                                                                               \
        RunFlashAttentionDecode<T, int8_t>(query, key, value, block_table, actual_seq_lengths_kv,           \
                                           alibi_slopes, sinks, cache_leftpad, key_antiquant_scale,         \
                                           value_antiquant_scale, attention_out, softmax_lse, workspace,    \
                                           &tilingData);                                                    \
        return;                                                                                             \
    }
#define FAD_INT8_CASES                                                                 \
    FAD_INT8_CASE(FAD_KEY_INT8, half)                                                  \
    FAD_INT8_CASE(FAD_KEY_INT8 | FAD_KEY_SPLIT, half)                                  \
    FAD_INT8_CASE(FAD_KEY_INT8 | FAD_KEY_BF16, bfloat16_t)                             \
    FAD_INT8_CASE(FAD_KEY_INT8 | FAD_KEY_BF16 | FAD_KEY_SPLIT, bfloat16_t)
