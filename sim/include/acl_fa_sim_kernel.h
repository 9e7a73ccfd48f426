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
    uint64_t interBlockFlagCalls; /* IBSet and IBWait calls this core completed */
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

/* ---- Instruction trace and modeled NPU time (acl-fa's pipeline model, NOT a chip measurement) ----
 * With the trace on, every launch records per core the instructions its Ascend C calls would
 * issue (pipe, size, memory ranges, flags, queue hand-offs, Matmul requests) and replays them in
 * a discrete-event model of the AI Cores: each pipe issues in order, pipes run in parallel, an
 * instruction starts when the scalar unit has issued it, its pipe is free and its flags are set.
 * Costs come from the chip's aclfaSimPipeCosts (each field sourced or marked assumed, see
 * aclfaSimPipeCostField). The result is deterministic: it depends on the trace only, never on the
 * host threads. With ACLFA_SIM_TRACE_RACES the replay also applies the pipe-race rule: a read of a
 * UB/L1/GM range whose last writer ran on another pipe or core with no ordering edge between them
 * fails the launch (ACL_ERROR_RT_AICORE_EXCEPTION) naming both instructions. */
#define ACLFA_SIM_TRACE_OPS 1
#define ACLFA_SIM_TRACE_RACES 2
#define ACLFA_SIM_PIPES 7     /* S, V, M (cube), MTE1, MTE2, MTE3, FIX */

/* Cycle costs of one chip (all doubles; cycles at clockMHz). */
typedef struct aclfaSimPipeCosts {
    double clockMHz;
    double scalarIssueCycles;      /* scalar-unit cycles to issue one API instruction */
    double scalarAccessCycles;     /* one GetValue/SetValue */
    double vectorIssueCycles;      /* fixed cycles per vector instruction */
    double vectorRepeatCycles;     /* per 256-B repeat */
    double vectorExpRepeatCycles;  /* per repeat of Exp/Ln */
    double cubeFractalCycles;      /* per 16x16x(32 B) fractal MAC step */
    double gmBytesPerCycle;        /* GM (L2) bandwidth of the chip, shared by the active cores */
    double corePortBytesPerCycle;  /* upper limit of one core's GM reads (MTE2, Matmul operands) */
    double mte2LatencyCycles;      /* GM -> UB/L1 first-byte latency */
    double mte3LatencyCycles;      /* UB -> GM */
    double mte1BytesPerCycle;      /* L1 -> L0A/L0B */
    double fixpipeBytesPerCycle;   /* L0C -> GM/UB */
    double fixpipeLatencyCycles;
    double flagLatencyCycles;      /* SetFlag -> WaitFlag across pipes */
    double barrierCycles;          /* PipeBarrier */
    double matmulRequestCycles;    /* AIV -> AIC Matmul request until the cube starts it */
    double syncAllCycles;          /* SyncAll / cross-core flag */
    double hbmBytesPerCycle;       /* HBM bandwidth (for the HBM bound of the L2 replay) */
    double crossCoreFlagCycles;    /* CrossCoreSetFlag -> CrossCoreWaitFlag across cores */
    double corePortWriteBytesPerCycle; /* upper limit of one core's FixPipe writes to GM (L0C -> GM) */
    double mte3BytesPerCycle;      /* upper limit of one core's MTE3 writes (UB -> GM) */
} aclfaSimPipeCosts;

typedef struct aclfaSimModelStats {
    double cycles;                 /* modeled kernel time: the largest of pipelineCycles, l2BoundCycles
                                    * and hbmBoundCycles (no modeled time beats a memory bound) */
    double clockMHz;
    uint64_t ops;                  /* instructions replayed (cube job stages not counted) */
    uint32_t aicUsed, aivUsed;     /* rows of aicBusy / aivBusy filled */
    uint32_t activeCores;          /* cores with GM traffic (they share gmBytesPerCycle) */
    uint32_t racesChecked;         /* 1 when the race rule ran on this replay */
    double coreGmBytesPerCycle;    /* each active core's share */
    double busy[ACLFA_SIM_PIPES];  /* busy cycles per pipe summed over cores */
    double aicBusy[ACLFA_SIM_MAX_AIC][ACLFA_SIM_PIPES];
    double aivBusy[ACLFA_SIM_MAX_AIV][ACLFA_SIM_PIPES];
    double aicEnd[ACLFA_SIM_MAX_AIC];  /* cycle at which each core's last instruction ends */
    double aivEnd[ACLFA_SIM_MAX_AIV];
    double pipelineCycles;         /* the replay's time: launch to the last instruction's end */
    double l2BoundCycles;          /* gmBytes / gmBytesPerCycle: all GM traffic through the chip's L2 */
    double hbmBoundCycles;         /* compulsoryHbmBytes / hbmBytesPerCycle */
    double gmBytes;                /* GM bytes moved (MTE2, MTE3, Matmul operand loads and results) */
    double compulsoryHbmBytes;     /* bytes that must cross HBM (docs/timing_model.md "Memory bound"):
                                    * distinct GM bytes the launch reads and never writes (its input;
                                    * the L2 starts cold) + distinct bytes it writes beyond the L2's
                                    * capacity */
} aclfaSimModelStats;

/* One scheduled interval of the model, for timelines. */
typedef struct aclfaSimModeledOp {
    double start;                  /* cycles from the launch */
    double end;
    const char *api;               /* the Ascend C call (static string) */
    uint64_t units;                /* repeats, bytes, accesses; MACs for cube stages */
    uint16_t core;                 /* as aclfaSimGmAccess::core: AIV index, or 1000 + AIC index */
    uint8_t pipe;                  /* 0 S, 1 V, 2 M, 3 MTE1, 4 MTE2, 5 MTE3, 6 FIX */
    uint8_t kind;                  /* 0 instruction, 1 stall (waiting for a flag, Matmul or SyncAll), 2 cube job stage */
    uint32_t seq;                  /* index of the instruction on its issuing core */
} aclfaSimModeledOp;

/* mode: 0 off (default), ACLFA_SIM_TRACE_OPS, or with ACLFA_SIM_TRACE_RACES. */
aclError aclfaSimSetOpTrace(int mode);
/* The cost table of a catalogue chip (NULL: the current chip). */
aclError aclfaSimGetPipeCosts(const char *chipName, aclfaSimPipeCosts *costs);
/* Field i of aclfaSimPipeCosts: its name, and in *source where its value comes from
 * ("assumed" when from nowhere). NULL past the last field. */
const char *aclfaSimPipeCostField(uint32_t index, const char **source);
/* The model of the last traced launch (ACL_ERROR_FAILURE when none). */
aclError aclfaSimGetModelStats(aclfaSimModelStats *stats);
/* Its schedule, sorted by core then start; valid until the next traced launch. */
aclError aclfaSimGetModeledOps(const aclfaSimModeledOp **ops, uint64_t *count);
/* Its GM accesses in modeled start order (ties: core, program order): the L2 replay input. */
aclError aclfaSimGetModeledGmTrace(const aclfaSimGmAccess **records, uint64_t *count);
/* Replays the last traced launch with other costs (stats only; the schedule is unchanged). */
aclError aclfaSimRemodel(const aclfaSimPipeCosts *costs, aclfaSimModelStats *stats);

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

/* The communication context GetHcclContext<index>() returns (index 0 or 1) on every core of
 * the next LaunchKernel made on the calling thread (then reset to null): what CANN's op
 * runtime hands an MC2 kernel for its HCCL group. The simulated libhccl makes it
 * (aclfaSimHcclKernelContextCreate, acl_fa_sim_hccl_kernel.h). */
void SetLaunchHcclContext(uint32_t index, void *context);

} // namespace acl_fa_sim
#endif
