// test_kernels.h -- tiling structs of the simulator's test kernels and the C entry points
// of libaclfa_sim_testkernels.so (called from tests/sim/test_sim_kernels.py through cffi).
// Every entry launches one kernel synchronously and returns the aclError of the launch,
// with the violation message (if any) in err. Buffers are device allocations (aclrtMalloc).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include "kernel_tiling/kernel_tiling.h"

struct VecScaleAddTiling {
    uint32_t tile;          // elements per tile (multiple of 8: whole 32-byte blocks)
    uint32_t tilesPerCore;
    float scale;
};

struct MmSoftmaxTiling {
    uint32_t m, n, k;       // out[m, n] = softmax_rows(A[m, k] . B[n, k]^T), A/B fp16, out fp32
    uint32_t rowsPerAiv;    // rows per vector core; AIV i takes rows [i * rowsPerAiv, ...)
    TCubeTiling cube;       // for one AIV's rows: M = rowsPerAiv, N = n, K = k
};

struct MmDequantTiling {
    MmSoftmaxTiling mm;     // A, B int8; C half; rowsPerAiv = m (one AIV)
    uint64_t quantScalar;   // Matmul::SetQuantScalar's argument; 0: not called
};

struct GemmTiling {
    uint32_t m, n, k;       // C[m, n] fp16 = A[m, k] . B[n, k]^T, all fp16
    uint32_t gridN;         // AIC b takes block (b / gridN, b % gridN) of C
    uint32_t tileM, tileN;  // block size (the last row / column of blocks may be smaller)
    TCubeTiling cube;       // M = tileM, N = tileN, K = k
};

struct FifoAttentionTiling {
    uint32_t sq, skv, headDim;  // q [sq, headDim], k/v [skv, headDim] fp16; sq a multiple of 128, headDim 128
    uint32_t tileN;             // keys per S tile; skv a multiple of tileN * kvSplit
    uint32_t preload;           // QK tiles requested ahead (1..3)
    uint32_t kvSplit;           // key chunks per query block (work items = sq / 128 * kvSplit)
    uint32_t chunkRows;         // rows per UB pass (a multiple of 8 dividing 64)
    float scale;
    TCubeTiling qkCube;         // M = 128, N = tileN, K = headDim
    TCubeTiling pvCube;         // M = 128, N = headDim, K = tileN
};

struct ProbeTiling {
    int32_t op;             // PROBE_* scenario
    uint32_t n;             // elements
    float param;            // scalar operand
};
// cross_core scenarios
enum CrossCoreOp : int32_t {
    CROSS_ATOMIC_SUM = 0,         // every AIV atomically adds its tile into out; AIV 0 copies the sum after SyncAll
    CROSS_ATOMIC_WRONG_TYPE = 1,  // SetAtomicAdd<int32_t> then a float copy
    CROSS_SKIP_BARRIER = 2,       // the last AIV never calls SyncAll
    CROSS_LATE_BARRIER = 3,       // the last AIV arrives after `spin` calls
    CROSS_MATMUL_AT_B = 4,        // C += A^T . B from every AIV (Matmul, A transposed, enAtomic)
    CROSS_AIC_SYNC_AIV_ONLY = 5,  // SyncAll<false> in a MIX kernel whose AICs serve Matmul
    CROSS_IB_CHAIN = 6,           // out += x[aiv] by read-add-write, AIV last .. 0 in turn (IBWait / IBSet)
    CROSS_IB_MISSING_SET = 7,     // AIV 1 waits for a flag nobody sets
    CROSS_IB_LATE_SET = 8,        // AIV 0 waits for the last AIV, which sets after `spin` calls
    CROSS_IB_SET_TWICE = 9,       // AIV 0 sets one flag twice; nobody waits
    CROSS_IB_BAD_BLOCK_IDX = 10,  // blockIdx == the core count
};

struct CrossCoreTiling {
    int32_t op;             // CrossCoreOp
    uint32_t n;             // floats per AIV tile (multiple of 8)
    uint64_t spin;          // CROSS_LATE_BARRIER, CROSS_IB_LATE_SET
    uint32_t m, mmN, k;     // CROSS_MATMUL_AT_B: C [m, mmN] fp32, A^T stored [k, m] half, B [k, mmN] half per AIV
    TCubeTiling cube;       // M = m, N = mmN, K = k
};

// core_flags scenarios (CrossCoreSetFlag / CrossCoreWaitFlag)
enum CoreFlagsOp : int32_t {
    FLAGS_AIC_AIV = 0,       // mode 2 both ways: AIVs copy x to GM, the AIC sums each pair, the AIVs copy the sums out
    FLAGS_AIV_PAIR = 1,      // mode 1: each AIV copies out what the other AIV of its group wrote
    FLAGS_ALL_AIVS = 2,      // mode 0: each AIV copies out what the next AIV of the launch wrote
    FLAGS_NEVER_SET = 3,     // AIV 1 waits for a flag nobody sets
    FLAGS_BAD_ID = 4,        // flagId 11
    FLAGS_BAD_PIPE = 5,      // a set on PIPE_S
    FLAGS_BAD_MODE = 6,      // modeId 3
    FLAGS_MODE1_ON_AIC = 7,  // an AIC sets mode 1
    FLAGS_OVERFLOW = 8,      // the AIC sets a mode-2 flag 17 times, no AIV waits
};
enum CoreFlagsSkip : uint32_t { FLAGS_SKIP_NONE = 0, FLAGS_SKIP_AIC_WAIT = 1, FLAGS_SKIP_AIV_WAIT = 2 };

struct CoreFlagsTiling {
    int32_t op;             // CoreFlagsOp
    uint32_t n;             // floats per AIV tile (multiple of 8)
    uint64_t spin;          // scalar GM reads at the wait point: by the AIVs with FLAGS_SKIP_AIV_WAIT, else the AIC
    uint32_t skip;          // CoreFlagsSkip
};

struct PhiloxTileTiling {
    uint32_t key0, key1;      // seed low / high word
    uint32_t ctr2, ctr3;      // counter words 2 and 3 (the stream)
    uint32_t threshold;       // keep iff the 8-bit draw >= threshold (0..256)
    float invKeepProb;
    uint32_t i0, j0;          // tile origin in the sequence (j0 a multiple of 16)
    uint32_t rows, width;     // tile [rows, width] fp32, width a multiple of 64
    uint32_t lanes;           // counters per chunk (a multiple of 8, at least width / 16)
    uint32_t rowsPerCore;     // core b takes rows [b * rowsPerCore, (b + 1) * rowsPerCore)
};

struct MaskTileTiling {
    uint32_t batch, heads, sq, skv;  // scores [batch, heads, sq, skv] fp32
    uint32_t mb, mn, mq;             // device mask uint8 [mb, mn, mq, skv], 1 = masked
    uint32_t blockM, blockN;         // tile = summary block (blockN a multiple of 8)
    uint32_t maskRows;               // MaskTiles rows per pass (a multiple of 4)
};
#endif

#ifdef __cplusplus
extern "C" {
#endif

int aclfaSimTestVecScaleAdd(void *x, void *y, void *z, uint32_t tile, uint32_t tilesPerCore, float scale,
                            uint32_t blockDim, char *err, size_t errLen);

/* cube = int32 fields baseM, baseN, baseK, stepM, stepN, stepKa, stepKb, depthA1, depthB1, dbL0A, dbL0B, dbL0C */
int aclfaSimTestMmSoftmax(void *a, void *b, void *out, void *workspace, uint32_t m, uint32_t n, uint32_t k,
                          uint32_t rowsPerAiv, uint32_t blockDim, const int32_t *cube, char *err, size_t errLen);

/* C[m, n] fp32 = A[m, k] . B[n, k]^T through the Matmul API only (same tiling as above). */
int aclfaSimTestMatmul(void *a, void *b, void *c, void *workspace, uint32_t m, uint32_t n, uint32_t k,
                       uint32_t rowsPerAiv, uint32_t blockDim, const int32_t *cube, char *err, size_t errLen);

/* C[m, n] half = dequantized int8 A[m, k] . B[n, k]^T (Matmul::SetQuantScalar(quantScalar); 0: not called),
   one AIV; cube as above. */
int aclfaSimTestMatmulDequant(void *a, void *b, void *c, void *workspace, uint32_t m, uint32_t n, uint32_t k,
                              uint64_t quantScalar, const int32_t *cube, char *err, size_t errLen);

/* C[m, n] fp16 = A[m, k] . B[n, k]^T on blockDim AICs (KERNEL_TYPE_AIC_ONLY), 2-D blocks of C. */
int aclfaSimTestGemm(void *a, void *b, void *c, uint32_t m, uint32_t n, uint32_t k, uint32_t gridN, uint32_t tileM,
                     uint32_t tileN, uint32_t blockDim, const int32_t *cube, char *err, size_t errLen);

/* fifo_attention (bench/model_validation.py) on blockDim MIX 1:2 blocks: out [kvSplit, sq, headDim] fp32, lse
 * [kvSplit, sq] fp32; workspace = the system workspace + blockDim x the group's FIFO slots; qkCube / pvCube as
 * the twelve int32 fields of aclfaSimTestMmSoftmax's cube. */
int aclfaSimTestFifoAttention(void *q, void *k, void *v, void *out, void *lse, void *workspace, uint32_t sq,
                              uint32_t skv, uint32_t headDim, uint32_t tileN, uint32_t preload, uint32_t kvSplit,
                              uint32_t chunkRows, float scale, uint32_t blockDim, const int32_t *qkCube,
                              const int32_t *pvCube, char *err, size_t errLen);

/* One API or rule scenario on one AIV: in [n] fp32 -> out (see probe.cpp for each op). */
int aclfaSimTestProbe(int32_t op, void *in, void *out, uint32_t n, float param, uint32_t kernelType, char *err,
                      size_t errLen);

/* One API / dtype combination of ascendc_sim/arch_surface.h (SurfaceOp, arch_surface.cpp) on one core launched
 * as kernelType: in [256] fp32 (4 rows of 64) -> out [256] fp32, GM copies with DataCopy only. */
int aclfaSimTestArchSurface(int32_t op, void *in, void *out, uint32_t kernelType, char *err, size_t errLen);

/* One cross_core scenario (CrossCoreOp) on blockDim MIX 1:2 blocks. */
int aclfaSimTestCrossCore(int32_t op, void *x, void *b, void *out, void *workspace, uint32_t n, uint64_t spin,
                          uint32_t m, uint32_t mmN, uint32_t k, uint32_t blockDim, char *err, size_t errLen);

/* One core_flags scenario (CoreFlagsOp) on blockDim MIX 1:2 blocks: x [2 blockDim, n] fp32, work
 * [3 blockDim, n] fp32 scratch, out [2 blockDim, n] fp32. */
int aclfaSimTestCoreFlags(int32_t op, void *x, void *work, void *out, uint32_t n, uint64_t spin, uint32_t skip,
                          uint32_t blockDim, char *err, size_t errLen);

/* philox_tile (op_kernel/common/philox_dropout.h) on blockDim AIVs: words = the 8-bit draws [rows, width] int32,
 * keep bytes [rows, width] uint8 (1 = kept), pOut = p with dropout; t = PhiloxTileTiling's fields in order. */
int aclfaSimTestPhiloxTile(void *p, void *pOut, void *words, void *bytes, const uint32_t *t, uint32_t blockDim,
                           char *err, size_t errLen);

/* mask_tile (op_kernel/common/attention_mask.h) on blockDim AIVs: out = scores with the mask applied per
 * tile, summary = the block classes; t = MaskTileTiling's fields in order. */
int aclfaSimTestMaskTile(void *mask, void *scores, void *out, void *summary, const uint32_t *t, uint32_t blockDim,
                         char *err, size_t errLen);

/* hccl_exchange (lib/hccl/hccl.h) on blockDim AIVs with the communication context `context` (an
 * aclfaSimHcclKernelContext of the simulated libhccl) as GetHcclContext<0>(): mode bit 0 communicates (bit 1:
 * AlltoAll of `count` fp16 per rank, else AllGather of `count` fp16), bit 2 computes z = 2 x + 1 over
 * [blockDim, tilesPerCore, tile] fp32 between the Commit and the Wait, bit 3 prepares a task it never
 * commits (a rule violation at Finalize). */
int aclfaSimTestHcclExchange(void *context, uint32_t mode, void *send, void *recv, uint64_t count, void *x, void *z,
                             uint32_t tile, uint32_t tilesPerCore, uint32_t blockDim, char *err, size_t errLen);

#ifdef __cplusplus
}
#endif
