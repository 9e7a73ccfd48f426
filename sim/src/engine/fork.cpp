// fork.cpp -- the engine's pthread_atfork handlers. A forked child has only the forking
// thread: the worker pool's and the spares' threads are the parent's, so the child gets new
// ones; the GM trace, the last launch's counters and the GM atomic-add lock are kept, their
// (leaf) locks held across fork so the child inherits them consistent and unlocked. Prepare
// waits at most for one atomic add or trace record, never for a whole kernel.
#include <pthread.h>

#include "engine_internal.h"
#include "worker_pool.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

void PrepareFork() {
    AtomicMutex().lock();
    TraceMutex().lock();
    StatsMutex().lock();
}

void UnlockKept() {
    StatsMutex().unlock();
    TraceMutex().unlock();
    AtomicMutex().unlock();
}

void AfterForkInChild() {
    UnlockKept();
    WorkerPool::AbandonInChild();
    SpareThreads::AbandonInChild();
}

struct ForkHandlers {
    ForkHandlers() { pthread_atfork(PrepareFork, UnlockKept, AfterForkInChild); }
} g_forkHandlers;

}  // namespace
}  // namespace kernel
}  // namespace acl_fa_sim
