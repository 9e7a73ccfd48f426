// fork.cpp -- the runtime's pthread_atfork handlers (see "fork" in rt_internal.h).
//
// Only leaf locks are held across fork (the configuration and the fault spec: no other lock
// is taken while one of them is held), so the prepare handler cannot deadlock and never waits
// for a running kernel. Everything the child abandons is replaced, not unlocked: its locks may
// be held by threads that do not exist in the child.
#include <pthread.h>

#include "rt_internal.h"

namespace acl_fa_sim {
namespace rt {
namespace {

void PrepareFork() {
    LockConfig();
    LockFaults();
}

void AfterForkInParent() {
    UnlockFaults();
    UnlockConfig();
}

void AfterForkInChild() {
    UnlockFaults();
    UnlockConfig();
    AbandonDevicesInChild();
    AbandonEventsInChild();
    AbandonMemoryInChild();
    AbandonInitInChild();
    ZeroLiveInChild();
}

struct ForkHandlers {
    ForkHandlers() { pthread_atfork(PrepareFork, AfterForkInParent, AfterForkInChild); }
} g_forkHandlers;

}  // namespace
}  // namespace rt
}  // namespace acl_fa_sim
