// lib/hccl/hccl_tiling.h -- the host side of the HCCL client's tiling: Mc2CcTilingConfig fills
// the Mc2InitTiling and the Mc2CcTiling structs an MC2 kernel's tiling data carries (asc-devkit
// include/adv_api/hccl/hccl_tiling.h; docs HCCL-Tiling侧接口/*.md). Declarations as there
// (namespace AscendC, constructor defaults, methods returning EXIT_SUCCESS / EXIT_FAILURE); the
// bodies follow impl/adv_api/tiling/hccl/hccl_tiling.cpp's checks and fill the simulator's
// layout (ascendc_sim/hccl_tiling_layout.h). GetTiling(Mc2InitTiling &) must come first: each
// later GetTiling(Mc2CcTiling &) lists its struct in that Mc2InitTiling by its offset, which is
// what the kernel's SetCcTilingV2 takes, so both must live in one tiling struct.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ascendc_sim/hccl_tiling_layout.h"
#include "kernel_tiling/kernel_tiling.h"
#include "lib/hccl/hccl_common.h"

namespace AscendC {

class Mc2CcTilingConfig {
public:
    explicit Mc2CcTilingConfig(const std::string &groupName, uint32_t opType, const std::string &algConfig,
                               uint32_t reduceType = 0, uint8_t dstDataType = 0, uint8_t srcDataType = 0,
                               uint8_t commEngine = 0)
        : groupName_(groupName), opType_(opType), algConfig_(algConfig), reduceType_(reduceType),
          dstDataType_(dstDataType), srcDataType_(srcDataType), commEngine_(commEngine) {}
    virtual ~Mc2CcTilingConfig() = default;

    uint32_t GetTiling(::Mc2InitTiling &tiling)
    {
        const bool reduce = opType_ == static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALLREDUCE) ||
                            opType_ == static_cast<uint32_t>(HcclCMDType::HCCL_CMD_REDUCE) ||
                            opType_ == static_cast<uint32_t>(HcclCMDType::HCCL_CMD_REDUCE_SCATTER);
        if (reduce && reduceType_ >= HCCL_REDUCE_RESERVED) return EXIT_FAILURE;
        init_ = &tiling;
        auto *inner = reinterpret_cast<acl_fa_sim::hccl_tiling::InitTilingLayout *>(&tiling);
        std::memset(inner, 0, sizeof *inner);
        inner->version = acl_fa_sim::hccl_tiling::kVersion;
        inner->queueNum = queueNum_;
        inner->commBlockNum = commBlockNum_;
        inner->debugMode = debugMode_;
        return EXIT_SUCCESS;
    }

    uint32_t GetTiling(::Mc2CcTiling &tiling)
    {
        using acl_fa_sim::hccl_tiling::CcTilingLayout;
        using acl_fa_sim::hccl_tiling::InitTilingLayout;
        if (init_ == nullptr) return EXIT_FAILURE;  // "must be set Mc2InitTiling first."
        if (groupName_.size() >= acl_fa_sim::hccl_tiling::kGroupNameBytes ||
            algConfig_.size() >= acl_fa_sim::hccl_tiling::kAlgConfigBytes) {
            return EXIT_FAILURE;
        }
        if (opType_ == 0 || opType_ >= static_cast<uint32_t>(HcclCMDType::HCCL_CMD_ALL)) return EXIT_FAILURE;
        if (reduceType_ >= HCCL_REDUCE_RESERVED || dstDataType_ >= HCCL_DATA_TYPE_RESERVED ||
            srcDataType_ >= HCCL_DATA_TYPE_RESERVED) {
            return EXIT_FAILURE;
        }
        const auto *base = reinterpret_cast<const uint8_t *>(init_);
        const auto *mine = reinterpret_cast<const uint8_t *>(&tiling);
        auto *init = reinterpret_cast<InitTilingLayout *>(init_);
        // The kernel finds this struct at initTiling + offset: it must follow the Mc2InitTiling.
        if (mine < base + sizeof(::Mc2InitTiling) || init->ccCount >= acl_fa_sim::hccl_tiling::kMaxCcTilings) {
            return EXIT_FAILURE;
        }
        auto *inner = reinterpret_cast<CcTilingLayout *>(&tiling);
        std::memset(inner, 0, sizeof *inner);
        inner->skipLocalRankCopy = skipLocalRankCopy_;
        inner->skipBufferWindowCopy = skipBufferWindowCopy_;
        inner->stepSize = stepSize_;
        inner->version = 1;
        std::memcpy(inner->groupName, groupName_.c_str(), groupName_.size() + 1);
        std::memcpy(inner->algConfig, algConfig_.c_str(), algConfig_.size() + 1);
        inner->opType = opType_;
        inner->reduceType = reduceType_;
        inner->srcDataType = srcDataType_;
        inner->dstDataType = dstDataType_;
        inner->commEngine = commEngine_;
        init->offset[init->ccCount++] = static_cast<uint32_t>(mine - base);
        return EXIT_SUCCESS;
    }

    uint32_t SetOpType(uint32_t opType) { opType_ = opType; return EXIT_SUCCESS; }
    uint32_t SetGroupName(const std::string &groupName) { groupName_ = groupName; return EXIT_SUCCESS; }
    uint32_t SetAlgConfig(const std::string &algConfig) { algConfig_ = algConfig; return EXIT_SUCCESS; }
    uint32_t SetReduceType(uint32_t reduceType, uint8_t dstDataType = 0, uint8_t srcDataType = 0)
    {
        reduceType_ = reduceType;
        dstDataType_ = dstDataType;
        srcDataType_ = srcDataType;
        return EXIT_SUCCESS;
    }
    uint32_t SetStepSize(uint8_t stepSize) { stepSize_ = stepSize; return EXIT_SUCCESS; }
    uint32_t SetSkipLocalRankCopy(uint8_t skip) { skipLocalRankCopy_ = skip; return EXIT_SUCCESS; }
    uint32_t SetSkipBufferWindowCopy(uint8_t skip) { skipBufferWindowCopy_ = skip; return EXIT_SUCCESS; }
    uint32_t SetDebugMode(uint8_t debugMode) { debugMode_ = debugMode; return EXIT_SUCCESS; }
    uint32_t SetQueueNum(uint16_t num) { queueNum_ = num; return EXIT_SUCCESS; }
    uint32_t SetCommBlockNum(uint16_t num) { commBlockNum_ = num; return EXIT_SUCCESS; }
    uint32_t SetCommEngine(uint8_t commEngine) { commEngine_ = commEngine; return EXIT_SUCCESS; }

private:
    std::string groupName_;
    uint32_t opType_;
    std::string algConfig_;
    uint32_t reduceType_;
    uint8_t dstDataType_;
    uint8_t srcDataType_;
    uint8_t commEngine_;
    uint8_t stepSize_ = 0;
    uint8_t skipLocalRankCopy_ = 0;
    uint8_t skipBufferWindowCopy_ = 0;
    uint8_t debugMode_ = 0;
    uint16_t queueNum_ = 0;
    uint16_t commBlockNum_ = 0;
    ::Mc2InitTiling *init_ = nullptr;
};

}  // namespace AscendC
