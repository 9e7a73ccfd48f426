// cross_core.cpp -- test kernel of SetAtomicAdd / SetAtomicNone, SyncAll and Matmul with A
// transposed and enAtomic, IBSet / IBWait (tests/sim/test_sim_cross_core.py). One tile of `n` floats per AIV;
// CROSS_* scenarios are listed in test_kernels.h.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

namespace {

// out[0:n] += x[aiv] atomically on every AIV; after SyncAll, AIV 0 copies the sum to out[n:2n].
void AtomicSum(const CrossCoreTiling &t, AscendC::GlobalTensor<float> &x, AscendC::GlobalTensor<float> &out,
               AscendC::TPipe &pipe, bool wrongType) {
    const uint32_t aiv = static_cast<uint32_t>(AscendC::GetBlockIdx());
    AscendC::TBuf<AscendC::TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, t.n * sizeof(float));
    AscendC::LocalTensor<float> tile = buf.Get<float>();
    AscendC::DataCopy(tile, x[uint64_t(aiv) * t.n], t.n);
    if (wrongType) {
        AscendC::SetAtomicAdd<int32_t>();
    } else {
        AscendC::SetAtomicAdd<float>();
    }
    AscendC::DataCopy(out, tile, t.n);
    AscendC::SetAtomicNone();
    AscendC::SyncAll();
    if (aiv == 0) {
        AscendC::DataCopy(tile, out, t.n);
        AscendC::DataCopy(out[t.n], tile, t.n);
    }
}

// The IBSet / IBWait scenarios. Flags: b as int32 (zeroed by the host), one 32-B block per AIV
// (MIX: the core count is GetBlockNum() * 2 with isAIVOnly = false); flag a hands over to AIV a.
void InterBlockFlags(const CrossCoreTiling &t, GM_ADDR b, AscendC::GlobalTensor<float> &x,
                     AscendC::GlobalTensor<float> &out, AscendC::TPipe &pipe, uint32_t aiv, uint32_t aivs) {
    AscendC::GlobalTensor<int32_t> flags;
    flags.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(b), uint64_t(aivs) * 8);
    AscendC::TBuf<AscendC::TPosition::VECCALC> flagBuf, tileBuf, sumBuf;
    pipe.InitBuffer(flagBuf, 32);
    AscendC::LocalTensor<int32_t> ub = flagBuf.Get<int32_t>();
    const int32_t me = static_cast<int32_t>(aiv), last = static_cast<int32_t>(aivs) - 1;
    switch (t.op) {
        case CROSS_IB_CHAIN: {
            // Without the flags the adds would race (lost updates) and come in any order.
            pipe.InitBuffer(tileBuf, t.n * sizeof(float));
            pipe.InitBuffer(sumBuf, t.n * sizeof(float));
            AscendC::LocalTensor<float> tile = tileBuf.Get<float>(), sum = sumBuf.Get<float>();
            AscendC::DataCopy(tile, x[uint64_t(aiv) * t.n], t.n);
            if (me != last) AscendC::IBWait<false>(flags, ub, me, 0);
            AscendC::DataCopy(sum, out, t.n);
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::Add(sum, sum, tile, t.n);
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::DataCopy(out, sum, t.n);
            if (me != 0) AscendC::IBSet<false>(flags, ub, me - 1, 0);
            break;
        }
        case CROSS_IB_MISSING_SET:
            if (me == 1) AscendC::IBWait<false>(flags, ub, 1, 0);
            break;
        case CROSS_IB_LATE_SET:
            if (me == 0) AscendC::IBWait<false>(flags, ub, 0, 0);
            if (me == last) {
                for (uint64_t i = 0; i < t.spin; ++i) (void)AscendC::GetBlockIdx();
                AscendC::IBSet<false>(flags, ub, 0, 0);
            }
            break;
        case CROSS_IB_SET_TWICE:
            if (me == 0) {
                AscendC::IBSet<false>(flags, ub, 0, 0);
                AscendC::IBSet<false>(flags, ub, 0, 0);
            }
            break;
        case CROSS_IB_BAD_BLOCK_IDX:
            if (me == 0) AscendC::IBSet<false>(flags, ub, static_cast<int32_t>(aivs), 0);
            break;
        default:
            break;
    }
}

}  // namespace

extern "C" __global__ __aicore__ void cross_core(GM_ADDR x, GM_ADDR b, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(CrossCoreTiling);
    GET_TILING_DATA(t, tiling);
    using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half, true>;
    using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
    using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;
    AscendC::TPipe pipe;
    AscendC::Matmul<AType, BType, CType> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.cube);
    const uint32_t aiv = static_cast<uint32_t>(AscendC::GetBlockIdx());
    const uint32_t aivs = static_cast<uint32_t>(AscendC::GetBlockNum() * AscendC::GetTaskRatio());
    AscendC::GlobalTensor<float> xGm, outGm;
    xGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(x), uint64_t(aivs) * t.n);
    outGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), 2 * uint64_t(t.n));
    switch (t.op) {
        case CROSS_ATOMIC_SUM:
            AtomicSum(t, xGm, outGm, pipe, false);
            break;
        case CROSS_ATOMIC_WRONG_TYPE:
            AtomicSum(t, xGm, outGm, pipe, true);
            break;
        case CROSS_SKIP_BARRIER:  // the last AIV leaves without SyncAll: the others hang
            if (aiv + 1 != aivs) AscendC::SyncAll();
            break;
        case CROSS_LATE_BARRIER:  // the last AIV spins for `spin` API calls before SyncAll
            if (aiv + 1 == aivs) {
                for (uint64_t i = 0; i < t.spin; ++i) (void)AscendC::GetBlockIdx();
            }
            AscendC::SyncAll();
            break;
        case CROSS_MATMUL_AT_B: {
            // C[m, n] += A_aiv^T . B_aiv over all AIVs: A_aiv stored [k, m] (x as half), B_aiv [k, n].
            AscendC::GlobalTensor<half> aGm, bGm;
            aGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(x), uint64_t(aivs) * t.k * t.m);
            bGm.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(b), uint64_t(aivs) * t.k * t.mmN);
            AscendC::GlobalTensor<float> cGm;
            cGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), uint64_t(t.m) * t.mmN);
            mm.SetOrgShape(t.m, t.mmN, t.k);
            mm.SetTensorA(aGm[uint64_t(aiv) * t.k * t.m], true);
            mm.SetTensorB(bGm[uint64_t(aiv) * t.k * t.mmN]);
            mm.SetTail(t.m, t.mmN, t.k);
            mm.IterateAll(cGm, 1);
            mm.End();
            break;
        }
        case CROSS_AIC_SYNC_AIV_ONLY:  // SyncAll<false> waits for the cube cores, which left after REGIST_MATMUL_OBJ
            AscendC::SyncAll<false>();
            break;
        default:
            InterBlockFlags(t, b, xGm, outGm, pipe, aiv, aivs);
            break;
    }
}
