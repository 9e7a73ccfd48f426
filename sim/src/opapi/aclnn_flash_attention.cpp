// aclnn_flash_attention.cpp -- the simulator's libcust_opapi: aclnnFlashAttentionGetWorkspaceSize /
// aclnnFlashAttention over the operator's own op_host (InferShape, TilingFunc) and op_kernel.
//
// Phase one does what CANN's generated op API and nnopbase do before a launch: validate the
// tensors (dtype, rank, shape and layout consistency, contiguity), check the OpDef's dtype and
// format lists and run InferShape, run the registered TilingFunc for the simulated chip, and
// return the workspace size with an executor holding the launch. Phase two enqueues the kernel
// on the stream; kernel faults surface at the next stream synchronization, as on the chip.
#include "aclnn_flash_attention.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "flash_attention_launch.h"
#include "opapi_common.h"
#include "aclnn/opdev/op_errno.h"
#include "sim_host/op_runtime.h"
#include "test_tiling_override.h"

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "FlashAttention";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttention";

// Everything phase two needs; owned by the executor, copied into each stream task.
struct LaunchSpec {
    acl_fa_sim::FlashAttentionLaunch launch;
    uint64_t workspaceSize = 0;
};

// Problem sizes read from the shapes for a layout.
struct Dims {
    int64_t b = 0, n = 0, nkv = 0, sq = 0, skv = 0, d = 0;
};

bool ReadDims(const std::string &layout, const Arg &q, const Arg &k, int64_t numHeads, int64_t numKvHeads,
              Dims *dims, Failure *failure)
{
    const uint64_t rank = layout == "BSH" ? 3 : 4;
    for (const Arg *arg : {&q, &k}) {
        if (arg->view.dimNum != rank) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have rank %llu for layout %s, got %s", API_PHASE1,
                            arg->name, static_cast<unsigned long long>(rank), layout.c_str(),
                            ShapeString(arg->view).c_str());
            return false;
        }
    }
    const int64_t *qd = q.view.dims;
    const int64_t *kd = k.view.dims;
    dims->b = qd[0];
    if (kd[0] != dims->b) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: batch differs: query %s, key %s", API_PHASE1,
                        ShapeString(q.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (layout == "BNSD") {
        *dims = Dims{qd[0], qd[1], kd[1], qd[2], kd[2], qd[3]};
    } else if (layout == "BSND") {
        *dims = Dims{qd[0], qd[2], kd[2], qd[1], kd[1], qd[3]};
    } else {  // BSH: heads come from the attrs
        if (numHeads <= 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: layout BSH needs numHeads > 0 (got %lld)", API_PHASE1,
                            static_cast<long long>(numHeads));
            return false;
        }
        if (qd[2] % numHeads != 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query hidden size %lld is not divisible by numHeads %lld",
                            API_PHASE1, static_cast<long long>(qd[2]), static_cast<long long>(numHeads));
            return false;
        }
        const int64_t d = qd[2] / numHeads;
        if (kd[2] % d != 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: key hidden size %lld is not a multiple of the head dim %lld",
                            API_PHASE1, static_cast<long long>(kd[2]), static_cast<long long>(d));
            return false;
        }
        *dims = Dims{qd[0], numHeads, kd[2] / d, qd[1], kd[1], d};
        if (numKvHeads > 0 && numKvHeads != dims->nkv) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numKvHeads %lld does not match key hidden size %lld / head dim %lld",
                            API_PHASE1, static_cast<long long>(numKvHeads), static_cast<long long>(kd[2]),
                            static_cast<long long>(d));
            return false;
        }
        return true;
    }
    if (kd[rank - 1] != dims->d) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: head dim differs: query %s, key %s", API_PHASE1,
                        ShapeString(q.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (numHeads > 0 && numHeads != dims->n) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numHeads %lld does not match query %s (layout %s)", API_PHASE1,
                        static_cast<long long>(numHeads), ShapeString(q.view).c_str(), layout.c_str());
        return false;
    }
    if (numKvHeads > 0 && numKvHeads != dims->nkv) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: numKvHeads %lld does not match key %s (layout %s)", API_PHASE1,
                        static_cast<long long>(numKvHeads), ShapeString(k.view).c_str(), layout.c_str());
        return false;
    }
    return true;
}

bool Validate(const std::string &layout, const Arg &q, const Arg &k, const Arg &v, const Arg &out, const Arg &lse,
              int64_t numHeads, int64_t numKvHeads, Dims *dims, Failure *failure)
{
    const int32_t dtype = q.view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16 && dtype != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16, bfloat16 or float32, got %s (%d)",
                        API_PHASE1, DtypeName(dtype), dtype);
        return false;
    }
    for (const Arg *arg : {&k, &v, &out}) {
        if (arg->view.dataType != dtype) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", API_PHASE1,
                            arg->name, DtypeName(dtype), DtypeName(arg->view.dataType));
            return false;
        }
    }
    if (lse.view.dataType != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: softmaxLseOut must be float32, got %s", API_PHASE1,
                        DtypeName(lse.view.dataType));
        return false;
    }
    if (layout != "BNSD" && layout != "BSND" && layout != "BSH") {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: inputLayout must be BNSD, BSND or BSH, got \"%s\"", API_PHASE1,
                        layout.c_str());
        return false;
    }
    if (!ReadDims(layout, q, k, numHeads, numKvHeads, dims, failure)) {
        return false;
    }
    if (v.view.dimNum != k.view.dimNum ||
        !std::equal(v.view.dims, v.view.dims + v.view.dimNum, k.view.dims)) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: value %s must have the shape of key %s", API_PHASE1,
                        ShapeString(v.view).c_str(), ShapeString(k.view).c_str());
        return false;
    }
    if (dims->nkv <= 0 || dims->n % dims->nkv != 0) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query heads %lld must be a multiple of key/value heads %lld",
                        API_PHASE1, static_cast<long long>(dims->n), static_cast<long long>(dims->nkv));
        return false;
    }
    return true;
}

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    if (aclfaSimShouldFail(API_PHASE2)) {
        return ACLNN_ERR_RUNTIME_ERROR;  // injected; the executor is consumed as on any failure
    }
    const aclnnStatus wsStatus = CheckWorkspace(API_PHASE2, workspace, workspaceSize, spec->workspaceSize);
    if (wsStatus != ACLNN_SUCCESS) {
        return wsStatus;
    }
    auto task = std::make_unique<acl_fa_sim::FlashAttentionLaunch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    const aclError rc = acl_fa_sim::EnqueueFlashAttention(stream, task.get());
    if (rc != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

}  // namespace

extern "C" aclnnStatus aclnnFlashAttentionGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, double scaleValue, bool causal,
    char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads, int64_t blockM, int64_t blockN,
    const aclTensor *attentionOutOut, const aclTensor *softmaxLseOut, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(API_PHASE1)) {
        return ACLNN_ERR_INNER;
    }
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    Arg q{"query"}, k{"key"}, v{"value"}, out{"attentionOutOut"}, lse{"softmaxLseOut"};
    Failure failure;
    for (auto [tensor, arg] : {std::pair{query, &q}, {key, &k}, {value, &v}, {attentionOutOut, &out},
                               {softmaxLseOut, &lse}}) {
        if (!CheckTensor(API_PHASE1, tensor, arg, &failure)) {
            return Report(failure);
        }
    }
    const std::string layout = inputLayoutOptional == nullptr ? "BNSD" : inputLayoutOptional;
    Dims dims;
    if (!Validate(layout, q, k, v, out, lse, numHeads, numKvHeads, &dims, &failure)) {
        return Report(failure);
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                           "%s: the FlashAttention op has no kernel for %s (%s); it is built for ascend910b, "
                           "ascend910_93, ascend310p and ascend910",
                           API_PHASE1, chip->name, chip->shortSoc));
    }

    const std::vector<TensorInfo> inputs{InfoOf(q), InfoOf(k), InfoOf(v)};
    const std::vector<AttrInfo> attrs{
        {"scale_value", static_cast<float>(scaleValue)}, {"causal", causal},
        {"input_layout", layout},                        {"num_heads", dims.n},
        {"num_kv_heads", dims.nkv},                      {"block_m", blockM},
        {"block_n", blockN}};
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(OP_TYPE, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", API_PHASE1, error.c_str()));
    }
    if (inferred.size() != 2 || !CheckOutput(API_PHASE1, out, inferred[0], &failure) || !CheckOutput(API_PHASE1, lse, inferred[1], &failure)) {
        return Report(inferred.size() != 2 ? Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs, "
                                                  "expected 2", API_PHASE1, inferred.size())
                                           : failure);
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputs, {InfoOf(out), InfoOf(lse)}, attrs, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str()));
    }
    if (!acl_fa_sim::ApplyTestTilingOverride(&tiling.tilingData, &tiling.tilingKey, &error)) {  // test-only, inert by default
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", API_PHASE1, error.c_str()));
    }

    auto spec = std::make_unique<LaunchSpec>();
    const size_t elementBytes = q.view.dataType == DT_FLOAT ? 4 : 2;  // float32; float16 and bfloat16
    spec->launch.query = DataOf(q, elementBytes);
    spec->launch.key = DataOf(k, elementBytes);
    spec->launch.value = DataOf(v, elementBytes);
    spec->launch.attentionOut = DataOf(out, elementBytes);
    spec->launch.softmaxLse = DataOf(lse, sizeof(float));
    spec->launch.blockDim = tiling.blockDim;
    spec->launch.tilingKey = tiling.tilingKey;
    spec->launch.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) {
        spec->workspaceSize += bytes;
    }
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(OP_TYPE, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) {
        return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    }
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

extern "C" aclnnStatus aclnnFlashAttention(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           aclrtStream stream)
{
    if (executor == nullptr) {
        aclfaSimSetErrMsg("%s: executor is nullptr", API_PHASE2);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    return aclfaSimRunExecutor(executor, workspace, workspaceSize, stream);
}
