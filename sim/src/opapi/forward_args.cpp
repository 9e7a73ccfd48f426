// forward_args.cpp -- see forward_args.h.
#include "forward_args.h"

#include <algorithm>
#include <memory>

#include "test_tiling_override.h"

namespace acl_fa_sim {
namespace opapi {
namespace {

bool ReadDims(const char *api, const std::string &layout, const Arg &q, const Arg &k, int64_t numHeads, int64_t numKvHeads,
              ForwardDims *dims, Failure *failure)
{
    const uint64_t rank = layout == "BSH" || layout == "TND" ? 3 : 4;
    for (const Arg *arg : {&q, &k}) {
        if (arg->view.dimNum != rank) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have rank %llu for layout %s, got %s", api,
                            arg->name, static_cast<unsigned long long>(rank), layout.c_str(),
                            ShapeString(arg->view).c_str());
            return false;
        }
    }
    const int64_t *qd = q.view.dims;
    const int64_t *kd = k.view.dims;
    dims->b = qd[0];
    if (layout != "TND" && kd[0] != dims->b) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: batch differs: query %s, key %s", api,
                        ShapeString(q.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (layout == "TND") {  // [T, N, D]: batch and lengths come from the sequence ends
        *dims = ForwardDims{1, qd[1], kd[1], qd[0], kd[0], qd[2]};
    } else if (layout == "BNSD") {
        *dims = ForwardDims{qd[0], qd[1], kd[1], qd[2], kd[2], qd[3]};
    } else if (layout == "BSND") {
        *dims = ForwardDims{qd[0], qd[2], kd[2], qd[1], kd[1], qd[3]};
    } else {  // BSH: heads come from the attrs
        if (numHeads <= 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: layout BSH needs numHeads > 0 (got %lld)", api,
                            static_cast<long long>(numHeads));
            return false;
        }
        if (qd[2] % numHeads != 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query hidden size %lld is not divisible by numHeads %lld",
                            api, static_cast<long long>(qd[2]), static_cast<long long>(numHeads));
            return false;
        }
        const int64_t d = qd[2] / numHeads;
        if (kd[2] % d != 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: key hidden size %lld is not a multiple of the head dim %lld",
                            api, static_cast<long long>(kd[2]), static_cast<long long>(d));
            return false;
        }
        *dims = ForwardDims{qd[0], numHeads, kd[2] / d, qd[1], kd[1], d};
        if (numKvHeads > 0 && numKvHeads != dims->nkv) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numKvHeads %lld does not match key hidden size %lld / head dim %lld",
                            api, static_cast<long long>(numKvHeads), static_cast<long long>(kd[2]),
                            static_cast<long long>(d));
            return false;
        }
        return true;
    }
    if (kd[rank - 1] != dims->d) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: head dim differs: query %s, key %s", api,
                        ShapeString(q.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (numHeads > 0 && numHeads != dims->n) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numHeads %lld does not match query %s (layout %s)", api,
                        static_cast<long long>(numHeads), ShapeString(q.view).c_str(), layout.c_str());
        return false;
    }
    if (numKvHeads > 0 && numKvHeads != dims->nkv) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numKvHeads %lld does not match key %s (layout %s)", api,
                        static_cast<long long>(numKvHeads), ShapeString(k.view).c_str(), layout.c_str());
        return false;
    }
    return true;
}

}  // namespace

bool ValidateForward(const char *api, const std::string &layout, bool allowTnd, const Arg &q, const Arg &k,
                     const Arg &v, const Arg &out, const Arg &lse, int64_t numHeads, int64_t numKvHeads,
                     ForwardDims *dims, Failure *failure)
{
    const int32_t dtype = q.view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16 && dtype != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16, bfloat16 or float32, got %s (%d)",
                        api, DtypeName(dtype), dtype);
        return false;
    }
    for (const Arg *arg : {&k, &v, &out}) {
        if (arg->view.dataType != dtype) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", api,
                            arg->name, DtypeName(dtype), DtypeName(arg->view.dataType));
            return false;
        }
    }
    if (lse.view.dataType != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: softmaxLseOut must be float32, got %s", api,
                        DtypeName(lse.view.dataType));
        return false;
    }
    if (layout != "BNSD" && layout != "BSND" && layout != "BSH" && !(allowTnd && layout == "TND")) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: inputLayout must be BNSD, BSND, BSH%s, got \"%s\"", api,
                        allowTnd ? " or TND" : "", layout.c_str());
        return false;
    }
    if (!ReadDims(api, layout, q, k, numHeads, numKvHeads, dims, failure)) {
        return false;
    }
    if (v.view.dimNum != k.view.dimNum ||
        !std::equal(v.view.dims, v.view.dims + v.view.dimNum, k.view.dims)) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: value %s must have the shape of key %s", api,
                        ShapeString(v.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (dims->nkv <= 0 || dims->n % dims->nkv != 0) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query heads %lld must be a multiple of key/value heads %lld",
                        api, static_cast<long long>(dims->n), static_cast<long long>(dims->nkv));
        return false;
    }
    return true;
}

namespace {

// Everything phase two needs; owned by the executor, copied into each stream task.
struct LaunchSpec {
    FlashAttentionLaunch launch;
    uint64_t workspaceSize = 0;
    const char *phase2Api = nullptr;
};

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    if (aclfaSimShouldFail(spec->phase2Api)) {
        return ACLNN_ERR_RUNTIME_ERROR;  // injected; the executor is consumed as on any failure
    }
    const aclnnStatus wsStatus = CheckWorkspace(spec->phase2Api, workspace, workspaceSize, spec->workspaceSize);
    if (wsStatus != ACLNN_SUCCESS) {
        return wsStatus;
    }
    auto task = std::make_unique<FlashAttentionLaunch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    const aclError rc = EnqueueFlashAttention(stream, task.get());
    if (rc != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

}  // namespace

aclnnStatus CreateForwardExecutor(const char *opType, const char *phase1Api, const char *phase2Api,
                                  host::TilingResult *tiling, const FlashAttentionLaunch &launch,
                                  uint64_t *workspaceSize, aclOpExecutor **executor)
{
    std::string error;
    if (!ApplyTestTilingOverride(&tiling->tilingData, &tiling->tilingKey, &error)) {  // test-only, inert by default
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", phase1Api, error.c_str()));
    }
    auto spec = std::make_unique<LaunchSpec>();
    spec->launch = launch;
    spec->phase2Api = phase2Api;
    spec->launch.blockDim = tiling->blockDim;
    spec->launch.tilingKey = tiling->tilingKey;
    spec->launch.tilingData = tiling->tilingData;
    for (uint64_t bytes : tiling->workspaceSizes) {
        spec->workspaceSize += bytes;
    }
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(opType, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    }
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

}  // namespace opapi
}  // namespace acl_fa_sim
