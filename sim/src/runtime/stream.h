// stream.h -- a simulated stream: an ordered queue of tasks run by one worker thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {

class Stream {
public:
    Stream(int32_t device, bool isDefault);
    ~Stream();  // Stop()s if still running
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;

    int32_t device() const { return device_; }
    bool isDefault() const { return isDefault_; }

    void Enqueue(Task task);

    // Waits until every task enqueued before the call has run. When a task failed since the
    // last synchronize, returns its code with its message (naming `api`) and clears it.
    // timeoutMs: -1 waits for ever; >= 0 returns ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when the
    // tasks have not all run by then (0: only checks), leaving them queued and any task
    // failure for a later synchronize.
    aclError Synchronize(const char *api, int32_t timeoutMs = -1);

    // Runs what is queued, then ends the worker thread. Idempotent.
    void Stop();

    // True once Stop() began: a task that blocks (aclrtStreamWaitEvent) gives up then, so a
    // stream whose wait can never be satisfied can still be destroyed.
    bool StopRequested() const { return stopRequested_.load(std::memory_order_acquire); }

private:
    void Run();

    const int32_t device_;
    const bool isDefault_;
    std::mutex mutex_;
    std::condition_variable workAvailable_;
    std::condition_variable taskDone_;
    std::deque<Task> queue_;     // guarded by mutex_
    uint64_t enqueued_ = 0;      // tasks ever enqueued; guarded by mutex_
    uint64_t completed_ = 0;     // tasks run or discarded; guarded by mutex_
    aclError error_ = ACL_SUCCESS;  // first failure since the last synchronize; later tasks are discarded
    std::string errorMessage_;
    bool stopping_ = false;
    std::atomic<bool> stopRequested_{false};
    std::thread worker_;
};

}  // namespace rt
}  // namespace acl_fa_sim
