/*
 * aclnn_attention_lse_merge.h -- the two-phase op API of the AttentionLseMerge custom operator,
 * in the form msopgen generates from op/attention_lse_merge.json: inputs, then outputs
 * (<name>Out), workspace size and executor (the op has no attrs). Exported by libcust_opapi.so.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Merges two partial attention results of the same query rows over disjoint key sets by their
 * LSE. outA, outB [..., D] (D a multiple of 16) with lseA, lseB float32 [...] (outA's leading
 * dims). outB float16 | bfloat16 | float32 (T); outA and attentionOutOut each float32 or T
 * (bfloat16 on Atlas A2/A3 only). attentionOutOut [..., D], softmaxLseOut float32 [...]:
 *   m = max(lseA, lseB); w_x = exp(lse_x - m)
 *   attentionOut = (w_a outA + w_b outB) / (w_a + w_b), softmaxLse = m + ln(w_a + w_b)
 * and 0 / -inf for a row whose two LSEs are -inf. attentionOutOut and softmaxLseOut may be the
 * memory of outA and lseA (an in-place running merge); any other overlap with an input is refused. */
__attribute__((visibility("default"))) aclnnStatus aclnnAttentionLseMergeGetWorkspaceSize(
    const aclTensor *outA, const aclTensor *lseA, const aclTensor *outB, const aclTensor *lseB,
    const aclTensor *attentionOutOut, const aclTensor *softmaxLseOut, uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnAttentionLseMerge(void *workspace, uint64_t workspaceSize,
                                                                           aclOpExecutor *executor,
                                                                           aclrtStream stream);

#ifdef __cplusplus
}
#endif
