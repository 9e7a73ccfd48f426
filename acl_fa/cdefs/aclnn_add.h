/* Mirrors CANN's builtin op API header aclnnop/aclnn_add.h (ops-math math/add/op_api/aclnn_add.h;
 * exported by libopapi.so): the in-place add acl-fa uses. The simulator's copy is
 * sim/include/aclnnop/aclnn_add.h. */
aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha,
                                            uint64_t *workspaceSize, aclOpExecutor **executor);
aclnnStatus aclnnInplaceAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
