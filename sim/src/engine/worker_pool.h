// worker_pool.h -- the host threads that run simulated cores, kept for the whole process.
//
// Starting threads for every launch cost tens of microseconds per launch (stack mapping and
// clone), more than a tiny kernel's whole work; the pool starts them once and parks them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace acl_fa_sim {
namespace kernel {

class WorkerPool {
public:
    // The process's pool (never destroyed: parked threads end with the process).
    static WorkerPool &Instance();

    // In a forked child (only the forking thread exists): abandons the inherited pool, whose
    // threads and any job in flight are the parent's, for a new one that starts its own
    // threads on the first Run(). Registered with pthread_atfork by fork.cpp.
    static void AbandonInChild();

    // Runs `job` on `workers` threads at once -- the calling thread and workers - 1 pool
    // threads -- and returns when every one of them has returned from it. One job at a
    // time: concurrent callers (launches from several streams) take turns.
    void Run(size_t workers, const std::function<void()> &job);

private:
    WorkerPool() = default;
    void Loop();

    static WorkerPool *instance_;

    std::mutex runMutex_;                  // serializes Run()
    std::mutex mutex_;                     // guards everything below
    std::condition_variable wake_;         // a new job was posted
    std::condition_variable done_;         // a pool thread finished its share
    std::vector<std::thread> threads_;
    const std::function<void()> *job_ = nullptr;
    uint64_t generation_ = 0;              // bumped per posted job
    size_t unclaimed_ = 0;                 // pool threads still to join the current job
    size_t running_ = 0;                   // pool threads not yet finished with it
};

}  // namespace kernel
}  // namespace acl_fa_sim
