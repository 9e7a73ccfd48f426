// aclnn_attention_lse_merge.cpp -- the simulator's aclnnAttentionLseMergeGetWorkspaceSize /
// aclnnAttentionLseMerge over the operator's own op_host (InferShape, TilingFunc) and op_kernel,
// as aclnn_flash_attention.cpp does for FlashAttention: phase one checks the tensors (null,
// device data, ND, contiguous, non-empty), the dtype combination of the OpDef, how the outputs
// overlap the inputs, runs InferShape and the TilingFunc and returns an executor; phase two
// enqueues the kernel of the simulated chip's architecture (the per-architecture binary that
// also holds the forward's entries).
#include "aclnn_attention_lse_merge.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "flash_attention_launch.h"
#include "kernel_operator.h"
#include "opapi_common.h"

namespace {

using namespace acl_fa_sim::opapi;

constexpr const char *OP_TYPE = "AttentionLseMerge";
constexpr const char *KERNEL = "attention_lse_merge";
constexpr const char *API_PHASE1 = "aclnnAttentionLseMergeGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnAttentionLseMerge";

using KernelEntry = void (*)(GM_ADDR outA, GM_ADDR lseA, GM_ADDR outB, GM_ADDR lseB, GM_ADDR attentionOut,
                             GM_ADDR softmaxLse, GM_ADDR workspace, GM_ADDR tiling);

// Device pointers in kernel-argument order and the tiling of one launch; the stream task owns a copy.
struct Launch {
    uint8_t *gm[6] = {};
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;
};

struct LaunchSpec {
    Launch launch;
    uint64_t workspaceSize = 0;
};

size_t ElementBytes(int32_t dtype) { return dtype == DT_FLOAT ? 4 : 2; }

// [begin, end) bytes of a checked tensor's elements.
struct Span {
    const uint8_t *begin, *end;
};
Span SpanOf(const Arg &arg)
{
    uint64_t elements = 1;
    for (uint64_t i = 0; i < arg.view.dimNum; ++i) elements *= static_cast<uint64_t>(arg.view.dims[i]);
    const size_t bytes = ElementBytes(arg.view.dataType);
    const uint8_t *begin = static_cast<const uint8_t *>(arg.view.data) + arg.view.offset * static_cast<int64_t>(bytes);
    return {begin, begin + elements * bytes};
}

aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *l = static_cast<const Launch *>(userData);
    const aclfaSimChip *chip = aclfaSimGetChip();
    std::string error;
    void *entry = acl_fa_sim::KernelEntryFor(chip->npuArch, KERNEL, &error);
    if (entry == nullptr) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    // A vector-only kernel: the AIVs of dav-c220, one AI Core per block on the coupled chips.
    const uint32_t kernelType = chip->coupled != 0 ? KERNEL_TYPE_AICORE : KERNEL_TYPE_AIV_ONLY;
    acl_fa_sim::SetLaunchTilingKey(l->tilingKey);
    const aclError rc = acl_fa_sim::LaunchKernel(
        KERNEL, l->blockDim, kernelType,
        [l, entry] {
            reinterpret_cast<KernelEntry>(entry)(l->gm[0], l->gm[1], l->gm[2], l->gm[3], l->gm[4], l->gm[5],
                                                 l->workspace, const_cast<uint8_t *>(l->tilingData.data()));
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
    if (aclfaSimStreamEnqueue(stream, KERNEL, RunOnStream, task.get(), ReleaseLaunch) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

// The OpDef's combinations: outB T in float16 | bfloat16 | float32, outA and attentionOut each
// float32 or T, the LSEs float32.
bool CheckDtypes(const Arg &outA, const Arg &lseA, const Arg &outB, const Arg &lseB, const Arg &out, const Arg &lse,
                 Failure *failure)
{
    const int32_t t = outB.view.dataType;
    if (t != DT_FLOAT16 && t != DT_BF16 && t != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: outB must be float16, bfloat16 or float32, got %s", API_PHASE1,
                        DtypeName(t));
        return false;
    }
    for (const Arg *arg : {&outA, &out}) {
        if (arg->view.dataType != t && arg->view.dataType != DT_FLOAT) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be float32 or outB's dtype (%s), got %s", API_PHASE1,
                            arg->name, DtypeName(t), DtypeName(arg->view.dataType));
            return false;
        }
    }
    for (const Arg *arg : {&lseA, &lseB, &lse}) {
        if (arg->view.dataType != DT_FLOAT) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be float32, got %s", API_PHASE1, arg->name,
                            DtypeName(arg->view.dataType));
            return false;
        }
    }
    return true;
}

// An output may be exactly the memory of its in-place partner (attentionOut of outA, softmaxLse
// of lseA) and must not overlap any other input or the other output: the kernel reads each row
// before writing the same row only.
bool CheckOverlaps(const Arg *inputs[4], const Arg &out, const Arg &lse, Failure *failure)
{
    const Arg *outputs[2] = {&out, &lse};
    for (int o = 0; o < 2; ++o) {
        const Span w = SpanOf(*outputs[o]);
        const Arg *others[5] = {inputs[0], inputs[1], inputs[2], inputs[3], outputs[1 - o]};
        for (const Arg *other : others) {
            const Span r = SpanOf(*other);
            if (w.begin >= r.end || r.begin >= w.end) continue;
            const bool partner = other == inputs[o == 0 ? 0 : 1];
            if (partner && w.begin == r.begin && w.end == r.end) continue;  // in place
            *failure = Fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: %s overlaps %s; an output may only be exactly the memory of %s (in place)",
                            API_PHASE1, outputs[o]->name, other->name, inputs[o == 0 ? 0 : 1]->name);
            return false;
        }
    }
    return true;
}

}  // namespace

extern "C" aclnnStatus aclnnAttentionLseMergeGetWorkspaceSize(const aclTensor *outA, const aclTensor *lseA,
                                                              const aclTensor *outB, const aclTensor *lseB,
                                                              const aclTensor *attentionOutOut,
                                                              const aclTensor *softmaxLseOut, uint64_t *workspaceSize,
                                                              aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(API_PHASE1)) return ACLNN_ERR_INNER;
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    Arg a{"outA"}, la{"lseA"}, b{"outB"}, lb{"lseB"}, out{"attentionOutOut"}, lse{"softmaxLseOut"};
    const std::pair<const aclTensor *, Arg *> args[] = {{outA, &a}, {lseA, &la}, {outB, &b},
                                                        {lseB, &lb}, {attentionOutOut, &out}, {softmaxLseOut, &lse}};
    Failure failure;
    for (const auto &[tensor, arg] : args) {
        if (!CheckTensor(API_PHASE1, tensor, arg, &failure)) return Report(failure);
    }
    const Arg *inputs[4] = {&a, &la, &b, &lb};
    if (!CheckDtypes(a, la, b, lb, out, lse, &failure) || !CheckOverlaps(inputs, out, lse, &failure)) {
        return Report(failure);
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "%s: the AttentionLseMerge op has no kernel for %s (%s)",
                           API_PHASE1, chip->name, chip->shortSoc));
    }
    const std::vector<TensorInfo> inputInfos{InfoOf(a), InfoOf(la), InfoOf(b), InfoOf(lb)};
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(OP_TYPE, inputInfos, {}, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", API_PHASE1, error.c_str()));
    }
    if (inferred.size() != 2 || !CheckOutput(API_PHASE1, out, inferred[0], &failure) ||
        !CheckOutput(API_PHASE1, lse, inferred[1], &failure)) {
        return Report(inferred.size() != 2 ? Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs",
                                                  API_PHASE1, inferred.size())
                                           : failure);
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputInfos, {InfoOf(out), InfoOf(lse)}, {}, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str()));
    }
    auto spec = std::make_unique<LaunchSpec>();
    Launch &l = spec->launch;
    const Arg *all[6] = {&a, &la, &b, &lb, &out, &lse};
    for (int i = 0; i < 6; ++i) l.gm[i] = DataOf(*all[i], ElementBytes(all[i]->view.dataType));
    l.blockDim = tiling.blockDim;
    l.tilingKey = tiling.tilingKey;
    l.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(OP_TYPE, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

extern "C" aclnnStatus aclnnAttentionLseMerge(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                              aclrtStream stream)
{
    return RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
