// executor.cpp -- aclOpExecutor: created by the op-API layer in phase one
// (aclfaSimCreateExecutor), run in phase two (aclfaSimRunExecutor), single use unless made
// repeatable with aclSetAclOpExecutorRepeatable, then released by aclDestroyAclOpExecutor
// (hicann/ops-transformer docs/context/两段式接口.md). A single-use executor that is never run may also be
// destroyed, so a caller can clean up after a failure between the two phases.
#include <string>

#include "nnopbase_internal.h"

struct aclOpExecutor {
    std::string opType;
    void *payload;
    aclfaSimExecutorRunFn run;
    void (*destroyPayload)(void *payload);
    bool repeatable = false;
};

namespace acl_fa_sim {
namespace nnopbase {
namespace {

LiveSet &Executors() {
    static LiveSet *executors = new LiveSet(ACLFA_SIM_LIVE_EXECUTOR);  // never destroyed
    return *executors;
}

void Release(aclOpExecutor *executor) {
    if (executor->destroyPayload != nullptr) executor->destroyPayload(executor->payload);
    delete executor;
}

// ACLNN_SUCCESS for a live executor; else ACLNN_ERR_PARAM_NULLPTR with `null` as the message, or
// ACLNN_ERR_PARAM_INVALID with `notLivePrefix` <the pointer> `notLiveSuffix`.
aclnnStatus CheckLive(aclOpExecutor *executor, const char *null, const char *notLivePrefix,
                      const char *notLiveSuffix) {
    if (executor == nullptr) {
        aclfaSimSetErrMsg("%s", null);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!Executors().Contains(executor)) {
        aclfaSimSetErrMsg("%s%p%s", notLivePrefix, static_cast<void *>(executor), notLiveSuffix);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace nnopbase
}  // namespace acl_fa_sim

using namespace acl_fa_sim::nnopbase;

extern "C" {

aclOpExecutor *aclfaSimCreateExecutor(const char *opType, void *payload, aclfaSimExecutorRunFn run,
                                      void (*destroyPayload)(void *payload)) {
    if (run == nullptr) {
        aclfaSimSetErrMsg("aclfaSimCreateExecutor: run is NULL");
        return nullptr;
    }
    aclOpExecutor *executor = new aclOpExecutor;
    executor->opType = opType != nullptr ? opType : "";
    executor->payload = payload;
    executor->run = run;
    executor->destroyPayload = destroyPayload;
    Executors().Add(executor);
    return executor;
}

aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
    if (aclfaSimShouldFail("aclSetAclOpExecutorRepeatable")) return ACLNN_ERR_INNER;
    const aclnnStatus status = CheckLive(executor, "aclSetAclOpExecutorRepeatable: executor is NULL",
                                         "aclSetAclOpExecutorRepeatable: ", " is not a live executor (a single-use "
                                         "executor is consumed by its run)");
    if (status != ACLNN_SUCCESS) return status;
    executor->repeatable = true;
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
    if (aclfaSimShouldFail("aclDestroyAclOpExecutor")) return ACLNN_ERR_INNER;
    if (executor == nullptr) return ACLNN_SUCCESS;
    if (!Executors().Remove(executor)) {
        aclfaSimSetErrMsg("aclDestroyAclOpExecutor: %p is not a live executor (destroyed twice, or a single-use "
                          "executor already consumed by its run)",
                          static_cast<void *>(executor));
        return ACLNN_ERR_PARAM_INVALID;
    }
    Release(executor);
    return ACLNN_SUCCESS;
}

int32_t aclfaSimRunExecutor(aclOpExecutor *executor, void *workspace, uint64_t workspaceSize, aclrtStream stream) {
    const aclnnStatus live = CheckLive(executor, "aclnn phase two: executor is NULL", "aclnn phase two: executor ",
                                       " is not live (a single-use executor runs once; call "
                                       "aclSetAclOpExecutorRepeatable after GetWorkspaceSize to reuse it)");
    if (live != ACLNN_SUCCESS) return live;
    if (executor->repeatable) return executor->run(executor->payload, workspace, workspaceSize, stream);
    Executors().Remove(executor);  // consumed whatever the outcome, as CANN does
    const int32_t status = executor->run(executor->payload, workspace, workspaceSize, stream);
    Release(executor);
    return status;
}

}  // extern "C"
