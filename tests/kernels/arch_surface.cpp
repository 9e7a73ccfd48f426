// arch_surface.cpp -- one API / dtype / mode combination per launch (SurfaceOp), on whatever chip
// the simulator runs (ACL_FA_SIM_SOC): tests/sim/test_arch_surface.py expects each combination
// to run, or to stop naming the API and the arch, as ascendc_sim/arch_surface.h says for that
// chip. Only what every architecture has moves the data: DataCopy GM <-> UB of whole blocks,
// no KERNEL_TASK_TYPE (910A takes none; the launch gives the type).
#include <cstdio>
#include <string>

#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"
#include "test_kernels.h"

namespace {

enum SurfaceOp : int32_t {
    SURF_WHOLE_MAX_F32 = 0,  // out[r] = max of row r (WholeReduceMax<float>, ORDER_VALUE_INDEX: out[2r])
    SURF_WHOLE_MAX_F32_ONLY_VALUE,  // the same with ORDER_ONLY_VALUE: out[r]
    SURF_WHOLE_MAX_F16,      // out[2r] = max of half(row r) (WholeReduceMax<half>, ORDER_VALUE_INDEX)
    SURF_WHOLE_SUM_F32,      // out[r] = sum of row r
    SURF_BLOCK_MAX_F32,      // out[8r + b] = max of block b of row r (BlockReduceMax<float>)
    SURF_BLOCK_SUM_F32,      // out[8r + b] = sum of block b of row r
    SURF_MAXS_F32,           // out = max(in, 0.5) (Maxs<float>)
    SURF_BRCB_F32,           // out[8i + j] = in[i], i < 32 (Brcb<float>)
    SURF_CAST_F16_RINT,      // out = float(half(in)), float -> half with CAST_RINT
    SURF_CAST_F16_NONE,      // the same with CAST_NONE (nearest even too)
    SURF_ADD_I16,            // in as int16_t: out = in + in (Add<int16_t>)
    SURF_DUP_MAX_F32,        // out = max(in, 0.5) with Duplicate + Max (every arch)
    SURF_COMPARES_F32,       // out bytes = bits of in > 0 (Compares<float>)
    SURF_REDUCE_SUM_F32,     // out[0] = sum(in) (ReduceSum<float>, count form)
    SURF_SYNC_ALL,           // the hardware SyncAll() of the launch's one core, then out = 0
    SURF_SELECT_SCALAR_F32,  // out[i] = bit i ? in[i] : 0.5, bits 0x5555... (Select mode 1, tensor-scalar)
    SURF_SELECT_SPR_F32,     // the same with mode 0 (VSEL_CMPMASK_SPR) and a tensor of 0.5, only the first 64
                             // bits set: every repeat reuses them
};

constexpr uint32_t N = 256;  // 4 rows of 64 fp32

struct SurfaceTiling {
    int32_t op;
};

void Run(int32_t op, GM_ADDR in, GM_ADDR out) {
    using namespace AscendC;
    TPipe pipe;
    TBuf<TPosition::VECCALC> xb, yb, tb;
    pipe.InitBuffer(xb, N * 4);
    pipe.InitBuffer(yb, N * 4);
    pipe.InitBuffer(tb, N * 8 * 4);
    GlobalTensor<float> inGm, outGm;
    inGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(in), N);
    outGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), N * 8);
    LocalTensor<float> x = xb.Get<float>(), y = yb.Get<float>(), tmp = tb.Get<float>();
    DataCopy(x, inGm, N);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    Duplicate(y, 0.0f, static_cast<int32_t>(N));
    LocalTensor<float> result = y;
    switch (op) {
        case SURF_WHOLE_MAX_F32: WholeReduceMax(y, x, 64, 4, 1, 1, 8, ReduceOrder::ORDER_VALUE_INDEX); break;
        case SURF_WHOLE_MAX_F32_ONLY_VALUE: WholeReduceMax(y, x, 64, 4, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE); break;
        case SURF_WHOLE_MAX_F16: {
            LocalTensor<half> h = tmp.ReinterpretCast<half>(), r = tmp[N].ReinterpretCast<half>();
            Cast(h, x, RoundMode::CAST_NONE, N);
            Duplicate(r, static_cast<half>(0.0f), 16);
            WholeReduceMax(r, h, 64, 4, 1, 1, 4, ReduceOrder::ORDER_VALUE_INDEX);  // 64 halves = 4 blocks per row
            Cast(y, r, RoundMode::CAST_NONE, 16);
            break;
        }
        case SURF_WHOLE_SUM_F32: WholeReduceSum(y, x, 64, 4, 1, 1, 8); break;
        case SURF_BLOCK_MAX_F32: BlockReduceMax(y, x, 4, 64, 1, 1, 8); break;
        case SURF_BLOCK_SUM_F32: BlockReduceSum(y, x, 4, 64, 1, 1, 8); break;
        case SURF_MAXS_F32: Maxs(y, x, 0.5f, static_cast<int32_t>(N)); break;
        case SURF_BRCB_F32: Brcb(tmp, x, 4, BrcbRepeatParams(1, 8)); result = tmp; break;
        case SURF_CAST_F16_RINT:
        case SURF_CAST_F16_NONE: {
            LocalTensor<half> h = tmp.ReinterpretCast<half>();
            Cast(h, x, op == SURF_CAST_F16_RINT ? RoundMode::CAST_RINT : RoundMode::CAST_NONE, N);
            Cast(y, h, RoundMode::CAST_NONE, N);
            break;
        }
        case SURF_ADD_I16: {
            LocalTensor<int16_t> xi = x.ReinterpretCast<int16_t>();
            Add(y.ReinterpretCast<int16_t>(), xi, xi, static_cast<int32_t>(2 * N));
            break;
        }
        case SURF_DUP_MAX_F32:
            Duplicate(tmp, 0.5f, static_cast<int32_t>(N));
            Max(y, x, tmp, static_cast<int32_t>(N));
            break;
        case SURF_COMPARES_F32: Compares(y.ReinterpretCast<uint8_t>(), x, 0.0f, CMPMODE::GT, N); break;
        case SURF_REDUCE_SUM_F32: ReduceSum(y, x, tmp, static_cast<int32_t>(N)); break;
        case SURF_SYNC_ALL: SyncAll(); break;
        case SURF_SELECT_SCALAR_F32:
        case SURF_SELECT_SPR_F32: {
            LocalTensor<uint16_t> bits = tmp.ReinterpretCast<uint16_t>();  // 256 bits, then 0.5s
            Duplicate(bits, static_cast<uint16_t>(0), 16);
            Duplicate(bits, static_cast<uint16_t>(0x5555), op == SURF_SELECT_SCALAR_F32 ? 16 : 4);
            LocalTensor<float> half05 = tmp[N];
            Duplicate(half05, 0.5f, static_cast<int32_t>(N));
            if (op == SURF_SELECT_SCALAR_F32) {
                Select(y, bits, x, 0.5f, SELMODE::VSEL_TENSOR_SCALAR_MODE, N);
            } else {
                Select(y, bits, x, half05, SELMODE::VSEL_CMPMASK_SPR, N);
            }
            break;
        }
        default: break;
    }
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(outGm, result, op == SURF_BRCB_F32 ? 8 * 32 : N);
}

}  // namespace

extern "C" __global__ __aicore__ void arch_surface(GM_ADDR in, GM_ADDR out, GM_ADDR tiling) {
    REGISTER_TILING_DEFAULT(SurfaceTiling);
    GET_TILING_DATA(t, tiling);
    Run(t.op, in, out);
}

extern "C" int aclfaSimTestArchSurface(int32_t op, void *in, void *out, uint32_t kernelType, char *err,
                                       size_t errLen) {
    SurfaceTiling t{op};
    std::string msg;
    const aclError rc = acl_fa_sim::LaunchKernel(
        "arch_surface", 1, kernelType,
        [&] { arch_surface(static_cast<GM_ADDR>(in), static_cast<GM_ADDR>(out), reinterpret_cast<GM_ADDR>(&t)); },
        &msg);
    if (err != nullptr && errLen > 0) std::snprintf(err, errLen, "%s", msg.c_str());
    return rc;
}
