// gemm_aic.cpp -- bench kernel: C[m, n] fp16 = A[m, k] . B[n, k]^T (fp16), a plain cube-only GEMM
// through the Matmul API: AIC b computes the [tileM, tileN] block (b / gridN, b % gridN) of C
// with one IterateAll (bench/gemm_model.py: the timing model against a published 910B2 GEMM).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

extern "C" __global__ __aicore__ void gemm_aic(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    REGISTER_TILING_DEFAULT(GemmTiling);
    GET_TILING_DATA(t, tiling);
    (void)workspace;
    using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
    using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half, true>;
    using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
    AscendC::TPipe pipe;
    AscendC::Matmul<AType, BType, CType> mm;
    mm.Init(&t.cube, &pipe);
    const uint32_t block = static_cast<uint32_t>(AscendC::GetBlockIdx());
    const uint32_t row0 = block / t.gridN * t.tileM, col0 = block % t.gridN * t.tileN;
    if (row0 >= t.m || col0 >= t.n) return;
    const uint32_t rows = t.m - row0 < t.tileM ? t.m - row0 : t.tileM;
    const uint32_t cols = t.n - col0 < t.tileN ? t.n - col0 : t.tileN;
    AscendC::GlobalTensor<half> aGm, bGm, cGm;
    aGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(a), uint64_t(t.m) * t.k);
    bGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(b), uint64_t(t.n) * t.k);
    cGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(c), uint64_t(t.m) * t.n);
    mm.SetOrgShape(t.m, t.n, t.k);
    mm.SetTensorA(aGm[uint64_t(row0) * t.k]);
    mm.SetTensorB(bGm[uint64_t(col0) * t.k], true);
    mm.SetTail(rows, cols, t.k);
    mm.IterateAll(cGm[uint64_t(row0) * t.n + col0]);
    mm.End();
}
