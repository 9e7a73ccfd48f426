// reduce.cpp -- HcclDataType sizes and names, and the element-wise reduction of HcclAllReduce.
//
// Every rank reduces the ranks' buffers in rank order 0, 1, ..., n-1, so all ranks get bitwise
// the same result (real HCCL's algorithms fix an order too, not necessarily this one).
// fp16/bf16 are reduced pairwise in fp32 and rounded back after each step.
#include <cstring>

#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

float Bf16ToFloat(uint16_t value) {
    uint32_t bits = static_cast<uint32_t>(value) << 16;
    float out;
    memcpy(&out, &bits, sizeof(out));
    return out;
}

uint16_t FloatToBf16(float value) {  // round to nearest even; NaN stays NaN
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>(bits >> 16);
}

template <typename T>
T Apply(T a, T b, uint32_t op) {
    switch (op) {
        case HCCL_REDUCE_SUM: return static_cast<T>(a + b);
        case HCCL_REDUCE_PROD: return static_cast<T>(a * b);
        case HCCL_REDUCE_MAX: return a < b ? b : a;
        default: return b < a ? b : a;  // HCCL_REDUCE_MIN
    }
}

template <typename T>
void ReduceTyped(void *dst, const void *src, uint64_t count, uint32_t op) {
    T *d = static_cast<T *>(dst);
    const T *s = static_cast<const T *>(src);
    for (uint64_t i = 0; i < count; ++i) d[i] = Apply(d[i], s[i], op);
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void ReduceHalf(void *dst, const void *src, uint64_t count, uint32_t op) {
    uint16_t *d = static_cast<uint16_t *>(dst);
    const uint16_t *s = static_cast<const uint16_t *>(src);
    for (uint64_t i = 0; i < count; ++i) d[i] = FromFloat(Apply(ToFloat(d[i]), ToFloat(s[i]), op));
}

float Fp16ToFloat(uint16_t value) { return aclFloat16ToFloat(value); }
uint16_t FloatToFp16(float value) { return aclFloatToFloat16(value); }

}  // namespace

size_t DataTypeSize(uint32_t dataType) {
    switch (dataType) {
        case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
        case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16: case HCCL_DATA_TYPE_FP16:
        case HCCL_DATA_TYPE_BFP16: return 2;
        case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32: case HCCL_DATA_TYPE_FP32: return 4;
        case HCCL_DATA_TYPE_INT64: case HCCL_DATA_TYPE_UINT64: case HCCL_DATA_TYPE_FP64: return 8;
        case HCCL_DATA_TYPE_INT128: return 16;
        default: return 0;
    }
}

const char *DataTypeName(uint32_t dataType) {
    switch (dataType) {
        case HCCL_DATA_TYPE_INT8: return "int8";
        case HCCL_DATA_TYPE_INT16: return "int16";
        case HCCL_DATA_TYPE_INT32: return "int32";
        case HCCL_DATA_TYPE_FP16: return "fp16";
        case HCCL_DATA_TYPE_FP32: return "fp32";
        case HCCL_DATA_TYPE_INT64: return "int64";
        case HCCL_DATA_TYPE_UINT64: return "uint64";
        case HCCL_DATA_TYPE_UINT8: return "uint8";
        case HCCL_DATA_TYPE_UINT16: return "uint16";
        case HCCL_DATA_TYPE_UINT32: return "uint32";
        case HCCL_DATA_TYPE_FP64: return "fp64";
        case HCCL_DATA_TYPE_BFP16: return "bf16";
        case HCCL_DATA_TYPE_INT128: return "int128";
        default: return "unknown type";
    }
}

bool ReduceInto(void *dst, const void *src, uint64_t count, uint32_t dataType, uint32_t op) {
    switch (dataType) {
        case HCCL_DATA_TYPE_INT8: ReduceTyped<int8_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_INT16: ReduceTyped<int16_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_INT32: ReduceTyped<int32_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_INT64: ReduceTyped<int64_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_UINT8: ReduceTyped<uint8_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_UINT16: ReduceTyped<uint16_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_UINT32: ReduceTyped<uint32_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_UINT64: ReduceTyped<uint64_t>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_FP32: ReduceTyped<float>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_FP64: ReduceTyped<double>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_FP16: ReduceHalf<Fp16ToFloat, FloatToFp16>(dst, src, count, op); return true;
        case HCCL_DATA_TYPE_BFP16: ReduceHalf<Bf16ToFloat, FloatToBf16>(dst, src, count, op); return true;
        default: return false;
    }
}

}  // namespace hccl
}  // namespace acl_fa_sim
