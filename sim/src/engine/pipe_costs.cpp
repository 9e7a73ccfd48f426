// pipe_costs.cpp -- the timing model's cost table per chip of the catalogue, each constant with
// its source or the word "assumed" (docs/timing_model.md lists them with the sensitivity of the
// modeled time to each assumed one). Nothing here is fitted to any measurement.
#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"

namespace {

struct Field {
    const char *name;  // the aclfaSimPipeCosts member, in declaration order
    const char *source;
};

// clang-format off
const Field kFields[] = {
    {"clockMHz", "chip catalogue (sim/src/runtime/chips.cpp)"},
    {"scalarIssueCycles", "assumed"},
    {"scalarAccessCycles", "assumed"},
    {"vectorIssueCycles", "assumed"},
    {"vectorRepeatCycles",
     "one 256-B repeat per cycle (docs/timing_model.md: vector unit)"},
    {"vectorExpRepeatCycles", "assumed"},
    {"cubeFractalCycles",
     "16x16x16 fp16 MACs per cycle: fp16 peak = AIC x clock x 8192 FLOP (docs/timing_model.md: cube)"},
    {"gmBytesPerCycle",
     "derived: AI Cores x the ini's l2_rate, GetCoreMemBw(L2) (docs/timing_model.md: GM bandwidth)"},
    {"corePortBytesPerCycle", "the ini's l2_rate = l2_read_rate, GetCoreMemBw(L2) (docs/chips.md)"},
    {"mte2LatencyCycles", "assumed"},
    {"mte3LatencyCycles", "assumed"},
    {"mte1BytesPerCycle", "the ini's l1_to_l0_b_rate; L0A loads counted at it too (docs/timing_model.md)"},
    {"fixpipeBytesPerCycle", "assumed"},
    {"fixpipeLatencyCycles", "assumed"},
    {"flagLatencyCycles", "assumed"},
    {"barrierCycles", "assumed"},
    {"matmulRequestCycles", "assumed"},
    {"syncAllCycles", "assumed"},
    {"hbmBytesPerCycle",
     "chip catalogue HBM GB/s / clock (sim/src/runtime/chips.cpp; assumed where marked there)"},
    {"crossCoreFlagCycles", "assumed"},
    {"corePortWriteBytesPerCycle", "the ini's l2_write_rate (docs/chips.md)"},
    {"mte3BytesPerCycle", "the ini's ub_to_l2_rate (docs/chips.md)"},
};
// clang-format on
constexpr uint32_t kFieldCount = sizeof(kFields) / sizeof(kFields[0]);

}  // namespace

extern "C" aclError aclfaSimGetPipeCosts(const char *chipName, aclfaSimPipeCosts *costs) {
    if (costs == nullptr) return ACL_ERROR_INVALID_PARAM;
    const aclfaSimChip *chip = chipName == nullptr ? aclfaSimGetChip() : aclfaSimFindChip(chipName);
    if (chip == nullptr) return ACL_ERROR_INVALID_PARAM;
    const double hz = chip->clockMHz * 1e6;
    aclfaSimPipeCosts c;
    c.clockMHz = chip->clockMHz;
    c.scalarIssueCycles = 8;
    c.scalarAccessCycles = 20;
    c.vectorIssueCycles = 12;
    c.vectorRepeatCycles = 1;
    c.vectorExpRepeatCycles = 2;
    c.cubeFractalCycles = 1;
    // Per-core rates are the platform file's [AICoreMemoryRates] (bytes per cycle per AI Core);
    // the chip's L2 rate is all AI Cores at l2_rate, as ddr_rate x cores matches the chip's HBM
    // rate (docs/timing_model.md: GM bandwidth).
    c.gmBytesPerCycle = static_cast<double>(chip->aicNum) * chip->l2Rate;
    c.corePortBytesPerCycle = chip->l2Rate;
    c.mte2LatencyCycles = 400;
    c.mte3LatencyCycles = 200;
    c.mte1BytesPerCycle = chip->l1ToL0bRate;
    c.fixpipeBytesPerCycle = 128;
    c.fixpipeLatencyCycles = 100;
    c.flagLatencyCycles = 10;
    c.barrierCycles = 4;
    c.matmulRequestCycles = 400;
    c.syncAllCycles = 1000;
    c.hbmBytesPerCycle = chip->hbmBandwidthGBs * 1e9 / hz;
    c.crossCoreFlagCycles = 100;
    c.corePortWriteBytesPerCycle = chip->l2WriteRate;
    c.mte3BytesPerCycle = chip->ubToL2Rate;
    *costs = c;
    return ACL_SUCCESS;
}

extern "C" const char *aclfaSimPipeCostField(uint32_t index, const char **source) {
    if (index >= kFieldCount) return nullptr;
    if (source != nullptr) *source = kFields[index].source;
    return kFields[index].name;
}
