/*
 * cffi declarations of the HCCL subset acl_fa.parallel uses (libhccl.so): those of the
 * simulator's copies of the real headers (torch-npu wheel, third_party/hccl/inc/hccl/), which
 * tests/runtime/test_abi.py checks against them as C++ (their HCCL_ROOT_INFO_BYTES is a const
 * array bound): prototypes, constants and the layouts of the structs that cross the ABI.
 * Parsed after acl_rt.h (aclrtStream).
 */
#include "../../sim/include/hccl/hccl_types.h"
#include "../../sim/include/hccl/hccl.h"
