/*
 * acl_fa_sim_cust_opapi.h -- extension of the simulator's libcust_opapi.so, NOT part of CANN's
 * ABI: the OpDefs its op_host code registered, for the tests that compare them with the op JSON.
 */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The OpDef registered as `opType`, in msopgen's op JSON form ({"op", "input_desc",
 * "output_desc", "attr"}, with "value_depend" on value-depend inputs and the AICore configs as
 * "aicore_config"), written into buf (NUL-terminated, cut at capacity). Returns the length of
 * the whole text; 0 when no op of that type is registered. */
__attribute__((visibility("default"))) size_t aclfaSimOpDefJson(const char *opType, char *buf, size_t capacity);

#ifdef __cplusplus
}
#endif
