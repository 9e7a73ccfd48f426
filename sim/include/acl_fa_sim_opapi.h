/*
 * acl_fa_sim_opapi.h -- extension of the simulator's libopapi.so (CANN's builtin op API library),
 * NOT part of CANN's ABI: the device-memory traffic of the builtin ops it ran, per device.
 */
#pragma once

#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* Totals since the library was loaded over the builtin-op tasks that ran on one device's streams
 * (a task that failed or was discarded is not counted). Bytes are GM bytes: each element of
 * selfRef read and written once, each element of other read once per element of the result. */
typedef struct aclfaSimBuiltinOpStats {
    uint64_t calls;
    uint64_t elements;      /* result elements */
    uint64_t gmReadBytes;
    uint64_t gmWriteBytes;
} aclfaSimBuiltinOpStats;

/* ACL_ERROR_INVALID_PARAM for a NULL stats or a device id outside [0, 64). */
aclError aclfaSimGetBuiltinOpStats(int32_t deviceId, aclfaSimBuiltinOpStats *stats);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
