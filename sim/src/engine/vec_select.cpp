// vec_select.cpp -- the element loops of the mask instructions: Compares (fp32 against a scalar,
// one bit per element), Select (fp32, tensor-scalar mode: a bit per element picks src0 or the
// scalar) and Gather (32-bit elements by byte offsets). The fp32 compare and select run eight lanes
// per AVX instruction when the host has AVX2 (checked once at load), one byte of the mask per eight
// elements; otherwise, and where dst partly overlaps src0, a sequential loop. Results are
// bit-identical either way: the same IEEE comparisons (ordered, NE unordered: a NaN compares false
// except for NE) and a pure choice between two values.
#include <algorithm>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ascendc_sim/vec_int.h"

#define ACLFA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace AscendC {
namespace sim {
namespace {

bool CompareOne(float a, float y, CMPMODE mode) {
    switch (mode) {
        case CMPMODE::LT: return a < y;
        case CMPMODE::GT: return a > y;
        case CMPMODE::EQ: return a == y;
        case CMPMODE::LE: return a <= y;
        case CMPMODE::GE: return a >= y;
        case CMPMODE::NE: return a != y;
    }
    return false;
}

void CompareScalarLoop(uint8_t *bits, const float *x, float y, CMPMODE mode, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint8_t byte = 0;
        for (size_t j = 0; j < 8 && i + j < n; ++j) byte |= static_cast<uint8_t>(CompareOne(x[i + j], y, mode)) << j;
        bits[i / 8] = byte;
    }
}

void SelectScalarLoop(float *dst, const uint8_t *bits, const float *src0, float src1, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = ((bits[i / 8] >> (i % 8)) & 1) ? src0[i] : src1;
}

#if defined(__x86_64__)
bool HasAvx2() {
    __builtin_cpu_init();  // may run before libgcc's own constructor has filled the CPU model
    return __builtin_cpu_supports("avx2");
}
const bool g_hasAvx2 = HasAvx2();

// Whole bytes of the mask: eight lanes per compare, movemask gives the byte (lane j -> bit j).
template <int kPredicate>
__attribute__((target("avx2"))) size_t CompareWide(uint8_t *bits, const float *x, float y, size_t n) {
    const __m256 vy = _mm256_set1_ps(y);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        bits[i / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vy, kPredicate)));
    }
    return i;
}

__attribute__((target("avx2"))) size_t SelectWide(float *dst, const uint8_t *bits, const float *src0, float src1,
                                                   size_t n) {
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 scalar = _mm256_set1_ps(src1);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i byte = _mm256_set1_epi32(bits[i / 8]);
        const __m256i keep = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane), lane);
        _mm256_storeu_ps(dst + i, _mm256_blendv_ps(scalar, _mm256_loadu_ps(src0 + i), _mm256_castsi256_ps(keep)));
    }
    return i;
}
#endif

}  // namespace

void CompareScalarBits(uint8_t *bits, const float *x, float y, CMPMODE mode, size_t n) {
    size_t done = 0;
#if defined(__x86_64__)
    if (g_hasAvx2) {
        switch (mode) {
            case CMPMODE::LT: done = CompareWide<_CMP_LT_OQ>(bits, x, y, n); break;
            case CMPMODE::GT: done = CompareWide<_CMP_GT_OQ>(bits, x, y, n); break;
            case CMPMODE::EQ: done = CompareWide<_CMP_EQ_OQ>(bits, x, y, n); break;
            case CMPMODE::LE: done = CompareWide<_CMP_LE_OQ>(bits, x, y, n); break;
            case CMPMODE::GE: done = CompareWide<_CMP_GE_OQ>(bits, x, y, n); break;
            case CMPMODE::NE: done = CompareWide<_CMP_NEQ_UQ>(bits, x, y, n); break;
        }
    }
#endif
    CompareScalarLoop(bits + done / 8, x + done, y, mode, n - done);
}

void SelectTensorScalar(float *dst, const uint8_t *bits, const float *src0, float src1, size_t n) {
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src0);
    const bool partOverlap = d != s && d < s + n * sizeof(float) && s < d + n * sizeof(float);
    size_t done = 0;
#if defined(__x86_64__)
    if (g_hasAvx2 && !partOverlap) done = SelectWide(dst, bits, src0, src1, n);
#endif
    SelectScalarLoop(dst + done, bits + done / 8, src0 + done, src1, n - done);
}

namespace {
template <typename T>
__attribute__((always_inline)) inline uint64_t GatherLoop(T *dst, const T *src, const uint32_t *offset,
                                                          uint32_t base, uint64_t srcBytes, uint64_t n) {
    // Every offset first (one pass of 32-bit lanes, no branch per element), then the loads: a
    // bad offset leaves dst untouched and is named by the caller. The pass keeps the largest
    // offset (bounds: base + max + sizeof(T) <= srcBytes covers every element) and the OR of
    // base + offset mod 2^32 (its low bits are those of the exact sum: alignment).
    uint32_t lowBits = 0, maxOffset = 0;
    for (uint64_t i = 0; i < n; ++i) {
        lowBits |= base + offset[i];
        maxOffset = std::max(maxOffset, offset[i]);
    }
    const bool bad = n != 0 && ((lowBits & (sizeof(T) - 1)) != 0 || uint64_t(base) + maxOffset + sizeof(T) > srcBytes);
    if (bad) {
        for (uint64_t i = 0; i < n; ++i) {
            const uint64_t byte = uint64_t(base) + offset[i];
            if (byte % sizeof(T) != 0 || byte + sizeof(T) > srcBytes) return i;
        }
    }
    const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    if (d + n * sizeof(T) <= s || s + srcBytes <= d) {
        T *__restrict out = dst;
        const T *__restrict in = src;
        for (uint64_t i = 0; i < n; ++i) out[i] = in[(uint64_t(base) + offset[i]) / sizeof(T)];
    } else {
        for (uint64_t i = 0; i < n; ++i) dst[i] = src[(uint64_t(base) + offset[i]) / sizeof(T)];
    }
    return n;
}
}  // namespace

ACLFA_CLONES uint64_t GatherElems(uint32_t *dst, const uint32_t *src, const uint32_t *offset, uint32_t base,
                                  uint64_t srcBytes, uint64_t n) {
    return GatherLoop(dst, src, offset, base, srcBytes, n);
}
ACLFA_CLONES uint64_t GatherElems(uint16_t *dst, const uint16_t *src, const uint32_t *offset, uint32_t base,
                                  uint64_t srcBytes, uint64_t n) {
    return GatherLoop(dst, src, offset, base, srcBytes, n);
}

}  // namespace sim
}  // namespace AscendC
