// reduce.cpp -- value-only fp32 fast paths of WholeReduceMax / WholeReduceSum on contiguous
// rows (vec.h). They give the same bits as the per-element loops of vec.h, which stay the
// definition: the max falls back to them where the result depends on which element wins (a NaN,
// or a zero max whose sign is that of the first zero), and the sums keep each row's order.
// Compiled for x86-64-v4 / v3 / baseline like convert.cpp.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ascendc_sim/vec.h"

#define ACLFA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace AscendC {
namespace sim {

ACLFA_CLONES bool MaxValueF32(const float *x, size_t n, float *out) {
    // 8 lanes of running maxima; `v > m ? v : m` keeps m on ties and never takes a NaN, so a NaN
    // is caught by the separate mask instead.
    typedef float V8 __attribute__((vector_size(32)));
    typedef int I8 __attribute__((vector_size(32)));
    constexpr size_t kLanes = 8;
    V8 m = V8{} - __builtin_inff();
    I8 nan = I8{};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        V8 v;
        std::memcpy(&v, x + i, sizeof(v));
        nan |= v != v;
        m = v > m ? v : m;
    }
    float best = m[0];
    bool anyNan = false;
    for (size_t j = 0; j < kLanes; ++j) {
        anyNan |= nan[j] != 0;
        best = m[j] > best ? m[j] : best;
    }
    for (; i < n; ++i) {
        anyNan |= x[i] != x[i];
        best = x[i] > best ? x[i] : best;
    }
    // Without NaN every element equal to a non-zero max has the max's bits, so which one wins
    // does not matter; +0 and -0 compare equal and the first one wins: the exact loop decides.
    if (anyNan || n == 0 || best == 0.0f) return false;
    *out = best;
    return true;
}

ACLFA_CLONES void SumRowsF32(const float *src, size_t rowStride, size_t n, size_t rows, float *dst, size_t dstStep) {
    // Eight rows at a time, each summed from 0 in element order (the per-element loop's order):
    // the rows are independent chains, so they overlap instead of waiting on one add at a time.
    constexpr size_t kRows = 8;
    size_t r = 0;
    for (; r + kRows <= rows; r += kRows) {
        float s[kRows] = {};
        const float *base = src + r * rowStride;
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < kRows; ++j) s[j] += base[j * rowStride + i];
        }
        for (size_t j = 0; j < kRows; ++j) dst[(r + j) * dstStep] = s[j];
    }
    for (; r < rows; ++r) {
        float s = 0.0f;
        for (size_t i = 0; i < n; ++i) s += src[r * rowStride + i];
        dst[r * dstStep] = s;
    }
}

}  // namespace sim
}  // namespace AscendC
