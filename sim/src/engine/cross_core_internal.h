// cross_core_internal.h -- the launch's cross-core state (SyncAll barrier, IBSet/IBWait flags,
// CrossCoreSetFlag/CrossCoreWaitFlag counters) and the GM atomic add.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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
    // isAic[i] / blockIdx[i]: kind and block index of core i (taskRatio: AIVs per AIC, for its
    // description in messages); group[i]: its AI Core group (MIX kernels: the AIC's block, an
    // AIV's block / taskRatio; otherwise i); startSpareWorker runs one more host worker on the
    // cores not started yet (no-op when none is left).
    CrossCore(std::vector<bool> isAic, std::vector<uint32_t> blockIdx, uint32_t taskRatio, std::vector<uint32_t> group,
              const volatile bool *abortFlag, std::function<void()> startSpareWorker);

    // The hardware flags (ascendc_sim/cross_core.h: CrossCoreSetFlag). flagId < kCoreFlags.
    static constexpr int kCoreFlags = 16;
    static constexpr uint32_t kCoreFlagMaxSets = 16;  // sets a counter holds (docs: CrossCoreSetFlag)
    // The cores whose counter for flagId a set from `core` in `mode` raises, in order.
    std::vector<uint32_t> CoreFlagTargets(uint32_t core, int mode) const;
    // CrossCoreSetFlag: counts the set; raises a violation when a counter would exceed
    // kCoreFlagMaxSets. `call` names the call for messages.
    void CoreFlagSet(CoreContext &core, int mode, int flagId, const std::string &call);
    // CrossCoreWaitFlag: waits until the core's counter for flagId is > 0 and takes 1 from it;
    // returns the cores whose sets made that 1 (for the trace). Raises a violation for a hang.
    std::vector<uint32_t> CoreFlagWait(CoreContext &core, int flagId, const std::string &call);

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
    // A core is about to block on something outside the launch's cores (an HCCL task): another
    // host thread runs the cores not started yet meanwhile, as at SyncAll.
    void LendHostThread() { startSpareWorker_(); }

private:
    bool Takes(uint32_t core, bool aivOnly) const;
    // Core c as messages name it ("AIV 3 (block 1, sub-block 1)"), made only for a message.
    std::string Name(uint32_t c) const;
    // Participants not arrived at the pending barrier (only those that finished, if finishedOnly).
    std::string Missing(bool aivOnly, bool finishedOnly) const;
    // True when no core of the launch can move: each left the kernel, waits at the pending
    // SyncAll or waits for a flag that holds the other value. Cores not started yet can move.
    bool NoCoreCanMove() const;
    // The cores waiting for a flag, with their calls.
    std::string FlagWaiters() const;
    // Blocks (lock held) until ready(); raises a `rule` violation for a hang: at once when no
    // core can move any more (`hint` says what the wait needs), else after the time limit.
    // The waiting core is `me`: it sleeps on its own condition variable, woken by the sets meant
    // for it and, when a core's state change leaves no core able to move, by WakeFlagWaiters.
    void WaitForFlag(std::unique_lock<std::mutex> &lock, uint32_t me, const std::function<bool()> &ready,
                     const char *rule, const std::string &call, const std::string &hint);
    // Every flag waiter re-checks (lock held): for changes that are not one core's set.
    void WakeFlagWaiters();
    // After a core started waiting, left the kernel or arrived at SyncAll (lock held): when no
    // core can move any more, the flag waiters must see it now, not at their time limit.
    void WakeFlagWaitersIfStuck();

    // Cores taking part with `core` in a counted set of `mode` (mode 0: its kind; 1 and 2 from an
    // AIV: its group's AIVs; 2 from the AIC: itself).
    std::vector<uint32_t> CoreFlagPeers(uint32_t core, int mode) const;

    std::vector<bool> isAic_;
    std::vector<uint32_t> blockIdx_;
    uint32_t taskRatio_;
    std::vector<uint32_t> group_;
    std::mutex mutex_;
    std::condition_variable wake_;  // SyncAll's barrier
    // Per core: what its flag wait sleeps on (a set wakes only its targets, not every waiting core).
    std::vector<std::condition_variable> flagWake_;
    std::vector<bool> arrived_, finished_;
    uint32_t count_ = 0;            // arrivals at the pending barrier
    bool pendingAivOnly_ = true;
    uint64_t generation_ = 0;       // completed barriers
    // Per core: the flag it waits for in IBSet / IBWait (null when none), the value it waits
    // for and its call.
    std::vector<const int32_t *> flagWait_;
    std::vector<int32_t> flagWant_;
    std::vector<std::string> flagCall_;
    // Per core and flagId: the pending 1s of its counter (oldest first, at most kCoreFlagMaxSets),
    // each with the cores whose sets made it. A vector, not a deque: an empty one allocates
    // nothing, and a launch constructs kCoreFlags of them per core.
    std::vector<std::array<std::vector<std::vector<uint32_t>>, kCoreFlags>> coreFlags_;
    // Per core, mode and flagId: its sets still waiting for the other peers' (modes 0, 1, 2).
    std::vector<std::array<std::array<uint32_t, kCoreFlags>, 3>> coreFlagSets_;
    std::vector<int> coreFlagWait_;  // per core: the flagId it waits for in CrossCoreWaitFlag, or -1
    const volatile bool *abortFlag_;
    std::function<void()> startSpareWorker_;
    double timeout_;
};

}  // namespace kernel
}  // namespace acl_fa_sim
