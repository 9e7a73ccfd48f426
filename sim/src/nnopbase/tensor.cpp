// tensor.cpp -- aclCreateTensor / aclDestroyTensor and aclfaSimGetTensorView.
//
// Validation as nnopbase's (hicann/opbase src/nnopbase/common/api/acl_op_api.cpp; docs/cann-facts.md#nnopbase-tensors-and-executors):
// NULL dims with a non-zero count, too many dims, negative dims, unknown dtype or format give
// NULL with a message for aclGetRecentErrMsg(); stride NULL means contiguous; strides and
// offset are in elements; aclDestroyTensor(NULL) is a success.
#include <cstring>

#include "nnopbase_internal.h"

struct aclTensor {
    aclfaSimTensorView view;
};

namespace acl_fa_sim {
namespace nnopbase {
namespace {

LiveSet &Tensors() {
    static LiveSet *tensors = new LiveSet(ACLFA_SIM_LIVE_TENSOR);  // never destroyed (exit-time destroys)
    return *tensors;
}

bool IsKnownFormat(int32_t format) {
    switch (format) {
        case ACL_FORMAT_NCHW: case ACL_FORMAT_NHWC: case ACL_FORMAT_ND: case ACL_FORMAT_NC1HWC0:
        case ACL_FORMAT_FRACTAL_Z: case ACL_FORMAT_NC1HWC0_C04: case ACL_FORMAT_HWCN: case ACL_FORMAT_NDHWC:
        case ACL_FORMAT_FRACTAL_NZ: case ACL_FORMAT_NCDHW: case ACL_FORMAT_NDC1HWC0: case ACL_FRACTAL_Z_3D:
        case ACL_FORMAT_NC: case ACL_FORMAT_NCL: case ACL_FORMAT_FRACTAL_NZ_C0_16: case ACL_FORMAT_FRACTAL_NZ_C0_32:
        case ACL_FORMAT_FRACTAL_NZ_C0_2: case ACL_FORMAT_FRACTAL_NZ_C0_4: case ACL_FORMAT_FRACTAL_NZ_C0_8:
            return true;
        default:
            return false;
    }
}

// Checks one dims argument; returns false with the message set.
bool CheckDims(const char *name, const int64_t *dims, uint64_t count) {
    if (dims == nullptr && count > 0) {
        aclfaSimSetErrMsg("aclCreateTensor: %s is NULL but its count is %llu", name,
                          static_cast<unsigned long long>(count));
        return false;
    }
    if (count > ACLFA_SIM_MAX_DIMS) {
        aclfaSimSetErrMsg("aclCreateTensor: %s has %llu dims; at most %d are supported", name,
                          static_cast<unsigned long long>(count), ACLFA_SIM_MAX_DIMS);
        return false;
    }
    for (uint64_t i = 0; i < count; ++i) {
        if (dims[i] < 0) {
            aclfaSimSetErrMsg("aclCreateTensor: %s[%llu] = %lld is negative", name, static_cast<unsigned long long>(i),
                              static_cast<long long>(dims[i]));
            return false;
        }
    }
    return true;
}

}  // namespace
}  // namespace nnopbase
}  // namespace acl_fa_sim

using namespace acl_fa_sim::nnopbase;

extern "C" {

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t *stride,
                           int64_t offset, aclFormat format, const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData) {
    if (aclfaSimShouldFail("aclCreateTensor")) return nullptr;
    if (!CheckDims("viewDims", viewDims, viewDimsNum) || !CheckDims("storageDims", storageDims, storageDimsNum)) {
        return nullptr;
    }
    if (!IsKnownDataType(dataType)) {
        aclfaSimSetErrMsg("aclCreateTensor: dataType %d is not an aclDataType", static_cast<int>(dataType));
        return nullptr;
    }
    if (!IsKnownFormat(format)) {
        aclfaSimSetErrMsg("aclCreateTensor: format %d is not an aclFormat", static_cast<int>(format));
        return nullptr;
    }
    if (offset < 0) {
        aclfaSimSetErrMsg("aclCreateTensor: offset %lld is negative", static_cast<long long>(offset));
        return nullptr;
    }
    aclTensor *tensor = new aclTensor;
    memset(&tensor->view, 0, sizeof(tensor->view));
    aclfaSimTensorView &view = tensor->view;
    view.dimNum = viewDimsNum;
    for (uint64_t i = 0; i < viewDimsNum; ++i) view.dims[i] = viewDims[i];
    if (stride != nullptr) {
        for (uint64_t i = 0; i < viewDimsNum; ++i) view.strides[i] = stride[i];
    } else {  // contiguous, row-major
        int64_t step = 1;
        for (uint64_t i = viewDimsNum; i-- > 0;) {
            view.strides[i] = step;
            step *= viewDims[i];
        }
    }
    view.offset = offset;
    view.dataType = dataType;
    view.format = format;
    view.storageDimNum = storageDimsNum;
    for (uint64_t i = 0; i < storageDimsNum; ++i) view.storageDims[i] = storageDims[i];
    view.data = tensorData;
    Tensors().Add(tensor);
    return tensor;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
    return DestroyLive("aclDestroyTensor", Tensors(), tensor, "aclTensor");
}

int32_t aclfaSimGetTensorView(const aclTensor *tensor, aclfaSimTensorView *view) {
    if (tensor == nullptr || view == nullptr) {
        aclfaSimSetErrMsg("aclfaSimGetTensorView: %s is NULL", tensor == nullptr ? "tensor" : "view");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!Tensors().Contains(tensor)) {
        aclfaSimSetErrMsg("aclfaSimGetTensorView: %p is not a live aclTensor", static_cast<const void *>(tensor));
        return ACLNN_ERR_PARAM_INVALID;
    }
    *view = tensor->view;
    return ACLNN_SUCCESS;
}

}  // extern "C"
