// accounting.cpp -- live-object counters: aclfaSimGetLiveCounts, aclfaSimCountLive.
#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {

LiveCounters &Live() {
    // Never destroyed: objects may still be released during process exit.
    static LiveCounters *counters = new LiveCounters;
    return *counters;
}

void ZeroLiveInChild() {
    LiveCounters &live = Live();
    for (std::atomic<int64_t> *counter :
         {&live.deviceAllocations, &live.deviceBytes, &live.hostAllocations, &live.streams, &live.events,
          &live.contexts, &live.tensors, &live.arrays, &live.scalars, &live.executors}) {
        counter->store(0);
    }
}

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclfaSimGetLiveCounts(aclfaSimLiveCounts *counts) {
    if (counts == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclfaSimGetLiveCounts: counts is NULL");
    LiveCounters &live = Live();
    counts->deviceAllocations = live.deviceAllocations.load();
    counts->deviceBytes = live.deviceBytes.load();
    counts->hostAllocations = live.hostAllocations.load();
    counts->streams = live.streams.load();
    counts->events = live.events.load();
    counts->contexts = live.contexts.load();
    counts->tensors = live.tensors.load();
    counts->intArrays = live.arrays.load();
    counts->scalars = live.scalars.load();
    counts->executors = live.executors.load();
    counts->initCount = InitCount();
    counts->devicesSet = DevicesSetCount();
    return ACL_SUCCESS;
}

void aclfaSimCountLive(aclfaSimLiveKind kind, int64_t delta) {
    LiveCounters &live = Live();
    switch (kind) {
        case ACLFA_SIM_LIVE_TENSOR: live.tensors += delta; break;
        case ACLFA_SIM_LIVE_ARRAY: live.arrays += delta; break;
        case ACLFA_SIM_LIVE_SCALAR: live.scalars += delta; break;
        case ACLFA_SIM_LIVE_EXECUTOR: live.executors += delta; break;
    }
}

}  // extern "C"
