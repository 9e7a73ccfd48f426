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
    double compulsoryHbmBytes = 0;  // CompulsoryHbmBytes of the trace, set when it is published
};

// Bytes the launch must move across HBM whatever its schedule (footprint.cpp): the distinct GM
// bytes it reads and never writes, plus the distinct bytes it writes beyond l2Bytes.
double CompulsoryHbmBytes(const LaunchTrace &trace, uint64_t l2Bytes);

struct ModelResult {
    aclfaSimModelStats stats{};
    std::vector<aclfaSimModeledOp> ops;    // the schedule, with KEEP_OPS
    std::vector<aclfaSimGmAccess> gm;      // GM accesses in modeled order, with KEEP_GM
    std::string race;                      // first race found (rule message), empty if none
    std::string error;                     // the replay could not finish (e.g. a SyncAll nobody joins)
    double gmBytes = 0;                    // GM bytes moved (MTE2, MTE3, cube loads and results)
};

// What a replay keeps besides the statistics (a bit set). The schedule takes about 40 B per
// instruction and stage, so it is made only when asked for (aclfaSimGetModeledOps).
constexpr int KEEP_OPS = 1;  // ModelResult::ops
constexpr int KEEP_GM = 2;   // ModelResult::gm

// Replays `trace` with `costs` at the per-core GM rate that keeps the launch within the chip's;
// keep: KEEP_OPS | KEEP_GM; checkRaces applies the rule. The modeled time (stats.cycles) is the
// replay's or a memory bound when that is longer: all GM bytes at gmBytesPerCycle, the trace's
// compulsory HBM bytes at hbmBytesPerCycle.
void ModelLaunch(const LaunchTrace &trace, const aclfaSimPipeCosts &costs, int keep, bool checkRaces,
                 ModelResult *out);

// The trace mode aclfaSimSetOpTrace set (0 when off).
int OpTraceMode();
// Keeps a finished launch's trace, models it and publishes the result; returns the race
// message (empty when none or not checked).
std::string PublishLaunchTrace(LaunchTrace &&trace);

}  // namespace kernel
}  // namespace acl_fa_sim
