/*
 * acl_fa_sim_kernel.h -- kernel-engine extension of the acl-fa CPU simulator
 * (libascendc_sim.so). NOT part of CANN's ABI.
 *
 * C part: launch statistics (the counters of docs/simulator.md#counters), readable from Python.
 * C++ part: the launcher used by the simulator's op-API layer and by test kernels.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACLFA_SIM_MAX_AIC 64
#define ACLFA_SIM_MAX_AIV 128

/* Counters of one simulated core over one launch. */
typedef struct aclfaSimCoreStats {
    uint64_t gmReadBytes;     /* bytes read from GM (DataCopy/DataCopyPad GM->local, Matmul operand loads, GlobalTensor::GetValue) */
    uint64_t gmWriteBytes;    /* bytes written to GM (local->GM copies, Matmul results to GM, GlobalTensor::SetValue) */
    uint64_t cubeMacs;        /* multiply-accumulates executed on the cube (AIC), padded tile sizes included */
    uint64_t vectorElems;     /* elements processed by vector instructions (AIV), per instruction */
    uint64_t scalarAccesses;  /* GetValue/SetValue calls on Local/GlobalTensor */
    uint64_t ubHighWater;     /* bytes of UB allocated at the peak (TPipe InitBuffer) */
    uint64_t l1HighWater;     /* bytes of L1 needed at the peak (Matmul tiles) */
    uint64_t workItems;       /* work items the launch's tiling gave this AIC core (SetLaunchWorkItems); 0 on AIVs */
    uint64_t atomicAddBytes;  /* of gmWriteBytes: bytes added to GM under SetAtomicAdd (UB->GM copies) or Matmul enAtomic */
    uint64_t syncAllCalls;    /* SyncAll barriers this core passed */
} aclfaSimCoreStats;

typedef struct aclfaSimLaunchStats {
    char kernelName[64];
    uint32_t blockDim;        /* as launched */
    uint32_t kernelType;      /* KernelType value of the launch (KERNEL_TYPE_MIX_AIC_1_2 ...) */
    uint32_t aicUsed;         /* entries of aic[] filled */
    uint32_t aivUsed;         /* entries of aiv[] filled */
    double wallSeconds;       /* host wall time of the whole launch (simulator time, NOT NPU time) */
    aclfaSimCoreStats total;  /* sums (high-water fields: maxima) */
    aclfaSimCoreStats aic[ACLFA_SIM_MAX_AIC];
    aclfaSimCoreStats aiv[ACLFA_SIM_MAX_AIV];
} aclfaSimLaunchStats;

/* Statistics of the most recently completed launch in this process. Returns
 * ACL_ERROR_INVALID_PARAM for NULL, ACL_ERROR_FAILURE when nothing was launched yet. */
aclError aclfaSimGetLastLaunchStats(aclfaSimLaunchStats *stats);

/* Optional GM access trace (for the L2 traffic model): when enabled, every GM range
 * read or written by a launch is appended in launch order. */
typedef struct aclfaSimGmAccess {
    uint64_t addr;            /* host address of the first byte */
    uint32_t bytes;
    uint16_t core;            /* AIV index, or 1000 + AIC index */
    uint16_t isWrite;
} aclfaSimGmAccess;
aclError aclfaSimSetGmTrace(int enable);                                  /* clears the trace */
aclError aclfaSimGetGmTrace(const aclfaSimGmAccess **records, uint64_t *count);

/* L2 traffic model (acl-fa's model, not a chip measurement): a fully associative LRU cache
 * of l2Bytes in lines of lineBytes, write-back, write-allocate, replayed over `records` in
 * their order. A record touches every line it overlaps. A read miss fills the line from
 * HBM; a write miss fills it too unless the record covers the whole line. Dirty lines are
 * written to HBM when evicted, and those still dirty after the last record are written
 * back at the end (flush). */
typedef struct aclfaSimL2Stats {
    uint64_t accessBytes;     /* sum of the records' bytes: raw GM access bytes */
    uint64_t lineAccesses;    /* line touches */
    uint64_t lineHits;
    uint64_t lineMisses;
    uint64_t distinctLines;   /* lines touched at least once (the compulsory misses) */
    uint64_t hbmReadBytes;    /* line fills */
    uint64_t hbmWriteBytes;   /* dirty lines written back, flush included */
    uint64_t hbmFlushBytes;   /* of hbmWriteBytes: written back after the last record */
} aclfaSimL2Stats;
/* ACL_ERROR_INVALID_PARAM for a NULL stats or records (count > 0), lineBytes 0, or
 * l2Bytes < lineBytes. Needs memory for l2Bytes / lineBytes lines (about 40 B each). */
aclError aclfaSimModelL2(uint64_t l2Bytes, uint32_t lineBytes, const aclfaSimGmAccess *records, uint64_t count,
                         aclfaSimL2Stats *stats);

#ifdef __cplusplus
}

#include <functional>
#include <string>
#include <vector>

namespace acl_fa_sim {

/* Runs one kernel launch synchronously on the calling thread's pool of host workers:
 * `body` is invoked once per simulated core (for KERNEL_TYPE_MIX_AIC_1_2: blockDim AIC
 * invocations and 2*blockDim AIV invocations) with that core's identity installed, so
 * GetBlockIdx/GetBlockNum/GetSubBlockIdx/ASCEND_IS_AIC/ASCEND_IS_AIV answer as on the
 * chip, and with fresh UB/L1 arenas of the current chip's sizes. `kernelType` is the
 * value the kernel declares with KERNEL_TASK_TYPE_DEFAULT (checked when it runs).
 * Returns ACL_SUCCESS, or ACL_ERROR_RT_AICORE_EXCEPTION (507015) with a message naming
 * the violated rule, the core and the API call written to *error. Statistics of the
 * launch become those of aclfaSimGetLastLaunchStats. */
aclError LaunchKernel(const char *kernelName, uint32_t blockDim, uint32_t kernelType,
                      const std::function<void()> &body, std::string *error);

/* The tiling key TILING_KEY_IS compares against in the next LaunchKernel made on the
 * calling thread (then reset to 0). */
void SetLaunchTilingKey(uint64_t key);

/* The work items each AIC core of the next LaunchKernel made on the calling thread is given,
 * perAic[i] for AIC i, recorded in that launch's statistics (then reset). The op's launch
 * path reads them from its tiling data: the engine cannot see the kernel's loops. */
void SetLaunchWorkItems(std::vector<uint64_t> perAic);

} // namespace acl_fa_sim
#endif
