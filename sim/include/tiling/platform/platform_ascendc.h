// tiling/platform/platform_ascendc.h -- the chip as a TilingFunc sees it (asc-devkit
// include/utils/tiling/platform/platform_ascendc.h, subset). Simulator: the PlatFormInfos
// a context hands out describe the simulated chip (aclfaSimGetChip()).
#pragma once

#include <cstdint>

namespace fe {
class PlatFormInfos;
}  // namespace fe

namespace platform_ascendc {
enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6, FB = 7, BT = 8, RESERVED };

enum class SocVersion {
    ASCEND910 = 0,  // Ascend910A
    ASCEND910B,     // Ascend910B1~4, Ascend910_93
    ASCEND310P,     // Ascend310P1, Ascend310P3
    ASCEND310B,
    RESERVED_VERSION = 99999
};

class PlatformAscendC {
 public:
    PlatformAscendC() = delete;
    ~PlatformAscendC() = default;
    explicit PlatformAscendC(fe::PlatFormInfos *platformInfo) : platformInfo_(platformInfo) {}
    // AI Cores (cube cores on split chips).
    uint32_t GetCoreNum(void) const;
    // Cube cores; on coupled chips (910A, 310P) the AI Core count.
    uint32_t GetCoreNumAic(void) const;
    // Vector cores; on coupled chips (910A, 310P) the AI Core count.
    uint32_t GetCoreNumAiv(void) const;
    // ceil(sliceNum / (aiv / aic)); 0 when a 1:2 mix would need more blocks than AIC cores.
    uint32_t CalcTschNumBlocks(uint32_t sliceNum, uint32_t aicCoreNum, uint32_t aivCoreNum) const;
    // System workspace the Ascend C API libraries need: 16 MiB on 910B/910_93, else 2 MiB.
    uint32_t GetLibApiWorkSpaceSize(void) const;
    // Bytes of one core's memory; UB and L1 without the 256 B 910B-class chips reserve.
    void GetCoreMemSize(const CoreMemType &memType, uint64_t &size) const;
    // One AI Core's bandwidth to a memory in bytes per cycle: L2 the platform file's
    // [AICoreMemoryRates] l2_rate, HBM its ddr_rate; 0 for the other types (not supported).
    void GetCoreMemBw(const CoreMemType &memType, uint64_t &bwSize) const;
    SocVersion GetSocVersion(void) const;

 private:
    fe::PlatFormInfos *platformInfo_;
};
}  // namespace platform_ascendc
