// matmul_only.cpp -- bench kernel: C[m, n] fp32 = A[m, k] . B[n, k]^T (fp16), MIX 1:2, each
// AIV computes `rowsPerAiv` rows with one IterateAll (bench/sim_matmul.py).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

extern "C" __global__ __aicore__ void matmul_only(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace,
                                                  GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(MmSoftmaxTiling);
    GET_TILING_DATA(t, tiling);
    using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
    using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half, true>;
    using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;
    AscendC::TPipe pipe;
    AscendC::Matmul<AType, BType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.cube);
    const uint32_t row0 = static_cast<uint32_t>(AscendC::GetBlockIdx()) * t.rowsPerAiv;
    if (row0 >= t.m) return;
    const uint32_t rows = t.m - row0 < t.rowsPerAiv ? t.m - row0 : t.rowsPerAiv;
    AscendC::GlobalTensor<half> aGm, bGm;
    AscendC::GlobalTensor<float> cGm;
    aGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(a), uint64_t(t.m) * t.k);
    bGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(b), uint64_t(t.n) * t.k);
    cGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(c), uint64_t(t.m) * t.n);
    mm.SetOrgShape(t.m, t.n, t.k);
    mm.SetTensorA(aGm[uint64_t(row0) * t.k]);
    mm.SetTensorB(bGm, true);
    mm.SetTail(rows, t.n, t.k);
    mm.IterateAll(cGm[uint64_t(row0) * t.n]);
    mm.End();
}
