// vec_fixed16.h -- the vector APIs of 16-bit fixed point on fp32 data: Cast between float and
// int16_t, and Abs (count forms; asc-devkit docs/zh/api/SIMD-API/基础API/Memory矢量计算/
// 类型转换/Cast.md and 基础算术/Abs.md). Included by vec.h ahead of its Cast dispatch.
//
// Cast.md's per-chip tables (ascendc_sim/arch_surface.h kCasts): Atlas A2/A3 (dav-c220) convert
// int16_t -> float with CAST_NONE and float -> int16_t with CAST_RINT / FLOOR / CEIL / ROUND /
// TRUNC (not CAST_NONE); the tables of the Atlas inference AI Core (310P, dav-m200) and the Atlas
// training series (910A, dav-c100) have neither pair, so both are missing there. A float whose rounded value lies outside int16_t
// (or a NaN) is a violation: the documentation states no saturation for this pair, so a kernel
// must keep its values in range.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

namespace AscendC {
namespace sim {

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
    acl_fa_sim::surface::RequireCast<T, int16_t>(acl_fa_sim::kernel::Enter("Cast"), static_cast<int>(roundMode));
    CheckAndTraceFixed16Cast(dst, src, count);
    for (uint32_t i = 0; i < count; ++i) dst.SimData()[i] = static_cast<float>(src.SimData()[i]);  // exact
}

template <typename U>
void CastToI16(const LocalTensor<int16_t> &dst, const LocalTensor<U> &src, const RoundMode &roundMode,
               const uint32_t count) {
    static_assert(std::is_same_v<U, float>, "Cast to int16_t: the simulator converts from float only");
    acl_fa_sim::surface::RequireCast<int16_t, U>(acl_fa_sim::kernel::Enter("Cast"), static_cast<int>(roundMode));
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
    sim::OnArch<T>(acl_fa_sim::surface::Api::Abs);
    sim::Unary("Abs", dst, src, count, [](T x) { return T(std::fabs(static_cast<float>(x))); });
}

}  // namespace AscendC
