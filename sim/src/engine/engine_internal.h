// engine_internal.h -- declarations shared by the engine's source files.
#pragma once

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

#include "acl_fa_sim.h"
#include "ascendc_sim/core.h"

namespace acl_fa_sim {
namespace kernel {

// A broken hardware rule; what() is the full message (rule, core, API, detail).
struct RuleViolation : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Reports a SetFlag that no WaitFlag consumed before the core finished.
void CheckEventsDrained(const CoreContext &core);

// System workspace the Ascend C libraries reserve (GetLibApiWorkSpaceSize): 16 MiB on
// the separated-architecture chips (Ascend910B / Ascend910_93), 2 MiB otherwise.
uint64_t LibApiWorkspaceBytes(const aclfaSimChip &chip);

// Locks a forked child keeps (fork.cpp holds them around fork()): the GM trace (checks.cpp),
// the last launch's counters (launch.cpp) and GM atomic adds (cross_core.cpp). All are leaf locks.
std::mutex &TraceMutex();
std::mutex &StatsMutex();
std::mutex &AtomicMutex();

}  // namespace kernel
}  // namespace acl_fa_sim
