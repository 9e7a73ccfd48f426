// worker_pool.cpp -- see worker_pool.h.
#include "worker_pool.h"

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

}  // namespace kernel
}  // namespace acl_fa_sim
