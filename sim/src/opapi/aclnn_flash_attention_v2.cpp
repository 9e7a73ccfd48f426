// aclnn_flash_attention_v2.cpp -- the simulator's aclnnFlashAttentionV2GetWorkspaceSize /
// aclnnFlashAttentionV2 over the operator's own op_host (InferShape, TilingFunc) and op_kernel,
// as aclnn_flash_attention.cpp does for FlashAttention, with the V2 op's optional tensors: an
// absent one (NULL) is not an input of the node; actual_seq_qlen / actual_seq_kvlen are
// value-depend, so phase one copies their values to the host for the tiling as CANN's framework
// does, and checks them here first so that bad lengths get a parameter error naming them.
#include "aclnn_flash_attention_v2.h"

#include <cstring>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "aclnn/opdev/op_errno.h"
#include "flash_attention_launch.h"
#include "forward_args.h"
#include "opapi_common.h"
#include "sim_host/op_runtime.h"

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "FlashAttentionV2";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionV2GetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionV2";
constexpr int32_t DT_UINT8 = 4;
constexpr int32_t DT_INT64 = 9;
constexpr int32_t DT_BOOL = 12;

// An optional tensor: absent (NULL) or checked like a required one.
bool CheckOptional(const aclTensor *tensor, Arg *arg, bool *present, Failure *failure)
{
    *present = tensor != nullptr;
    return tensor == nullptr || CheckTensor(API_PHASE1, tensor, arg, failure);
}

// The cumulative sequence ends of a TND batch: int64, rank 1, one per sequence, non-decreasing
// from >= 0 and ending at `tokens` (the query's or key's T). Copies them into *ends.
bool ReadEnds(const Arg &arg, int64_t tokens, const char *tokensName, std::vector<int64_t> *ends, Failure *failure)
{
    if (arg.view.dataType != DT_INT64 || arg.view.dimNum != 1) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be a 1-D int64 tensor of cumulative sequence ends, got "
                        "%s %s", API_PHASE1, arg.name, DtypeName(arg.view.dataType), ShapeString(arg.view).c_str());
        return false;
    }
    ends->resize(static_cast<size_t>(arg.view.dims[0]));
    std::memcpy(ends->data(), DataOf(arg, sizeof(int64_t)), ends->size() * sizeof(int64_t));
    int64_t previous = 0;
    for (size_t s = 0; s < ends->size(); ++s) {
        if ((*ends)[s] < previous) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be non-decreasing cumulative sequence ends "
                            "(without the leading 0): entry %zu is %lld after %lld", API_PHASE1, arg.name, s,
                            static_cast<long long>((*ends)[s]), static_cast<long long>(previous));
            return false;
        }
        previous = (*ends)[s];
    }
    if (previous != tokens) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must end at %s = %lld, its last entry is %lld", API_PHASE1,
                        arg.name, tokensName, static_cast<long long>(tokens), static_cast<long long>(previous));
        return false;
    }
    return true;
}

acl_fa_sim::host::TensorInfo Absent()
{
    acl_fa_sim::host::TensorInfo info;
    info.present = false;
    return info;
}

}  // namespace

extern "C" aclnnStatus aclnnFlashAttentionV2GetWorkspaceSize(
    const aclTensor *query, const aclTensor *key, const aclTensor *value, const aclTensor *attenMaskOptional,
    const aclTensor *actualSeqQlenOptional, const aclTensor *actualSeqKvlenOptional, double scaleValue,
    int64_t preTokens, int64_t nextTokens, char *inputLayoutOptional, int64_t numHeads, int64_t numKvHeads,
    double keepProb, int64_t seed, int64_t offset, int64_t blockM, int64_t blockN, const aclTensor *attentionOutOut,
    const aclTensor *softmaxLseOut, const aclTensor *dropoutMaskOutOptional, uint64_t *workspaceSize,
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
    Arg mask{"attenMaskOptional"}, qEnds{"actualSeqQlenOptional"}, kvEnds{"actualSeqKvlenOptional"};
    Arg dropout{"dropoutMaskOutOptional"};
    Failure failure;
    for (auto [tensor, arg] : {std::pair{query, &q}, {key, &k}, {value, &v}, {attentionOutOut, &out},
                               {softmaxLseOut, &lse}}) {
        if (!CheckTensor(API_PHASE1, tensor, arg, &failure)) {
            return Report(failure);
        }
    }
    bool hasMask = false, hasQEnds = false, hasKvEnds = false, hasDropout = false;
    if (!CheckOptional(attenMaskOptional, &mask, &hasMask, &failure) ||
        !CheckOptional(actualSeqQlenOptional, &qEnds, &hasQEnds, &failure) ||
        !CheckOptional(actualSeqKvlenOptional, &kvEnds, &hasKvEnds, &failure) ||
        !CheckOptional(dropoutMaskOutOptional, &dropout, &hasDropout, &failure)) {
        return Report(failure);
    }
    const std::string layout = inputLayoutOptional == nullptr ? "BNSD" : inputLayoutOptional;
    const bool tndLayout = layout == "TND";
    ForwardDims dims;
    if (!ValidateForward(API_PHASE1, layout, true, q, k, v, out, lse, numHeads, numKvHeads, &dims, &failure)) {
        return Report(failure);
    }
    if (hasMask && mask.view.dataType != DT_UINT8 && mask.view.dataType != DT_BOOL) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: attenMaskOptional must be uint8 or bool (1 = masked out), "
                           "got %s", API_PHASE1, DtypeName(mask.view.dataType)));
    }
    if (hasMask && !tndLayout) {
        // Rank 4 [mb, mn, mq, Skv], each of mb, mn, mq 1 or the full size: read at its own shape.
        const int64_t full[4] = {dims.b, dims.n, dims.sq, dims.skv};
        bool fits = mask.view.dimNum == 4 && mask.view.dims[3] == dims.skv;
        for (int i = 0; fits && i < 3; ++i) fits = mask.view.dims[i] == 1 || mask.view.dims[i] == full[i];
        if (!fits) {
            return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: attenMaskOptional %s must be [1 or %lld, 1 or %lld, 1 or "
                               "%lld, %lld] (1 = masked out; it is read at its own shape, never expanded)",
                               API_PHASE1, ShapeString(mask.view).c_str(), static_cast<long long>(dims.b),
                               static_cast<long long>(dims.n), static_cast<long long>(dims.sq),
                               static_cast<long long>(dims.skv)));
        }
    }
    if (!(keepProb > 0.0 && keepProb <= 1.0)) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: keepProb must be in (0, 1] (1 = no dropout), got %g",
                           API_PHASE1, keepProb));
    }
    if (hasDropout && dropout.view.dataType != DT_UINT8) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: dropoutMaskOutOptional must be uint8, got %s", API_PHASE1,
                           DtypeName(dropout.view.dataType)));
    }
    const bool tnd = layout == "TND";
    if (tnd != (hasQEnds || hasKvEnds) || (tnd && !(hasQEnds && hasKvEnds))) {
        return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: actualSeqQlenOptional and actualSeqKvlenOptional are "
                           "required with inputLayout TND and refused with any other layout (inputLayout %s, "
                           "given: %s%s)", API_PHASE1, layout.c_str(), hasQEnds ? "actualSeqQlenOptional " : "",
                           hasKvEnds ? "actualSeqKvlenOptional" : "none"));
    }
    std::vector<int64_t> qEndValues, kvEndValues;
    if (tnd) {
        if (!ReadEnds(qEnds, dims.sq, "query's T", &qEndValues, &failure) ||
            !ReadEnds(kvEnds, dims.skv, "key's T", &kvEndValues, &failure)) {
            return Report(failure);
        }
        if (qEndValues.size() != kvEndValues.size()) {
            return Report(Fail(ACLNN_ERR_PARAM_INVALID, "%s: actualSeqQlenOptional has %zu sequences, "
                               "actualSeqKvlenOptional %zu; they must agree", API_PHASE1, qEndValues.size(),
                               kvEndValues.size()));
        }
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                           "%s: the FlashAttentionV2 op has no kernel for %s (%s); it is built for ascend910b, "
                           "ascend910_93, ascend310p and ascend910",
                           API_PHASE1, chip->name, chip->shortSoc));
    }

    auto valueDepend = [](const Arg &arg, const std::vector<int64_t> &values) {
        TensorInfo info = InfoOf(arg);
        info.values.resize(values.size() * sizeof(int64_t));
        std::memcpy(info.values.data(), values.data(), info.values.size());
        return info;
    };
    const std::vector<TensorInfo> inputs{
        InfoOf(q), InfoOf(k), InfoOf(v), hasMask ? InfoOf(mask) : Absent(),
        tnd ? valueDepend(qEnds, qEndValues) : Absent(), tnd ? valueDepend(kvEnds, kvEndValues) : Absent()};
    const std::vector<AttrInfo> attrs{
        {"scale_value", static_cast<float>(scaleValue)}, {"pre_tokens", preTokens},
        {"next_tokens", nextTokens},                     {"input_layout", layout},
        {"num_heads", dims.n},                           {"num_kv_heads", dims.nkv},
        {"keep_prob", static_cast<float>(keepProb)},     {"seed", seed},
        {"offset", offset},                              {"block_m", blockM},
        {"block_n", blockN}};
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(OP_TYPE, inputs, attrs, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", API_PHASE1, error.c_str()));
    }
    if (inferred.size() != 3) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs, expected 3", API_PHASE1,
                           inferred.size()));
    }
    if (!CheckOutput(API_PHASE1, out, inferred[0], &failure) || !CheckOutput(API_PHASE1, lse, inferred[1], &failure) ||
        (hasDropout && !CheckOutput(API_PHASE1, dropout, inferred[2], &failure))) {
        return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputs, {InfoOf(out), InfoOf(lse), hasDropout ? InfoOf(dropout) : Absent()}, attrs,
                  &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str()));
    }

    acl_fa_sim::FlashAttentionLaunch launch;
    const size_t elementBytes = q.view.dataType == DT_FLOAT ? 4 : 2;  // float32; float16 and bfloat16
    launch.v2 = true;
    launch.query = DataOf(q, elementBytes);
    launch.key = DataOf(k, elementBytes);
    launch.value = DataOf(v, elementBytes);
    launch.attenMask = hasMask ? DataOf(mask, 1) : nullptr;
    launch.actualSeqQlen = tnd ? DataOf(qEnds, sizeof(int64_t)) : nullptr;
    launch.actualSeqKvlen = tnd ? DataOf(kvEnds, sizeof(int64_t)) : nullptr;
    launch.attentionOut = DataOf(out, elementBytes);
    launch.softmaxLse = DataOf(lse, sizeof(float));
    launch.dropoutMask = hasDropout ? DataOf(dropout, 1) : nullptr;
    return CreateForwardExecutor(OP_TYPE, API_PHASE1, API_PHASE2, &tiling, launch, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnFlashAttentionV2(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                             aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
