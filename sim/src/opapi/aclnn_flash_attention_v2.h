/*
 * aclnn_flash_attention_v2.h -- the two-phase op API of the FlashAttentionV2 custom operator, in
 * the form CANN's msopgen generates from op/flash_attention_v2.json
 * (docs/cann-facts.md#custom-operator-api): inputs (an optional one as <name>Optional), then attrs in declaration order
 * (float -> double, int -> int64_t, the optional string attr -> char *...Optional), then outputs
 * (<name>Out, an optional one <name>OutOptional), workspace size and executor.
 * Installed as vendors/<vendor>/op_api/include/aclnn_flash_attention_v2.h; exported by
 * libcust_opapi.so.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* query, key, value: required, float16 | bfloat16 | float32, ND; shapes by inputLayoutOptional:
 *   BNSD [B, N, Sq, D] / [B, Nkv, Skv, D]; BSND [B, Sq, N, D]; BSH [B, Sq, N*D];
 *   TND [Tq, N, D] / [Tkv, Nkv, D] (sequences packed along T).
 * attenMaskOptional: uint8 | bool, 1 = masked out (FlashAttentionScore's convention); NULL = none.
 * actualSeqQlenOptional, actualSeqKvlenOptional: int64 [sequences], cumulative END offsets of the
 *   sequences along Tq / Tkv without the leading 0; required for TND, refused otherwise.
 * scaleValue: multiplies Q.K^T. preTokens, nextTokens: key j is visible to query i iff
 *   i + (Skv - Sq) - preTokens <= j <= i + (Skv - Sq) + nextTokens, per sequence; 2147483647 =
 *   unbounded; causal is (2147483647, 0).
 * numHeads, numKvHeads: 0 = from the shapes (BSH needs numHeads).
 * keepProb, seed, offset: dropout of P (keepProb 1 = none); seed and offset carry uint64 bits.
 * blockM, blockN: 0 = chosen by the tiling; else multiples of 16 that must fit the chip.
 * attentionOutOut: like query. softmaxLseOut: float32 [B, N, Sq]; TND [N, Tq].
 * dropoutMaskOutOptional: uint8 [B, N, Sq, Skv] keep mask (1 = kept), a testing aid; NULL = none. */
__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attenMaskOptional,
    const aclTensor *actualSeqQlenOptional, const aclTensor *actualSeqKvlenOptional, double scaleValue,
    int64_t preTokens, int64_t nextTokens, char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads,
    double keepProb, int64_t seed, int64_t offset, int64_t blockM, int64_t blockN, const aclTensor *attentionOutOut,
    const aclTensor *softmaxLseOut, const aclTensor *dropoutMaskOutOptional, uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionV2(void *workspace, uint64_t workspaceSize,
                                                                          aclOpExecutor *executor,
                                                                          aclrtStream stream);

#ifdef __cplusplus
}
#endif
