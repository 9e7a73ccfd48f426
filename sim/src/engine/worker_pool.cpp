// worker_pool.cpp -- see worker_pool.h.
#include "worker_pool.h"

#include <algorithm>
#include <chrono>

namespace acl_fa_sim {
namespace kernel {

WorkerPool *WorkerPool::instance_ = new WorkerPool();

WorkerPool &WorkerPool::Instance() { return *instance_; }

void WorkerPool::AbandonInChild() { instance_ = new WorkerPool(); }

void WorkerPool::Run(size_t workers, const std::function<void()> &job) {
    std::lock_guard<std::mutex> run(runMutex_);
    const size_t helpers = workers > 0 ? workers - 1 : 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        while (threads_.size() < helpers) {
            threads_.emplace_back([this] { Loop(); });
            threads_.back().detach();
        }
        job_ = &job;
        unclaimed_ = helpers;
        running_ = helpers;
        ++generation_;
    }
    wake_.notify_all();
    job();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
}

void WorkerPool::Loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [&] { return generation_ != seen && unclaimed_ > 0; });
        seen = generation_;
        --unclaimed_;
        const std::function<void()> *job = job_;
        lock.unlock();
        (*job)();
        lock.lock();
        if (--running_ == 0) done_.notify_one();
    }
}

// A spare's state, on its own stack: the job it was given (null while parked) and the launch's
// group to tell when done. Guarded by SpareThreads::mutex_.
struct SpareThreads::Parked {
    std::condition_variable wake;
    const std::function<void()> *job = nullptr;
    Group *group = nullptr;
};

SpareThreads *SpareThreads::instance_ = new SpareThreads();

SpareThreads &SpareThreads::Instance() { return *instance_; }

void SpareThreads::AbandonInChild() { instance_ = new SpareThreads(); }

void SpareThreads::Group::Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
}

void SpareThreads::Group::Done() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_all();
}

void SpareThreads::Start(const std::function<void()> &job, Group &group) {
    {
        std::lock_guard<std::mutex> lock(group.mutex_);
        ++group.pending_;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!parked_.empty()) {
            Parked *spare = parked_.back();
            parked_.pop_back();
            spare->job = &job;
            spare->group = &group;
            spare->wake.notify_one();
            return;
        }
    }
    try {
        std::thread([this, &job, &group] {
            Parked self;
            self.job = &job;
            self.group = &group;
            Loop(&self);
        }).detach();
    } catch (...) {
        group.Done();
        throw;
    }
}

void SpareThreads::Loop(Parked *self) {
    for (;;) {
        (*self->job)();
        Group *group = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            group = self->group;
            self->job = nullptr;
            self->group = nullptr;
            parked_.push_back(self);
        }
        // Parked before the launch hears of it: a launch that follows takes this thread.
        group->Done();
        std::unique_lock<std::mutex> lock(mutex_);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kIdleSeconds);
        while (self->job == nullptr) {
            if (self->wake.wait_until(lock, deadline) == std::cv_status::timeout && self->job == nullptr) {
                parked_.erase(std::find(parked_.begin(), parked_.end(), self));
                return;
            }
        }
    }
}

}  // namespace kernel
}  // namespace acl_fa_sim
