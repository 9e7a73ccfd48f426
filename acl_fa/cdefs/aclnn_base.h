/*
 * cffi declarations of the nnopbase (libnnopbase.so) functions, types and status codes the
 * acl-fa driver uses: those of the simulator's mirror of hicann/opbase include/nnopbase/aclnn/
 * (sim/include/aclnn), which tests/runtime/test_abi.py compiles over the real ACL headers.
 * Parsed after acl_rt.h (aclDataType, aclFormat, aclrtStream come from there).
 */
#include "../../sim/include/aclnn/acl_meta.h"
#include "../../sim/include/aclnn/opdev/op_errno.h"
#include "../../sim/include/aclnn/aclnn_base.h"
