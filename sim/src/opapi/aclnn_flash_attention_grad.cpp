// aclnn_flash_attention_grad.cpp -- the simulator's aclnnFlashAttentionGradGetWorkspaceSize /
// aclnnFlashAttentionGrad over the operator's own op_host (InferShape, TilingFunc) and op_kernel
// entry flash_attention_grad, as aclnn_flash_attention.cpp does for the forward.
#include "aclnn_flash_attention_grad.h"

#include <memory>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"
#include "opapi_common.h"

extern "C" void flash_attention_grad(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                                     GM_ADDR dout, GM_ADDR softmax_lse, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv,
                                     GM_ADDR workspace, GM_ADDR tiling);

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "FlashAttentionGrad";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionGradGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionGrad";

enum Gm { QUERY = 0, KEY, VALUE, ATTENTION_OUT, DOUT, SOFTMAX_LSE, DQ, DK, DV, GM_ARGS };

// One launch: device pointers in kernel-argument order, the tiling, the workspace.
struct Launch {
    uint8_t *gm[GM_ARGS] = {};
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
        "flash_attention_grad", l->blockDim, KERNEL_TYPE_MIX_AIC_1_2,
        [l] {
            flash_attention_grad(l->gm[QUERY], l->gm[KEY], l->gm[VALUE], l->gm[ATTENTION_OUT], l->gm[DOUT],
                                 l->gm[SOFTMAX_LSE], l->gm[DQ], l->gm[DK], l->gm[DV], l->workspace,
                                 const_cast<uint8_t *>(l->tilingData.data()));
        },
        &error);
    if (rc != ACL_SUCCESS) snprintf(errBuf, errBufLen, "%s", error.c_str());
    return rc;
}

void ReleaseLaunch(void *userData) { delete static_cast<Launch *>(userData); }

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    if (aclfaSimShouldFail(API_PHASE2)) return ACLNN_ERR_RUNTIME_ERROR;
    const aclnnStatus ws = CheckWorkspace(API_PHASE2, workspace, workspaceSize, spec->workspaceSize);
    if (ws != ACLNN_SUCCESS) return ws;
    auto task = std::make_unique<Launch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    if (aclfaSimStreamEnqueue(stream, "flash_attention_grad", RunOnStream, task.get(), ReleaseLaunch) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

// Dtypes: the five activations share query's float16 / bfloat16, the LSE is float32.
bool CheckDtypes(const Arg *const args[6], Failure *failure)
{
    const int32_t dtype = args[QUERY]->view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16 or bfloat16, got %s (%d)", API_PHASE1,
                        DtypeName(dtype), dtype);
        return false;
    }
    for (int i = KEY; i <= DOUT; ++i) {
        if (args[i]->view.dataType != dtype) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", API_PHASE1,
                            args[i]->name, DtypeName(dtype), DtypeName(args[i]->view.dataType));
            return false;
        }
    }
    if (args[SOFTMAX_LSE]->view.dataType != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: softmaxLse must be float32, got %s", API_PHASE1,
                        DtypeName(args[SOFTMAX_LSE]->view.dataType));
        return false;
    }
    return true;
}

}  // namespace

extern "C" aclnnStatus aclnnFlashAttentionGradGetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attentionOut,
    const aclTensor *dout, const aclTensor *softmaxLse, double scaleValue, bool causal, char *inputLayoutOptional,
    int64_t numHeads, int64_t numKvHeads, bool deterministic, int64_t blockM, int64_t blockN, const aclTensor *dqOut,
    const aclTensor *dkOut, const aclTensor *dvOut, uint64_t *workspaceSize, aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(API_PHASE1)) return ACLNN_ERR_INNER;
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    Arg q{"query"}, k{"key"}, v{"value"}, out{"attentionOut"}, dO{"dout"}, lse{"softmaxLse"}, dq{"dqOut"},
        dk{"dkOut"}, dv{"dvOut"};
    Arg *const args[GM_ARGS] = {&q, &k, &v, &out, &dO, &lse, &dq, &dk, &dv};
    const aclTensor *const tensors[GM_ARGS] = {query, key, value, attentionOut, dout, softmaxLse, dqOut, dkOut, dvOut};
    Failure failure;
    for (int i = 0; i < GM_ARGS; ++i) {
        if (!CheckTensor(API_PHASE1, tensors[i], args[i], &failure)) return Report(failure);
    }
    if (!CheckDtypes(args, &failure)) return Report(failure);
    for (Arg *grad : {&dq, &dk, &dv}) {
        if (grad->view.dataType != q.view.dataType) {
            return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", API_PHASE1,
                               grad->name, DtypeName(q.view.dataType), DtypeName(grad->view.dataType)));
        }
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                           "%s: the FlashAttentionGrad op has no kernel for %s (%s); it is built for ascend910b and "
                           "ascend910_93 (Atlas A2/A3)",
                           API_PHASE1, chip->name, chip->shortSoc));
    }
    const std::string layout = inputLayoutOptional == nullptr ? "BNSD" : inputLayoutOptional;
    std::vector<TensorInfo> inputs;
    for (int i = QUERY; i <= SOFTMAX_LSE; ++i) inputs.push_back(InfoOf(*args[i]));
    const std::vector<AttrInfo> attrs{{"scale_value", static_cast<float>(scaleValue)},
                                      {"causal", causal},
                                      {"input_layout", layout},
                                      {"num_heads", numHeads},
                                      {"num_kv_heads", numKvHeads},
                                      {"deterministic", deterministic},
                                      {"block_m", blockM},
                                      {"block_n", blockN}};
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(OP_TYPE, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s", API_PHASE1, error.c_str()));
    }
    if (inferred.size() != 3) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs, expected 3", API_PHASE1,
                           inferred.size()));
    }
    for (int i = 0; i < 3; ++i) {
        if (!CheckOutput(API_PHASE1, *args[DQ + i], inferred[i], &failure)) return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputs, {InfoOf(dq), InfoOf(dk), InfoOf(dv)}, attrs, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str()));
    }

    auto spec = std::make_unique<LaunchSpec>();
    for (int i = 0; i < GM_ARGS; ++i) spec->launch.gm[i] = DataOf(*args[i], i == SOFTMAX_LSE ? sizeof(float) : 2);
    spec->launch.blockDim = tiling.blockDim;
    spec->launch.tilingKey = tiling.tilingKey;
    spec->launch.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(OP_TYPE, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

extern "C" aclnnStatus aclnnFlashAttentionGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                               aclrtStream stream)
{
    if (executor == nullptr) {
        aclfaSimSetErrMsg("%s: executor is nullptr", API_PHASE2);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    return aclfaSimRunExecutor(executor, workspace, workspaceSize, stream);
}
