// nnopbase_internal.h -- what the modules of the simulated nnopbase (libnnopbase.so) share.
#pragma once

#include <mutex>
#include <set>

#include "aclnn/aclnn_base.h"
#include "aclnn/opdev/op_errno.h"
#include "acl_fa_sim.h"

namespace acl_fa_sim {
namespace nnopbase {

// Live objects of one kind, so a destroy of a dead or foreign pointer is reported instead of
// corrupting memory, and so the runtime's counters stay exact. In a forked child every set is
// emptied: the parent's objects are not the child's (they are abandoned, never destroyed).
class LiveSet {
public:
    explicit LiveSet(aclfaSimLiveKind kind);  // registers the set for the fork handlers
    LiveSet(const LiveSet &) = delete;
    LiveSet &operator=(const LiveSet &) = delete;
    void Add(const void *object);
    bool Remove(const void *object);  // false when not live
    bool Contains(const void *object);

private:
    friend struct LiveSetForkHandlers;
    const aclfaSimLiveKind kind_;
    std::mutex mutex_;
    std::set<const void *> objects_;
};

// What every aclDestroy<Object> does: `api` may be failed by injection; NULL is a success; an
// object `live` does not hold is refused ("%p is not a live <what> (destroyed twice?)"), a live
// one forgotten and deleted.
template <typename Object>
aclnnStatus DestroyLive(const char *api, LiveSet &live, const Object *object, const char *what) {
    if (aclfaSimShouldFail(api)) return ACLNN_ERR_INNER;
    if (object == nullptr) return ACLNN_SUCCESS;
    if (!live.Remove(object)) {
        aclfaSimSetErrMsg("%s: %p is not a live %s (destroyed twice?)", api, static_cast<const void *>(object), what);
        return ACLNN_ERR_PARAM_INVALID;
    }
    delete object;
    return ACLNN_SUCCESS;
}

// True for the values of aclDataType (ACL_DT_UNDEFINED excluded).
bool IsKnownDataType(int32_t dataType);

}  // namespace nnopbase
}  // namespace acl_fa_sim
