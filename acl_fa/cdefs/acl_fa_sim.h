/*
 * cffi declarations of the acl-fa simulator's extension functions (NOT part of CANN's ABI):
 * the C parts of sim/include/acl_fa_sim.h (libascendcl.so, libnnopbase.so) and of
 * sim/include/acl_fa_sim_kernel.h (libascendc_sim.so). Parsed after acl_rt.h and aclnn_base.h;
 * only called when the backend is "sim". tests/runtime/test_abi.py compiles these declarations against
 * those headers and compares the constants.
 */

/* ---- acl_fa_sim.h : chip catalogue (libascendcl.so) ------------------------------------ */
typedef struct aclfaSimChip {
    char name[32];
    char shortSoc[32];
    int32_t socVersion;
    int32_t npuArch;
    uint32_t aicNum;
    uint32_t aivNum;
    uint32_t coupled;
    uint64_t ubBytes;
    uint64_t l1Bytes;
    uint64_t l0aBytes, l0bBytes, l0cBytes;
    uint64_t l2Bytes;
    uint64_t hbmBytes;
    double hbmBandwidthGBs;
    double cubeFp16Tflops;
    double clockMHz;
    uint32_t l2LineBytes;
    uint32_t reserved;
    uint32_t ddrRate, l2Rate, l2ReadRate, l2WriteRate;
    uint32_t l1ToL0aRate, l1ToL0bRate, l0cToUbRate, ubToL2Rate;
} aclfaSimChip;

const aclfaSimChip *aclfaSimGetChip(void);
uint32_t aclfaSimGetChipCount(void);
const aclfaSimChip *aclfaSimGetChipAt(uint32_t index);
const aclfaSimChip *aclfaSimFindChip(const char *name);

/* ---- acl_fa_sim.h : live-object accounting and fault injection (libascendcl.so) -------- */
typedef struct aclfaSimLiveCounts {
    int64_t deviceAllocations;
    int64_t deviceBytes;
    int64_t hostAllocations;
    int64_t streams;
    int64_t events;
    int64_t contexts;
    int64_t tensors;
    int64_t intArrays;
    int64_t scalars;
    int64_t executors;
    int64_t initCount;
    int64_t devicesSet;
} aclfaSimLiveCounts;

aclError aclfaSimGetLiveCounts(aclfaSimLiveCounts *counts);
aclError aclfaSimSetFaults(const char *spec);

/* A host function run in order on a stream's worker thread; an error code (with errBuf) fails the stream. */
typedef aclError (*aclfaSimTaskFn)(void *userData, char *errBuf, size_t errBufLen);
aclError aclfaSimStreamEnqueue(aclrtStream stream, const char *taskName, aclfaSimTaskFn fn, void *userData,
                               void (*release)(void *userData));

/* ---- acl_fa_sim_kernel.h : launch statistics (libascendc_sim.so) ----------------------- */
#define ACLFA_SIM_MAX_AIC 64
#define ACLFA_SIM_MAX_AIV 128

typedef struct aclfaSimCoreStats {
    uint64_t gmReadBytes;
    uint64_t gmWriteBytes;
    uint64_t cubeMacs;
    uint64_t vectorElems;
    uint64_t scalarAccesses;
    uint64_t ubHighWater;
    uint64_t l1HighWater;
    uint64_t workItems;       /* AIC: items its tiling gave it; AIV: 0 */
    uint64_t atomicAddBytes;
    uint64_t syncAllCalls;
    uint64_t interBlockFlagCalls;
} aclfaSimCoreStats;

typedef struct aclfaSimLaunchStats {
    char kernelName[64];
    uint32_t blockDim;
    uint32_t kernelType;
    uint32_t aicUsed;
    uint32_t aivUsed;
    double wallSeconds;
    aclfaSimCoreStats total;
    aclfaSimCoreStats aic[64];
    aclfaSimCoreStats aiv[128];
} aclfaSimLaunchStats;

aclError aclfaSimGetLastLaunchStats(aclfaSimLaunchStats *stats);

typedef struct aclfaSimGmAccess {
    uint64_t addr;
    uint32_t bytes;
    uint16_t core;
    uint16_t isWrite;
} aclfaSimGmAccess;

aclError aclfaSimSetGmTrace(int enable);
aclError aclfaSimGetGmTrace(const aclfaSimGmAccess **records, uint64_t *count);

typedef struct aclfaSimL2Stats {
    uint64_t accessBytes;
    uint64_t lineAccesses;
    uint64_t lineHits;
    uint64_t lineMisses;
    uint64_t distinctLines;
    uint64_t hbmReadBytes;
    uint64_t hbmWriteBytes;
    uint64_t hbmFlushBytes;
} aclfaSimL2Stats;

aclError aclfaSimModelL2(uint64_t l2Bytes, uint32_t lineBytes, const aclfaSimGmAccess *records, uint64_t count,
                         aclfaSimL2Stats *stats);

/* ---- acl_fa_sim_kernel.h : instruction trace and modeled time (libascendc_sim.so) ------- */
#define ACLFA_SIM_TRACE_OPS 1
#define ACLFA_SIM_TRACE_RACES 2
#define ACLFA_SIM_PIPES 7

typedef struct aclfaSimPipeCosts {
    double clockMHz;
    double scalarIssueCycles;
    double scalarAccessCycles;
    double vectorIssueCycles;
    double vectorRepeatCycles;
    double vectorExpRepeatCycles;
    double cubeFractalCycles;
    double gmBytesPerCycle;
    double corePortBytesPerCycle;
    double mte2LatencyCycles;
    double mte3LatencyCycles;
    double mte1BytesPerCycle;
    double fixpipeBytesPerCycle;
    double fixpipeLatencyCycles;
    double flagLatencyCycles;
    double barrierCycles;
    double matmulRequestCycles;
    double syncAllCycles;
    double hbmBytesPerCycle;
    double crossCoreFlagCycles;
    double corePortWriteBytesPerCycle;
    double mte3BytesPerCycle;
} aclfaSimPipeCosts;

typedef struct aclfaSimModelStats {
    double cycles;
    double clockMHz;
    uint64_t ops;
    uint32_t aicUsed, aivUsed;
    uint32_t activeCores;
    uint32_t racesChecked;
    double coreGmBytesPerCycle;
    double busy[7];
    double aicBusy[64][7];
    double aivBusy[128][7];
    double aicEnd[64];
    double aivEnd[128];
} aclfaSimModelStats;

typedef struct aclfaSimModeledOp {
    double start;
    double end;
    const char *api;
    uint64_t units;
    uint16_t core;
    uint8_t pipe;
    uint8_t kind;
    uint32_t seq;
} aclfaSimModeledOp;

aclError aclfaSimSetOpTrace(int mode);
aclError aclfaSimGetPipeCosts(const char *chipName, aclfaSimPipeCosts *costs);
const char *aclfaSimPipeCostField(uint32_t index, const char **source);
aclError aclfaSimGetModelStats(aclfaSimModelStats *stats);
aclError aclfaSimGetModeledOps(const aclfaSimModeledOp **ops, uint64_t *count);
aclError aclfaSimGetModeledGmTrace(const aclfaSimGmAccess **records, uint64_t *count);
aclError aclfaSimRemodel(const aclfaSimPipeCosts *costs, aclfaSimModelStats *stats);
