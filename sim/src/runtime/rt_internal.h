// rt_internal.h -- what the modules of the simulated ACL runtime (libascendcl.so) share.
// Not installed, not part of any ABI.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "acl/acl.h"
#include "acl_fa_sim.h"

namespace acl_fa_sim {
namespace rt {

// ---- error messages (errmsg.cpp) ----------------------------------------------------------
// Records a printf-style message for aclGetRecentErrMsg() on the calling thread and returns
// `code`, so an API can `return Fail(code, "...")`.
aclError Fail(aclError code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Moves the live object `handle` of `live` (a map from handles, guarded by `mutex`) into *taken
// and forgets it, once `refuse(object)` (ACL_SUCCESS, or the error it reported) lets it go: what
// every aclrtDestroy* does first. ACL_ERROR_RT_PARAM_INVALID, naming `api` and `what`, when
// `handle` is not live.
template <typename Map, typename Refuse>
aclError TakeLive(std::mutex &mutex, Map &live, void *handle, const char *api, const char *what,
                  typename Map::mapped_type *taken, Refuse refuse) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(handle);
    if (it == live.end()) return Fail(ACL_ERROR_RT_PARAM_INVALID, "%s: %s %p is not a live %s", api, what, handle, what);
    const aclError refused = refuse(*it->second);
    if (refused != ACL_SUCCESS) return refused;
    *taken = std::move(it->second);
    live.erase(it);
    return ACL_SUCCESS;
}

// ---- configuration from the environment (config.cpp) --------------------------------------
constexpr uint32_t kMaxDevices = 64;

// Re-reads ACL_FA_SIM_SOC, ACL_FA_SIM_HBM_BYTES and ACL_FA_SIM_DEVICE_COUNT. On a bad value
// returns ACL_ERROR_INVALID_PARAM with the message set and keeps the previous configuration.
aclError LoadConfigFromEnv();
uint32_t DeviceCount();
uint64_t HbmCapacityBytes();  // per device

// ---- live-object counters (accounting.cpp) ------------------------------------------------
struct LiveCounters {
    std::atomic<int64_t> deviceAllocations{0};
    std::atomic<int64_t> deviceBytes{0};
    std::atomic<int64_t> hostAllocations{0};
    std::atomic<int64_t> streams{0};
    std::atomic<int64_t> events{0};
    std::atomic<int64_t> contexts{0};
    std::atomic<int64_t> tensors{0};
    std::atomic<int64_t> arrays{0};
    std::atomic<int64_t> scalars{0};
    std::atomic<int64_t> executors{0};
};
LiveCounters &Live();

// ---- initialization state (init.cpp) ------------------------------------------------------
bool IsInitialized();
int64_t InitCount();

// ---- devices, contexts, streams (device.cpp, stream.cpp) ----------------------------------
class Stream;

// Resolves the calling thread's current context. On failure returns the error (message
// names `api`) and leaves the outputs untouched.
aclError CurrentDevice(const char *api, int32_t *device);

// Resolves a stream handle for `api` (NULL = default stream of the current context) and
// checks that it belongs to the current context's device.
aclError ResolveStream(const char *api, aclrtStream handle, std::shared_ptr<Stream> *out);

// A task run in order on a stream's worker thread. Returns ACL_SUCCESS or an error code with
// *message explaining it.
struct Task {
    std::string name;
    aclError (*run)(void *state, std::string *message) = nullptr;
    void *state = nullptr;
    void (*release)(void *state) = nullptr;  // called once after the run or the discard
    // Runs even when an earlier task of the stream failed (event records: a stream waiting for
    // the event must not be held for ever by another stream's failure, which that stream's
    // synchronize reports).
    bool runAfterFailure = false;
};

// Adds the task to the stream's queue (never fails once the stream is resolved).
void Enqueue(Stream &stream, Task task);

// Sum of aclrtSetDevice references not yet reset, over all devices.
int64_t DevicesSetCount();

// Drains and releases every device (aclFinalize).
void ReleaseAllDevices();

// ---- fork (fork.cpp) ----------------------------------------------------------------------
// A forked child has only the thread that called fork(): the stream workers are gone, and as
// on CANN (a context does not cross fork) every handle inherited from the parent is invalid
// there. The child handler abandons the inherited state -- never destroyed, its threads do not
// exist -- so the child starts as a process that never called aclInit; a new aclInit,
// aclrtSetDevice and so on then work. State kept across fork (configuration, fault spec) is
// locked around the fork so that the child inherits it consistent.
void AbandonDevicesInChild();  // device.cpp: contexts, streams, the thread's current context
void AbandonMemoryInChild();   // memory.cpp: device and host blocks
void AbandonEventsInChild();   // event.cpp
void AbandonInitInChild();     // init.cpp: the aclInit reference count
void ZeroLiveInChild();        // accounting.cpp: the child owns no objects yet
void LockConfig();             // chips.cpp, held across fork
void UnlockConfig();
void LockFaults();             // faults.cpp, held across fork
void UnlockFaults();

}  // namespace rt
}  // namespace acl_fa_sim
