// matmul_dequant.cpp -- test kernel: C[m, n] half = dequantized A[m, k] . B[n, k]^T with int8 A
// and B, MIX 1:2, one AIV issuing one IterateAll: the Matmul API's dequantization on the way out
// of L0C (SetQuantScalar, FixPipe DEQF16). quantScalar 0: SetQuantScalar is not called (the
// simulator must refuse the matmul).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

extern "C" __global__ __aicore__ void matmul_dequant(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace,
                                                     GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(MmDequantTiling);
    GET_TILING_DATA(t, tiling);
    using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, int8_t>;
    using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, int8_t, true>;
    using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
    AscendC::TPipe pipe;
    AscendC::Matmul<AType, BType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.mm.cube);
    if (AscendC::GetBlockIdx() != 0) return;
    AscendC::GlobalTensor<int8_t> aGm, bGm;
    AscendC::GlobalTensor<half> cGm;
    aGm.SetGlobalBuffer(reinterpret_cast<__gm__ int8_t *>(a), uint64_t(t.mm.m) * t.mm.k);
    bGm.SetGlobalBuffer(reinterpret_cast<__gm__ int8_t *>(b), uint64_t(t.mm.n) * t.mm.k);
    cGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(c), uint64_t(t.mm.m) * t.mm.n);
    if (t.quantScalar != 0) mm.SetQuantScalar(t.quantScalar);
    mm.SetOrgShape(t.mm.m, t.mm.n, t.mm.k);
    mm.SetTensorA(aGm);
    mm.SetTensorB(bGm, true);
    mm.SetTail(t.mm.m, t.mm.n, t.mm.k);
    mm.IterateAll(cGm);
    mm.End();
}
