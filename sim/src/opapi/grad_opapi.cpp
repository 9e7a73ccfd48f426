// grad_opapi.cpp -- see grad_opapi.h.
#include "grad_opapi.h"

#include <memory>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"

namespace acl_fa_sim {
namespace opapi {
namespace {

// One launch: the entry, device pointers in kernel-argument order, the tiling, the workspace.
struct Launch {
    GradEntry entry{};
    std::vector<uint8_t *> gm;
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;
};

struct LaunchSpec {
    Launch launch;
    uint64_t workspaceSize = 0;
};

aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *l = static_cast<const Launch *>(userData);
    std::string error;
    acl_fa_sim::SetLaunchTilingKey(l->tilingKey);
    const aclError rc = acl_fa_sim::LaunchKernel(
        l->entry.kernelName, l->blockDim, KERNEL_TYPE_MIX_AIC_1_2,
        [l] { l->entry.kernel(l->gm.data(), l->workspace, const_cast<uint8_t *>(l->tilingData.data())); }, &error);
    if (rc != ACL_SUCCESS) snprintf(errBuf, errBufLen, "%s", error.c_str());
    return rc;
}

void ReleaseLaunch(void *userData) { delete static_cast<Launch *>(userData); }

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    const char *api2 = spec->launch.entry.api2;
    if (aclfaSimShouldFail(api2)) return ACLNN_ERR_RUNTIME_ERROR;
    const aclnnStatus ws = CheckWorkspace(api2, workspace, workspaceSize, spec->workspaceSize);
    if (ws != ACLNN_SUCCESS) return ws;
    auto task = std::make_unique<Launch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    if (aclfaSimStreamEnqueue(stream, spec->launch.entry.kernelName, RunOnStream, task.get(), ReleaseLaunch) !=
        ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

}  // namespace

bool CheckGradDtypes(const char *api, const Arg *const acts[6], const Arg *const grads[3], Failure *failure)
{
    const int32_t dtype = acts[0]->view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16 or bfloat16, got %s (%d)", api,
                        DtypeName(dtype), dtype);
        return false;
    }
    for (int i = 1; i < 5; ++i) {
        if (acts[i]->view.dataType != dtype) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", api,
                            acts[i]->name, DtypeName(dtype), DtypeName(acts[i]->view.dataType));
            return false;
        }
    }
    if (acts[5]->view.dataType != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: softmaxLse must be float32, got %s", api,
                        DtypeName(acts[5]->view.dataType));
        return false;
    }
    for (int i = 0; i < 3; ++i) {
        if (grads[i]->view.dataType != dtype) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", api,
                            grads[i]->name, DtypeName(dtype), DtypeName(grads[i]->view.dataType));
            return false;
        }
    }
    return true;
}

aclnnStatus PrepareGrad(const GradEntry &entry, const std::vector<host::TensorInfo> &inputs,
                        const std::vector<host::AttrInfo> &attrs, const Arg *const grads[3],
                        const std::vector<uint8_t *> &gm, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    Failure failure;
    if (!HasOp(entry.opType)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                           "%s: the %s op has no kernel for %s (%s); it is built for ascend910b and ascend910_93 "
                           "(Atlas A2/A3)",
                           entry.api1, entry.opType, chip->name, chip->shortSoc));
    }
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(entry.opType, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", entry.api1, error.c_str()));
    }
    if (inferred.size() != 3) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs, expected 3", entry.api1,
                           inferred.size()));
    }
    for (int i = 0; i < 3; ++i) {
        if (!CheckOutput(entry.api1, *grads[i], inferred[i], &failure)) return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(entry.opType, inputs, {InfoOf(*grads[0]), InfoOf(*grads[1]), InfoOf(*grads[2])}, attrs, &tiling,
                  &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", entry.api1, error.c_str()));
    }
    auto spec = std::make_unique<LaunchSpec>();
    spec->launch.entry = entry;
    spec->launch.gm = gm;
    spec->launch.blockDim = tiling.blockDim;
    spec->launch.tilingKey = tiling.tilingKey;
    spec->launch.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(entry.opType, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

}  // namespace opapi
}  // namespace acl_fa_sim
