/*
 * aclnn/aclnn_base.h -- simulator copy of nnopbase's library init API (hicann/opbase
 * include/nnopbase/aclnn/aclnn_base.h); exported by libnnopbase.so.
 */
#pragma once

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize();

#ifdef __cplusplus
}
#endif
