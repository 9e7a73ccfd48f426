/*
 * aclnn_flash_attention.h -- the two-phase op API of the FlashAttention custom operator, in the
 * form CANN's msopgen generates from op/flash_attention.json (docs/cann-facts.md#custom-operator-api): inputs,
 * then attrs in declaration order (float -> double, bool -> bool, int -> int64_t, the optional
 * string attr -> char *...Optional), then outputs (<name>Out), workspace size and executor.
 * Installed as vendors/<vendor>/op_api/include/aclnn_flash_attention.h; exported by
 * libcust_opapi.so.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* query, key, value: required, float16 | bfloat16, ND; shapes by inputLayoutOptional:
 *   BNSD [B, N, Sq, D] / [B, Nkv, Skv, D]; BSND [B, Sq, N, D]; BSH [B, Sq, N*D].
 * scaleValue: multiplies Q.K^T. causal: mask key j > i + (Skv - Sq).
 * inputLayoutOptional: "BNSD" (default when NULL), "BSND" or "BSH".
 * numHeads, numKvHeads: 0 = from the shapes (BSH needs numHeads; numKvHeads defaults to numHeads).
 * blockM, blockN: 0 = chosen by the tiling; else multiples of 16 that must fit the chip.
 * attentionOutOut: like query. softmaxLseOut: float32 [B, N, Sq]. */
__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, double scaleValue, bool causal,
    char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads, int64_t blockM, int64_t blockN,
    const aclTensor *attentionOutOut, const aclTensor *softmaxLseOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttention(void *workspace, uint64_t workspaceSize,
                                                                        aclOpExecutor *executor,
                                                                        aclrtStream stream);

#ifdef __cplusplus
}
#endif
