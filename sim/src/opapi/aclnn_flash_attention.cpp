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
#include "forward_args.h"
#include "opapi_common.h"
#include "aclnn/opdev/op_errno.h"
#include "sim_host/op_runtime.h"

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "FlashAttention";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttention";

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
    ForwardDims dims;
    if (!ValidateForward(API_PHASE1, layout, false, q, k, v, out, lse, numHeads, numKvHeads, &dims, &failure)) {
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
    acl_fa_sim::FlashAttentionLaunch launch;
    const size_t elementBytes = q.view.dataType == DT_FLOAT ? 4 : 2;  // float32; float16 and bfloat16
    launch.query = DataOf(q, elementBytes);
    launch.key = DataOf(k, elementBytes);
    launch.value = DataOf(v, elementBytes);
    launch.attentionOut = DataOf(out, elementBytes);
    launch.softmaxLse = DataOf(lse, sizeof(float));
    return CreateForwardExecutor(OP_TYPE, API_PHASE1, API_PHASE2, &tiling, launch, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnFlashAttention(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                           aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
