// ascendc_sim/vec.h -- vector instructions on UB (asc-devkit include/basic_api/
// kernel_operator_vec_{binary,binary_scalar,unary,duplicate,vconv,reduce,brcb,cmpsel}_intf.h).
//
// Count forms compute elements [0, count). Every operand must be in UB, start 32-byte
// aligned and hold `count` elements (checked once per call). vectorElems grows by count
// (by the elements read for the repeat forms). half arithmetic rounds each result to
// fp16 (as the fp16 vector unit does); fp32 Exp/Ln and the type conversions run in the
// engine library (vectorized, round-to-nearest-even where the mode asks for it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ascendc_sim/data_copy.h"

namespace AscendC {

enum class RoundMode : uint8_t {
    CAST_NONE = 0,
    CAST_RINT,   // round to nearest, ties to even
    CAST_FLOOR,
    CAST_CEIL,
    CAST_ROUND,  // round to nearest, ties away from zero
    CAST_TRUNC,  // toward zero
    CAST_ODD,    // von Neumann: truncate, set the lowest bit when inexact
    UNKNOWN = 0xFF,
};
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX = 0, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

struct BrcbRepeatParams {
    BrcbRepeatParams() {}
    BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn)
        : dstBlkStride(dstBlkStrideIn), dstRepStride(dstRepStrideIn) {}
    uint32_t blockNumber = 8;
    uint16_t dstRepStride = 8;
    uint16_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

namespace sim {
void ExpF32(const float *src, float *dst, size_t n);
void LnF32(const float *src, float *dst, size_t n);
// Narrowing / widening conversions for Cast; tags: 0 float, 1 half, 2 bfloat16, 3 int32.
void CastImpl(void *dst, int dstTag, const void *src, int srcTag, size_t n, RoundMode mode);
// Fast paths of the value-only fp32 reductions on contiguous rows (engine, reduce.cpp); their
// results are those of the per-element loops below. MaxValueF32: the max of x[0:n] into *out, or
// false (nothing written) when the loop must decide (a NaN, n == 0, or a max of +-0).
// SumRowsF32: dst[r * dstStep] = the sum from 0, in element order, of src[r * rowStride + 0:n].
bool MaxValueF32(const float *x, size_t n, float *out);
void SumRowsF32(const float *src, size_t rowStride, size_t n, size_t rows, float *dst, size_t dstStep);


// Checks count >= 0 and that each operand holds it; counts the work and traces the
// instruction (kFirstIsDst: the first operand is written, the others read; otherwise all are
// read and the small result the caller writes is not traced).
template <bool kFirstIsDst = true, typename... Ts>
void VecOperands(const char *api, int64_t count, const LocalTensor<Ts> &...ts) {
    if (count < 0) {
        acl_fa_sim::kernel::Violation("vector count", api, "count " + std::to_string(count) + " is negative");
    }
    int i = 0;
    const char *names[] = {"dst", "src0", "src1", "src2"};
    (CheckLocalT(api, names[std::min(i++, 3)], ts, uint64_t(count) * sizeof(Ts)), ...);
    acl_fa_sim::kernel::CoreContext *core = acl_fa_sim::kernel::CurrentCore();
    if (core == nullptr) acl_fa_sim::kernel::NoCore(api);
    core->stats->vectorElems += static_cast<uint64_t>(count);  // CountVector, on the core at hand
    if (acl_fa_sim::kernel::Tracing(*core)) {
        int j = 0;
        const uint64_t widest = std::max({sizeof(Ts)...});
        const bool exp = std::strcmp(api, "Exp") == 0 || std::strcmp(api, "Ln") == 0;
        TraceVector(api, RepeatsOf(uint64_t(count) * widest),
                    {LocalOf(ts, uint64_t(count) * sizeof(Ts), kFirstIsDst && j++ == 0)...}, exp);
    }
}

template <typename T, typename F>
inline void Binary(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &a, const LocalTensor<T> &b,
                   int32_t count, F f) {
    acl_fa_sim::kernel::Enter(api);
    VecOperands(api, count, dst, a, b);
    T *d = dst.SimData();
    const T *x = a.SimData(), *y = b.SimData();
    for (int32_t i = 0; i < count; ++i) d[i] = f(x[i], y[i]);
}
template <typename T, typename F>
inline void Unary(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &a, int32_t count, F f) {
    acl_fa_sim::kernel::Enter(api);
    VecOperands(api, count, dst, a);
    T *d = dst.SimData();
    const T *x = a.SimData();
    for (int32_t i = 0; i < count; ++i) d[i] = f(x[i]);
}
// Integer arithmetic on the vector unit: asc-devkit documents int16_t/int32_t for Add, Sub, Mul,
// Adds and Muls on A2/A3 but no wraparound, so a result outside the dtype is a violation rather
// than silently wrapped (kernels keep their integer values in range).
[[noreturn]] inline void IntegerOverflow(const char *api, int64_t x, int64_t y, int64_t r) {
    acl_fa_sim::kernel::Violation("integer overflow", api,
                                  std::to_string(x) + " and " + std::to_string(y) + " give " + std::to_string(r) +
                                      ", outside the dtype (the unit's overflow behaviour is undocumented)");
}
template <typename T, typename F>
inline T Arith(const char *api, T x, T y, F f) {
    if constexpr (std::is_integral_v<T>) {
        const int64_t r = f(int64_t(x), int64_t(y));
        if (r < int64_t(std::numeric_limits<T>::min()) || r > int64_t(std::numeric_limits<T>::max())) {
            IntegerOverflow(api, int64_t(x), int64_t(y), r);
        }
        return T(r);
    } else {
        return T(f(x, y));
    }
}

// The int16_t/int32_t count forms run in the engine (vec_int.cpp, vectorized): dst[i] = a[i] op b[i]
// (Scalar: a[i] op s) in int64 for i < n. Returns n, or the index of the first result outside T;
// dst then holds only whole blocks before it, and the operands of that element are unchanged.
enum class IntOp : uint8_t { kAdd, kSub, kMul };
size_t IntArith(IntOp op, int16_t *dst, const int16_t *a, const int16_t *b, size_t n);
size_t IntArith(IntOp op, int32_t *dst, const int32_t *a, const int32_t *b, size_t n);
size_t IntArithScalar(IntOp op, int16_t *dst, const int16_t *a, int16_t s, size_t n);
size_t IntArithScalar(IntOp op, int32_t *dst, const int32_t *a, int32_t s, size_t n);
template <typename T>
constexpr bool IsVecInt() {
    return std::is_same_v<T, int16_t> || std::is_same_v<T, int32_t>;
}
inline int64_t IntOpApply(IntOp op, int64_t x, int64_t y) {
    return op == IntOp::kAdd ? x + y : op == IntOp::kSub ? x - y : x * y;
}
template <typename T>
inline void IntBinary(const char *api, IntOp op, const LocalTensor<T> &dst, const LocalTensor<T> &a,
                      const LocalTensor<T> &b, int32_t count) {
    acl_fa_sim::kernel::Enter(api);
    VecOperands(api, count, dst, a, b);
    const T *x = a.SimData(), *y = b.SimData();
    const size_t bad = IntArith(op, dst.SimData(), x, y, static_cast<size_t>(count));
    if (bad < static_cast<size_t>(count)) IntegerOverflow(api, x[bad], y[bad], IntOpApply(op, x[bad], y[bad]));
}
template <typename T>
inline void IntScalar(const char *api, IntOp op, const LocalTensor<T> &dst, const LocalTensor<T> &a, T s,
                      int32_t count) {
    acl_fa_sim::kernel::Enter(api);
    VecOperands(api, count, dst, a);
    const T *x = a.SimData();
    const size_t bad = IntArithScalar(op, dst.SimData(), x, s, static_cast<size_t>(count));
    if (bad < static_cast<size_t>(count)) IntegerOverflow(api, x[bad], s, IntOpApply(op, x[bad], s));
}
// Max as the vector unit does it: a NaN operand gives NaN.
template <typename T>
inline T MaxOf(T x, T y) {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) {
        if (x != x) return x;
        if (y != y) return y;
    }
    return x > y ? x : y;
}
// FusedMulAdd's element: dst = src0 * dst + src1, rounded after the product and after the sum (the
// unit's rounding inside the instruction is not documented; two roundings is the plain reading).
template <typename T>
inline T MulAddElement(T d, T x, T y) {
    return Arith("FusedMulAdd", Arith("FusedMulAdd", x, d, [](auto a, auto b) { return a * b; }), y,
                 [](auto a, auto b) { return a + b; });
}
}  // namespace sim

// ---- binary ----
template <typename T>
void Add(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Add);
    if constexpr (sim::IsVecInt<T>()) {
        sim::IntBinary("Add", sim::IntOp::kAdd, dst, src0, src1, count);
    } else {
        sim::Binary("Add", dst, src0, src1, count,
                    [](T x, T y) { return sim::Arith("Add", x, y, [](auto a, auto b) { return a + b; }); });
    }
}
template <typename T>
void Sub(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Sub);
    if constexpr (sim::IsVecInt<T>()) {
        sim::IntBinary("Sub", sim::IntOp::kSub, dst, src0, src1, count);
    } else {
        sim::Binary("Sub", dst, src0, src1, count,
                    [](T x, T y) { return sim::Arith("Sub", x, y, [](auto a, auto b) { return a - b; }); });
    }
}
template <typename T>
void Mul(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Mul);
    if constexpr (sim::IsVecInt<T>()) {
        sim::IntBinary("Mul", sim::IntOp::kMul, dst, src0, src1, count);
    } else {
        sim::Binary("Mul", dst, src0, src1, count,
                    [](T x, T y) { return sim::Arith("Mul", x, y, [](auto a, auto b) { return a * b; }); });
    }
}
template <typename T>
void Div(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Div);
    sim::Binary("Div", dst, src0, src1, count, [](T x, T y) { return T(x / y); });
}
template <typename T>
void Max(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Max);
    sim::Binary("Max", dst, src0, src1, count, [](T x, T y) { return sim::MaxOf(x, y); });
}
// dst = src0 * dst + src1 (asc-devkit kernel_operator_vec_binary_intf.h, 复合计算/FusedMulAdd.md): A2/A3 and
// 310P AI Core, half and float.
template <typename T>
void FusedMulAdd(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1,
                 const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::FusedMulAdd);
    acl_fa_sim::kernel::Enter("FusedMulAdd");
    sim::VecOperands("FusedMulAdd", count, dst, src0, src1);
    T *d = dst.SimData();
    const T *x = src0.SimData(), *y = src1.SimData();
    for (int32_t i = 0; i < count; ++i) d[i] = sim::MulAddElement(d[i], x[i], y[i]);
}

// ---- binary, mask + repeat form (continuous mask: the first `mask` elements of each
// repeat; element i of repeat r is in block i / perBlock at
// (r * repStride + block * blkStride) * 32 bytes from the operand's start) ----
struct BinaryRepeatParams {
    BinaryRepeatParams() {}
    BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn, const uint8_t src1BlkStrideIn,
                       const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn), src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn), src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn) {}
    uint32_t blockNumber = 8;
    uint8_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};

namespace sim {
// Bytes an operand spans for `mask` elements over `repeatTime` repeats.
inline uint64_t RepeatSpan(uint64_t mask, uint64_t repeatTime, uint64_t blkStride, uint64_t repStride,
                           uint64_t elemBytes) {
    const uint64_t perBlock = 32 / elemBytes;
    const uint64_t lastBlock = (mask - 1) / perBlock;
    return ((repeatTime - 1) * repStride + lastBlock * blkStride) * 32 + ((mask - 1) % perBlock + 1) * elemBytes;
}
template <typename T, typename F>
void RepeatBinary(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &src0,
                  const LocalTensor<T> &src1, uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams &p, F f) {
    acl_fa_sim::kernel::Enter(api);
    constexpr uint64_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    if (mask > perRepeat) {
        acl_fa_sim::kernel::Violation("vector repeat parameters", api,
                                      "mask " + std::to_string(mask) + " exceeds the " + std::to_string(perRepeat) +
                                          " elements of a repeat");
    }
    if (mask == 0 || repeatTime == 0) return;
    CheckLocalT(api, "dst", dst, RepeatSpan(mask, repeatTime, p.dstBlkStride, p.dstRepStride, sizeof(T)));
    CheckLocalT(api, "src0", src0, RepeatSpan(mask, repeatTime, p.src0BlkStride, p.src0RepStride, sizeof(T)));
    CheckLocalT(api, "src1", src1, RepeatSpan(mask, repeatTime, p.src1BlkStride, p.src1RepStride, sizeof(T)));
    CountVector(mask * repeatTime);
    TraceVector(api, repeatTime,
                {LocalOf(dst, RepeatSpan(mask, repeatTime, p.dstBlkStride, p.dstRepStride, sizeof(T)), true),
                 LocalOf(src0, RepeatSpan(mask, repeatTime, p.src0BlkStride, p.src0RepStride, sizeof(T)), false),
                 LocalOf(src1, RepeatSpan(mask, repeatTime, p.src1BlkStride, p.src1RepStride, sizeof(T)), false)});
    T *d = dst.SimData();
    const T *x = src0.SimData(), *y = src1.SimData();
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t b = 0; b * perBlock < mask; ++b) {
            const uint64_t n = std::min<uint64_t>(perBlock, mask - b * perBlock);
            T *db = d + (r * p.dstRepStride + b * p.dstBlkStride) * perBlock;
            const T *xb = x + (r * p.src0RepStride + b * p.src0BlkStride) * perBlock;
            const T *yb = y + (r * p.src1RepStride + b * p.src1BlkStride) * perBlock;
            for (uint64_t e = 0; e < n; ++e) {
                if constexpr (std::is_invocable_v<F, T, T, T>) {
                    db[e] = f(db[e], xb[e], yb[e]);  // an instruction that reads dst too (FusedMulAdd)
                } else {
                    db[e] = f(xb[e], yb[e]);
                }
            }
        }
    }
}
}  // namespace sim

template <typename T, bool isSetMask = true>
void Add(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Add);
    sim::RepeatBinary("Add", dst, src0, src1, mask, repeatTime, repeatParams,
                      [](T x, T y) { return sim::Arith("Add", x, y, [](auto a, auto b) { return a + b; }); });
}
template <typename T, bool isSetMask = true>
void Sub(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Sub);
    sim::RepeatBinary("Sub", dst, src0, src1, mask, repeatTime, repeatParams,
                      [](T x, T y) { return sim::Arith("Sub", x, y, [](auto a, auto b) { return a - b; }); });
}
template <typename T, bool isSetMask = true>
void Mul(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Mul);
    sim::RepeatBinary("Mul", dst, src0, src1, mask, repeatTime, repeatParams,
                      [](T x, T y) { return sim::Arith("Mul", x, y, [](auto a, auto b) { return a * b; }); });
}
template <typename T, bool isSetMask = true>
void Div(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Div);
    sim::RepeatBinary("Div", dst, src0, src1, mask, repeatTime, repeatParams, [](T x, T y) { return T(x / y); });
}
template <typename T, bool isSetMask = true>
void Max(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Max);
    sim::RepeatBinary("Max", dst, src0, src1, mask, repeatTime, repeatParams,
                      [](T x, T y) { return sim::MaxOf(x, y); });
}
template <typename T, bool isSetMask = true>
void FusedMulAdd(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, uint64_t mask,
                 const uint8_t repeatTime, const BinaryRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::FusedMulAdd);
    sim::RepeatBinary("FusedMulAdd", dst, src0, src1, mask, repeatTime, repeatParams,
                      [](T d, T x, T y) { return sim::MulAddElement(d, x, y); });
}

// ---- tensor-scalar ----
template <typename T, bool isSetMask = true>
void Adds(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Adds);
    const T s = scalarValue;
    if constexpr (sim::IsVecInt<T>()) {
        sim::IntScalar("Adds", sim::IntOp::kAdd, dst, src, s, count);
    } else {
        sim::Unary("Adds", dst, src, count,
                   [s](T x) { return sim::Arith("Adds", x, s, [](auto a, auto b) { return a + b; }); });
    }
}
template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Muls);
    const T s = scalarValue;
    if constexpr (sim::IsVecInt<T>()) {
        sim::IntScalar("Muls", sim::IntOp::kMul, dst, src, s, count);
    } else {
        sim::Unary("Muls", dst, src, count,
                   [s](T x) { return sim::Arith("Muls", x, s, [](auto a, auto b) { return a * b; }); });
    }
}
template <typename T, bool isSetMask = true>
void Maxs(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Maxs);
    const T s = scalarValue;
    sim::Unary("Maxs", dst, src, count, [s](T x) { return sim::MaxOf(x, s); });
}

// ---- unary ----
// exp(-inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN.
template <typename T>
void Exp(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Exp);
    if constexpr (std::is_same_v<T, float>) {
        sim::VecOperands("Exp", count, dst, src);
        sim::ExpF32(src.SimData(), dst.SimData(), static_cast<size_t>(count));
    } else {
        sim::Unary("Exp", dst, src, count, [](T x) { return T(std::exp(static_cast<float>(x))); });
    }
}
// ln(0) = -inf, ln(x < 0) = NaN.
template <typename T>
void Ln(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Ln);
    if constexpr (std::is_same_v<T, float>) {
        sim::VecOperands("Ln", count, dst, src);
        sim::LnF32(src.SimData(), dst.SimData(), static_cast<size_t>(count));
    } else {
        sim::Unary("Ln", dst, src, count, [](T x) { return T(std::log(static_cast<float>(x))); });
    }
}

namespace sim {
// d[0:n] = v, in the engine (vec_int.cpp: compiled per CPU level, where the kernel libraries
// are built for the baseline ISA).
void FillBits(uint32_t *d, uint32_t v, size_t n);
void FillBits(uint16_t *d, uint16_t v, size_t n);
}  // namespace sim

template <typename T>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, const int32_t &count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Duplicate);
    sim::VecOperands("Duplicate", count, dst);
    T *d = dst.SimData();
    const T s = scalarValue;
    if constexpr (sizeof(T) == 4 || sizeof(T) == 2) {
        using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
        Bits v;
        std::memcpy(&v, &s, sizeof(v));
        sim::FillBits(reinterpret_cast<Bits *>(d), v, static_cast<size_t>(count));
    } else {
        for (int32_t i = 0; i < count; ++i) d[i] = s;
    }
}

// Repeat forms: repeat r writes 8 blocks at (r * dstRepeatStride + b * dstBlockStride) * 32 B.
// Continuous mask: the first `mask` elements of each repeat; bit mask: element i when bit
// i % 64 of mask[i / 64] is set.
namespace sim {
template <typename T, typename Sel>
void DuplicateRepeat(const LocalTensor<T> &dst, T value, uint64_t maxElem, uint8_t repeatTime,
                     uint16_t dstBlockStride, uint8_t dstRepeatStride, Sel selected) {
    acl_fa_sim::kernel::Enter("Duplicate");
    constexpr uint64_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    if (maxElem > perRepeat) {
        acl_fa_sim::kernel::Violation("vector repeat parameters", "Duplicate",
                                      "mask covers " + std::to_string(maxElem) + " elements; a repeat has " +
                                          std::to_string(perRepeat));
    }
    if (maxElem == 0 || repeatTime == 0) return;
    CheckLocalT("Duplicate", "dst", dst, RepeatSpan(maxElem, repeatTime, dstBlockStride, dstRepeatStride, sizeof(T)));
    TraceVector("Duplicate", repeatTime,
                {LocalOf(dst, RepeatSpan(maxElem, repeatTime, dstBlockStride, dstRepeatStride, sizeof(T)), true)});
    uint64_t n = 0;
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t i = 0; i < maxElem; ++i) {
            if (!selected(i)) continue;
            dst.SimData()[(r * dstRepeatStride + (i / perBlock) * dstBlockStride) * perBlock + i % perBlock] = value;
            ++n;
        }
    }
    CountVector(n);
}
}  // namespace sim

template <typename T, bool isSetMask = true>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, uint64_t mask, const uint8_t repeatTime,
               const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Duplicate);
    sim::DuplicateRepeat(dst, scalarValue, mask, repeatTime, dstBlockStride, dstRepeatStride,
                         [](uint64_t) { return true; });
}
template <typename T, bool isSetMask = true>
void Duplicate(const LocalTensor<T> &dst, const T &scalarValue, uint64_t mask[], const uint8_t repeatTime,
               const uint16_t dstBlockStride, const uint8_t dstRepeatStride) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Duplicate);
    const uint64_t m0 = mask[0], m1 = sizeof(T) == 2 ? mask[1] : 0;
    uint64_t last = 0;  // one past the highest selected element
    for (uint64_t i = 0; i < 128; ++i) {
        if (((i < 64 ? m0 >> i : m1 >> (i - 64)) & 1) != 0) last = i + 1;
    }
    sim::DuplicateRepeat(dst, scalarValue, last, repeatTime, dstBlockStride, dstRepeatStride,
                         [m0, m1](uint64_t i) { return ((i < 64 ? m0 >> i : m1 >> (i - 64)) & 1) != 0; });
}

// ---- Cast ----
namespace sim {
// x rounded to an integral value as a Cast's mode says (CAST_NONE / CAST_RINT: to nearest, ties
// to even): the integer Casts' rounding, here and in the engine (convert.cpp).
inline float RoundByMode(float x, RoundMode mode) {
    switch (mode) {
        case RoundMode::CAST_FLOOR: return std::floor(x);
        case RoundMode::CAST_CEIL: return std::ceil(x);
        case RoundMode::CAST_ROUND: return std::round(x);
        case RoundMode::CAST_TRUNC: return std::trunc(x);
        default: return std::nearbyint(x);
    }
}
}  // namespace sim
}  // namespace AscendC
#include "ascendc_sim/vec_fixed16.h"  // Cast between float and int16_t, Abs
namespace AscendC {
namespace sim {
// uint8_t / int8_t -> half (CAST_NONE; exact): asc-devkit Cast.md, the A2/A3, 310P and 910 tables.
template <typename T, typename B>
void CastFromByte(const LocalTensor<T> &dst, const LocalTensor<B> &src, const RoundMode &roundMode,
                  const uint32_t count) {
    static_assert(std::is_same_v<T, half>, "Cast from uint8_t / int8_t: the simulator converts to half only");
    acl_fa_sim::surface::RequireCast<T, B>(acl_fa_sim::kernel::Enter("Cast"), static_cast<int>(roundMode));
    sim::CheckLocalT("Cast", "dst", dst, uint64_t(count) * sizeof(T));
    sim::CheckLocalT("Cast", "src", src, uint64_t(count));
    sim::CountVector(count);
    sim::TraceVector("Cast", sim::RepeatsOf(uint64_t(count) * sizeof(T)),
                     {sim::LocalOf(dst, uint64_t(count) * sizeof(T), true), sim::LocalOf(src, uint64_t(count), false)});
    for (uint32_t i = 0; i < count; ++i) dst.SimData()[i] = T(static_cast<float>(src.SimData()[i]));
}
// half -> uint8_t / int8_t (asc-devkit Cast.md; A2/A3: CAST_NONE / RINT / FLOOR / CEIL / ROUND / TRUNC,
// 310P and 910: no CAST_RINT); values are rounded as the mode says and saturated to B's range.
template <typename B, typename U>
void CastToByte(const LocalTensor<B> &dst, const LocalTensor<U> &src, const RoundMode &roundMode,
                const uint32_t count) {
    static_assert(std::is_same_v<U, half>, "Cast to uint8_t / int8_t: the simulator converts from half only");
    acl_fa_sim::surface::RequireCast<B, U>(acl_fa_sim::kernel::Enter("Cast"), static_cast<int>(roundMode));
    sim::CheckLocalT("Cast", "dst", dst, uint64_t(count));
    sim::CheckLocalT("Cast", "src", src, uint64_t(count) * sizeof(U));
    sim::CountVector(count);
    sim::TraceVector("Cast", sim::RepeatsOf(uint64_t(count) * sizeof(U)),
                     {sim::LocalOf(dst, uint64_t(count), true), sim::LocalOf(src, uint64_t(count) * sizeof(U), false)});
    constexpr float lo = std::is_same_v<B, int8_t> ? -128.0f : 0.0f;
    constexpr float hi = std::is_same_v<B, int8_t> ? 127.0f : 255.0f;
    for (uint32_t i = 0; i < count; ++i) {
        const float x = static_cast<float>(src.SimData()[i]);
        const float r = RoundByMode(x, roundMode);
        dst.SimData()[i] = static_cast<B>(r != r ? 0.0f : std::min(hi, std::max(lo, r)));
    }
}
}  // namespace sim
template <typename T, typename U>
void Cast(const LocalTensor<T> &dst, const LocalTensor<U> &src, const RoundMode &roundMode, const uint32_t count) {
    if constexpr (std::is_same_v<U, uint8_t> || std::is_same_v<U, int8_t>) {
        sim::CastFromByte(dst, src, roundMode, count);
        return;
    } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
        sim::CastToByte(dst, src, roundMode, count);
        return;
    } else if constexpr (std::is_same_v<U, int16_t>) {
        sim::CastFromI16(dst, src, roundMode, count);
        return;
    } else if constexpr (std::is_same_v<T, int16_t>) {
        sim::CastToI16(dst, src, roundMode, count);
        return;
    } else {
    static_assert(sim::TypeTag<T>() >= 0 && sim::TypeTag<U>() >= 0,
                  "Cast: the simulator supports float, half, bfloat16_t and int32_t");
    auto &core = acl_fa_sim::kernel::Enter("Cast");
    acl_fa_sim::surface::RequireCast<T, U>(core, static_cast<int>(roundMode));
    sim::CheckLocalT("Cast", "dst", dst, uint64_t(count) * sizeof(T));
    sim::CheckLocalT("Cast", "src", src, uint64_t(count) * sizeof(U));
    sim::CountVector(count);
    sim::TraceVector("Cast", sim::RepeatsOf(uint64_t(count) * std::max(sizeof(T), sizeof(U))),
                     {sim::LocalOf(dst, uint64_t(count) * sizeof(T), true),
                      sim::LocalOf(src, uint64_t(count) * sizeof(U), false)});
    sim::CastImpl(dst.SimData(), sim::TypeTag<T>(), src.SimData(), sim::TypeTag<U>(), count, roundMode);
    }
}

// ---- reductions (count form): result in dst[0]; calIndex puts the index in dst[1] ----
template <typename T>
void ReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &sharedTmpBuffer,
               const int32_t count, bool calIndex = 0) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::ReduceMax);
    sim::VecOperands<false>("ReduceMax", count, src);
    sim::CheckLocalT("ReduceMax", "dst", dst, (calIndex ? 2 : 1) * sizeof(T));
    sim::CheckLocalT("ReduceMax", "sharedTmpBuffer", sharedTmpBuffer, 0);
    if (count <= 0) return;
    const T *x = src.SimData();
    T best = x[0];
    uint32_t idx = 0;
    for (int32_t i = 1; i < count; ++i) {
        if (best != best) break;
        if (x[i] != x[i] || x[i] > best) {
            best = x[i];
            idx = static_cast<uint32_t>(i);
        }
    }
    dst.SimData()[0] = best;
    if (calIndex) {
        // the index is stored as raw bits in an element of T
        if constexpr (sizeof(T) == 4) {
            std::memcpy(&dst.SimData()[1], &idx, 4);
        } else {
            uint16_t i16 = static_cast<uint16_t>(idx);
            std::memcpy(&dst.SimData()[1], &i16, 2);
        }
    }
}
template <typename T, bool isSetMask = true>
void ReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<T> &sharedTmpBuffer,
               const int32_t count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::ReduceSum);
    sim::VecOperands<false>("ReduceSum", count, src);
    sim::CheckLocalT("ReduceSum", "dst", dst, sizeof(T));
    sim::CheckLocalT("ReduceSum", "sharedTmpBuffer", sharedTmpBuffer, 0);
    // 8 interleaved partial sums in fp32, combined pairwise: the tree order of the unit
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const T *x = src.SimData();
    int32_t i = 0;
    for (; i + 8 <= count; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] += static_cast<float>(x[i + j]);
    }
    for (int j = 0; i < count; ++i, ++j) part[j] += static_cast<float>(x[i]);
    const float s = ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
    dst.SimData()[0] = static_cast<T>(s);
}

// ---- reductions (mask + repeat form), continuous mask: the first `mask` elements of
// each repeat; repeat r reads 8 blocks of 32 B at src + r * srcRepStride blocks, block b at
// b * srcBlkStride blocks ----
namespace sim {
// The checks, counters and trace of one WholeReduce call; false when it has nothing to do.
template <typename T>
bool WholeReduceOperands(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &src, int32_t mask,
                         int32_t repeatTime, int32_t dstStep, int32_t srcBlkStride, int32_t srcRepStride) {
    constexpr int32_t perBlock = 32 / sizeof(T);
    constexpr int32_t perRepeat = 256 / sizeof(T);
    if (mask < 0 || mask > perRepeat || repeatTime < 0 || repeatTime > 255) {
        acl_fa_sim::kernel::Violation("vector repeat parameters", api,
                                      "mask " + std::to_string(mask) + " must be in [0, " + std::to_string(perRepeat) +
                                          "], repeatTime " + std::to_string(repeatTime) + " in [0, 255]");
    }
    if (mask == 0 || repeatTime == 0) return false;
    const int32_t lastBlock = (mask - 1) / perBlock;
    const uint64_t srcSpan = (uint64_t(repeatTime - 1) * srcRepStride + uint64_t(lastBlock) * srcBlkStride) * 32 +
                             uint64_t((mask - 1) % perBlock + 1) * sizeof(T);
    CheckLocalT(api, "src", src, srcSpan);
    CheckLocal(api, "dst", dst.SimPos(), dst.GetPhyAddr(),
               (uint64_t(repeatTime - 1) * dstStep + 1) * sizeof(T), uint64_t(dst.GetSize()) * sizeof(T), true);
    CountVector(uint64_t(mask) * repeatTime);
    TraceVector(api, static_cast<uint64_t>(repeatTime),
                {LocalOf(dst, (uint64_t(repeatTime - 1) * dstStep + 1) * sizeof(T), true), LocalOf(src, srcSpan, false)});
    return true;
}
// True when the `mask` elements of each repeat are adjacent in UB (one block, or blocks back to back).
template <typename T>
constexpr bool RepeatIsContiguous(int32_t mask, int32_t srcBlkStride) {
    return srcBlkStride == 1 || mask <= int32_t(32 / sizeof(T));
}
template <typename T, typename F>
void WholeReduce(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &src, int32_t mask,
                 int32_t repeatTime, int32_t dstStep, int32_t srcBlkStride, int32_t srcRepStride, F reduce) {
    constexpr int32_t perBlock = 32 / sizeof(T);
    if (!WholeReduceOperands(api, dst, src, mask, repeatTime, dstStep, srcBlkStride, srcRepStride)) return;
    for (int32_t r = 0; r < repeatTime; ++r) {
        const T *base = src.SimData() + uint64_t(r) * srcRepStride * perBlock;
        reduce(base, mask, perBlock, srcBlkStride, dst.SimData() + uint64_t(r) * dstStep);
    }
}
}  // namespace sim

template <typename T, bool isSetMask = true>
void WholeReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t mask, const int32_t repeatTime,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                    ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::WholeReduceMax);
    acl_fa_sim::surface::RequireReduceOrder(core, "WholeReduceMax", static_cast<int>(order));
    const bool valueOnly = order == ReduceOrder::ORDER_ONLY_VALUE;
    const int32_t step = dstRepStride * (valueOnly ? 1 : 2);  // dstRepStride counts results
    const bool fast = std::is_same_v<T, float> && valueOnly && sim::RepeatIsContiguous<T>(mask, srcBlkStride);
    sim::WholeReduce("WholeReduceMax", dst, src, mask, repeatTime, step, srcBlkStride, srcRepStride,
                     [order, fast](const T *base, int32_t n, int32_t perBlock, int32_t blkStride, T *out) {
                         if constexpr (std::is_same_v<T, float>) {
                             if (fast && sim::MaxValueF32(base, static_cast<size_t>(n), out)) return;
                         }
                         // The first NaN wins; otherwise the first of the largest elements.
                         T best = base[0];
                         uint32_t idx = 0;
                         for (int32_t i = 1; i < n; ++i) {
                             const T v = base[uint64_t(i / perBlock) * blkStride * perBlock + i % perBlock];
                             if (v != v || v > best) {
                                 if (best != best) break;
                                 best = v;
                                 idx = static_cast<uint32_t>(i);
                             }
                         }
                         T idxBits;
                         if constexpr (sizeof(T) == 4) {
                             std::memcpy(&idxBits, &idx, 4);
                         } else {
                             uint16_t i16 = static_cast<uint16_t>(idx);
                             std::memcpy(&idxBits, &i16, 2);
                         }
                         switch (order) {
                             case ReduceOrder::ORDER_VALUE_INDEX: out[0] = best; out[1] = idxBits; break;
                             case ReduceOrder::ORDER_INDEX_VALUE: out[0] = idxBits; out[1] = best; break;
                             case ReduceOrder::ORDER_ONLY_VALUE: out[0] = best; break;
                             case ReduceOrder::ORDER_ONLY_INDEX: out[0] = idxBits; break;
                         }
                     });
}
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t mask, const int32_t repeatTime,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::WholeReduceSum);
    if constexpr (std::is_same_v<T, float>) {
        // Each repeat summed from 0 in element order, as the loop below does.
        if (sim::RepeatIsContiguous<T>(mask, srcBlkStride)) {
            if (sim::WholeReduceOperands("WholeReduceSum", dst, src, mask, repeatTime, dstRepStride, srcBlkStride,
                                         srcRepStride)) {
                sim::SumRowsF32(src.SimData(), size_t(srcRepStride) * (32 / sizeof(float)), size_t(mask), size_t(repeatTime),
                                dst.SimData(), size_t(dstRepStride));
            }
            return;
        }
    }
    sim::WholeReduce("WholeReduceSum", dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride,
                     [](const T *base, int32_t n, int32_t perBlock, int32_t blkStride, T *out) {
                         float s = 0.0f;
                         for (int32_t i = 0; i < n; ++i) {
                             s += static_cast<float>(base[uint64_t(i / perBlock) * blkStride * perBlock + i % perBlock]);
                         }
                         out[0] = static_cast<T>(s);
                     });
}

// ---- BlockReduceMax / BlockReduceSum (continuous mask): each 32-byte block of a repeat reduced
// to one element. Repeat r reads 8 blocks, block b at (r * srcRepStride + b * srcBlkStride) * 32 B
// from src, of which the first `mask` elements of the repeat take part; the result of block b goes
// to dst[r * dstRepStride * 8 + b] (dstRepStride counts one repeat's 8 results: 16 B of half,
// 32 B of float). Blocks with no element under the mask are not written (the simulator's choice;
// kernels read only the results of the blocks they reduce). Max: the first NaN, else the largest;
// Sum: from 0 in element order, in float. ----
namespace sim {
template <typename T, typename F>
void BlockReduce(const char *api, const LocalTensor<T> &dst, const LocalTensor<T> &src, int32_t repeatTime,
                 int32_t mask, int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride, F reduce) {
    constexpr int32_t perBlock = 32 / sizeof(T), perRepeat = 256 / sizeof(T);
    if (mask < 0 || mask > perRepeat || repeatTime < 0 || repeatTime > 255 || dstRepStride < 0 || srcBlkStride < 0 ||
        srcRepStride < 0) {
        acl_fa_sim::kernel::Violation("vector repeat parameters", api,
                                      "mask " + std::to_string(mask) + " must be in [0, " + std::to_string(perRepeat) +
                                          "], repeatTime " + std::to_string(repeatTime) +
                                          " in [0, 255], strides non-negative");
    }
    if (mask == 0 || repeatTime == 0) return;
    const int32_t blocks = (mask + perBlock - 1) / perBlock;  // blocks of a repeat under the mask
    const uint64_t srcSpan = (uint64_t(repeatTime - 1) * srcRepStride + uint64_t(blocks - 1) * srcBlkStride) * 32 +
                             uint64_t((mask - 1) % perBlock + 1) * sizeof(T);
    const uint64_t dstSpan = (uint64_t(repeatTime - 1) * dstRepStride * 8 + uint64_t(blocks)) * sizeof(T);
    CheckLocalT(api, "src", src, srcSpan);
    CheckLocal(api, "dst", dst.SimPos(), dst.GetPhyAddr(), dstSpan, uint64_t(dst.GetSize()) * sizeof(T), true);
    CountVector(uint64_t(mask) * repeatTime);
    TraceVector(api, static_cast<uint64_t>(repeatTime), {LocalOf(dst, dstSpan, true), LocalOf(src, srcSpan, false)});
    for (int32_t r = 0; r < repeatTime; ++r) {
        for (int32_t b = 0; b < blocks; ++b) {
            const T *x = src.SimData() + (uint64_t(r) * srcRepStride + uint64_t(b) * srcBlkStride) * perBlock;
            const int32_t n = std::min(perBlock, mask - b * perBlock);
            dst.SimData()[uint64_t(r) * dstRepStride * 8 + b] = reduce(x, n);
        }
    }
}
}  // namespace sim

template <typename T, bool isSetMask = true>
void BlockReduceMax(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t repeatTime, const int32_t mask,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::BlockReduceMax);
    sim::BlockReduce("BlockReduceMax", dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride,
                     [](const T *x, int32_t n) {
                         T best = x[0];
                         for (int32_t i = 1; i < n && best == best; ++i) {
                             if (x[i] != x[i] || x[i] > best) best = x[i];
                         }
                         return best;
                     });
}
template <typename T, bool isSetMask = true>
void BlockReduceSum(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t repeatTime, const int32_t mask,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::BlockReduceSum);
    sim::BlockReduce("BlockReduceSum", dst, src, repeatTime, mask, dstRepStride, srcBlkStride, srcRepStride,
                     [](const T *x, int32_t n) {
                         float sum = 0.0f;
                         for (int32_t i = 0; i < n; ++i) sum += static_cast<float>(x[i]);
                         return static_cast<T>(sum);
                     });
}

// ---- Brcb: each of 8 source elements per repeat fills one 32-byte block of dst ----
template <typename T>
void Brcb(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint8_t repeatTime,
          const BrcbRepeatParams &repeatParams) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Brcb);
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb supports 16- and 32-bit types");
    constexpr uint32_t perBlock = 32 / sizeof(T);
    if (repeatTime == 0) return;
    sim::CheckLocalT("Brcb", "src", src, uint64_t(repeatTime) * 8 * sizeof(T));
    const uint64_t dstSpan =
        (uint64_t(repeatTime - 1) * repeatParams.dstRepStride + 7ull * repeatParams.dstBlkStride + 1) * 32;
    sim::CheckLocalT("Brcb", "dst", dst, dstSpan);
    sim::CountVector(uint64_t(repeatTime) * 8 * perBlock);
    sim::TraceVector("Brcb", repeatTime,
                     {sim::LocalOf(dst, dstSpan, true), sim::LocalOf(src, uint64_t(repeatTime) * 8 * sizeof(T), false)});
    for (uint32_t r = 0; r < repeatTime; ++r) {
        for (uint32_t b = 0; b < 8; ++b) {
            const T v = src.SimData()[r * 8 + b];
            T *blk = dst.SimData() + (uint64_t(r) * repeatParams.dstRepStride + uint64_t(b) * repeatParams.dstBlkStride) *
                                         perBlock;
            for (uint32_t e = 0; e < perBlock; ++e) blk[e] = v;
        }
    }
}

// ---- Compare (count form): bit i of dst (uint8_t bytes, LSB first) = src0[i] cmp src1[i].
// count * sizeof(T) must be a multiple of 256 bytes (whole repeats). ----
template <typename T, typename U>
void Compare(const LocalTensor<U> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, CMPMODE cmpMode,
             uint32_t count) {
    sim::OnArch<T>(acl_fa_sim::surface::Api::Compare);
    if ((uint64_t(count) * sizeof(T)) % 256 != 0) {
        acl_fa_sim::kernel::Violation("vector count", "Compare",
                                      "count " + std::to_string(count) + " is not a whole number of 256-byte repeats");
    }
    sim::VecOperands<false>("Compare", count, src0, src1);
    sim::CheckLocalT("Compare", "dst", dst, (count + 7) / 8);
    uint8_t *bits = reinterpret_cast<uint8_t *>(dst.SimData());
    const T *x = src0.SimData(), *y = src1.SimData();
    for (uint32_t i = 0; i < count; i += 8) {
        uint8_t byte = 0;
        for (uint32_t j = 0; j < 8 && i + j < count; ++j) {
            const T a = x[i + j], b = y[i + j];
            bool r = false;
            switch (cmpMode) {
                case CMPMODE::LT: r = a < b; break;
                case CMPMODE::GT: r = a > b; break;
                case CMPMODE::EQ: r = a == b; break;
                case CMPMODE::LE: r = a <= b; break;
                case CMPMODE::GE: r = a >= b; break;
                case CMPMODE::NE: r = a != b; break;
            }
            byte |= static_cast<uint8_t>(r) << j;
        }
        bits[i / 8] = byte;
    }
}

// ---- Select (count form): dst[i] = bit i of selMask ? src0[i] : src1[i] (or the scalar); in mode 0
// (VSEL_CMPMASK_SPR) every repeat reuses the first 256 / sizeof(T) bits of selMask (Select.md) ----
namespace sim {
// fp32 tensor-scalar Select over n elements (vec_select.cpp).
void SelectTensorScalar(float *dst, const uint8_t *bits, const float *src0, float src1, size_t n);
}  // namespace sim
template <typename T, typename U>
void Select(const LocalTensor<T> &dst, const LocalTensor<U> &selMask, const LocalTensor<T> &src0,
            const LocalTensor<T> &src1, SELMODE selMode, uint32_t count) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::Select);
    acl_fa_sim::surface::RequireSelectMode(core, static_cast<int>(selMode));
    if (selMode != SELMODE::VSEL_TENSOR_TENSOR_MODE && selMode != SELMODE::VSEL_CMPMASK_SPR) {
        acl_fa_sim::kernel::Violation("Select mode", "Select", "tensor-tensor Select needs VSEL_TENSOR_TENSOR_MODE");
    }
    // mode 0: one repeat's bits, reused by every repeat
    const uint32_t period = selMode == SELMODE::VSEL_CMPMASK_SPR ? 256 / sizeof(T) : count;
    sim::VecOperands("Select", count, dst, src0, src1);
    sim::CheckLocalT("Select", "selMask", selMask, (std::min(count, period) + 7) / 8);
    const uint8_t *bits = reinterpret_cast<const uint8_t *>(selMask.SimData());
    for (uint32_t i = 0; i < count; ++i) {
        const uint32_t b = i % period;
        dst.SimData()[i] = ((bits[b / 8] >> (b % 8)) & 1) ? src0.SimData()[i] : src1.SimData()[i];
    }
}
template <typename T, typename U>
void Select(const LocalTensor<T> &dst, const LocalTensor<U> &selMask, const LocalTensor<T> &src0, T src1,
            SELMODE selMode, uint32_t count) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::Select);
    acl_fa_sim::surface::RequireSelectMode(core, static_cast<int>(selMode));
    if (selMode != SELMODE::VSEL_TENSOR_SCALAR_MODE) {
        acl_fa_sim::kernel::Violation("Select mode", "Select", "tensor-scalar Select needs VSEL_TENSOR_SCALAR_MODE");
    }
    sim::VecOperands("Select", count, dst, src0);
    sim::CheckLocalT("Select", "selMask", selMask, (count + 7) / 8);
    const uint8_t *bits = reinterpret_cast<const uint8_t *>(selMask.SimData());
    if constexpr (std::is_same_v<T, float>) {
        sim::SelectTensorScalar(dst.SimData(), bits, src0.SimData(), src1, count);  // engine, vectorized
    } else {
        for (uint32_t i = 0; i < count; ++i) {
            dst.SimData()[i] = ((bits[i / 8] >> (i % 8)) & 1) ? src0.SimData()[i] : src1;
        }
    }
}

}  // namespace AscendC
