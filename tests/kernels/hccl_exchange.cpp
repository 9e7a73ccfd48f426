// hccl_exchange.cpp -- test kernel for Ascend C's kernel-side HCCL client (lib/hccl/hccl.h) as
// MC2 kernels use it: InitV2 with the launch's GetHcclContext<0>(), SetCcTilingV2 per opType,
// a Prepare with commit = true, vector work while the server moves the data, Wait, Finalize.
// AIV only; every core calls the client (the working core, block 0, sends the task); each core
// computes its own [tilesPerCore, tile] fp32 rows of z = 2 x + 1.
#include <cstddef>

#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"
#include "lib/hccl/hccl.h"
#include "lib/hccl/hccl_tiling.h"
#include "test_kernels.h"

namespace {

struct HcclExchangeTiling {
    Mc2InitTiling init;
    Mc2CcTiling allGather;
    Mc2CcTiling alltoAll;
    Mc2CcTiling alltoAllV;
    uint32_t mode;
    uint32_t tile;
    uint32_t tilesPerCore;
    uint64_t count;
};

constexpr uint32_t kCommunicate = 1, kAlltoAll = 2, kCompute = 4, kNeverCommit = 8, kRingAlltoAllV = 16,
                   kTwice = 32;
constexpr uint32_t kMaxRanks = 128;  // AlltoAllV.md: at most 128 ranks per domain on Atlas A3

class HcclExchange {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR z, const HcclExchangeTiling &t) {
        tile_ = t.tile;
        tiles_ = t.tilesPerCore;
        const uint64_t perCore = uint64_t(t.tile) * t.tilesPerCore;
        xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(x) + perCore * AscendC::GetBlockIdx(), perCore);
        zGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(z) + perCore * AscendC::GetBlockIdx(), perCore);
        pipe_.InitBuffer(inQue_, 2, tile_ * sizeof(float));
        pipe_.InitBuffer(outQue_, 2, tile_ * sizeof(float));
    }
    // z = 2 x + 1, double-buffered.
    __aicore__ inline void Compute() {
        for (uint32_t i = 0; i < tiles_; ++i) {
            AscendC::LocalTensor<float> x = inQue_.AllocTensor<float>();
            AscendC::DataCopy(x, xGm_[uint64_t(i) * tile_], tile_);
            inQue_.EnQue(x);
            x = inQue_.DeQue<float>();
            AscendC::LocalTensor<float> z = outQue_.AllocTensor<float>();
            AscendC::Muls(z, x, 2.0f, static_cast<int32_t>(tile_));
            AscendC::Adds(z, z, 1.0f, static_cast<int32_t>(tile_));
            inQue_.FreeTensor(x);
            outQue_.EnQue(z);
            z = outQue_.DeQue<float>();
            AscendC::DataCopy(zGm_[uint64_t(i) * tile_], z, tile_);
            outQue_.FreeTensor(z);
        }
    }

private:
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::TPosition::VECIN, 2> inQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 2> outQue_;
    AscendC::GlobalTensor<float> xGm_, zGm_;
    uint32_t tile_ = 0, tiles_ = 0;
};

}  // namespace

extern "C" __global__ __aicore__ void hccl_exchange(GM_ADDR send, GM_ADDR recv, GM_ADDR x, GM_ADDR z,
                                                    GM_ADDR workspace, GM_ADDR tiling) {
    (void)workspace;
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(HcclExchangeTiling);
    GET_TILING_DATA_WITH_STRUCT(HcclExchangeTiling, t, tiling);
    AscendC::Hccl hccl;
    hccl.InitV2(AscendC::GetHcclContext<AscendC::HCCL_GROUP_ID_0>(), &t);
    if (hccl.SetCcTilingV2(offsetof(HcclExchangeTiling, allGather)) != AscendC::HCCL_SUCCESS ||
        hccl.SetCcTilingV2(offsetof(HcclExchangeTiling, alltoAll)) != AscendC::HCCL_SUCCESS ||
        hccl.SetCcTilingV2(offsetof(HcclExchangeTiling, alltoAllV)) != AscendC::HCCL_SUCCESS) {
        return;
    }
    AscendC::HcclHandle handle = -1, second = -1;
    if (t.mode & kCommunicate) {
        if (t.mode & kRingAlltoAllV) {  // a ring step: count elements to rank + 1, from rank - 1
            const uint32_t rank = hccl.GetRankId(), ranks = hccl.GetRankDim();
            uint64_t sendCounts[kMaxRanks] = {}, recvCounts[kMaxRanks] = {}, displs[kMaxRanks] = {};
            sendCounts[(rank + 1) % ranks] = t.count;
            recvCounts[(rank + ranks - 1) % ranks] = t.count;
            handle = hccl.AlltoAllV<true>(send, sendCounts, displs, AscendC::HCCL_DATA_TYPE_FP16, recv, recvCounts,
                                          displs, AscendC::HCCL_DATA_TYPE_FP16);
            if (t.mode & kTwice) {  // the same exchange again, committed at once (the fused ring's K then V)
                second = hccl.AlltoAllV<true>(send, sendCounts, displs, AscendC::HCCL_DATA_TYPE_FP16, recv,
                                              recvCounts, displs, AscendC::HCCL_DATA_TYPE_FP16);
            }
        } else if (t.mode & kAlltoAll) {
            handle = hccl.AlltoAll<true>(send, recv, t.count, AscendC::HCCL_DATA_TYPE_FP16);
        } else {
            handle = hccl.AllGather<true>(send, recv, t.count, AscendC::HCCL_DATA_TYPE_FP16, 0);
        }
    }
    if (t.mode & kNeverCommit) hccl.AllGather<false>(send, recv, t.count, AscendC::HCCL_DATA_TYPE_FP16, 0);
    if (t.mode & kCompute) {
        HcclExchange op;
        op.Init(x, z, t);
        op.Compute();
    }
    if (handle >= 0) hccl.Wait(handle);
    if (second >= 0) hccl.Wait(second);
    hccl.Finalize();
}

extern "C" int aclfaSimTestHcclExchange(void *context, uint32_t mode, void *send, void *recv, uint64_t count, void *x,
                                        void *z, uint32_t tile, uint32_t tilesPerCore, uint32_t blockDim, char *err,
                                        size_t errLen) {
    HcclExchangeTiling t{};
    t.mode = mode;
    t.tile = tile;
    t.tilesPerCore = tilesPerCore;
    t.count = count;
    // The host side of an MC2 op's tiling, as MC2 ops fill it: one config, GetTiling of the
    // Mc2InitTiling, then one Mc2CcTiling per collective (SetOpType / SetAlgConfig between).
    AscendC::Mc2CcTilingConfig config("sim_group", static_cast<uint32_t>(AscendC::HcclCMDType::HCCL_CMD_ALLGATHER),
                                      "AllGather=level0:fullmesh");
    bool ok = config.GetTiling(t.init) == EXIT_SUCCESS && config.GetTiling(t.allGather) == EXIT_SUCCESS;
    config.SetOpType(static_cast<uint32_t>(AscendC::HcclCMDType::HCCL_CMD_ALLTOALL));
    config.SetAlgConfig("AlltoAll=level0:fullmesh");
    ok = ok && config.GetTiling(t.alltoAll) == EXIT_SUCCESS;
    config.SetOpType(static_cast<uint32_t>(AscendC::HcclCMDType::HCCL_CMD_ALLTOALLV));
    ok = ok && config.GetTiling(t.alltoAllV) == EXIT_SUCCESS;
    if (!ok) {
        std::snprintf(err, errLen, "Mc2CcTilingConfig::GetTiling failed");
        return -1;
    }
    acl_fa_sim::SetLaunchHcclContext(0, context);
    std::string msg;
    const aclError rc = acl_fa_sim::LaunchKernel(
        "hccl_exchange", blockDim, KERNEL_TYPE_AIV_ONLY,
        [&] {
            hccl_exchange(static_cast<GM_ADDR>(send), static_cast<GM_ADDR>(recv), static_cast<GM_ADDR>(x),
                          static_cast<GM_ADDR>(z), nullptr, reinterpret_cast<GM_ADDR>(&t));
        },
        &msg);
    std::snprintf(err, errLen, "%s", msg.c_str());
    return rc;
}
