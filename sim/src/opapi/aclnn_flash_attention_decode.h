/*
 * aclnn_flash_attention_decode.h -- the two-phase op API of the FlashAttentionDecode custom
 * operator, in the form msopgen generates from op/flash_attention_decode.json: inputs, then
 * attrs in declaration order (float -> double, int -> int64_t), then outputs (<name>Out),
 * workspace size and executor. Exported by libcust_opapi.so.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* query [B, Sq, N, D]; key, value [numBlocks, blockSize, Nkv, D] (a contiguous cache
 * [B, Smax, Nkv, D] is numBlocks = B, blockSize = Smax with blockTable[b] = {b}); float16 |
 * bfloat16. blockTable [B, maxBlocksPerSeq] int32: cache block of each blockSize keys of a
 * sequence. actualSeqLengthsKv [B] int32: keys per sequence (never read past).
 * scaleValue multiplies Q.K^T. blockSize: 0 or key's dim 1. preTokens / nextTokens: keys visible
 * before / after a row's bottom-right aligned diagonal (nextTokens 0 = causal; 2147483647 =
 * unlimited). numSplits: 0 = keys split over all cores, 1 = one core per (sequence, kv head).
 * attentionOutOut like query; softmaxLseOut float32 [B, N, Sq]. */
__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionDecodeGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *blockTable,
    const aclTensor *actualSeqLengthsKv, double scaleValue, int64_t blockSize, int64_t preTokens,
    int64_t nextTokens, int64_t numSplits, const aclTensor *attentionOutOut, const aclTensor *softmaxLseOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionDecode(void *workspace,
                                                                              uint64_t workspaceSize,
                                                                              aclOpExecutor *executor,
                                                                              aclrtStream stream);

#ifdef __cplusplus
}
#endif
