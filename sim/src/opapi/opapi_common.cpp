// opapi_common.cpp -- see opapi_common.h.
#include "opapi_common.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>

namespace acl_fa_sim {
namespace opapi {

Failure Fail(aclnnStatus code, const char *fmt, ...)
{
    char buffer[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof(buffer), fmt, args);
    va_end(args);
    return Failure{code, buffer};
}

aclnnStatus Report(const Failure &failure)
{
    aclfaSimSetErrMsg("%s", failure.message.c_str());
    return failure.code;
}

aclnnStatus RunPhase2(const char *api, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                      aclrtStream stream)
{
    if (executor == nullptr) return Report(Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: executor is nullptr", api));
    return aclfaSimRunExecutor(executor, workspace, workspaceSize, stream);
}

std::string LibraryDirectory()
{
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&LibraryDirectory), &info) == 0 || info.dli_fname == nullptr) return ".";
    const std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

size_t ElementBytes(int32_t dtype)
{
    switch (dtype) {
        case 0: case 3: case 8: return 4;            // float32, int32, uint32
        case 1: case 6: case 7: case 27: return 2;   // float16, int16, uint16, bfloat16
        case 9: case 10: case 11: return 8;          // int64, uint64, double
        default: return 1;                           // int8, uint8, bool
    }
}

std::string ShapeString(const std::vector<int64_t> &shape)
{
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        text += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return text + "]";
}

std::string ShapeString(const aclfaSimTensorView &view)
{
    return ShapeString(std::vector<int64_t>(view.dims, view.dims + view.dimNum));
}

namespace {
bool IsContiguous(const aclfaSimTensorView &view)
{
    int64_t expected = 1;
    for (int64_t i = static_cast<int64_t>(view.dimNum) - 1; i >= 0; --i) {
        if (view.dims[i] != 1 && view.strides[i] != expected) {
            return false;
        }
        expected *= view.dims[i];
    }
    return true;
}
}  // namespace

bool CheckTensor(const char *api, const aclTensor *tensor, Arg *arg, Failure *failure)
{
    if (tensor == nullptr) {
        *failure = Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s is nullptr", api, arg->name);
        return false;
    }
    aclfaSimGetTensorView(tensor, &arg->view);
    if (arg->view.data == nullptr) {
        *failure = Fail(ACLNN_ERR_PARAM_NULLPTR, "%s: %s has no device data (tensorData is nullptr)", api, arg->name);
        return false;
    }
    if (arg->view.format != FORMAT_ND) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s must be in format ND (%d), got format %d", api, arg->name,
                        FORMAT_ND, arg->view.format);
        return false;
    }
    if (!IsContiguous(arg->view)) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s %s must be contiguous (row-major strides)", api, arg->name,
                        ShapeString(arg->view).c_str());
        return false;
    }
    for (uint64_t i = 0; i < arg->view.dimNum; ++i) {
        if (arg->view.dims[i] <= 0) {
            *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s %s has an empty dimension %llu; every dimension must be >= 1",
                            api, arg->name, ShapeString(arg->view).c_str(), static_cast<unsigned long long>(i));
            return false;
        }
    }
    return true;
}

bool CheckOutput(const char *api, const Arg &arg, const host::TensorInfo &expected, Failure *failure)
{
    std::vector<int64_t> shape(arg.view.dims, arg.view.dims + arg.view.dimNum);
    if (shape != expected.shape) {
        *failure = Fail(ACLNN_ERR_PARAM_INVALID, "%s: %s has shape %s, the op produces %s", api, arg.name,
                        ShapeString(shape).c_str(), ShapeString(expected.shape).c_str());
        return false;
    }
    return true;
}

host::TensorInfo InfoOf(const Arg &arg)
{
    host::TensorInfo info;
    info.shape.assign(arg.view.dims, arg.view.dims + arg.view.dimNum);
    info.dtype = arg.view.dataType;
    info.format = arg.view.format;
    return info;
}

uint8_t *DataOf(const Arg &arg, size_t elementBytes)
{
    return static_cast<uint8_t *>(arg.view.data) + arg.view.offset * static_cast<int64_t>(elementBytes);
}

aclnnStatus CheckWorkspace(const char *api, void *workspace, uint64_t workspaceSize, uint64_t needed)
{
    if (workspaceSize < needed) {
        aclfaSimSetErrMsg("%s: workspaceSize %llu is smaller than the %llu bytes phase one asked for", api,
                          static_cast<unsigned long long>(workspaceSize), static_cast<unsigned long long>(needed));
        return ACLNN_ERR_PARAM_INVALID;
    }
    if (needed > 0 && workspace == nullptr) {
        aclfaSimSetErrMsg("%s: workspace is nullptr but %llu bytes are needed", api,
                          static_cast<unsigned long long>(needed));
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    return ACLNN_SUCCESS;
}

}  // namespace opapi
}  // namespace acl_fa_sim
