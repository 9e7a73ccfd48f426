// aclnn_attention_lse_merge.cpp -- the simulator's aclnnAttentionLseMergeGetWorkspaceSize /
// aclnnAttentionLseMerge and aclnnAttentionLseMergeInt16GetWorkspaceSize / aclnnAttentionLseMergeInt16
// (the int16 running result with row bounds) over the operators' own op_host (InferShape, TilingFunc) and op_kernel,
// as aclnn_flash_attention.cpp does for FlashAttention: phase one checks the tensors (null,
// device data, ND, contiguous, non-empty), the dtype combination of the OpDef, how the outputs
// overlap the inputs, runs InferShape and the TilingFunc and returns an executor; phase two
// enqueues the kernel of the simulated chip's architecture (the per-architecture binary that
// also holds the forward's entries).
#include "aclnn_attention_lse_merge.h"
#include "aclnn_attention_lse_merge_int16.h"

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

// One of the two ops: names, and its tensors in kernel-argument order (inputs, then outputs).
struct OpSpec {
    const char *opType, *kernel, *phase1, *phase2;
    size_t inputs, outputs;
};
constexpr OpSpec MERGE{"AttentionLseMerge", "attention_lse_merge", "aclnnAttentionLseMergeGetWorkspaceSize",
                       "aclnnAttentionLseMerge", 4, 2};
constexpr OpSpec MERGE_INT16{"AttentionLseMergeInt16", "attention_lse_merge_int16",
                             "aclnnAttentionLseMergeInt16GetWorkspaceSize", "aclnnAttentionLseMergeInt16", 5, 3};
constexpr size_t MAX_TENSORS = 8;

using KernelEntry6 = void (*)(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR workspace,
                              GM_ADDR tiling);
using KernelEntry8 = void (*)(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR,
                              GM_ADDR workspace, GM_ADDR tiling);

// Device pointers in kernel-argument order and the tiling of one launch; the stream task owns a copy.
struct Launch {
    const OpSpec *op = nullptr;
    uint8_t *gm[MAX_TENSORS] = {};
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;
};

struct LaunchSpec {
    Launch launch;
    uint64_t workspaceSize = 0;
};

size_t ElementBytes(int32_t dtype) { return dtype == DT_FLOAT ? 4 : 2; }  // float32, or float16 | bfloat16 | int16

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
    void *entry = acl_fa_sim::KernelEntryFor(chip->npuArch, l->op->kernel, &error);
    if (entry == nullptr) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    // A vector-only kernel: the AIVs of dav-c220, one AI Core per block on the coupled chips.
    const uint32_t kernelType = chip->coupled != 0 ? KERNEL_TYPE_AICORE : KERNEL_TYPE_AIV_ONLY;
    acl_fa_sim::SetLaunchTilingKey(l->tilingKey);
    const aclError rc = acl_fa_sim::LaunchKernel(
        l->op->kernel, l->blockDim, kernelType,
        [l, entry] {
            uint8_t *tiling = const_cast<uint8_t *>(l->tilingData.data());
            if (l->op->inputs + l->op->outputs == 6) {
                reinterpret_cast<KernelEntry6>(entry)(l->gm[0], l->gm[1], l->gm[2], l->gm[3], l->gm[4], l->gm[5],
                                                      l->workspace, tiling);
            } else {
                reinterpret_cast<KernelEntry8>(entry)(l->gm[0], l->gm[1], l->gm[2], l->gm[3], l->gm[4], l->gm[5],
                                                      l->gm[6], l->gm[7], l->workspace, tiling);
            }
        },
        &error);
    if (rc != ACL_SUCCESS) snprintf(errBuf, errBufLen, "%s", error.c_str());
    return rc;
}

void ReleaseLaunch(void *userData) { delete static_cast<Launch *>(userData); }

int32_t RunLaunchSpec(void *payload, void *workspace, uint64_t workspaceSize, aclrtStream stream)
{
    const auto *spec = static_cast<const LaunchSpec *>(payload);
    const OpSpec &op = *spec->launch.op;
    if (aclfaSimShouldFail(op.phase2)) return ACLNN_ERR_RUNTIME_ERROR;
    const aclnnStatus ws = CheckWorkspace(op.phase2, workspace, workspaceSize, spec->workspaceSize);
    if (ws != ACLNN_SUCCESS) return ws;
    auto task = std::make_unique<Launch>(spec->launch);
    task->workspace = static_cast<uint8_t *>(workspace);
    if (aclfaSimStreamEnqueue(stream, op.kernel, RunOnStream, task.get(), ReleaseLaunch) != ACL_SUCCESS) {
        return ACLNN_ERR_RUNTIME_ERROR;  // the runtime's message stays in aclGetRecentErrMsg
    }
    task.release();  // owned by the stream task now
    return ACLNN_SUCCESS;
}

void DestroyLaunchSpec(void *payload) { delete static_cast<LaunchSpec *>(payload); }

// The OpDefs' combinations: outB T in float16 | bfloat16 | float32, the LSEs and bounds float32;
// AttentionLseMerge: outA and attentionOut each float32 or T; AttentionLseMergeInt16: outA int16,
// attentionOut int16 or T. args: the op's tensors in kernel order.
bool CheckDtypes(const OpSpec &op, const Arg *const *args, Failure *failure)
{
    const bool fixed = &op == &MERGE_INT16;
    const Arg &outA = *args[0], &outB = *args[fixed ? 3 : 2], &out = *args[op.inputs];
    const int32_t t = outB.view.dataType;
    if (t != DT_FLOAT16 && t != DT_BF16 && t != DT_FLOAT) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: outB must be float16, bfloat16 or float32, got %s", op.phase1,
                        DtypeName(t));
        return false;
    }
    const int32_t other = fixed ? DT_INT16 : DT_FLOAT;  // the dtype besides T that outA / attentionOut may have
    for (const Arg *arg : {&outA, &out}) {
        const int32_t dt = arg->view.dataType;
        const bool ok = fixed && arg == &outA ? dt == DT_INT16 : (dt == t || dt == other);
        if (!ok) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be %s, got %s", op.phase1, arg->name,
                            fixed && arg == &outA ? "int16"
                                                  : (std::string(DtypeName(other)) + " or outB's dtype (" +
                                                     DtypeName(t) + ")").c_str(),
                            DtypeName(dt));
            return false;
        }
    }
    for (size_t i = 0; i < op.inputs + op.outputs; ++i) {
        const Arg *arg = args[i];
        if (arg == &outA || arg == &outB || arg == &out) continue;
        if (arg->view.dataType != DT_FLOAT) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be float32, got %s", op.phase1, arg->name,
                            DtypeName(arg->view.dataType));
            return false;
        }
    }
    return true;
}

// An output may be exactly the memory of its in-place partner (attentionOut of outA, softmaxLse
// of lseA, boundOut of boundA) and must not overlap any other input or output: the kernel reads
// each row before writing the same row only. args: the op's tensors in kernel order.
bool CheckOverlaps(const OpSpec &op, const Arg *const *args, Failure *failure)
{
    const size_t n = op.inputs + op.outputs;
    for (size_t o = op.inputs; o < n; ++o) {
        const Arg *partner = args[o - op.inputs];  // outputs are listed in the order of their partners
        const Span w = SpanOf(*args[o]);
        for (size_t i = 0; i < n; ++i) {
            if (i == o) continue;
            const Span r = SpanOf(*args[i]);
            if (w.begin >= r.end || r.begin >= w.end) continue;
            if (args[i] == partner && w.begin == r.begin && w.end == r.end) continue;  // in place
            *failure = Fail(ACLNN_ERR_PARAM_INVALID,
                            "%s: %s overlaps %s; an output may only be exactly the memory of %s (in place)",
                            op.phase1, args[o]->name, args[i]->name, partner->name);
            return false;
        }
    }
    return true;
}

// Phase one of either op: tensors / names in kernel order (inputs, then outputs).
aclnnStatus PhaseOne(const OpSpec &op, const aclTensor *const *tensors, const char *const *names,
                     uint64_t *workspaceSize, aclOpExecutor **executor)
{
    using namespace acl_fa_sim::host;
    if (aclfaSimShouldFail(op.phase1)) return ACLNN_ERR_INNER;
    if (workspaceSize == nullptr || executor == nullptr) {
        return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", op.phase1,
                           workspaceSize == nullptr ? "workspaceSize" : "executor"));
    }
    const size_t n = op.inputs + op.outputs;
    std::vector<Arg> args;
    for (size_t i = 0; i < n; ++i) args.push_back(Arg{names[i]});
    const Arg *argp[MAX_TENSORS] = {};
    Failure failure;
    for (size_t i = 0; i < n; ++i) {
        if (!CheckTensor(op.phase1, tensors[i], &args[i], &failure)) return Report(failure);
        argp[i] = &args[i];
    }
    if (!CheckDtypes(op, argp, &failure) || !CheckOverlaps(op, argp, &failure)) {
        return Report(failure);
    }
    if (!HasOp(op.opType)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(Fail(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "%s: the %s op has no kernel for %s (%s)", op.phase1,
                           op.opType, chip->name, chip->shortSoc));
    }
    std::vector<TensorInfo> inputInfos, outputInfos;
    for (size_t i = 0; i < op.inputs; ++i) inputInfos.push_back(InfoOf(args[i]));
    for (size_t i = op.inputs; i < n; ++i) outputInfos.push_back(InfoOf(args[i]));
    std::vector<TensorInfo> inferred;
    std::string error;
    if (RunInferShape(op.opType, inputInfos, {}, &inferred, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", op.phase1, error.c_str()));
    }
    if (inferred.size() != op.outputs) {
        return Report(Fail(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape gave %zu outputs", op.phase1,
                           inferred.size()));
    }
    for (size_t i = 0; i < op.outputs; ++i) {
        if (!CheckOutput(op.phase1, args[op.inputs + i], inferred[i], &failure)) return Report(failure);
    }
    TilingResult tiling;
    if (RunTiling(op.opType, inputInfos, outputInfos, {}, &tiling, &error) != 0) {
        return Report(Fail(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", op.phase1, error.c_str()));
    }
    auto spec = std::make_unique<LaunchSpec>();
    Launch &l = spec->launch;
    l.op = &op;
    for (size_t i = 0; i < n; ++i) l.gm[i] = DataOf(args[i], ElementBytes(args[i].view.dataType));
    l.blockDim = tiling.blockDim;
    l.tilingKey = tiling.tilingKey;
    l.tilingData = tiling.tilingData;
    for (uint64_t bytes : tiling.workspaceSizes) spec->workspaceSize += bytes;
    const uint64_t wsBytes = spec->workspaceSize;
    aclOpExecutor *created = aclfaSimCreateExecutor(op.opType, spec.get(), RunLaunchSpec, DestroyLaunchSpec);
    if (created == nullptr) return ACLNN_ERR_INNER_CREATE_EXECUTOR;  // nnopbase set the message
    spec.release();
    *workspaceSize = wsBytes;
    *executor = created;
    return ACLNN_SUCCESS;
}

}  // namespace

extern "C" aclnnStatus aclnnAttentionLseMergeGetWorkspaceSize(const aclTensor *outA, const aclTensor *lseA,
                                                              const aclTensor *outB, const aclTensor *lseB,
                                                              const aclTensor *attentionOutOut,
                                                              const aclTensor *softmaxLseOut, uint64_t *workspaceSize,
                                                              aclOpExecutor **executor)
{
    const aclTensor *tensors[] = {outA, lseA, outB, lseB, attentionOutOut, softmaxLseOut};
    const char *names[] = {"outA", "lseA", "outB", "lseB", "attentionOutOut", "softmaxLseOut"};
    return PhaseOne(MERGE, tensors, names, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnAttentionLseMerge(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                              aclrtStream stream)
{
    return RunPhase2(MERGE.phase2, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnAttentionLseMergeInt16GetWorkspaceSize(
    const aclTensor *outA, const aclTensor *boundA, const aclTensor *lseA, const aclTensor *outB, const aclTensor *lseB,
    const aclTensor *attentionOutOut, const aclTensor *boundOutOut, const aclTensor *softmaxLseOut,
    uint64_t *workspaceSize, aclOpExecutor **executor)
{
    const aclTensor *tensors[] = {outA, boundA, lseA, outB, lseB, attentionOutOut, boundOutOut, softmaxLseOut};
    const char *names[] = {"outA", "boundA", "lseA", "outB", "lseB", "attentionOutOut", "boundOutOut", "softmaxLseOut"};
    return PhaseOne(MERGE_INT16, tensors, names, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnAttentionLseMergeInt16(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                                   aclrtStream stream)
{
    return RunPhase2(MERGE_INT16.phase2, workspace, workspaceSize, executor, stream);
}
