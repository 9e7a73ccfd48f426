// ascendc_sim/vec_int.h -- integer and bit vector instructions on UB, with the dtypes and
// ranges asc-devkit documents for Atlas A2/A3 (docs/zh/api/SIMD-API/基础API/Memory矢量计算/
// 逻辑计算/{And,Or,ShiftLeft,ShiftRight}.md, 比较与选择/Compares.md, 数据填充/CreateVecIndex.md,
// 离散与聚合/Gather.md; declarations in include/basic_api/kernel_operator_vec_{binary,
// binary_scalar,cmpsel,createvecindex,gather}_intf.h). Count forms only.
//
//   And, Or            int16_t / uint16_t only (32-bit words go through a uint16_t ReinterpretCast
//                      with twice the count, as the docs recommend)
//   ShiftLeft/Right    int16_t, uint16_t, int32_t, uint32_t; scalar in [0, 16] / [0, 32];
//                      unsigned: logical, signed: arithmetic. Not on 310P AI Core or 910A.
//   Compares           half / float every CMPMODE, int32_t only EQ; count * sizeof(T) whole
//                      256-byte repeats; dst: 1 bit per element (uint8_t, LSB first)
//   CreateVecIndex     int16_t, half, int32_t, float: dst[i] = firstValue + i
//   Gather             dst[i] = src[(srcBaseAddr + srcOffset[i]) / sizeof(T)], offsets in bytes,
//                      element-aligned, inside src; src and dst must not be the same memory
#pragma once

#include <cstdint>
#include <type_traits>

#include "ascendc_sim/vec.h"

namespace AscendC {

namespace sim {
// Element loops in the engine (vec_int.cpp, vec_select.cpp; vectorized): operands already
// checked, n elements. And/Or on 16-bit lanes; shifts as ShiftLeft/ShiftRight below, s in
// [0, bits]; Compares bits for fp32 against a scalar (n a multiple of 8); Gather returns n, or the
// index of the first offset that is misaligned or outside srcBytes (dst then untouched).
enum class BitOp : uint8_t { kAnd, kOr };
void Bitwise16(BitOp op, uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
void ShiftBits(bool left, int16_t *dst, const int16_t *src, unsigned s, size_t n);
void ShiftBits(bool left, uint16_t *dst, const uint16_t *src, unsigned s, size_t n);
void ShiftBits(bool left, int32_t *dst, const int32_t *src, unsigned s, size_t n);
void ShiftBits(bool left, uint32_t *dst, const uint32_t *src, unsigned s, size_t n);
void CompareScalarBits(uint8_t *bits, const float *x, float y, CMPMODE mode, size_t n);
uint64_t GatherElems(uint32_t *dst, const uint32_t *src, const uint32_t *offset, uint32_t base, uint64_t srcBytes,
                     uint64_t n);
uint64_t GatherElems(uint16_t *dst, const uint16_t *src, const uint32_t *offset, uint32_t base, uint64_t srcBytes,
                     uint64_t n);

template <typename T>
constexpr bool Is16BitInt() {
    return std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t>;
}
template <typename T>
constexpr bool IsShiftType() {
    return Is16BitInt<T>() || std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>;
}
template <typename T>
void Shift(const char *api, bool left, const LocalTensor<T> &dst, const LocalTensor<T> &src, T amount, int32_t count) {
    static_assert(IsShiftType<T>(), "ShiftLeft/ShiftRight: T must be int16_t, uint16_t, int32_t or uint32_t on A2/A3");
    // Not on 310P AI Core or 910A (arch_surface.h).
    OnArch<T>(left ? acl_fa_sim::surface::Api::ShiftLeft : acl_fa_sim::surface::Api::ShiftRight);
    const int64_t limit = sizeof(T) * 8;
    if (int64_t(amount) < 0 || int64_t(amount) > limit) {
        acl_fa_sim::kernel::Violation("shift amount", api,
                                      "scalarValue " + std::to_string(int64_t(amount)) + " is outside [0, " +
                                          std::to_string(limit) + "]");
    }
    VecOperands(api, count, dst, src);
    ShiftBits(left, dst.SimData(), src.SimData(), static_cast<unsigned>(amount), static_cast<size_t>(count));
}
template <typename T>
void Bitwise(const char *api, BitOp op, const LocalTensor<T> &dst, const LocalTensor<T> &a, const LocalTensor<T> &b,
             int32_t count) {
    static_assert(Is16BitInt<T>(),
                  "And/Or: T must be int16_t or uint16_t on A2/A3 (ReinterpretCast 32-bit data to uint16_t)");
    OnArch<T>(op == BitOp::kAnd ? acl_fa_sim::surface::Api::And : acl_fa_sim::surface::Api::Or);
    VecOperands(api, count, dst, a, b);
    Bitwise16(op, reinterpret_cast<uint16_t *>(dst.SimData()), reinterpret_cast<const uint16_t *>(a.SimData()),
              reinterpret_cast<const uint16_t *>(b.SimData()), static_cast<size_t>(count));
}
}  // namespace sim

template <typename T>
void And(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::Bitwise("And", sim::BitOp::kAnd, dst, src0, src1, count);
}
template <typename T>
void Or(const LocalTensor<T> &dst, const LocalTensor<T> &src0, const LocalTensor<T> &src1, const int32_t &count) {
    sim::Bitwise("Or", sim::BitOp::kOr, dst, src0, src1, count);
}

// Signed types shift arithmetically; bits shifted out of the top are dropped.
template <typename T, bool isSetMask = true>
void ShiftLeft(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count) {
    sim::Shift("ShiftLeft", true, dst, src, scalarValue, count);
}
template <typename T, bool isSetMask = true>
void ShiftRight(const LocalTensor<T> &dst, const LocalTensor<T> &src, const T &scalarValue, const int32_t &count) {
    sim::Shift("ShiftRight", false, dst, src, scalarValue, count);
}

template <typename T, typename U>
void Compares(const LocalTensor<U> &dst, const LocalTensor<T> &src0, const T src1Scalar, CMPMODE cmpMode,
              uint32_t count) {
    static_assert(std::is_same_v<U, uint8_t>, "Compares: dst must be uint8_t");
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, int32_t>,
                  "Compares: T must be half, float or int32_t on A2/A3");
    sim::OnArch<T>(acl_fa_sim::surface::Api::Compares);
    if (std::is_same_v<T, int32_t> && cmpMode != CMPMODE::EQ) {
        acl_fa_sim::kernel::Violation("Compares mode", "Compares", "int32_t supports only CMPMODE::EQ on A2/A3");
    }
    if ((uint64_t(count) * sizeof(T)) % 256 != 0) {
        acl_fa_sim::kernel::Violation("vector count", "Compares",
                                      "count " + std::to_string(count) + " is not a whole number of 256-byte repeats");
    }
    sim::VecOperands<false>("Compares", count, src0);
    sim::CheckLocalT("Compares", "dst", dst, count / 8);
    uint8_t *bits = dst.SimData();
    const T *x = src0.SimData();
    const T y = src1Scalar;
    if constexpr (std::is_same_v<T, float>) {
        sim::CompareScalarBits(bits, x, y, cmpMode, count);
    } else {
    for (uint32_t i = 0; i < count; i += 8) {
        uint8_t byte = 0;
        for (uint32_t j = 0; j < 8; ++j) {
            const T a = x[i + j];
            bool r = false;
            switch (cmpMode) {
                case CMPMODE::LT: r = a < y; break;
                case CMPMODE::GT: r = a > y; break;
                case CMPMODE::EQ: r = a == y; break;
                case CMPMODE::LE: r = a <= y; break;
                case CMPMODE::GE: r = a >= y; break;
                case CMPMODE::NE: r = a != y; break;
            }
            byte |= static_cast<uint8_t>(r) << j;
        }
        bits[i / 8] = byte;
    }
    }
}

template <typename T>
void CreateVecIndex(LocalTensor<T> dst, const T &firstValue, uint32_t count) {
    static_assert(std::is_same_v<T, int16_t> || std::is_same_v<T, half> || std::is_same_v<T, int32_t> ||
                      std::is_same_v<T, float>,
                  "CreateVecIndex: T must be int16_t, half, int32_t or float on A2/A3");
    sim::OnArch<T>(acl_fa_sim::surface::Api::CreateVecIndex);
    sim::VecOperands("CreateVecIndex", static_cast<int64_t>(count), dst);
    T *d = dst.SimData();
    if constexpr (std::is_integral_v<T>) {
        const int64_t last = int64_t(firstValue) + int64_t(count) - 1;
        if (count > 0 && (last > std::numeric_limits<T>::max())) {
            acl_fa_sim::kernel::Violation("CreateVecIndex range", "CreateVecIndex",
                                          "firstValue + count - 1 = " + std::to_string(last) + " overflows the dtype");
        }
        for (uint32_t i = 0; i < count; ++i) d[i] = T(int64_t(firstValue) + i);
    } else {
        for (uint32_t i = 0; i < count; ++i) d[i] = T(static_cast<float>(firstValue) + static_cast<float>(i));
    }
}

template <typename T>
void Gather(const LocalTensor<T> &dst, const LocalTensor<T> &src, const LocalTensor<uint32_t> &srcOffset,
            const uint32_t srcBaseAddr, const uint32_t count) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Gather: 16- and 32-bit types on A2/A3");
    sim::OnArch<T>(acl_fa_sim::surface::Api::Gather);
    sim::CheckLocalT("Gather", "dst", dst, uint64_t(count) * sizeof(T));
    sim::CheckLocalT("Gather", "srcOffset", srcOffset, uint64_t(count) * 4);
    sim::CheckLocalT("Gather", "src", src, 0);
    if (dst.GetPhyAddr() == src.GetPhyAddr() && dst.SimPos() == src.SimPos()) {
        acl_fa_sim::kernel::Violation("Gather operands", "Gather", "src and dst are the same memory");
    }
    const uint64_t srcBytes = uint64_t(src.GetSize()) * sizeof(T);
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
    const uint32_t *off = srcOffset.SimData();
    const uint64_t i = sim::GatherElems(reinterpret_cast<Bits *>(dst.SimData()),
                                        reinterpret_cast<const Bits *>(src.SimData()), off, srcBaseAddr, srcBytes, count);
    if (i < count) {
        const uint64_t byte = uint64_t(srcBaseAddr) + off[i];
        acl_fa_sim::kernel::Violation("Gather offset", "Gather",
                                      "element " + std::to_string(i) + ": byte offset " + std::to_string(byte) +
                                          " is not aligned to the element or outside src's " +
                                          std::to_string(srcBytes) + " bytes");
    }
    sim::CountVector(count);
    sim::TraceVector("Gather", sim::RepeatsOf(uint64_t(count) * sizeof(T)),
                     {sim::LocalOf(dst, uint64_t(count) * sizeof(T), true),
                      sim::LocalOf(srcOffset, uint64_t(count) * 4, false), sim::LocalOf(src, srcBytes, false)});
}

}  // namespace AscendC
