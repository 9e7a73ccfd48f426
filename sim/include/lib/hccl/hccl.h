// lib/hccl/hccl.h -- Ascend C's kernel-side HCCL client, as MC2 kernels call it:
//
//     Hccl hccl;                                        // Hccl<HCCL_SERVER_TYPE_AICPU, DEFAULT_CFG>
//     hccl.InitV2(AscendC::GetHcclContext<HCCL_GROUP_ID_0>(), &tilingData);
//     hccl.SetCcTilingV2(offsetof(TilingData, allGatherTiling));
//     HcclHandle h = hccl.AllGather<true>(send, recv, count, HCCL_DATA_TYPE_FP16, 0);  // prepare + commit
//     ... compute while the server moves the data ...
//     hccl.Wait(h);
//     hccl.Finalize();
//
// Declarations as asc-devkit include/adv_api/hccl/hccl.h (class template Hccl<serverType, config>,
// its member names, parameter types, order and defaults); the simulator implements the members
// acl-fa uses: InitV2, SetCcTilingV2, AllGather, AlltoAll, AlltoAllV (A3 only), Commit, Wait,
// Query, Finalize, GetRankId, GetRankDim (HCCL-Kernel侧接口/*.md: AlltoAllV, AlltoAllvWrite are
// A3/950 only; BatchWrite on A2 runs between servers only). Others are not declared, so a
// kernel that calls them fails to build here rather than run something unchecked.
//
// Simulation. The context is an aclfaSimHcclKernelContext (acl_fa_sim_hccl_kernel.h): the
// working core (GetBlockIdx() == config.blockId, of the one core type that prepares tasks)
// hands each task to the simulated libhccl's server, which moves it through the
// communicator's channels on its own thread while the cores compute; every core's Wait waits
// for it. The instruction trace gets a COMM_START at the Commit lasting the task's modeled
// link time and a COMM_WAIT at each Wait (docs/hccl.md, "Communication fused into the kernel").
// Rules checked (a violation names the call): InitV2 before anything else, SetCcTilingV2 of a
// Mc2CcTiling of the call's opType before the call, at most 63 Prepare calls per communicator
// in a launch (the A2/A3 limit in AllGather.md), Prepare from one core type only unless config
// names it, Commit / Wait of a handle that was prepared, no Wait on a handle not committed,
// Finalize after every committed task.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "acl_fa_sim.h"
#include "acl_fa_sim_hccl_kernel.h"
#include "ascendc_sim/core.h"
#include "ascendc_sim/hccl_tiling_layout.h"
#include "ascendc_sim/kernel_macros.h"
#include "ascendc_sim/optrace.h"
#include "kernel_tiling/kernel_tiling.h"
#include "lib/hccl/hccl_common.h"

namespace AscendC {

constexpr int32_t HCCL_FAILED = -1;
constexpr int32_t HCCL_SUCCESS = 0;

static constexpr HcclServerConfig DEFAULT_CFG = {CoreType::DEFAULT, 0};

template <HcclServerType serverType = HcclServerType::HCCL_SERVER_TYPE_AICPU, const auto &config = DEFAULT_CFG>
class Hccl {
public:
    template <bool commit = false>
    __aicore__ inline HcclHandle AllGather(GM_ADDR sendBuf, GM_ADDR recvBuf, uint64_t sendCount, HcclDataType dataType,
                                           uint64_t strideCount, uint8_t repeat = 1)
    {
        aclfaSimHcclKernelTask task{static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALLGATHER),
                                    static_cast<uint32_t>(dataType), sendBuf, recvBuf, sendCount, strideCount, repeat};
        const HcclHandle h = Prepare("Hccl::AllGather", task);
        if (commit) Commit(h);
        return h;
    }

    template <bool commit = false>
    __aicore__ inline HcclHandle AlltoAll(GM_ADDR sendBuf, GM_ADDR recvBuf, uint64_t dataCount, HcclDataType dataType,
                                          uint64_t strideCount = 0, uint8_t repeat = 1)
    {
        aclfaSimHcclKernelTask task{static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALLTOALL),
                                    static_cast<uint32_t>(dataType), sendBuf, recvBuf, dataCount, strideCount, repeat};
        const HcclHandle h = Prepare("Hccl::AlltoAll", task);
        if (commit) Commit(h);
        return h;
    }

    // AlltoAllV: rank i sends sendCounts[j] elements from sendBuf + sdispls[j] to rank j, which
    // puts them at recvBuf + rdispls[i]; counts and displacements are uint64 arrays of
    // GetRankDim() entries in elements of sendType (asc-devkit hccl.h; AlltoAllV.md). Atlas A3
    // and Ascend 950 only: "Atlas A2 训练系列产品/Atlas A2 推理系列产品：不支持" (AlltoAllV.md,
    // 产品支持情况), so the simulator refuses it on an Ascend910B. recvType must equal sendType.
    // The server reads the arrays at Prepare (the working core's copy).
    template <bool commit = false>
    __aicore__ inline HcclHandle AlltoAllV(GM_ADDR sendBuf, void *sendCounts, void *sdispls, HcclDataType sendType,
                                           GM_ADDR recvBuf, void *recvCounts, void *rdispls, HcclDataType recvType,
                                           uint8_t repeat = 1)
    {
        const aclfaSimChip *chip = aclfaSimGetChip();
        if (chip != nullptr && std::string(chip->shortSoc) == "ascend910b") {
            Fail("Hccl::AlltoAllV", std::string("AlltoAllV does not exist on ") + chip->name +
                                        " (Atlas A2): the API offers it on Atlas A3 and Ascend 950 only "
                                        "(asc-devkit AlltoAllV.md, 产品支持情况)");
        }
        if (sendCounts == nullptr || sdispls == nullptr || recvCounts == nullptr || rdispls == nullptr) {
            Fail("Hccl::AlltoAllV", "sendCounts, sdispls, recvCounts and rdispls must all be given");
        }
        if (recvType != sendType) Fail("Hccl::AlltoAllV", "recvType must equal sendType (AlltoAllV.md)");
        aclfaSimHcclKernelTask task{static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALLTOALLV),
                                    static_cast<uint32_t>(sendType), sendBuf, recvBuf, 0, 0, repeat};
        task.sendCounts = static_cast<const uint64_t *>(sendCounts);
        task.sdispls = static_cast<const uint64_t *>(sdispls);
        task.recvCounts = static_cast<const uint64_t *>(recvCounts);
        task.rdispls = static_cast<const uint64_t *>(rdispls);
        const HcclHandle h = Prepare("Hccl::AlltoAllV", task);
        if (commit) Commit(h);
        return h;
    }

    __aicore__ inline int32_t SetCcTilingV2(uint64_t offset)
    {
        Core("Hccl::SetCcTilingV2");
        if (context_ == nullptr || initTiling_ == nullptr) {
            Fail("Hccl::SetCcTilingV2", "called before InitV2 (or InitV2 got no initTiling)");
        }
        const auto *init = reinterpret_cast<const acl_fa_sim::hccl_tiling::InitTilingLayout *>(initTiling_);
        bool listed = false;
        for (uint32_t i = 0; i < init->ccCount && i < acl_fa_sim::hccl_tiling::kMaxCcTilings; ++i) {
            listed = listed || init->offset[i] == offset;
        }
        const auto *cc = reinterpret_cast<const acl_fa_sim::hccl_tiling::CcTilingLayout *>(
            static_cast<const uint8_t *>(initTiling_) + offset);
        if (!listed || cc->version != 1 || cc->opType >= kOpTypes) return HCCL_FAILED;
        ccTiling_[cc->opType] = cc;
        return HCCL_SUCCESS;
    }

    __aicore__ inline void InitV2(GM_ADDR context, const void *initTiling)
    {
        acl_fa_sim::kernel::CoreContext &core = Core("Hccl::InitV2");
        const auto *ctx = reinterpret_cast<const aclfaSimHcclKernelContext *>(context);
        if (ctx == nullptr || ctx->magic != ACLFA_SIM_HCCL_KERNEL_CONTEXT_MAGIC) {
            Fail("Hccl::InitV2", "the context is not a communication context (GetHcclContext<index>() of a launch "
                                 "that was given one for that index)");
        }
        const auto *init = static_cast<const acl_fa_sim::hccl_tiling::InitTilingLayout *>(initTiling);
        if (init == nullptr || init->version != acl_fa_sim::hccl_tiling::kVersion) {
            Fail("Hccl::InitV2", "initTiling is not an Mc2InitTiling filled by Mc2CcTilingConfig::GetTiling");
        }
        context_ = const_cast<aclfaSimHcclKernelContext *>(ctx);
        initTiling_ = initTiling;
        if (config.type == CoreType::ON_AIV) working_ = !core.isAic && core.blockIdx == config.blockId;
        else if (config.type == CoreType::ON_AIC) working_ = core.isAic && core.blockIdx == config.blockId;
        else working_ = core.blockIdx == static_cast<uint64_t>(config.blockId);
    }

    __aicore__ inline void Commit(HcclHandle handleId)
    {
        acl_fa_sim::kernel::CoreContext &core = Core("Hccl::Commit");
        Check("Hccl::Commit", handleId);
        if (committed_[handleId]) Fail("Hccl::Commit", "handle " + std::to_string(handleId) + " is already committed");
        committed_[handleId] = true;
        if (!working_) return;  // only the working core writes the message
        const double seconds = context_->commit(context_->server, handleId);
        const aclfaSimChip *chip = aclfaSimGetChip();
        const double cycles = seconds * (chip != nullptr ? chip->clockMHz : 1800.0) * 1e6;
        acl_fa_sim::kernel::TraceComm(core, true, Key(handleId), static_cast<uint64_t>(cycles + 0.5), "Hccl::Commit");
    }

    __aicore__ inline int32_t Wait(HcclHandle handleId)
    {
        acl_fa_sim::kernel::CoreContext &core = Core("Hccl::Wait");
        Check("Hccl::Wait", handleId);
        if (!committed_[handleId]) {
            Fail("Hccl::Wait", "handle " + std::to_string(handleId) + " was prepared but not committed on this core "
                               "(a Wait for it would never end)");
        }
        char err[1024] = {0};
        // The working core may not have started yet: lend this host thread's place meanwhile.
        if (context_->query(context_->server, handleId) == 0) acl_fa_sim::kernel::LendHostThread(core);
        if (context_->wait(context_->server, handleId, core.abortFlag, err, sizeof err) != 0) {
            Fail("Hccl::Wait", std::string("the communication task failed: ") + err);
        }
        acl_fa_sim::kernel::TraceComm(core, false, Key(handleId), 0, "Hccl::Wait");
        return HCCL_SUCCESS;
    }

    __aicore__ inline int32_t Query(HcclHandle handleId)
    {
        Core("Hccl::Query");
        Check("Hccl::Query", handleId);
        const int32_t state = context_->query(context_->server, handleId);
        return state < 0 ? HCCL_FAILED : state * repeat_[handleId];
    }

    template <bool sync = true>
    __aicore__ inline void Finalize()
    {
        Core("Hccl::Finalize");
        if (context_ == nullptr) Fail("Hccl::Finalize", "called before InitV2");
        for (int32_t h = 0; h < prepared_; ++h) {
            if (!committed_[h]) {
                Fail("Hccl::Finalize", "handle " + std::to_string(h) + " was prepared but never committed");
            }
            if (sync && working_) Wait(static_cast<HcclHandle>(h));
        }
    }

    __aicore__ inline uint32_t GetRankId()
    {
        Core("Hccl::GetRankId");
        if (context_ == nullptr) Fail("Hccl::GetRankId", "called before InitV2");
        return context_->rankId;
    }

    __aicore__ inline uint32_t GetRankDim()
    {
        Core("Hccl::GetRankDim");
        if (context_ == nullptr) Fail("Hccl::GetRankDim", "called before InitV2");
        return context_->rankDim;
    }

private:
    static constexpr uint32_t kOpTypes = static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALL);

    static acl_fa_sim::kernel::CoreContext &Core(const char *api) { return acl_fa_sim::kernel::Enter(api); }
    [[noreturn]] static void Fail(const char *api, const std::string &why)
    {
        acl_fa_sim::kernel::Violation("HCCL client", api, why);
    }
    uint64_t Key(HcclHandle h) const
    {
        return (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(context_)) << 7) | static_cast<uint64_t>(h);
    }
    void Check(const char *api, HcclHandle h) const
    {
        if (context_ == nullptr) Fail(api, "called before InitV2");
        if (h < 0 || h >= prepared_) Fail(api, "handle " + std::to_string(h) + " was not returned by a Prepare call");
    }

    HcclHandle Prepare(const char *api, const aclfaSimHcclKernelTask &task)
    {
        acl_fa_sim::kernel::CoreContext &core = Core(api);
        if (context_ == nullptr) Fail(api, "called before InitV2");
        if (task.opType >= kOpTypes || ccTiling_[task.opType] == nullptr) {
            Fail(api, "no Mc2CcTiling of this opType was set: call SetCcTilingV2 with the offset of a Mc2CcTiling "
                      "made by Mc2CcTilingConfig for opType " + std::to_string(task.opType) + " first");
        }
        if (prepared_ >= acl_fa_sim::hccl_tiling::kMaxPrepare) {
            Fail(api, "more than " + std::to_string(acl_fa_sim::hccl_tiling::kMaxPrepare) +
                          " Prepare calls in one communication domain (the limit on Atlas A2/A3)");
        }
        if (task.repeat == 0) Fail(api, "repeat must be >= 1");
        const HcclHandle h = static_cast<HcclHandle>(prepared_++);
        repeat_[h] = task.repeat;
        if (working_) {
            char err[1024] = {0};
            if (context_->prepare(context_->server, h, &task, err, sizeof err) != 0) Fail(api, err);
        }
        (void)core;
        return h;
    }

    aclfaSimHcclKernelContext *context_ = nullptr;
    const void *initTiling_ = nullptr;
    const acl_fa_sim::hccl_tiling::CcTilingLayout *ccTiling_[kOpTypes] = {};
    bool working_ = false;
    int32_t prepared_ = 0;
    bool committed_[acl_fa_sim::hccl_tiling::kMaxPrepare] = {};
    uint32_t repeat_[acl_fa_sim::hccl_tiling::kMaxPrepare] = {};
};

}  // namespace AscendC
