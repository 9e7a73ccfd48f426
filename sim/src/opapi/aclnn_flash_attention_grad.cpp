// aclnn_flash_attention_grad.cpp -- the simulator's aclnnFlashAttentionGradGetWorkspaceSize /
// aclnnFlashAttentionGrad over the operator's own op_host (InferShape, TilingFunc) and op_kernel
// entry flash_attention_grad, as aclnn_flash_attention.cpp does for the forward.
#include "aclnn_flash_attention_grad.h"

#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "grad_opapi.h"
#include "kernel_operator.h"
#include "opapi_common.h"

extern "C" void flash_attention_grad(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                                     GM_ADDR dout, GM_ADDR softmax_lse, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv,
                                     GM_ADDR workspace, GM_ADDR tiling);

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *API_PHASE1 = "aclnnFlashAttentionGradGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionGrad";

enum Gm { QUERY = 0, KEY, VALUE, ATTENTION_OUT, DOUT, SOFTMAX_LSE, DQ, DK, DV, GM_ARGS };

void RunKernel(uint8_t *const *gm, uint8_t *workspace, uint8_t *tiling)
{
    flash_attention_grad(gm[QUERY], gm[KEY], gm[VALUE], gm[ATTENTION_OUT], gm[DOUT], gm[SOFTMAX_LSE], gm[DQ], gm[DK],
                         gm[DV], workspace, tiling);
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
    const Arg *const acts[6] = {&q, &k, &v, &out, &dO, &lse};
    const Arg *const grads[3] = {&dq, &dk, &dv};
    if (!CheckGradDtypes(API_PHASE1, acts, grads, &failure)) return Report(failure);
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
    std::vector<uint8_t *> gm;
    for (int i = 0; i < GM_ARGS; ++i) gm.push_back(DataOf(*args[i], i == SOFTMAX_LSE ? sizeof(float) : 2));
    const GradEntry entry{"FlashAttentionGrad", API_PHASE1, API_PHASE2, "flash_attention_grad", RunKernel};
    return PrepareGrad(entry, inputs, attrs, grads, gm, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnFlashAttentionGrad(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                               aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
