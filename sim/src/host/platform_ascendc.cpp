// platform_ascendc.cpp -- PlatformAscendC answering with the simulated chip.
#include "tiling/platform/platform_ascendc.h"

#include "node_data.h"

namespace platform_ascendc {
namespace {
constexpr int32_t kArch910B = 2201;  // dav-2201: 910B / 910_93
constexpr uint32_t kLibApiWorkspace910B = 16u * 1024 * 1024;
constexpr uint32_t kLibApiWorkspaceOther = 2u * 1024 * 1024;
constexpr uint32_t kMixAicAivRatio = 2;  // 910B-class MIX kernels: 1 AIC + 2 AIV per block
}  // namespace

uint32_t PlatformAscendC::GetCoreNum(void) const {
    // As documented for CANN: the vector cores on chips with separate cube and vector cores
    // (Atlas A2/A3), the AI Cores on coupled chips.
    const aclfaSimChip &chip = platformInfo_->Chip();
    return chip.coupled != 0 ? chip.aicNum : chip.aivNum;
}

uint32_t PlatformAscendC::GetCoreNumAic(void) const { return platformInfo_->Chip().aicNum; }

uint32_t PlatformAscendC::GetCoreNumAiv(void) const {
    const aclfaSimChip &chip = platformInfo_->Chip();
    // Coupled chips have no separate vector cores: CANN answers the AI Core count.
    return chip.coupled != 0 ? chip.aicNum : chip.aivNum;
}

uint32_t PlatformAscendC::CalcTschNumBlocks(uint32_t sliceNum, uint32_t aicCoreNum, uint32_t aivCoreNum) const {
    if (aicCoreNum == 0 || aivCoreNum == 0 || aicCoreNum > aivCoreNum) return sliceNum;
    const uint32_t ratio = aivCoreNum / aicCoreNum;
    const uint32_t numBlocks = (sliceNum + ratio - 1) / ratio;
    if (ratio == kMixAicAivRatio && numBlocks > aicCoreNum) return 0;
    return numBlocks;
}

uint32_t PlatformAscendC::GetLibApiWorkSpaceSize(void) const {
    return platformInfo_->Chip().npuArch == kArch910B ? kLibApiWorkspace910B : kLibApiWorkspaceOther;
}

void PlatformAscendC::GetCoreMemSize(const CoreMemType &memType, uint64_t &size) const {
    const aclfaSimChip &chip = platformInfo_->Chip();
    switch (memType) {
        case CoreMemType::L0_A: size = chip.l0aBytes; break;
        case CoreMemType::L0_B: size = chip.l0bBytes; break;
        case CoreMemType::L0_C: size = chip.l0cBytes; break;
        case CoreMemType::L1: size = chip.l1Bytes; break;  // the catalogue holds the answer after the reserve
        case CoreMemType::L2: size = chip.l2Bytes; break;
        case CoreMemType::UB: size = chip.ubBytes; break;
        case CoreMemType::HBM: size = chip.hbmBytes; break;
        default: size = 0; break;  // FB / BT: not modelled
    }
}

void PlatformAscendC::GetCoreMemBw(const CoreMemType &memType, uint64_t &bwSize) const {
    // As CANN's PlatFormInfos::GetLocalMemBw: only L2 and HBM have a rate (docs/chips.md).
    const aclfaSimChip &chip = platformInfo_->Chip();
    switch (memType) {
        case CoreMemType::L2: bwSize = chip.l2Rate; break;
        case CoreMemType::HBM: bwSize = chip.ddrRate; break;
        default: bwSize = 0; break;
    }
}

SocVersion PlatformAscendC::GetSocVersion(void) const {
    return static_cast<SocVersion>(platformInfo_->Chip().socVersion);
}

}  // namespace platform_ascendc
