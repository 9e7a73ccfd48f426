// aclnn_flash_attention_grad_v2.cpp -- the simulator's aclnnFlashAttentionGradV2GetWorkspaceSize /
// aclnnFlashAttentionGradV2 over the operator's own op_host (InferShape, TilingFunc, with the
// ValueDepend sequence lengths copied to the host as CANN's framework does) and op_kernel entry
// flash_attention_grad_v2; the checks and the launch are aclnnFlashAttentionGrad's (grad_opapi.h).
#include "aclnn_flash_attention_grad_v2.h"

#include <cstring>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "grad_opapi.h"
#include "kernel_operator.h"
#include "opapi_common.h"

extern "C" void flash_attention_grad_v2(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                                        GM_ADDR dout, GM_ADDR softmax_lse, GM_ADDR atten_mask,
                                        GM_ADDR actual_seq_qlen, GM_ADDR actual_seq_kvlen, GM_ADDR dq, GM_ADDR dk,
                                        GM_ADDR dv, GM_ADDR workspace, GM_ADDR tiling);

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *API_PHASE1 = "aclnnFlashAttentionGradV2GetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionGradV2";

enum Gm {
    QUERY = 0, KEY, VALUE, ATTENTION_OUT, DOUT, SOFTMAX_LSE, ATTEN_MASK, SEQ_QLEN, SEQ_KVLEN, DQ, DK, DV, GM_ARGS
};

void RunKernel(uint8_t *const *gm, uint8_t *workspace, uint8_t *tiling)
{
    flash_attention_grad_v2(gm[QUERY], gm[KEY], gm[VALUE], gm[ATTENTION_OUT], gm[DOUT], gm[SOFTMAX_LSE],
                            gm[ATTEN_MASK], gm[SEQ_QLEN], gm[SEQ_KVLEN], gm[DQ], gm[DK], gm[DV], workspace, tiling);
}

size_t ElementBytes(int32_t dtype)
{
    switch (dtype) {
        case DT_FLOAT: return 4;
        case DT_FLOAT16:
        case DT_BF16: return 2;
        case 9: return 8;  // DT_INT64
        default: return 1;  // DT_BOOL, DT_UINT8
    }
}

}  // namespace

extern "C" aclnnStatus aclnnFlashAttentionGradV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attentionOut,
    const aclTensor *dout, const aclTensor *softmaxLse, const aclTensor *attenMaskOptional,
    const aclTensor *actualSeqQlenOptional, const aclTensor *actualSeqKvlenOptional, double scaleValue,
    int64_t preTokens, int64_t nextTokens, char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads,
    double keepProb, int64_t seed, int64_t offset, bool deterministic, int64_t blockM, int64_t blockN,
    const aclTensor *dqOut, const aclTensor *dkOut, const aclTensor *dvOut, uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(API_PHASE1)) return ACLNN_ERR_INNER;
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    Arg q{"query"}, k{"key"}, v{"value"}, out{"attentionOut"}, dO{"dout"}, lse{"softmaxLse"},
        mask{"attenMaskOptional"}, qlen{"actualSeqQlenOptional"}, kvlen{"actualSeqKvlenOptional"}, dq{"dqOut"},
        dk{"dkOut"}, dv{"dvOut"};
    Arg *const args[GM_ARGS] = {&q, &k, &v, &out, &dO, &lse, &mask, &qlen, &kvlen, &dq, &dk, &dv};
    const aclTensor *const tensors[GM_ARGS] = {query, key, value, attentionOut, dout, softmaxLse,
                                               attenMaskOptional, actualSeqQlenOptional, actualSeqKvlenOptional,
                                               dqOut, dkOut, dvOut};
    Failure failure;
    for (int i = 0; i < GM_ARGS; ++i) {
        const bool optional = i == ATTEN_MASK || i == SEQ_QLEN || i == SEQ_KVLEN;
        if (optional && tensors[i] == nullptr) continue;
        if (!CheckTensor(API_PHASE1, tensors[i], args[i], &failure)) return Report(failure);
    }
    const Arg *const acts[6] = {&q, &k, &v, &out, &dO, &lse};
    const Arg *const grads[3] = {&dq, &dk, &dv};
    if (!CheckGradDtypes(API_PHASE1, acts, grads, &failure)) return Report(failure);
    const std::string layout = inputLayoutOptional == nullptr ? "BNSD" : inputLayoutOptional;
    std::vector<TensorInfo> inputs;
    std::vector<uint8_t *> gm;
    for (int i = QUERY; i <= DV; ++i) {
        const bool present = tensors[i] != nullptr;
        const size_t bytes = present ? ElementBytes(args[i]->view.dataType) : 0;
        gm.push_back(present ? DataOf(*args[i], bytes) : nullptr);
        if (i >= DQ) continue;
        TensorInfo info;
        if (present) {
            info = InfoOf(*args[i]);
            if (i == SEQ_QLEN || i == SEQ_KVLEN) {
                // ValueDepend: the framework hands the TilingFunc a host copy of the values.
                int64_t count = 1;
                for (int64_t dim : info.shape) count *= dim;
                info.values.resize(static_cast<size_t>(count) * bytes);
                if (!info.values.empty()) std::memcpy(info.values.data(), gm.back(), info.values.size());
            }
        } else {
            info.present = false;
        }
        inputs.push_back(std::move(info));
    }
    const std::vector<AttrInfo> attrs{{"scale_value", static_cast<float>(scaleValue)},
                                      {"pre_tokens", preTokens},
                                      {"next_tokens", nextTokens},
                                      {"input_layout", layout},
                                      {"num_heads", numHeads},
                                      {"num_kv_heads", numKvHeads},
                                      {"keep_prob", static_cast<float>(keepProb)},
                                      {"seed", seed},
                                      {"offset", offset},
                                      {"deterministic", deterministic},
                                      {"block_m", blockM},
                                      {"block_n", blockN}};
    const GradEntry entry{"FlashAttentionGradV2", API_PHASE1, API_PHASE2, "flash_attention_grad_v2", RunKernel};
    return PrepareGrad(entry, inputs, attrs, grads, gm, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnFlashAttentionGradV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                 aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
