#pragma once
// What every op's TilingFunc asks the platform about the chip it tiles for (the pure policies'
// ChipLimits), read the same way for the forward, the backward and decode.
#include "tiling/platform/platform_ascendc.h"
#include "tiling_policy.h"

namespace fa_host {

// The SoC family for messages (PlatformAscendC names the family, not the exact chip).
inline const char *SocText(platform_ascendc::SocVersion soc) {
    switch (soc) {
        case platform_ascendc::SocVersion::ASCEND910: return "Ascend910";
        case platform_ascendc::SocVersion::ASCEND910B: return "Ascend910B";
        case platform_ascendc::SocVersion::ASCEND310P: return "Ascend310P";
        default: return "this SoC";
    }
}

// The queried buffer sizes, L2 rate and core counts; socName and socVersion are the caller's to set.
inline void ReadChipBuffers(const platform_ascendc::PlatformAscendC &platform, fa_policy::ChipLimits *chip) {
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, chip->ubBytes);
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L1, chip->l1Bytes);
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_A, chip->l0aBytes);
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_B, chip->l0bBytes);
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, chip->l0cBytes);
    platform.GetCoreMemBw(platform_ascendc::CoreMemType::L2, chip->l2BytesPerCycle);
    chip->aicNum = platform.GetCoreNumAic();
    chip->aivNum = platform.GetCoreNumAiv();
}

}  // namespace fa_host
