// stream.cpp -- Stream (see stream.h) and aclfaSimStreamEnqueue.
#include "stream.h"

#include <chrono>
#include <cstring>

namespace acl_fa_sim {
namespace rt {

Stream::Stream(int32_t device, bool isDefault) : device_(device), isDefault_(isDefault) {
    worker_ = std::thread(&Stream::Run, this);
}

Stream::~Stream() { Stop(); }

void Stream::Enqueue(Task task) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
    ++enqueued_;
    workAvailable_.notify_one();
}

aclError Stream::Synchronize(const char *api, int32_t timeoutMs) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = enqueued_;
    const auto reached = [&] { return completed_ >= target; };
    if (timeoutMs < 0) {
        taskDone_.wait(lock, reached);
    } else if (!taskDone_.wait_for(lock, std::chrono::milliseconds(timeoutMs), reached)) {
        return Fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, "%s: %llu task(s) of the stream still unfinished after %d ms", api,
                    static_cast<unsigned long long>(target - completed_), timeoutMs);
    }
    if (error_ == ACL_SUCCESS) return ACL_SUCCESS;
    aclError code = error_;
    std::string message = std::move(errorMessage_);
    error_ = ACL_SUCCESS;
    errorMessage_.clear();
    return Fail(code, "%s: a task on the stream failed: %s", api, message.c_str());
}

void Stream::Stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return;
        stopping_ = true;
        stopRequested_.store(true, std::memory_order_release);
        workAvailable_.notify_all();
    }
    if (worker_.joinable()) worker_.join();
}

void Stream::Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        workAvailable_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        Task task = std::move(queue_.front());
        queue_.pop_front();
        // The stream is in error until a synchronize reports it; its tasks are discarded until then.
        const bool discard = error_ != ACL_SUCCESS && !task.runAfterFailure;
        lock.unlock();
        aclError ret = ACL_SUCCESS;
        std::string message;
        if (!discard) ret = task.run(task.state, &message);
        if (task.release != nullptr) task.release(task.state);
        lock.lock();
        if (ret != ACL_SUCCESS && error_ == ACL_SUCCESS) {
            error_ = ret;
            errorMessage_ = task.name + ": " + message;
        }
        ++completed_;
        taskDone_.notify_all();
    }
}

void Enqueue(Stream &stream, Task task) { stream.Enqueue(std::move(task)); }

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

namespace {

// State of one aclfaSimStreamEnqueue task.
struct HostTask {
    aclfaSimTaskFn fn;
    void *userData;
    void (*release)(void *userData);
};

aclError RunHostTask(void *state, std::string *message) {
    HostTask *task = static_cast<HostTask *>(state);
    char errBuf[4096];
    errBuf[0] = '\0';
    aclError ret = task->fn(task->userData, errBuf, sizeof(errBuf));
    if (ret != ACL_SUCCESS) *message = errBuf[0] != '\0' ? errBuf : "failed without a message";
    return ret;
}

void ReleaseHostTask(void *state) {
    HostTask *task = static_cast<HostTask *>(state);
    if (task->release != nullptr) task->release(task->userData);
    delete task;
}

}  // namespace

extern "C" {

aclError aclfaSimStreamEnqueue(aclrtStream stream, const char *taskName, aclfaSimTaskFn fn, void *userData,
                               void (*release)(void *userData)) {
    if (fn == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclfaSimStreamEnqueue: fn is NULL");
    std::shared_ptr<Stream> target;
    aclError ret = ResolveStream("aclfaSimStreamEnqueue", stream, &target);
    if (ret != ACL_SUCCESS) return ret;
    Task task;
    task.name = taskName != nullptr ? taskName : "task";
    task.run = RunHostTask;
    task.state = new HostTask{fn, userData, release};
    task.release = ReleaseHostTask;
    target->Enqueue(std::move(task));
    return ACL_SUCCESS;
}

}  // extern "C"
