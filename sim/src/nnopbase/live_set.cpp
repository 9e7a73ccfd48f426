// live_set.cpp -- LiveSet (see nnopbase_internal.h) and the data-type table.
#include <pthread.h>

#include <vector>

#include "nnopbase_internal.h"

namespace acl_fa_sim {
namespace nnopbase {
namespace {

// Every LiveSet ever made (they are never destroyed).
struct AllSets {
    std::mutex mutex;
    std::vector<LiveSet *> sets;  // guarded by mutex
};

AllSets &All() {
    static AllSets *all = new AllSets;
    return *all;
}

}  // namespace

// pthread_atfork handlers: every set's lock is held across fork (leaf locks: nothing else is
// locked while one is held), so the child sees each set whole, then empties it.
struct LiveSetForkHandlers {
    static void Prepare() {
        All().mutex.lock();
        for (LiveSet *set : All().sets) set->mutex_.lock();
    }
    static void Parent() {
        for (LiveSet *set : All().sets) set->mutex_.unlock();
        All().mutex.unlock();
    }
    static void Child() {
        for (LiveSet *set : All().sets) {
            set->objects_.clear();
            set->mutex_.unlock();
        }
        All().mutex.unlock();
    }
    LiveSetForkHandlers() { pthread_atfork(Prepare, Parent, Child); }
};

namespace {
LiveSetForkHandlers g_forkHandlers;
}  // namespace

LiveSet::LiveSet(aclfaSimLiveKind kind) : kind_(kind) {
    std::lock_guard<std::mutex> lock(All().mutex);
    All().sets.push_back(this);
}

void LiveSet::Add(const void *object) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        objects_.insert(object);
    }
    aclfaSimCountLive(kind_, 1);
}

bool LiveSet::Remove(const void *object) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (objects_.erase(object) == 0) return false;
    }
    aclfaSimCountLive(kind_, -1);
    return true;
}

bool LiveSet::Contains(const void *object) {
    std::lock_guard<std::mutex> lock(mutex_);
    return objects_.count(object) != 0;
}

bool IsKnownDataType(int32_t dataType) {
    switch (dataType) {
        case ACL_FLOAT: case ACL_FLOAT16: case ACL_INT8: case ACL_INT32: case ACL_UINT8: case ACL_INT16:
        case ACL_UINT16: case ACL_UINT32: case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_BOOL:
        case ACL_STRING: case ACL_COMPLEX64: case ACL_COMPLEX128: case ACL_BF16: case ACL_INT4: case ACL_UINT1:
        case ACL_COMPLEX32: case ACL_HIFLOAT8: case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN: case ACL_FLOAT8_E8M0:
        case ACL_FLOAT6_E3M2: case ACL_FLOAT6_E2M3: case ACL_FLOAT4_E2M1: case ACL_FLOAT4_E1M2:
            return true;
        default:
            return false;
    }
}

}  // namespace nnopbase
}  // namespace acl_fa_sim
