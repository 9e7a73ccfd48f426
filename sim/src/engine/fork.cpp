// fork.cpp -- the engine's pthread_atfork handlers. A forked child has only the forking
// thread: the worker pool's threads are the parent's, so the child gets a new pool; the GM
// trace and the last launch's counters are kept, their (leaf) locks held across fork so the
// child inherits them consistent. Nothing here waits for a running kernel.
#include <pthread.h>

#include "engine_internal.h"
#include "worker_pool.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

void PrepareFork() {
    TraceMutex().lock();
    StatsMutex().lock();
}

void AfterForkInParent() {
    StatsMutex().unlock();
    TraceMutex().unlock();
}

void AfterForkInChild() {
    StatsMutex().unlock();
    TraceMutex().unlock();
    WorkerPool::AbandonInChild();
}

struct ForkHandlers {
    ForkHandlers() { pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild); }
} g_forkHandlers;

}  // namespace
}  // namespace kernel
}  // namespace acl_fa_sim
