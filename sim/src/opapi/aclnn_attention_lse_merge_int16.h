/*
 * aclnn_attention_lse_merge_int16.h -- the two-phase op API of the AttentionLseMergeInt16 custom
 * operator, in the form msopgen generates from op/attention_lse_merge_int16.json: inputs, then
 * outputs (<name>Out), workspace size and executor (the op has no attrs). Exported by
 * libcust_opapi.so. Atlas A2/A3 only.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* AttentionLseMerge with the running result in int16 fixed point (docs/lse_merge.md). outA int16
 * [..., D] in units of boundA / 32767 per row (boundA float32 [...], >= max |outA| of the row),
 * lseA float32 [...]; outB [..., D] float16 | bfloat16 | float32 (T) with lseB. Per row:
 *   B' = max(boundA, max |outB|), merged = the LSE merge of outA * boundA / 32767 and outB,
 *   attentionOutOut = round(merged * 32767 / B') in int16, or merged in T (the final conversion),
 *   boundOutOut = B', softmaxLseOut = the merged LSE.
 * A row with boundA 0 and lseA -inf is empty: the first merge takes outB whatever outA holds.
 * attentionOutOut, boundOutOut, softmaxLseOut may be the memory of outA, boundA, lseA (in place;
 * a T attentionOut over the int16 outA too: both 2 bytes); any other overlap is refused. */
__attribute__((visibility("default"))) aclnnStatus aclnnAttentionLseMergeInt16GetWorkspaceSize(
    const aclTensor *outA, const aclTensor *boundA, const aclTensor *lseA, const aclTensor *outB, const aclTensor *lseB,
    const aclTensor *attentionOutOut, const aclTensor *boundOutOut, const aclTensor *softmaxLseOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnAttentionLseMergeInt16(void *workspace, uint64_t workspaceSize,
                                                                                aclOpExecutor *executor,
                                                                                aclrtStream stream);

#ifdef __cplusplus
}
#endif
