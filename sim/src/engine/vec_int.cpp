// vec_int.cpp -- the element loops of the int16_t/int32_t vector arithmetic (Add, Sub, Mul, Adds,
// Muls count forms), of the bit instructions (And, Or, ShiftLeft, ShiftRight) and of Duplicate's
// fill. Each arithmetic result must fit the dtype (the unit's wraparound is undocumented: vec.h);
// the loops find the first result that does not without a branch per element, so they vectorize. All are
// compiled for x86-64-v4 / v3 / baseline, chosen at load time (target_clones). The plain loops
// keep the order of a sequential loop where dst partly overlaps a source (the compiler's
// vectorized path runs only when the distance allows it).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "ascendc_sim/vec_int.h"

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

// The operands x of a scalar Mul whose product with s fits T: [lo, hi] (s == 0: every x). A block
// then needs only its min and max, two vector reductions, instead of a widened product per lane.
template <typename T>
struct MulRange {
    int64_t lo, hi;
    explicit MulRange(T s) {
        constexpr int64_t tmin = std::numeric_limits<T>::min(), tmax = std::numeric_limits<T>::max();
        const int64_t m = s;
        // floor / ceil of a / b for b != 0 (C++ division truncates toward zero).
        auto floorDiv = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
        auto ceilDiv = [](int64_t a, int64_t b) { return a / b + ((a % b != 0) && ((a < 0) == (b < 0))); };
        if (m > 0) {
            lo = ceilDiv(tmin, m), hi = floorDiv(tmax, m);
        } else if (m < 0) {
            lo = ceilDiv(tmax, m), hi = floorDiv(tmin, m);
        } else {
            lo = tmin, hi = tmax;
        }
    }
};

// |v| as uint32_t (exact for the most negative value too).
template <typename T>
inline uint32_t Magnitude(T v) {
    return v < 0 ? uint32_t(0) - uint32_t(int32_t(v)) : uint32_t(v);
}

// One block of m results without a failing element: out[i] = x[i] op y (wrapping arithmetic on
// the host, exact since nothing overflows).
template <IntOp op, bool kScalar, typename T>
__attribute__((always_inline)) inline void Write(T *out, const T *x, const T *y, size_t m) {
    // uint32_t: wraps where int would overflow (uint16_t operands promote to int); the low bits
    // are the exact result.
    for (size_t i = 0; i < m; ++i) out[i] = static_cast<T>(Apply<op>(uint32_t(x[i]), uint32_t(y[kScalar ? 0 : i])));
}

// The [min, max] of x[0:m] and of y[0:m] (m > 0); with kWrite also out[i] = x[i] y[i] (wrapping),
// out apart from x and y.
template <typename T>
using Ranges = std::pair<std::pair<T, T>, std::pair<T, T>>;
template <bool kWrite, typename T>
__attribute__((always_inline)) inline Ranges<T> MinMax(T *__restrict out, const T *__restrict x,
                                                       const T *__restrict y, size_t m) {
    T xmn = x[0], xmx = x[0], ymn = y[0], ymx = y[0];
    for (size_t i = 0; i < m; ++i) {
        const T a = x[i], b = y[i];  // by value: std::min's references keep the loop scalar
        xmn = a < xmn ? a : xmn;
        xmx = a > xmx ? a : xmx;
        ymn = b < ymn ? b : ymn;
        ymx = b > ymx ? b : ymx;
        if constexpr (kWrite) out[i] = static_cast<T>(uint32_t(a) * uint32_t(b));
    }
    return {{xmn, xmx}, {ymn, ymx}};
}

// Index in [0, m) of the first result of a block that does not fit T (the block has one).
template <IntOp op, bool kScalar, typename T>
size_t FirstOverflow(const T *x, const T *y, size_t m) {
    constexpr int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    for (size_t i = 0; i < m; ++i) {
        const int64_t r = Apply<op>(int64_t(x[i]), int64_t(y[kScalar ? 0 : i]));
        if (r < lo || r > hi) return i;
    }
    return m;
}

// kScalar: b[0] is the scalar operand of every element.
template <IntOp op, bool kScalar, typename T>
__attribute__((always_inline)) inline size_t Run(T *dst, const T *a, const T *b, size_t n) {
    using L = Lane<op, T>;
    // dst equal to or apart from each source: element i reads only its own operands before its
    // result is written, so a block can be checked first and then written in place (a block is
    // then either all written or, when it holds the failing element, untouched). A partial overlap
    // computes the block aside and copies it.
    const bool aside = (dst != a && Overlaps(dst, a, n)) || (!kScalar && dst != b && Overlaps(dst, b, n));
    const bool checkFirst = !aside && (dst == a || (!kScalar && dst == b));
    T block[kBlock];
    for (size_t i0 = 0; i0 < n; i0 += kBlock) {
        const size_t m = std::min(kBlock, n - i0);
        const T *x = a + i0;
        const T *y = kScalar ? b : b + i0;
        if constexpr (kScalar && op == IntOp::kMul) {
            const MulRange<T> range(*b);
            T mn = std::numeric_limits<T>::max(), mx = std::numeric_limits<T>::min();
            for (size_t i = 0; i < m; ++i) {
                mn = std::min(mn, x[i]);
                mx = std::max(mx, x[i]);
            }
            if (mn < range.lo || mx > range.hi) return i0 + FirstOverflow<op, kScalar>(x, y, m);
            Write<op, kScalar>(aside ? block : dst + i0, x, y, m);
            if (aside) std::copy(block, block + m, dst + i0);
            continue;
        }
        if constexpr (!kScalar && op == IntOp::kMul) {
            // |x y| <= max|x| max|y|: when that bound fits T no product can overflow (the usual
            // case); otherwise every product is checked exactly below. The bound comes from each
            // operand's min and max (two lane-wise instructions each). Apart from both sources,
            // the products go to dst in the same pass (a block that may overflow is then
            // recomputed below, and its operands are untouched); otherwise after it.
            const bool direct = !aside && !checkFirst;
            const auto [xr, yr] = direct ? MinMax<true>(dst + i0, x, y, m) : MinMax<false>(dst, x, y, m);
            const uint32_t ax = std::max(Magnitude(xr.first), Magnitude(xr.second));
            const uint32_t ay = std::max(Magnitude(yr.first), Magnitude(yr.second));
            if (uint64_t(ax) * ay <= uint64_t(std::numeric_limits<T>::max())) {
                if (!direct) {
                    Write<op, kScalar>(aside ? block : dst + i0, x, y, m);
                    if (aside) std::copy(block, block + m, dst + i0);
                }
                continue;
            }
        }
        typename L::Flag flag = 0;
        if constexpr (op != IntOp::kMul) {
            // In place with one source (dst == a or dst == b, not both): one pass writes the
            // block; a block that overflowed is then restored from its results and the other
            // operand (x + y and x - y wrap on the host, so each operand is recoverable).
            if (checkFirst && (kScalar || a != b)) {
                using U = std::make_unsigned_t<T>;
                T *io = dst + i0;
                if (dst == a) {
                    for (size_t i = 0; i < m; ++i) io[i] = L::Do(io[i], y[kScalar ? 0 : i], flag);
                } else {
                    for (size_t i = 0; i < m; ++i) io[i] = L::Do(x[i], io[i], flag);
                }
                if (!L::Overflowed(flag)) continue;
                for (size_t i = 0; i < m; ++i) {
                    const U r = U(io[i]);
                    if (dst == a) {
                        const U v = U(y[kScalar ? 0 : i]);
                        io[i] = T(op == IntOp::kAdd ? U(r - v) : U(r + v));
                    } else {
                        io[i] = T(op == IntOp::kAdd ? U(r - U(x[i])) : U(U(x[i]) - r));
                    }
                }
                return i0 + FirstOverflow<op, kScalar>(x, y, m);
            }
        }
        if (checkFirst) {
            for (size_t i = 0; i < m; ++i) (void)L::Do(x[i], y[kScalar ? 0 : i], flag);
            if (L::Overflowed(flag)) return i0 + FirstOverflow<op, kScalar>(x, y, m);
            Write<op, kScalar>(dst + i0, x, y, m);
            continue;
        }
        T *out = aside ? block : dst + i0;
        for (size_t i = 0; i < m; ++i) out[i] = L::Do(x[i], y[kScalar ? 0 : i], flag);
        if (L::Overflowed(flag)) return i0 + FirstOverflow<op, kScalar>(x, y, m);
        if (aside) std::copy(block, block + m, dst + i0);
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

namespace {
template <typename T>
__attribute__((always_inline)) inline void ShiftLoop(bool left, T *dst, const T *src, unsigned s, size_t n) {
    using U = std::make_unsigned_t<T>;
    constexpr unsigned bits = sizeof(T) * 8;
    if (left && s >= bits) {
        for (size_t i = 0; i < n; ++i) dst[i] = T(0);
    } else if (left) {
        for (size_t i = 0; i < n; ++i) dst[i] = T(U(src[i]) << s);
    } else if (s >= bits) {
        // Every bit shifted out: the sign fill for signed T (-1 or 0), else 0.
        for (size_t i = 0; i < n; ++i) dst[i] = std::is_signed_v<T> ? T(src[i] >> (bits - 1)) : T(0);
    } else {
        for (size_t i = 0; i < n; ++i) dst[i] = T(src[i] >> s);  // arithmetic for signed T
    }
}
}  // namespace

ACLFA_CLONES void Bitwise16(BitOp op, uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n) {
    if (op == BitOp::kAnd) {
        for (size_t i = 0; i < n; ++i) dst[i] = uint16_t(a[i] & b[i]);
    } else {
        for (size_t i = 0; i < n; ++i) dst[i] = uint16_t(a[i] | b[i]);
    }
}
ACLFA_CLONES void FillBits(uint32_t *d, uint32_t v, size_t n) { std::fill_n(d, n, v); }
ACLFA_CLONES void FillBits(uint16_t *d, uint16_t v, size_t n) { std::fill_n(d, n, v); }
ACLFA_CLONES void ShiftBits(bool left, int16_t *dst, const int16_t *src, unsigned s, size_t n) {
    ShiftLoop(left, dst, src, s, n);
}
ACLFA_CLONES void ShiftBits(bool left, uint16_t *dst, const uint16_t *src, unsigned s, size_t n) {
    ShiftLoop(left, dst, src, s, n);
}
ACLFA_CLONES void ShiftBits(bool left, int32_t *dst, const int32_t *src, unsigned s, size_t n) {
    ShiftLoop(left, dst, src, s, n);
}
ACLFA_CLONES void ShiftBits(bool left, uint32_t *dst, const uint32_t *src, unsigned s, size_t n) {
    ShiftLoop(left, dst, src, s, n);
}

}  // namespace sim
}  // namespace AscendC
