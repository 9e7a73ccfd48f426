// core_flags.cpp -- test kernel of CrossCoreSetFlag / CrossCoreWaitFlag (tests/sim/test_sim_core_flags.py):
// a MIX 1:2 kernel without the Matmul API, so that its AICs run kernel code. Scenarios: CoreFlagsOp
// in test_kernels.h. GM: x [aivs, n] fp32 input, work = copies [aivs, n] then sums [blocks, n], out
// [aivs, n]. `skip` leaves out the waits of one side (for the race rule); `spin` scalar reads of x
// right after the wait point delay the side that skips its wait (the AIC when none skips), so that
// its reads come after the other side's writes in modeled time.
#include "kernel_operator.h"
#include "test_kernels.h"

namespace {

constexpr uint16_t kAivsDone = 1;    // mode 2, AIVs -> AIC: the group's copies are in GM
constexpr uint16_t kSumsDone = 2;    // mode 2, AIC -> AIVs: the group's sums are in GM
constexpr uint16_t kPairDone = 3;    // mode 1: both AIVs of the group wrote their copies
constexpr uint16_t kAllDone = 4;     // mode 0: every AIV wrote its copy

// AIV: tile <- x[aiv] -> copies[aiv] (MTE2, then MTE3 after the queue-free V-less hand-over).
void CopyIn(AscendC::LocalTensor<float> &tile, AscendC::GlobalTensor<float> &x, AscendC::GlobalTensor<float> &copies,
            uint32_t aiv, uint32_t n) {
    AscendC::DataCopy(tile, x[uint64_t(aiv) * n], n);
    AscendC::PipeBarrier<PIPE_ALL>();
    AscendC::DataCopy(copies[uint64_t(aiv) * n], tile, n);
}

// AIV: out[aiv] <- src (another core's GM data) through UB.
void CopyOut(AscendC::LocalTensor<float> &tile, const AscendC::GlobalTensor<float> &src,
             AscendC::GlobalTensor<float> &out, uint32_t aiv, uint32_t n) {
    AscendC::DataCopy(tile, src, n);
    AscendC::PipeBarrier<PIPE_ALL>();
    AscendC::DataCopy(out[uint64_t(aiv) * n], tile, n);
}

// `spin` scalar reads of x (written by no core), a delay on the trace.
void Spin(const CoreFlagsTiling &t, AscendC::GlobalTensor<float> &x) {
    for (uint64_t i = 0; i < t.spin; ++i) (void)x.GetValue(0);
}

// AIC of block g: sums[g] = copies[2g] + copies[2g + 1] by scalar GM accesses.
void SumPair(const CoreFlagsTiling &t, AscendC::GlobalTensor<float> &copies, AscendC::GlobalTensor<float> &sums,
             uint32_t g) {
    for (uint32_t i = 0; i < t.n; ++i) {
        const float a = copies.GetValue(uint64_t(2 * g) * t.n + i), b = copies.GetValue(uint64_t(2 * g + 1) * t.n + i);
        sums.SetValue(uint64_t(g) * t.n + i, a + b);
    }
    AscendC::DataCacheCleanAndInvalid<float, AscendC::CacheLine::ENTIRE_DATA_CACHE>(sums);
}

}  // namespace

extern "C" __global__ __aicore__ void core_flags(GM_ADDR x, GM_ADDR work, GM_ADDR out, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(CoreFlagsTiling);
    GET_TILING_DATA(t, tiling);
    const uint32_t blocks = static_cast<uint32_t>(AscendC::GetBlockNum());
    const uint32_t aivs = blocks * static_cast<uint32_t>(AscendC::GetTaskRatio());
    AscendC::GlobalTensor<float> xGm, copies, sums, outGm;
    xGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(x), uint64_t(aivs) * t.n);
    copies.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(work), uint64_t(aivs) * t.n);
    sums.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(work) + uint64_t(aivs) * t.n, uint64_t(blocks) * t.n);
    outGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), uint64_t(aivs) * t.n);
    if ASCEND_IS_AIC {
        const uint32_t g = static_cast<uint32_t>(AscendC::GetBlockIdx());
        switch (t.op) {
            case FLAGS_AIC_AIV:
                if (t.skip != FLAGS_SKIP_AIC_WAIT) AscendC::CrossCoreWaitFlag<2>(kAivsDone);
                if (t.skip != FLAGS_SKIP_AIV_WAIT) Spin(t, xGm);
                SumPair(t, copies, sums, g);
                // the scalar stores before MTE2, whose set then carries them to the AIVs
                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(EVENT_ID0);
                AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(EVENT_ID0);
                AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(kSumsDone);
                break;
            case FLAGS_MODE1_ON_AIC:
                AscendC::CrossCoreSetFlag<1, PIPE_FIX>(kPairDone);
                break;
            case FLAGS_OVERFLOW:  // 17 sets, no wait
                for (int i = 0; i < 17; ++i) AscendC::CrossCoreSetFlag<2, PIPE_FIX>(kSumsDone);
                break;
            default:
                break;
        }
        return;
    }
    const uint32_t aiv = static_cast<uint32_t>(AscendC::GetBlockIdx());
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, t.n * sizeof(float));
    AscendC::LocalTensor<float> tile = buf.Get<float>();
    const bool wait = t.skip != FLAGS_SKIP_AIV_WAIT;
    switch (t.op) {
        case FLAGS_AIC_AIV:  // out[aiv] = x[2g] + x[2g + 1], summed by the group's AIC
            CopyIn(tile, xGm, copies, aiv, t.n);
            AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(kAivsDone);
            if (wait) AscendC::CrossCoreWaitFlag<2>(kSumsDone);
            if (!wait) Spin(t, xGm);
            CopyOut(tile, sums[uint64_t(aiv / 2) * t.n], outGm, aiv, t.n);
            break;
        case FLAGS_AIV_PAIR:  // out[aiv] = x[aiv ^ 1], written by the other AIV of the group
            CopyIn(tile, xGm, copies, aiv, t.n);
            AscendC::CrossCoreSetFlag<1, PIPE_MTE3>(kPairDone);
            if (wait) AscendC::CrossCoreWaitFlag<1>(kPairDone);
            if (!wait) Spin(t, xGm);
            CopyOut(tile, copies[uint64_t(aiv ^ 1) * t.n], outGm, aiv, t.n);
            break;
        case FLAGS_ALL_AIVS:  // out[aiv] = x[(aiv + 1) % aivs], written by another group's AIV
            CopyIn(tile, xGm, copies, aiv, t.n);
            AscendC::CrossCoreSetFlag<0, PIPE_MTE3>(kAllDone);
            if (wait) AscendC::CrossCoreWaitFlag<0>(kAllDone);
            if (!wait) Spin(t, xGm);
            CopyOut(tile, copies[uint64_t((aiv + 1) % aivs) * t.n], outGm, aiv, t.n);
            break;
        case FLAGS_NEVER_SET:
            if (aiv == 1) AscendC::CrossCoreWaitFlag<2>(kSumsDone);
            break;
        case FLAGS_BAD_ID:
            if (aiv == 0) AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(11);
            break;
        case FLAGS_BAD_PIPE:
            if (aiv == 0) AscendC::CrossCoreSetFlag<2, PIPE_S>(kAivsDone);
            break;
        case FLAGS_BAD_MODE:
            if (aiv == 0) AscendC::CrossCoreSetFlag<3, PIPE_MTE3>(kAivsDone);
            break;
        default:
            break;
    }
}
