// convert.cpp -- element type conversions (Cast, Matmul operand/result conversion) and
// the fp32 transcendental vector ops. Loops are compiled for x86-64-v4 / v3 / baseline
// and chosen at load time (target_clones), so F16C/AVX-512 are used where present.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ascendc_sim/vec.h"

#define ACLFA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace acl_fa_sim {
namespace kernel {

// fp16 <-> fp32. GCC does not vectorize _Float16 conversions (one vcvtph2ps/vcvtps2ph per
// element), and these loops carry every Matmul operand and Cast of the fp16 kernels, so with F16C
// they convert eight lanes per instruction. Both paths use the same instructions, rounding by the
// current MXCSR direction (nearest even unless a caller changed it), so results are bit-identical.
namespace {

void F32ToF16Scalar(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const _Float16 h = static_cast<_Float16>(src[i]);
        std::memcpy(&dst[i], &h, 2);
    }
}

void F16ToF32Scalar(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        _Float16 h;
        std::memcpy(&h, &src[i], 2);
        dst[i] = static_cast<float>(h);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void F32ToF16Wide(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_CUR_DIRECTION);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + i), h);
    }
    F32ToF16Scalar(src + i, dst + i, n - i);
}

__attribute__((target("avx,f16c"))) void F16ToF32Wide(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    F16ToF32Scalar(src + i, dst + i, n - i);
}

bool HasF16c() {
    __builtin_cpu_init();  // may run before libgcc's own constructor has filled the CPU model
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

const bool g_hasF16c = HasF16c();
#endif

}  // namespace

void ConvertF32ToF16(const float *src, uint16_t *dst, size_t n) {
#if defined(__x86_64__)
    if (g_hasF16c) return F32ToF16Wide(src, dst, n);
#endif
    F32ToF16Scalar(src, dst, n);
}

void ConvertF16ToF32(const uint16_t *src, float *dst, size_t n) {
#if defined(__x86_64__)
    if (g_hasF16c) return F16ToF32Wide(src, dst, n);
#endif
    F16ToF32Scalar(src, dst, n);
}

ACLFA_CLONES void ConvertF32ToBf16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, &src[i], 4);
        const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
        const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        dst[i] = static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : r);
    }
}

ACLFA_CLONES void ConvertBf16ToF32(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const uint32_t u = static_cast<uint32_t>(src[i]) << 16;
        std::memcpy(&dst[i], &u, 4);
    }
}

}  // namespace kernel
}  // namespace acl_fa_sim

namespace AscendC {
namespace sim {
namespace {

using acl_fa_sim::kernel::Violation;

// Rounds x (finite, in float) to a value representable with `mantBits` explicit mantissa
// bits and minimum normal exponent `minExp`, by the given mode; then the caller converts
// exactly. Used for the non-default modes (the default RINT path is the vectorized one).
float RoundToFormat(float x, int mantBits, int minExp, RoundMode mode) {
    if (!std::isfinite(x) || x == 0.0f) return x;
    int e;
    std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
    const int exp = std::max(e - 1, minExp);
    const float ulp = std::ldexp(1.0f, exp - mantBits);
    const float q = x / ulp;  // exact: power-of-two scaling
    float r;
    switch (mode) {
        case RoundMode::CAST_FLOOR: r = std::floor(q); break;
        case RoundMode::CAST_CEIL: r = std::ceil(q); break;
        case RoundMode::CAST_ROUND: r = std::round(q); break;  // ties away from zero
        case RoundMode::CAST_TRUNC: r = std::trunc(q); break;
        case RoundMode::CAST_ODD: {
            r = std::trunc(q);
            if (r != q && std::fmod(r, 2.0f) == 0.0f) r += (q > 0 ? 1.0f : -1.0f);
            break;
        }
        default: r = std::nearbyint(q); break;  // RINT / NONE: ties to even
    }
    return r * ulp;
}

int32_t SaturateInt(float x) {
    if (std::isnan(x)) return 0;
    if (x >= 2147483647.0f) return INT32_MAX;
    if (x <= -2147483648.0f) return INT32_MIN;
    return static_cast<int32_t>(x);
}

}  // namespace

// exp in 8 lanes (libm's expf is one call per element): e^x = 2^k * e^r with k = round(x / ln 2)
// and r = x - k ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts, the first with few bits so k times
// it is exact), e^r = 1 + r + r^2 P(r) with Cephes expf's degree-5 P, and 2^k as two power-of-two
// factors so a subnormal result is rounded once. Within 1 ulp of the correctly rounded result
// (checked against exp in double on every 37th float bit pattern: 0.4 % are 1 ulp off, none
// more); exp(-inf) = +0, exp(+inf) = +inf, exp(NaN) = NaN, x > 88.73 overflows to +inf, x < -103.98
// gives +0. This file is compiled without FMA contraction, so every CPU gives the same bits.
namespace {
typedef float ExpV8 __attribute__((vector_size(32)));
typedef int32_t ExpI8 __attribute__((vector_size(32)));

// e^x of 8 lanes; inlined into each clone of ExpF32 (so it never passes vectors by value itself).
__attribute__((always_inline)) inline void Exp8(const float *src, float *dst) {
    const ExpV8 zero = {};
    const ExpV8 lo = zero - 104.0f, hi = zero + 89.0f;  // past both ends of the float range of e^x
    const ExpV8 shifter = zero + 12582912.0f;            // 1.5 * 2^23: adding it rounds to an integer
    ExpV8 x;
    std::memcpy(&x, src, sizeof(x));
    ExpV8 xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    const ExpV8 k = (xc * 1.44269504088896341f + shifter) - shifter;
    ExpV8 r = xc - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    ExpV8 p = zero + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const ExpI8 ki = __builtin_convertvector(k, ExpI8);  // in [-150, 128]
    const ExpI8 k1 = ki >> 1, k2 = ki - k1;              // each a normal float's exponent
    const ExpI8 bits1 = (k1 + 127) << 23, bits2 = (k2 + 127) << 23;
    ExpV8 scale1, scale2;
    std::memcpy(&scale1, &bits1, sizeof(scale1));
    std::memcpy(&scale2, &bits2, sizeof(scale2));
    ExpV8 y = p * scale1 * scale2;
    y = x != x ? x : y;
    std::memcpy(dst, &y, sizeof(y));
}
}  // namespace

ACLFA_CLONES void ExpF32(const float *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) Exp8(src + i, dst + i);
    if (i < n) {
        float in[8] = {}, out[8];
        std::memcpy(in, src + i, (n - i) * sizeof(float));
        Exp8(in, out);
        std::memcpy(dst + i, out, (n - i) * sizeof(float));
    }
}

ACLFA_CLONES void LnF32(const float *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = std::log(src[i]);
}

// Tags: 0 float, 1 half, 2 bfloat16, 3 int32.
void CastImpl(void *dst, int dstTag, const void *src, int srcTag, size_t n, RoundMode mode) {
    using namespace acl_fa_sim::kernel;
    const bool nearestEven = mode == RoundMode::CAST_RINT || mode == RoundMode::CAST_NONE;
    if (srcTag == 0 && (dstTag == 1 || dstTag == 2)) {
        const float *s = static_cast<const float *>(src);
        if (nearestEven) {
            (dstTag == 1 ? ConvertF32ToF16 : ConvertF32ToBf16)(s, static_cast<uint16_t *>(dst), n);
            return;
        }
        // fp16: 10 mantissa bits, min normal exponent -14; bf16: 7 bits, -126
        const int mant = dstTag == 1 ? 10 : 7, minExp = dstTag == 1 ? -14 : -126;
        for (size_t i = 0; i < n; ++i) {
            const float r = RoundToFormat(s[i], mant, minExp, mode);
            (dstTag == 1 ? ConvertF32ToF16 : ConvertF32ToBf16)(&r, static_cast<uint16_t *>(dst) + i, 1);
        }
        return;
    }
    if ((srcTag == 1 || srcTag == 2) && dstTag == 0) {
        (srcTag == 1 ? ConvertF16ToF32 : ConvertBf16ToF32)(static_cast<const uint16_t *>(src),
                                                            static_cast<float *>(dst), n);
        return;
    }
    if (srcTag == 0 && dstTag == 3) {
        const float *s = static_cast<const float *>(src);
        int32_t *d = static_cast<int32_t *>(dst);
        for (size_t i = 0; i < n; ++i) d[i] = SaturateInt(AscendC::sim::RoundByMode(s[i], mode));
        return;
    }
    if (srcTag == 3 && dstTag == 0) {
        const int32_t *s = static_cast<const int32_t *>(src);
        float *d = static_cast<float *>(dst);
        for (size_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
        return;
    }
    if (srcTag == dstTag) {
        std::memmove(dst, src, n * (srcTag == 1 || srcTag == 2 ? 2 : 4));
        return;
    }
    Violation("Cast types", "Cast",
              "conversion " + std::to_string(srcTag) + " -> " + std::to_string(dstTag) +
                  " (0 float, 1 half, 2 bfloat16, 3 int32) is not supported by the simulator");
}

}  // namespace sim
}  // namespace AscendC
