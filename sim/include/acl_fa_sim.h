/*
 * acl_fa_sim.h -- extension functions of the acl-fa CPU simulator.
 *
 * NOT part of CANN's ABI. These functions exist only in the simulator's libraries:
 *   - libascendcl.so : chip catalogue, live-object accounting, fault injection, the
 *                      plumbing the other simulator libraries use (error messages,
 *                      device-allocation look-up, host tasks on streams).
 *   - libascendc_sim.so : kernel-launch statistics (see acl_fa_sim_kernel.h).
 * The Python driver declares them by reading this header (acl_fa/cdefs/acl_fa_sim.h names it;
 * keep the C part plain C that cffi parses) and calls them only when the
 * backend is "sim"; code that must also run on a real Ascend never calls them.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every function below is exported by the simulator's libraries, which are otherwise built
 * with hidden visibility. */
#pragma GCC visibility push(default)

/* ---- chip catalogue -------------------------------------------------------------
 * One row per simulated SoC (docs/cann-facts.md#chips). The current chip is chosen
 * by the env var ACL_FA_SIM_SOC (default "Ascend910B2"), read at aclInit. */
typedef struct aclfaSimChip {
    char name[32];             /* as aclrtGetSocName() answers, e.g. "Ascend910B2" */
    char shortSoc[32];         /* op-def config name, e.g. "ascend910b", "ascend910_93", "ascend910", "ascend310p" */
    int32_t socVersion;        /* platform_ascendc::SocVersion value: ASCEND910 0, ASCEND910B 1, ASCEND310P 2 */
    int32_t npuArch;           /* 1001 (910A), 2002 (310P), 2201 (910B / 910_93) */
    uint32_t aicNum;           /* cube cores (AI Cores on coupled chips) */
    uint32_t aivNum;           /* vector cores (0 extra on coupled 910A) */
    uint32_t coupled;          /* 1 when cube and vector share one core (910A, 310P) */
    uint64_t ubBytes;          /* per core, as GetCoreMemSize(UB) answers (910B: 196352) */
    uint64_t l1Bytes;          /* per AIC, as GetCoreMemSize(L1) answers (910B: 524032) */
    uint64_t l0aBytes, l0bBytes, l0cBytes;
    uint64_t l2Bytes;          /* shared L2 cache */
    uint64_t hbmBytes;         /* device memory capacity (overridable with ACL_FA_SIM_HBM_BYTES) */
    double hbmBandwidthGBs;    /* GB/s (1e9 B/s) */
    double cubeFp16Tflops;     /* whole-chip fp16 cube peak, 1e12 FLOP/s */
    double clockMHz;
    uint32_t l2LineBytes;      /* L2 cache line, bytes (used by the traffic model) */
    uint32_t reserved;
    /* One AI Core's memory rates in bytes per cycle, the platform file's [AICoreMemoryRates]
     * (docs/chips.md): GetCoreMemBw answers l2Rate (L2) and ddrRate (HBM). */
    uint32_t ddrRate, l2Rate, l2ReadRate, l2WriteRate;
    uint32_t l1ToL0aRate, l1ToL0bRate, l0cToUbRate, ubToL2Rate;
} aclfaSimChip;

/* Current chip (never NULL once the library is loaded). */
const aclfaSimChip *aclfaSimGetChip(void);
/* Catalogue access, for `acl-fa plan --soc all`. */
uint32_t aclfaSimGetChipCount(void);
const aclfaSimChip *aclfaSimGetChipAt(uint32_t index);
const aclfaSimChip *aclfaSimFindChip(const char *name); /* case-insensitive; NULL when unknown */

/* ---- live-object accounting ------------------------------------------------------ */
typedef struct aclfaSimLiveCounts {
    int64_t deviceAllocations;   /* aclrtMalloc blocks not yet freed */
    int64_t deviceBytes;         /* their requested sizes, summed */
    int64_t hostAllocations;     /* aclrtMallocHost blocks not yet freed */
    int64_t streams;             /* explicit streams (the default stream is not counted) */
    int64_t events;
    int64_t contexts;            /* explicit contexts (default contexts are not counted) */
    int64_t tensors;             /* aclTensor */
    int64_t intArrays;           /* aclIntArray, aclFloatArray and aclBoolArray */
    int64_t scalars;             /* aclScalar */
    int64_t executors;           /* aclOpExecutor not yet consumed or destroyed */
    int64_t initCount;           /* aclInit reference count (0 = not initialized) */
    int64_t devicesSet;          /* aclrtSetDevice references not yet reset, summed over devices */
} aclfaSimLiveCounts;

aclError aclfaSimGetLiveCounts(aclfaSimLiveCounts *counts);

/* Accounting hook for the simulator's other libraries (libnnopbase.so): adds `delta` to the
 * live count of one kind of nnopbase object. Not meant for applications. */
typedef enum aclfaSimLiveKind {
    ACLFA_SIM_LIVE_TENSOR = 0,   /* -> aclfaSimLiveCounts.tensors */
    ACLFA_SIM_LIVE_ARRAY = 1,    /* -> intArrays (int, float and bool arrays) */
    ACLFA_SIM_LIVE_SCALAR = 2,   /* -> scalars */
    ACLFA_SIM_LIVE_EXECUTOR = 3  /* -> executors */
} aclfaSimLiveKind;
void aclfaSimCountLive(aclfaSimLiveKind kind, int64_t delta);

/* ---- fault injection --------------------------------------------------------------
 * Spec syntax "api:N[,api:N...]": the Nth call (1-based, counted from when the spec
 * was set) of `api` fails with that API's real error code and a message saying it was
 * injected. Read from ACL_FA_SIM_FAIL at load; replaced by this call; NULL or "" clears.
 * Any exported API name of the simulator's libraries may be named, aclnn entries too. */
aclError aclfaSimSetFaults(const char *spec);

/* Called at the top of every faultable API of the simulator's libraries. Returns 1
 * when this call must fail (and records the injected-fault message), else 0. */
int aclfaSimShouldFail(const char *api);

/* ---- plumbing shared by the simulator's libraries ------------------------------- */

/* Device count used when ACL_FA_SIM_DEVICE_COUNT is unset (8 unless raised; the simulated
 * libhccl.so asks for 8 when loaded). Takes effect at once when the variable is unset (never
 * lowers the count). */
void aclfaSimSetDefaultDeviceCount(uint32_t count);

/* Sets the calling thread's message returned by aclGetRecentErrMsg(). printf-style. */
void aclfaSimSetErrMsg(const char *fmt, ...);

/* When ptr lies inside a live aclrtMalloc block, stores that block's start and its
 * usable size (the requested size, not the padding or guards) and returns 1; else 0. */
int aclfaSimFindDeviceAllocation(const void *ptr, void **base, size_t *size);

/* A unit of work run in order on a stream's worker thread (kernels, host tasks).
 * Returns ACL_SUCCESS, or an error code with a message written into errBuf; the
 * error is then reported by the next aclrtSynchronizeStream/Device on that stream
 * (as an AI Core exception is on hardware), with the message in aclGetRecentErrMsg. */
typedef aclError (*aclfaSimTaskFn)(void *userData, char *errBuf, size_t errBufLen);

/* Enqueues fn on the stream (NULL = default stream of the current context). `release`
 * (may be NULL) is called with userData after the task ran or was discarded; when the
 * enqueue itself fails (bad stream, no current context) the caller keeps userData. */
aclError aclfaSimStreamEnqueue(aclrtStream stream, const char *taskName, aclfaSimTaskFn fn,
                               void *userData, void (*release)(void *userData));


/* ---- nnopbase plumbing (exported by libnnopbase.so) ----------------------------- */
#define ACLFA_SIM_MAX_DIMS 8

/* What an aclTensor holds, for the simulator's op-API layer (real nnopbase keeps this
 * behind opaque C++ classes). Strides and offset in elements. */
typedef struct aclfaSimTensorView {
    uint64_t dimNum;
    int64_t dims[ACLFA_SIM_MAX_DIMS];
    int64_t strides[ACLFA_SIM_MAX_DIMS];
    int64_t offset;
    int32_t dataType;       /* aclDataType */
    int32_t format;         /* aclFormat */
    uint64_t storageDimNum;
    int64_t storageDims[ACLFA_SIM_MAX_DIMS];
    void *data;             /* tensorData as given to aclCreateTensor */
} aclfaSimTensorView;

struct aclTensor;
struct aclOpExecutor;

/* ACLNN_ERR_PARAM_NULLPTR for NULL arguments, else ACLNN_SUCCESS. */
int32_t aclfaSimGetTensorView(const struct aclTensor *tensor, aclfaSimTensorView *view);

struct aclScalar;

/* What an aclScalar holds: its aclDataType and the value's aclDataTypeSize bytes (zero-padded
 * to 16). ACLNN_ERR_PARAM_NULLPTR for NULL arguments, ACLNN_ERR_PARAM_INVALID for a scalar that
 * is not live, else ACLNN_SUCCESS. */
int32_t aclfaSimGetScalarValue(const struct aclScalar *scalar, int32_t *dataType, unsigned char bytes[16]);

/* Phase two of an op: run what phase one prepared. */
typedef int32_t (*aclfaSimExecutorRunFn)(void *payload, void *workspace, uint64_t workspaceSize,
                                         aclrtStream stream);

/* Creates an executor owning `payload` (destroyed with `destroyPayload`). Counted in
 * aclfaSimLiveCounts.executors until consumed (single use) or, when made repeatable
 * with aclSetAclOpExecutorRepeatable, until aclDestroyAclOpExecutor. */
struct aclOpExecutor *aclfaSimCreateExecutor(const char *opType, void *payload,
                                             aclfaSimExecutorRunFn run,
                                             void (*destroyPayload)(void *payload));

/* Runs the executor's phase two; a non-repeatable executor is destroyed afterwards
 * whatever the outcome (as CANN does). ACLNN_ERR_PARAM_NULLPTR for NULL. */
int32_t aclfaSimRunExecutor(struct aclOpExecutor *executor, void *workspace, uint64_t workspaceSize,
                            aclrtStream stream);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
