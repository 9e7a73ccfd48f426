// ascendc_sim/hccl_tiling_layout.h -- the simulator's layout inside Mc2InitTiling (64 B) and
// Mc2CcTiling (512 B), written by the host's Mc2CcTilingConfig (lib/hccl/hccl_tiling.h) and read
// by the kernel's Hccl client (lib/hccl/hccl.h). On CANN both sides belong to the HCCL library
// too (asc-devkit impl/adv_api/tiling/hccl/hccl_tiling.cpp: Mc2InitTilingInner, Mc2CcTilingInner);
// the fields here are the ones that library fills, in an order of the simulator's own.
#pragma once

#include <cstdint>

namespace acl_fa_sim {
namespace hccl_tiling {

constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxCcTilings = 8;  // Mc2CcTiling structs one Mc2InitTiling can list (MAX_CC_TILING_NUM)
constexpr uint32_t kGroupNameBytes = 128;
constexpr uint32_t kAlgConfigBytes = 128;
// The A2/A3 limit on Prepare calls (and InterHcclGroupSync) in one communication domain
// (HCCL-Kernel侧接口/AllGather.md, 约束说明).
constexpr int32_t kMaxPrepare = 63;

struct InitTilingLayout {
    uint32_t version;                 // kVersion once Mc2CcTilingConfig::GetTiling(Mc2InitTiling&) ran
    uint32_t ccCount;                 // Mc2CcTiling structs made after it
    uint32_t offset[kMaxCcTilings];   // bytes from the Mc2InitTiling to each of them
    uint16_t queueNum;
    uint16_t commBlockNum;
    uint8_t debugMode;
    uint8_t pad[19];
};
static_assert(sizeof(InitTilingLayout) == 64, "Mc2InitTiling is 64 bytes");

struct CcTilingLayout {
    uint8_t skipLocalRankCopy;
    uint8_t skipBufferWindowCopy;
    uint8_t stepSize;
    uint8_t version;                  // 1 once filled
    char groupName[kGroupNameBytes];  // the communicator's name (HcclGetCommName)
    char algConfig[kAlgConfigBytes];  // e.g. "AllGather=level0:doublering"
    uint32_t opType;                  // AscendC::HcclCMDType
    uint32_t reduceType;              // AscendC::HcclReduceOp
    uint8_t srcDataType;
    uint8_t dstDataType;
    uint8_t commEngine;
    uint8_t pad[512 - 4 - kGroupNameBytes - kAlgConfigBytes - 8 - 3];
};
static_assert(sizeof(CcTilingLayout) == 512, "Mc2CcTiling is 512 bytes");

}  // namespace hccl_tiling
}  // namespace acl_fa_sim
