/*
 * aclnn_flash_attention_grad.h -- the two-phase op API of the FlashAttentionGrad custom
 * operator, in the form msopgen generates from op/flash_attention_grad.json (inputs, attrs in
 * declaration order with the optional string attr as char *...Optional, outputs as <name>Out,
 * workspace size, executor). Exported by libcust_opapi.so next to aclnnFlashAttention.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* query, key, value, attentionOut, dout: float16 | bfloat16, ND, in inputLayoutOptional
 * ("BNSD" when NULL, "BSND", "BSH"); attentionOut and dout shaped like query.
 * softmaxLse: float32 [B, N, Sq], the forward's LSE (-inf on rows that see no key).
 * scaleValue, causal, numHeads, numKvHeads, blockM, blockN: as aclnnFlashAttention.
 * deterministic: true = dQ summed in a fixed order (bit-identical runs); false = fp32 atomic adds.
 * dqOut like query, dkOut and dvOut like key. */
__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attentionOut,
    const aclTensor *dout, const aclTensor *softmaxLse, double scaleValue, bool causal, char *inputLayoutOptional,
    int64_t numHeads, int64_t numKvHeads, bool deterministic, int64_t blockM, int64_t blockN, const aclTensor *dqOut,
    const aclTensor *dkOut, const aclTensor *dvOut, uint64_t *workspaceSize, aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnFlashAttentionGrad(void *workspace, uint64_t workspaceSize,
                                                                            aclOpExecutor *executor,
                                                                            aclrtStream stream);

#ifdef __cplusplus
}
#endif
