// timing.h -- the discrete-event pipeline model and the pipe-race rule over a launch's
// instruction trace (engine-internal; the C API is in acl_fa_sim_kernel.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acl_fa_sim_kernel.h"
#include "ascendc_sim/optrace.h"

namespace acl_fa_sim {
namespace kernel {

// One traced core of a launch.
struct TracedCore {
    bool isAic = false;
    uint32_t blockIdx = 0;
    uint16_t traceCore = 0;  // aclfaSimGmAccess::core numbering
    uint32_t server = 0;     // index (in the launch's core list) of the core whose cube runs its Matmul jobs
};

struct LaunchTrace {
    std::vector<TracedCore> cores;
    std::vector<OpTrace> traces;  // one per core, same order
};

struct ModelResult {
    aclfaSimModelStats stats{};
    std::vector<aclfaSimModeledOp> ops;    // filled when asked
    std::vector<aclfaSimGmAccess> gm;      // GM accesses in modeled order, when asked
    std::string race;                      // first race found (rule message), empty if none
    std::string error;                     // the replay could not finish (e.g. a SyncAll nobody joins)
    double gmBytes = 0;                    // GM bytes moved (MTE2, MTE3, cube loads and results)
};

// Replays `trace` with `costs`. keepSchedule fills ops and gm; checkRaces applies the rule.
void ModelLaunch(const LaunchTrace &trace, const aclfaSimPipeCosts &costs, bool keepSchedule, bool checkRaces,
                 ModelResult *out);

// The trace mode aclfaSimSetOpTrace set (0 when off).
int OpTraceMode();
// Keeps a finished launch's trace, models it and publishes the result; returns the race
// message (empty when none or not checked).
std::string PublishLaunchTrace(LaunchTrace &&trace);

}  // namespace kernel
}  // namespace acl_fa_sim
