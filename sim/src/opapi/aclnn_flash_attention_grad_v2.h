/*
 * aclnn_flash_attention_grad_v2.h -- the two-phase op API of the FlashAttentionGradV2 custom
 * operator, in the form msopgen generates from op/flash_attention_grad_v2.json (inputs in
 * declaration order, optional tensors as <name>Optional and may be NULL, attrs in declaration
 * order with the optional string attr as char *...Optional, outputs as <name>Out, workspace
 * size, executor). Exported by libcust_opapi.so next to aclnnFlashAttentionGrad.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* query, key, value, attentionOut, dout, softmaxLse, scaleValue, numHeads, numKvHeads,
 * deterministic, blockM, blockN: as aclnnFlashAttentionGrad, with inputLayoutOptional one of
 * "BNSD" (NULL), "BSND", "BSH" or "TND" (q [Tq, N, D], k/v [Tkv, Nkv, D], softmaxLse [N, Tq]).
 * preTokens, nextTokens: key j is visible to query i of a sequence iff
 *   i + (Skv - Sq) - preTokens <= j <= i + (Skv - Sq) + nextTokens; 2147483647 = unbounded;
 *   causal = (2147483647, 0); preTokens + nextTokens >= 0.
 * attenMaskOptional: must be NULL (masks are not supported yet).
 * actualSeqQlenOptional, actualSeqKvlenOptional: int64 [num_seqs], cumulative end offsets without
 *   the leading 0 (TND only, then both required).
 * keepProb: must be 1; seed, offset: dropout's Philox key (unused while keepProb is 1).
 * dqOut like query, dkOut and dvOut like key. */
__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionGradV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attentionOut,
    const aclTensor *dout, const aclTensor *softmaxLse, const aclTensor *attenMaskOptional,
    const aclTensor *actualSeqQlenOptional, const aclTensor *actualSeqKvlenOptional, double scaleValue,
    int64_t preTokens, int64_t nextTokens, char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads,
    double keepProb, int64_t seed, int64_t offset, bool deterministic, int64_t blockM, int64_t blockN,
    const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dvOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionGradV2(void *workspace, uint64_t workspaceSize,
                                                                              aclOpExecutor *executor,
                                                                              aclrtStream stream);

#ifdef __cplusplus
}
#endif
