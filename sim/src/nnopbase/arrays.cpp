// arrays.cpp -- aclIntArray / aclFloatArray / aclBoolArray / aclScalar create and destroy.
// NULL values with a non-zero size give NULL with a message; destroy(NULL) is a success.
#include <cstring>
#include <vector>

#include "nnopbase_internal.h"

struct aclIntArray {
    std::vector<int64_t> values;
};
struct aclFloatArray {
    std::vector<float> values;
};
struct aclBoolArray {
    std::vector<bool> values;
};
struct aclScalar {
    int32_t dataType;      // aclDataType
    unsigned char bytes[16];  // the value, aclDataTypeSize(dataType) bytes
};

namespace acl_fa_sim {
namespace nnopbase {
namespace {

// One set for the three array kinds: they share aclfaSimLiveCounts.intArrays. Never destroyed.
LiveSet &Arrays() {
    static LiveSet *arrays = new LiveSet(ACLFA_SIM_LIVE_ARRAY);
    return *arrays;
}

LiveSet &Scalars() {
    static LiveSet *scalars = new LiveSet(ACLFA_SIM_LIVE_SCALAR);
    return *scalars;
}

template <typename Array, typename T>
Array *CreateArray(const char *api, const T *value, uint64_t size) {
    if (aclfaSimShouldFail(api)) return nullptr;
    if (value == nullptr && size > 0) {
        aclfaSimSetErrMsg("%s: value is NULL but size is %llu", api, static_cast<unsigned long long>(size));
        return nullptr;
    }
    Array *array = new Array;
    array->values.assign(value, value + size);
    Arrays().Add(array);
    return array;
}

template <typename Array>
aclnnStatus DestroyArray(const char *api, const Array *array) {
    return DestroyLive(api, Arrays(), array, "array");
}

}  // namespace
}  // namespace nnopbase
}  // namespace acl_fa_sim

using namespace acl_fa_sim::nnopbase;

extern "C" {

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
    return CreateArray<aclIntArray>("aclCreateIntArray", value, size);
}

aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size) {
    return CreateArray<aclFloatArray>("aclCreateFloatArray", value, size);
}

aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size) {
    return CreateArray<aclBoolArray>("aclCreateBoolArray", value, size);
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array) { return DestroyArray("aclDestroyIntArray", array); }

aclnnStatus aclDestroyFloatArray(const aclFloatArray *array) { return DestroyArray("aclDestroyFloatArray", array); }

aclnnStatus aclDestroyBoolArray(const aclBoolArray *array) { return DestroyArray("aclDestroyBoolArray", array); }

aclScalar *aclCreateScalar(void *value, aclDataType dataType) {
    if (aclfaSimShouldFail("aclCreateScalar")) return nullptr;
    if (value == nullptr) {
        aclfaSimSetErrMsg("aclCreateScalar: value is NULL");
        return nullptr;
    }
    const size_t bytes = IsKnownDataType(dataType) ? aclDataTypeSize(dataType) : 0;
    if (bytes == 0 || bytes > sizeof(aclScalar::bytes)) {
        aclfaSimSetErrMsg("aclCreateScalar: dataType %d is not a scalar aclDataType", static_cast<int>(dataType));
        return nullptr;
    }
    aclScalar *scalar = new aclScalar;
    scalar->dataType = dataType;
    memset(scalar->bytes, 0, sizeof(scalar->bytes));
    memcpy(scalar->bytes, value, bytes);
    Scalars().Add(scalar);
    return scalar;
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
    return DestroyLive("aclDestroyScalar", Scalars(), scalar, "aclScalar");
}

int32_t aclfaSimGetScalarValue(const aclScalar *scalar, int32_t *dataType, unsigned char bytes[16]) {
    if (scalar == nullptr || dataType == nullptr || bytes == nullptr) {
        aclfaSimSetErrMsg("aclfaSimGetScalarValue: %s is NULL",
                          scalar == nullptr ? "scalar" : dataType == nullptr ? "dataType" : "bytes");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!Scalars().Contains(scalar)) {
        aclfaSimSetErrMsg("aclfaSimGetScalarValue: %p is not a live aclScalar", static_cast<const void *>(scalar));
        return ACLNN_ERR_PARAM_INVALID;
    }
    *dataType = scalar->dataType;
    memcpy(bytes, scalar->bytes, sizeof(scalar->bytes));
    return ACLNN_SUCCESS;
}

}  // extern "C"
