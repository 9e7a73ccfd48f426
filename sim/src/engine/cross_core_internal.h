// cross_core_internal.h -- the launch's cross-core state (SyncAll barrier, IBSet/IBWait flags) and
// the GM atomic add.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ascendc_sim/core.h"

namespace acl_fa_sim {
namespace kernel {

// Adds `bytes` of src to dst element-wise (tag: 0 float, 1 half, 2 bfloat16, 3 int32) under
// the process's atomic lock.
void AddToGm(void *dst, const void *src, uint64_t bytes, int tag);

// The SyncAll barrier of one launch. Cores are identified by CoreContext::launchIndex.
struct CrossCore {
    // isAic[i] / names[i]: kind and description of core i; startSpareWorker runs one more
    // host worker on the cores not started yet (no-op when none is left).
    CrossCore(const std::vector<bool> &isAic, const std::vector<std::string> &names, const volatile bool *abortFlag,
              std::function<void()> startSpareWorker);

    // SyncAll: returns when every participating core arrived; raises a violation for a hang.
    void Arrive(CoreContext &core, bool aivOnly);
    // IBSet (set) / IBWait on the 32-B flag block at `flag`: waits until flag[0] is 0 (IBSet)
    // or 1 (IBWait), copies the block to `ub` and flips flag[0] and ub[0]; raises a violation
    // for a hang. `call` names the call for messages, e.g. "IBWait(blockIdx 3, eventID 0)".
    void InterBlockFlag(CoreContext &core, bool set, int32_t *flag, int32_t *ub, const std::string &call);
    // The core left the kernel body (normally or by an error).
    void Finished(uint32_t core);
    // Wakes waiting cores so they see the launch's abort flag.
    void Abort();

private:
    bool Takes(uint32_t core, bool aivOnly) const;
    // Participants not arrived at the pending barrier (only those that finished, if finishedOnly).
    std::string Missing(bool aivOnly, bool finishedOnly) const;
    // True when no core of the launch can move: each left the kernel, waits at the pending
    // SyncAll or waits for a flag that holds the other value. Cores not started yet can move.
    bool NoCoreCanMove() const;
    // The cores waiting for a flag, with their calls.
    std::string FlagWaiters() const;

    std::vector<bool> isAic_;
    std::vector<std::string> names_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<bool> arrived_, finished_;
    uint32_t count_ = 0;            // arrivals at the pending barrier
    bool pendingAivOnly_ = true;
    uint64_t generation_ = 0;       // completed barriers
    // Per core: the flag it waits for in IBSet / IBWait (null when none), the value it waits
    // for and its call.
    std::vector<const int32_t *> flagWait_;
    std::vector<int32_t> flagWant_;
    std::vector<std::string> flagCall_;
    const volatile bool *abortFlag_;
    std::function<void()> startSpareWorker_;
    double timeout_;
};

}  // namespace kernel
}  // namespace acl_fa_sim
