// test_kernels.h -- tiling structs of the simulator's test kernels and the C entry points
// of libaclfa_sim_testkernels.so (called from tests/test_sim_kernels.py through cffi).
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

struct ProbeTiling {
    int32_t op;             // PROBE_* scenario
    uint32_t n;             // elements
    float param;            // scalar operand
};
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

/* One API or rule scenario on one AIV: in [n] fp32 -> out (see probe.cpp for each op). */
int aclfaSimTestProbe(int32_t op, void *in, void *out, uint32_t n, float param, uint32_t kernelType, char *err,
                      size_t errLen);

#ifdef __cplusplus
}
#endif
