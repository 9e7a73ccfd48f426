// aclnn_flash_attention_decode.cpp -- the simulator's aclnnFlashAttentionDecodeGetWorkspaceSize /
// aclnnFlashAttentionDecode over the operator's own op_host (InferShape, TilingFunc) and
// op_kernel, as aclnn_flash_attention.cpp does for FlashAttention: phase one checks the tensors
// (null, device data, ND, contiguous, non-empty, dtypes), the OpDef lists and InferShape, runs
// the TilingFunc and returns the workspace size with an executor; phase two enqueues the kernel.
// The sequence lengths and block table are device data: the kernel reads them, phase one
// cannot (as on the chip); the Python layer validates their values before any device work.
#include "aclnn_flash_attention_decode.h"

#include <memory>
#include <string>
#include <vector>

#include "aclnn/opdev/op_errno.h"
#include "acl_fa_sim.h"
#include "flash_attention_decode_launch.h"
#include "opapi_common.h"
#include "sim_host/op_runtime.h"

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "FlashAttentionDecode";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionDecodeGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionDecode";

struct LaunchSpec {
    acl_fa_sim::FlashAttentionDecodeLaunch launch;
    uint64_t workspaceSize = 0;
};

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    if (aclfaSimShouldFail(API_PHASE2)) {
        return ACLNN_ERR_RUNTIME_ERROR;  // injected; the executor is consumed as on any failure
    }
    const aclnnStatus ws = CheckWorkspace(API_PHASE2, workspace, workspaceSize, spec->workspaceSize);
    if (ws != ACLNN_SUCCESS) return ws;
    auto task = std::make_unique<acl_fa_sim::FlashAttentionDecodeLaunch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    if (acl_fa_sim::EnqueueFlashAttentionDecode(stream, task.get()) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

}  // namespace

extern "C" aclnnStatus aclnnFlashAttentionDecodeGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *blockTable,
    const aclTensor *actualSeqLengthsKv, double scaleValue, int64_t blockSize, int64_t preTokens,
    int64_t nextTokens, int64_t numSplits, const aclTensor *attentionOutOut, const aclTensor *softmaxLseOut,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(API_PHASE1)) {
        return ACLNN_ERR_INNER;
    }
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    Arg q{"query"}, k{"key"}, v{"value"}, table{"blockTable"}, lens{"actualSeqLengthsKv"}, out{"attentionOutOut"},
        lse{"softmaxLseOut"};
    const std::pair<const aclTensor *, Arg *> args[] = {{query, &q},   {key, &k},   {value, &v},
                                                        {blockTable, &table},       {actualSeqLengthsKv, &lens},
                                                        {attentionOutOut, &out},    {softmaxLseOut, &lse}};
    Failure failure;
    for (const auto &[tensor, arg] : args) {
        if (!CheckTensor(API_PHASE1, tensor, arg, &failure)) return Report(failure);
    }
    const int32_t dtype = q.view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16 or bfloat16, got %s", API_PHASE1,
                           DtypeName(dtype)));
    }
    for (const Arg *arg : {&k, &v, &out}) {
        if (arg->view.dataType != dtype) {
            return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", API_PHASE1,
                               arg->name, DtypeName(dtype), DtypeName(arg->view.dataType)));
        }
    }
    for (const auto &[arg, expected] : {std::pair{&table, DT_INT32}, {&lens, DT_INT32}, {&lse, DT_FLOAT}}) {
        if (arg->view.dataType != expected) {
            return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be %s, got %s", API_PHASE1, arg->name,
                               DtypeName(expected), DtypeName(arg->view.dataType)));
        }
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                           "%s: the FlashAttentionDecode op has no kernel for %s (%s); it is built for ascend910b and "
                           "ascend910_93 (Atlas A2/A3)",
                           API_PHASE1, chip->name, chip->shortSoc));
    }

    const std::vector<TensorInfo> inputs{InfoOf(q), InfoOf(k), InfoOf(v), InfoOf(table), InfoOf(lens)};
    const std::vector<AttrInfo> attrs{{"scale_value", static_cast<float>(scaleValue)},
                                      {"block_size", blockSize},
                                      {"pre_tokens", preTokens},
                                      {"next_tokens", nextTokens},
                                      {"num_splits", numSplits}};
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(OP_TYPE, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", API_PHASE1, error.c_str()));
    }
    if (inferred.size() != 2) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs", API_PHASE1,
                           inferred.size()));
    }
    if (!CheckOutput(API_PHASE1, out, inferred[0], &failure) || !CheckOutput(API_PHASE1, lse, inferred[1], &failure)) {
        return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputs, {InfoOf(out), InfoOf(lse)}, attrs, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str()));
    }

    auto spec = std::make_unique<LaunchSpec>();
    const size_t elementBytes = 2;  // float16 and bfloat16
    auto &l = spec->launch;
    l.query = DataOf(q, elementBytes);
    l.key = DataOf(k, elementBytes);
    l.value = DataOf(v, elementBytes);
    l.blockTable = DataOf(table, sizeof(int32_t));
    l.actualSeqLengthsKv = DataOf(lens, sizeof(int32_t));
    l.attentionOut = DataOf(out, elementBytes);
    l.softmaxLse = DataOf(lse, sizeof(float));
    l.blockDim = tiling.blockDim;
    l.tilingKey = tiling.tilingKey;
    l.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
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

extern "C" aclnnStatus aclnnFlashAttentionDecode(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                 aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
