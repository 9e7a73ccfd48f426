// aclnn_flash_attention_decode.cpp -- the simulator's aclnnFlashAttentionDecodeGetWorkspaceSize /
// aclnnFlashAttentionDecode over the operator's own op_host (InferShape, TilingFunc) and
// op_kernel, as aclnn_flash_attention.cpp does for FlashAttention: phase one checks the tensors
// (null, device data, ND, contiguous, non-empty, dtypes), the OpDef lists and InferShape, runs
// the TilingFunc and returns the workspace size with an executor; phase two enqueues the kernel.
// The sequence lengths and block table are device data: the kernel reads them, phase one
// cannot (as on the chip); the Python layer validates their values before any device work.
#include "aclnn_flash_attention_decode.h"

#include <cstdarg>
#include <memory>
#include <string>
#include <vector>

#include "aclnn/opdev/op_errno.h"
#include "acl_fa_sim.h"
#include "flash_attention_decode_launch.h"
#include "opapi_common.h"
#include "sim_host/op_runtime.h"

namespace {

constexpr const char *OP_TYPE = "FlashAttentionDecode";
constexpr const char *API_PHASE1 = "aclnnFlashAttentionDecodeGetWorkspaceSize";
constexpr const char *API_PHASE2 = "aclnnFlashAttentionDecode";

// aclDataType / ge::DataType share these values.
constexpr int32_t DT_FLOAT = 0;
constexpr int32_t DT_FLOAT16 = 1;
constexpr int32_t DT_INT32 = 3;
constexpr int32_t DT_BF16 = 27;
constexpr int32_t FORMAT_ND = 2;

aclnnStatus Report(aclnnStatus code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
aclnnStatus Report(aclnnStatus code, const char *fmt, ...)
{
    char buffer[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof(buffer), fmt, args);
    va_end(args);
    aclfaSimSetErrMsg("%s", buffer);
    return code;
}

const char *DtypeName(int32_t dtype)
{
    switch (dtype) {
        case DT_FLOAT: return "float32";
        case DT_FLOAT16: return "float16";
        case DT_INT32: return "int32";
        case DT_BF16: return "bfloat16";
        default: return "an unsupported dtype";
    }
}

std::string ShapeString(const int64_t *dims, uint64_t n)
{
    std::string text = "[";
    for (uint64_t i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
}

struct Arg {
    const char *name;
    const aclTensor *tensor;
    aclfaSimTensorView view{};
};

// Null, device data, ND, row-major contiguous, every dimension >= 1. Returns ACLNN_SUCCESS or the
// reported failure.
aclnnStatus CheckTensor(Arg *arg)
{
    if (arg->tensor == nullptr) return Report(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1, arg->name);
    aclfaSimGetTensorView(arg->tensor, &arg->view);
    const aclfaSimTensorView &v = arg->view;
    if (v.data == nullptr) {
        return Report(ACLNN_ERR_PARAM_NULLPTR, "%s: %s has no device data (tensorData is nullptr)", API_PHASE1,
                      arg->name);
    }
    if (v.format != FORMAT_ND) {
        return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s must be in format ND (%d), got format %d", API_PHASE1, arg->name,
                      FORMAT_ND, v.format);
    }
    int64_t expected = 1;
    for (int64_t i = static_cast<int64_t>(v.dimNum) - 1; i >= 0; --i) {
        if (v.dims[i] <= 0) {
            return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s %s has an empty dimension; every dimension must be >= 1",
                          API_PHASE1, arg->name, ShapeString(v.dims, v.dimNum).c_str());
        }
        if (v.dims[i] != 1 && v.strides[i] != expected) {
            return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s %s must be contiguous (row-major strides)", API_PHASE1,
                          arg->name, ShapeString(v.dims, v.dimNum).c_str());
        }
        expected *= v.dims[i];
    }
    return ACLNN_SUCCESS;
}

aclnnStatus CheckDtype(const Arg &arg, int32_t expected)
{
    if (arg.view.dataType == expected) return ACLNN_SUCCESS;
    return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s must be %s, got %s", API_PHASE1, arg.name, DtypeName(expected),
                  DtypeName(arg.view.dataType));
}

acl_fa_sim::host::TensorInfo InfoOf(const Arg &arg)
{
    acl_fa_sim::host::TensorInfo info;
    info.shape.assign(arg.view.dims, arg.view.dims + arg.view.dimNum);
    info.dtype = arg.view.dataType;
    info.format = arg.view.format;
    return info;
}

uint8_t *DataOf(const Arg &arg, size_t elementBytes)
{
    return static_cast<uint8_t *>(arg.view.data) + arg.view.offset * static_cast<int64_t>(elementBytes);
}

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
    if (workspaceSize < spec->workspaceSize) {
        return Report(ACLNN_ERR_PARAM_INVALID, "%s: workspaceSize %llu is smaller than the %llu bytes phase one asked for",
                      API_PHASE2, static_cast<unsigned long long>(workspaceSize),
                      static_cast<unsigned long long>(spec->workspaceSize));
    }
    if (spec->workspaceSize > 0 && workspace == nullptr) {
        return Report(ACLNN_ERR_PARAM_NULLPTR, "%s: workspace is nullptr but %llu bytes are needed", API_PHASE2,
                      static_cast<unsigned long long>(spec->workspaceSize));
    }
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
        return Report(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", API_PHASE1,
                      workspaceSize == nullptr ? "workspaceSize" : "executor");
    }
    Arg q{"query", query}, k{"key", key}, v{"value", value}, table{"blockTable", blockTable},
        lens{"actualSeqLengthsKv", actualSeqLengthsKv}, out{"attentionOutOut", attentionOutOut},
        lse{"softmaxLseOut", softmaxLseOut};
    for (Arg *arg : {&q, &k, &v, &table, &lens, &out, &lse}) {
        const aclnnStatus rc = CheckTensor(arg);
        if (rc != ACLNN_SUCCESS) return rc;
    }
    const int32_t dtype = q.view.dataType;
    if (dtype != DT_FLOAT16 && dtype != DT_BF16) {
        return Report(ACLNN_ERR_PARAM_INVALID, "%s: query must be float16 or bfloat16, got %s", API_PHASE1,
                      DtypeName(dtype));
    }
    for (const Arg *arg : {&k, &v, &out}) {
        if (arg->view.dataType != dtype) {
            return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s must have the dtype of query (%s), got %s", API_PHASE1,
                          arg->name, DtypeName(dtype), DtypeName(arg->view.dataType));
        }
    }
    for (const auto &[arg, expected] : {std::pair{&table, DT_INT32}, {&lens, DT_INT32}, {&lse, DT_FLOAT}}) {
        const aclnnStatus rc = CheckDtype(*arg, expected);
        if (rc != ACLNN_SUCCESS) return rc;
    }
    if (!HasOp(OP_TYPE)) {
        const aclfaSimChip *chip = aclfaSimGetChip();
        return Report(ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                      "%s: the FlashAttentionDecode op has no kernel for %s (%s); it is built for ascend910b and "
                      "ascend910_93 (Atlas A2/A3)",
                      API_PHASE1, chip->name, chip->shortSoc);
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
        return Report(ACLNN_ERR_INNER_INFERSHAPE_ERROR, "%s: InferShape failed: %s", API_PHASE1, error.c_str());
    }
    for (size_t i = 0; i < 2 && i < inferred.size(); ++i) {
        const Arg &arg = i == 0 ? out : lse;
        const std::vector<int64_t> shape(arg.view.dims, arg.view.dims + arg.view.dimNum);
        if (shape != inferred[i].shape) {
            return Report(ACLNN_ERR_PARAM_INVALID, "%s: %s has shape %s, the op produces %s", API_PHASE1, arg.name,
                          ShapeString(shape.data(), shape.size()).c_str(),
                          ShapeString(inferred[i].shape.data(), inferred[i].shape.size()).c_str());
        }
    }
    TilingResult tiling;
    if (RunTiling(OP_TYPE, inputs, {InfoOf(out), InfoOf(lse)}, attrs, &tiling, &error) != 0) {
        return Report(ACLNN_ERR_INNER_TILING_ERROR, "%s: tiling failed: %s", API_PHASE1, error.c_str());
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
    return acl_fa_sim::opapi::RunPhase2(API_PHASE2, workspace, workspaceSize, executor, stream);
}
