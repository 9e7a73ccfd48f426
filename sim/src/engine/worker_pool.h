// worker_pool.h -- the host threads that run simulated cores, kept for the whole process
// (WorkerPool), and the spares a blocked core lends its place to (SpareThreads).
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

// Host threads lent to a launch while one of its cores blocks (CrossCore's spare worker: a
// core waiting at SyncAll or for a flag lets the cores not started yet run, even with
// ACL_FA_SIM_THREADS=1). A new thread per spare cost a clone, a stack and fresh 700 KiB arenas
// per launch; here a spare parks when its job is done and the next launch that needs one takes
// it. A spare parked for kIdleSeconds ends (and frees its arenas): a launch of many cores can
// need dozens at once, which should not stay with the process. (A spare that ran a core holds
// thread_local arenas, whose destructors keep this library loaded until the spare ends.)
class SpareThreads {
public:
    // The pending spares of one launch: it waits in Wait() until every job it started returned.
    class Group {
    public:
        void Wait();

    private:
        friend class SpareThreads;
        void Done();
        std::mutex mutex_;
        std::condition_variable done_;
        size_t pending_ = 0;
    };

    static constexpr double kIdleSeconds = 2.0;

    // The process's spares (never destroyed: parked threads end with the process or when idle).
    static SpareThreads &Instance();
    // In a forked child: abandons the inherited spares (their threads are the parent's), as
    // WorkerPool::AbandonInChild.
    static void AbandonInChild();

    // Runs `job` once on a parked spare, or on a new one when none is parked; `group` counts it
    // until the spare returned from it and parked again (the job must outlive that).
    void Start(const std::function<void()> &job, Group &group);

private:
    struct Parked;
    SpareThreads() = default;
    void Loop(Parked *self);

    static SpareThreads *instance_;

    std::mutex mutex_;               // guards everything below and every Parked
    std::vector<Parked *> parked_;   // waiting for a job, the most recently parked last
};

}  // namespace kernel
}  // namespace acl_fa_sim
