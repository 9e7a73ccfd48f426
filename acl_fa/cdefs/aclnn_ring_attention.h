/* Mirrors aclnn_ring_attention.h of the custom op package (RingAttention, one ring step with the
 * K/V exchange in its kernel; an MC2 op whose `group` is HcclGetCommName of the comm), generated
 * by msopgen from op_host/ring_attention/ring_attention.json; the simulator's entries are
 * generated from that JSON (sim/src/opapi/gen_aclnn.py) and tests/ops/test_op_interfaces.py
 * holds this file to it. */
aclnnStatus aclnnRingAttentionGetWorkspaceSize(const aclTensor *query, const aclTensor *key, const aclTensor *value,
                                               char *group, double scaleValue, bool causal, char *inputLayoutOptional,
                                               int64_t numHeads, int64_t numKvHeads, int64_t blockM, int64_t blockN,
                                               bool compute, bool exchange, const aclTensor *attentionOutOut,
                                               const aclTensor *softmaxLseOut, const aclTensor *keyNextOut,
                                               const aclTensor *valueNextOut, uint64_t *workspaceSize,
                                               aclOpExecutor **executor);
aclnnStatus aclnnRingAttention(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
