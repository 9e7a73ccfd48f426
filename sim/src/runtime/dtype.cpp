// dtype.cpp -- aclDataTypeSize and the fp16 <-> fp32 conversions.
#include <cstring>

#include "rt_internal.h"

extern "C" {

// Bytes per element; 0 for types that have no whole-byte element (INT4, UINT1, the 4/6-bit
// floats, STRING) and for unknown values.
size_t aclDataTypeSize(aclDataType dataType) {
    switch (dataType) {
        case ACL_BOOL:
        case ACL_INT8:
        case ACL_UINT8:
        case ACL_HIFLOAT8:
        case ACL_FLOAT8_E5M2:
        case ACL_FLOAT8_E4M3FN:
        case ACL_FLOAT8_E8M0:
            return 1;
        case ACL_FLOAT16:
        case ACL_BF16:
        case ACL_INT16:
        case ACL_UINT16:
            return 2;
        case ACL_FLOAT:
        case ACL_INT32:
        case ACL_UINT32:
        case ACL_COMPLEX32:
            return 4;
        case ACL_INT64:
        case ACL_UINT64:
        case ACL_DOUBLE:
        case ACL_COMPLEX64:
            return 8;
        case ACL_COMPLEX128:
            return 16;
        default:
            return 0;
    }
}

// IEEE binary16 -> binary32, exact (subnormals, infinities and NaN payloads kept).
float aclFloat16ToFloat(aclFloat16 value) {
    uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
    uint32_t exponent = (value >> 10) & 0x1fu;
    uint32_t mantissa = value & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {  // subnormal: normalize
        int shift = 0;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            ++shift;
        }
        bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float out;
    memcpy(&out, &bits, sizeof(out));
    return out;
}

// binary32 -> binary16 with round-to-nearest-even; overflow gives infinity, NaN stays NaN.
aclFloat16 aclFloatToFloat16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof(bits));
    uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    uint32_t exponent = (bits >> 23) & 0xffu;
    uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xff) return static_cast<aclFloat16>(sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0u));
    int32_t halfExponent = static_cast<int32_t>(exponent) - 127 + 15;
    if (halfExponent >= 0x1f) return static_cast<aclFloat16>(sign | 0x7c00u);
    if (halfExponent <= 0) {
        if (halfExponent < -10) return sign;  // below half the smallest subnormal
        mantissa |= 0x800000u;                 // implicit leading one
        uint32_t shift = static_cast<uint32_t>(14 - halfExponent);
        uint32_t half = mantissa >> shift;
        uint32_t rest = mantissa & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
        return static_cast<aclFloat16>(sign | half);
    }
    uint32_t half = (static_cast<uint32_t>(halfExponent) << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
    return static_cast<aclFloat16>(sign | half);
}

}  // extern "C"
