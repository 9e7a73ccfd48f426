// vec_fixed16.h -- the vector APIs of 16-bit fixed point on fp32 data: Cast between float and
// int16_t, and Abs (count forms; asc-devkit docs/zh/api/SIMD-API/基础API/Memory矢量计算/
// 类型转换/Cast.md and 基础算术/Abs.md). Included by vec.h ahead of its Cast dispatch.
//
// Cast.md's per-chip tables: Atlas A2/A3 (dav-c220) convert int16_t -> float with CAST_NONE and
// float -> int16_t with CAST_RINT / FLOOR / CEIL / ROUND / TRUNC (not CAST_NONE); the tables of
// the Atlas inference AI Core (310P, dav-m200) and the Atlas training series (910A, dav-c100)
// have neither pair, so both are missing there. A float whose rounded value lies outside int16_t
// (or a NaN) is a violation: the documentation states no saturation for this pair, so a kernel
// must keep its values in range.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

namespace AscendC {
namespace sim {

inline void CheckFixed16Arch(const char *what) {
    auto &core = acl_fa_sim::kernel::Enter("Cast");
    if (core.npuArch != 2201) {
        acl_fa_sim::kernel::MissingOnArch(core, "dtype", "Cast", what,
                                          " (asc-devkit Cast.md lists the pair for Atlas A2/A3 only)");
    }
}

// The checks, vector count and trace of one `count`-element Cast between int16_t and float (its
// repeats are those of the float side).
template <typename D, typename S>
void CheckAndTraceFixed16Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src, const uint32_t count) {
    const uint64_t dstBytes = uint64_t(count) * sizeof(D);
    const uint64_t srcBytes = uint64_t(count) * sizeof(S);
    sim::CheckLocalT("Cast", "dst", dst, dstBytes);
    sim::CheckLocalT("Cast", "src", src, srcBytes);
    sim::CountVector(count);
    sim::TraceVector("Cast", sim::RepeatsOf(uint64_t(count) * sizeof(float)),
                     {sim::LocalOf(dst, dstBytes, true), sim::LocalOf(src, srcBytes, false)});
}

template <typename T>
void CastFromI16(const LocalTensor<T> &dst, const LocalTensor<int16_t> &src, const RoundMode &roundMode,
                 const uint32_t count) {
    static_assert(std::is_same_v<T, float>, "Cast from int16_t: the simulator converts to float only");
    CheckFixed16Arch("int16_t -> float");
    if (roundMode != RoundMode::CAST_NONE) {
        acl_fa_sim::kernel::Violation("Cast mode", "Cast", "int16_t -> float takes CAST_NONE only");
    }
    CheckAndTraceFixed16Cast(dst, src, count);
    for (uint32_t i = 0; i < count; ++i) dst.SimData()[i] = static_cast<float>(src.SimData()[i]);  // exact
}

template <typename U>
void CastToI16(const LocalTensor<int16_t> &dst, const LocalTensor<U> &src, const RoundMode &roundMode,
               const uint32_t count) {
    static_assert(std::is_same_v<U, float>, "Cast to int16_t: the simulator converts from float only");
    CheckFixed16Arch("float -> int16_t");
    if (roundMode == RoundMode::CAST_NONE || roundMode == RoundMode::CAST_ODD) {
        acl_fa_sim::kernel::Violation("Cast mode", "Cast",
                                      "float -> int16_t takes CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND or CAST_TRUNC");
    }
    CheckAndTraceFixed16Cast(dst, src, count);
    for (uint32_t i = 0; i < count; ++i) {
        const float x = src.SimData()[i];
        const float r = RoundByMode(x, roundMode);
        if (!(r >= -32768.0f && r <= 32767.0f)) {
            acl_fa_sim::kernel::Violation("Cast range", "Cast",
                                          "float " + std::to_string(x) + " (element " + std::to_string(i) +
                                              ") rounds outside int16_t; the saturation of this pair is undocumented");
        }
        dst.SimData()[i] = static_cast<int16_t>(r);
    }
}

}  // namespace sim

// dst[i] = |src[i]| (float, half): a sign-bit clear, exact.
template <typename T>
void Abs(const LocalTensor<T> &dst, const LocalTensor<T> &src, const int32_t &count) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, half>, "Abs: the simulator supports float and half");
    sim::Unary("Abs", dst, src, count, [](T x) { return T(std::fabs(static_cast<float>(x))); });
}

}  // namespace AscendC
