// pipe_costs.cpp -- the timing model's cost table per chip of the catalogue, each constant with
// its source or the word "assumed" (docs/timing_model.md lists them with the sensitivity of the
// modeled time to each assumed one). Nothing here is fitted to any measurement.
#include <cstring>
#include <strings.h>

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
     "assumed (910B4 half of the other 910B: docs/timing_model.md: GM bandwidth)"},
    {"corePortBytesPerCycle", "assumed"},
    {"mte2LatencyCycles", "assumed"},
    {"mte3LatencyCycles", "assumed"},
    {"mte1BytesPerCycle", "assumed"},
    {"fixpipeBytesPerCycle", "assumed"},
    {"fixpipeLatencyCycles", "assumed"},
    {"flagLatencyCycles", "assumed"},
    {"barrierCycles", "assumed"},
    {"matmulRequestCycles", "assumed"},
    {"syncAllCycles", "assumed"},
    {"hbmBytesPerCycle",
     "chip catalogue HBM GB/s / clock (sim/src/runtime/chips.cpp; assumed where marked there)"},
    {"crossCoreFlagCycles", "assumed"},
};
// clang-format on
constexpr uint32_t kFieldCount = sizeof(kFields) / sizeof(kFields[0]);

// GM (L2) bandwidth in GB/s, all assumed: 910B4 at half the other 910B parts, as
// hw-native-sys/pto-isa's FA cost model scales it (docs/timing_model.md).
double GmBandwidthGBs(const aclfaSimChip &chip) {
    if (strcasecmp(chip.name, "Ascend910B4") == 0) return 2000.0;
    if (chip.npuArch == 2201) return 4000.0;
    if (chip.npuArch == 1001) return 2000.0;  // 910A
    return 400.0;                             // 310P
}

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
    c.gmBytesPerCycle = GmBandwidthGBs(*chip) * 1e9 / hz;
    c.corePortBytesPerCycle = 128;
    c.mte2LatencyCycles = 400;
    c.mte3LatencyCycles = 200;
    c.mte1BytesPerCycle = 256;
    c.fixpipeBytesPerCycle = 128;
    c.fixpipeLatencyCycles = 100;
    c.flagLatencyCycles = 10;
    c.barrierCycles = 4;
    c.matmulRequestCycles = 400;
    c.syncAllCycles = 1000;
    c.hbmBytesPerCycle = chip->hbmBandwidthGBs * 1e9 / hz;
    c.crossCoreFlagCycles = 100;
    *costs = c;
    return ACL_SUCCESS;
}

extern "C" const char *aclfaSimPipeCostField(uint32_t index, const char **source) {
    if (index >= kFieldCount) return nullptr;
    if (source != nullptr) *source = kFields[index].source;
    return kFields[index].name;
}
