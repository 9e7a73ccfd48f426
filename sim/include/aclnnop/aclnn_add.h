/*
 * aclnnop/aclnn_add.h -- the simulator's mirror of CANN's builtin op API header for Add (ops-math
 * math/add/op_api/aclnn_add.h, installed as include/aclnnop/aclnn_add.h; exported by libopapi.so).
 * Only the in-place form acl-fa uses is simulated (sim/src/opapi_builtin/aclnn_add.cpp).
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* selfRef = selfRef + alpha * other. other broadcasts to selfRef's shape; the dtypes promote (float16
 * with bfloat16 or float32 gives float32) and the result is cast to selfRef's dtype. alpha is a host
 * scalar. Phase one: checks, returns the executor; phase two enqueues the add on the stream. */
__attribute__((visibility("default"))) aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef,
                                                                                   const aclTensor *other,
                                                                                   const aclScalar *alpha,
                                                                                   uint64_t *workspaceSize,
                                                                                   aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus aclnnInplaceAdd(void *workspace, uint64_t workspaceSize,
                                                                   aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif
