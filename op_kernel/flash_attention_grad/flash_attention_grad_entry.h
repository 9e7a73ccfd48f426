// flash_attention_grad_entry.h -- what the kernel entries of FlashAttentionGrad,
// FlashAttentionGradV2 and FlashAttentionGradV3 share: read the tiling, pick the instance for the tiling key, run the one
// backward kernel (flash_attention_grad_kernel.h).
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "flash_attention_grad_kernel.h"
#include "flash_attention_grad_tiling.h"

// Every key op_host can produce (flash_attention_grad_tiling.h): dtype bit 0, band bit 1,
// layout bits 2-3 (BNSD 0, BSND 1; BSH and TND run BSND's path), deterministic bit 4. The band,
// layout and mode are handled at run time by one instance per dtype; each key has its own binary.
#define FAG_CASE(KEY, T)                                                                                      \
    if (TILING_KEY_IS(KEY)) {                                                                                 \
        flash_attn_grad::RunFlashAttentionGrad<T>(query, key, value, attention_out, dout, softmax_lse,         \
                                                  atten_mask, actual_seq_qlen, actual_seq_kvlen, alibi_slopes,  \
                                                  sinks, dq, dk, dv, dsinks, workspace, &tilingData);          \
        return;                                                                                               \
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

// The body of both entries; expects query, key, value, attention_out, dout, softmax_lse,
// atten_mask, actual_seq_qlen, actual_seq_kvlen, alibi_slopes, sinks (nullptr when absent), dq,
// dk, dv, dsinks (nullptr when absent), workspace and tiling in scope.
#define FAG_TILING_AND_CASES()                             \
    REGISTER_TILING_DEFAULT(FlashAttentionGradTilingData); \
    GET_TILING_DATA(tilingData, tiling);                   \
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);     \
    FAG_CASES_FOR_DTYPE(0, half)                           \
    FAG_CASES_FOR_DTYPE(1, bfloat16_t)
