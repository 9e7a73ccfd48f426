/*
 * cffi declarations of the ACL runtime functions, types and constants the acl-fa driver uses:
 * those of the simulator's copies of the real ACL 1.17 headers (torch-npu wheel,
 * torch_npu/include/acl/), the subset acl-fa uses, which tests/runtime/test_abi.py compiles the
 * simulator against the real headers with and compares constant by constant.
 */
#include "../../sim/include/acl/acl_base_rt.h"
#include "../../sim/include/acl/error_codes/rt_error_codes.h"
#include "../../sim/include/acl/acl_rt.h"
