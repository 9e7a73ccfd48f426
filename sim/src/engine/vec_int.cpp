// vec_int.cpp -- the element loops of the int16_t/int32_t vector arithmetic (Add, Sub, Mul, Adds,
// Muls count forms). Each result must fit the dtype (the unit's wraparound is undocumented:
// vec.h); the loops find the first result that does not without a branch per element, so they
// vectorize, and are compiled for x86-64-v4 / v3 / baseline, chosen at
// load time (target_clones).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ascendc_sim/vec.h"

#define ACLFA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace AscendC {
namespace sim {
namespace {

// Results go to dst one block at a time, after the whole block fits, when dst overlaps a source
// (in-place instructions): the operands of a failing element are then still intact, so the
// caller can name them. Otherwise they go straight to dst.
constexpr size_t kBlock = 512;

template <IntOp op, typename W>
inline W Apply(W x, W y) {
    if constexpr (op == IntOp::kAdd) return x + y;
    else if constexpr (op == IntOp::kSub) return x - y;
    else return x * y;
}

// One element, with an overflow flag to OR over a block (a reduction the compiler vectorizes,
// where a bool flag or an early exit would keep the loop scalar).
template <IntOp op, typename T>
struct Lane {
    // int32 Add/Sub in int32 itself (two's complement wrap on the host, 8 lanes per AVX2
    // instruction): the result overflowed iff its sign differs from both addends' (Add) or from
    // the minuend's while the operands' signs differ (Sub); the flag's sign bit says so.
    // Otherwise in a wider type W that holds every result exactly: it overflowed iff narrowing it
    // to T and widening it back changes it.
    static constexpr bool kSignTrick = sizeof(T) == 4 && op != IntOp::kMul;
    using Flag = std::conditional_t<kSignTrick, T, std::conditional_t<sizeof(T) == 2, int32_t, int64_t>>;
    static inline T Do(T x, T y, Flag &flag) {
        if constexpr (kSignTrick) {
            using U = std::make_unsigned_t<T>;
            const T r = static_cast<T>(op == IntOp::kAdd ? U(U(x) + U(y)) : U(U(x) - U(y)));
            flag |= op == IntOp::kAdd ? T((x ^ r) & (y ^ r)) : T((x ^ y) & (x ^ r));
            return r;
        } else {
            const Flag r = Apply<op>(Flag(x), Flag(y));
            const T t = static_cast<T>(r);
            flag |= r ^ Flag(t);
            return t;
        }
    }
    static inline bool Overflowed(Flag flag) { return kSignTrick ? flag < 0 : flag != 0; }
};

template <typename T>
inline bool Overlaps(const T *x, const T *y, size_t n) {
    const auto p = reinterpret_cast<uintptr_t>(x), q = reinterpret_cast<uintptr_t>(y);
    return p < q + n * sizeof(T) && q < p + n * sizeof(T);
}

// kScalar: b[0] is the scalar operand of every element.
template <IntOp op, bool kScalar, typename T>
__attribute__((always_inline)) inline size_t Run(T *dst, const T *a, const T *b, size_t n) {
    using L = Lane<op, T>;
    constexpr int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    const bool inPlace = Overlaps(dst, a, n) || (!kScalar && Overlaps(dst, b, n));
    T block[kBlock];
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
        const size_t m = std::min(kBlock, n - i0);
        const T *x = a + i0;
        const T *y = kScalar ? b : b + i0;
        T *out = inPlace ? block : dst + i0;
        typename L::Flag flag = 0;
        for (size_t i = 0; i < m; ++i) out[i] = L::Do(x[i], y[kScalar ? 0 : i], flag);
        if (L::Overflowed(flag)) {
            for (size_t i = 0; i < m; ++i) {
                const int64_t r = Apply<op>(int64_t(x[i]), int64_t(y[kScalar ? 0 : i]));
                if (r < lo || r > hi) return i0 + i;
            }
        }
        if (inPlace) std::copy(block, block + m, dst + i0);
    }
    return n;
}

template <bool kScalar, typename T>
__attribute__((always_inline)) inline size_t Dispatch(IntOp op, T *dst, const T *a, const T *b, size_t n) {
    switch (op) {
        case IntOp::kAdd: return Run<IntOp::kAdd, kScalar>(dst, a, b, n);
        case IntOp::kSub: return Run<IntOp::kSub, kScalar>(dst, a, b, n);
        case IntOp::kMul: return Run<IntOp::kMul, kScalar>(dst, a, b, n);
    }
    return n;
}

}  // namespace

ACLFA_CLONES size_t IntArith(IntOp op, int16_t *dst, const int16_t *a, const int16_t *b, size_t n) {
    return Dispatch<false>(op, dst, a, b, n);
}
ACLFA_CLONES size_t IntArith(IntOp op, int32_t *dst, const int32_t *a, const int32_t *b, size_t n) {
    return Dispatch<false>(op, dst, a, b, n);
}
ACLFA_CLONES size_t IntArithScalar(IntOp op, int16_t *dst, const int16_t *a, int16_t s, size_t n) {
    return Dispatch<true>(op, dst, a, &s, n);
}
ACLFA_CLONES size_t IntArithScalar(IntOp op, int32_t *dst, const int32_t *a, int32_t s, size_t n) {
    return Dispatch<true>(op, dst, a, &s, n);
}

}  // namespace sim
}  // namespace AscendC
