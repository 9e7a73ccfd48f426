// ascendc_sim/arch_surface.h -- the Ascend C API surface of each simulated architecture: for
// every API the simulator implements, the dtypes (and, where the API has them, the round modes,
// reduce orders and kernel types) that arch 1001 (dav-c100, 910A), 2002 (dav-m200, 310P AI Core)
// and 2201 (dav-c220, Atlas A2/A3) provide. Every API entry of sim/include/ascendc_sim/ asks
// this table before it does anything, so a kernel that calls what its chip lacks stops with
// MissingOnArch naming the API, the dtype or mode, the chip and its arch -- the refusal the real
// toolchain gives (a missing intrinsic overload, static_assert or ASCENDC_REPORT_NOT_SUPPORT).
//
// Sources (docs/simulator.md "The per-chip API surface" says how the table is read and kept
// current): the asc-devkit API reference, docs/zh/api/SIMD-API/基础API/... (the same pages as
// hiascend.com "Ascend C API" atlasascendc_api_07_*), whose "数据类型" section lists the dtypes
// per product -- "Atlas 训练系列产品" = 1001, "Atlas 推理系列产品AI Core" = 2002, "Atlas A2 训练系列
// 产品/Atlas A2 推理系列产品" = 2201 -- and the per-arch implementations impl/basic_api/dav_c100,
// dav_m200, dav_c220 (which intrinsic each one calls, or ASCENDC_REPORT_NOT_SUPPORT). The
// `source` of each row names its page; the rows hold only what the simulator implements.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "ascendc_sim/kernel_macros.h"

namespace acl_fa_sim {
namespace surface {

// The columns of every table.
enum ArchColumn : uint8_t { kC100 = 0, kM200 = 1, kC220 = 2, kArchCount = 3 };
constexpr const char *kProduct[kArchCount] = {"the Atlas training series (dav-c100)",
                                              "the Atlas inference series AI Core (dav-m200)",
                                              "Atlas A2/A3 (dav-c220)"};
// __NPU_ARCH__ -> column (the catalogue's chips are 1001, 2002 and 2201).
inline ArchColumn ColumnOf(int32_t npuArch) { return npuArch == 1001 ? kC100 : npuArch == 2002 ? kM200 : kC220; }

// ---- dtypes: one bit each ----
using Dtypes = uint16_t;
enum : Dtypes {
    kI8 = 1u << 0, kU8 = 1u << 1, kI16 = 1u << 2, kU16 = 1u << 3, kF16 = 1u << 4,
    kBf16 = 1u << 5, kI32 = 1u << 6, kU32 = 1u << 7, kF32 = 1u << 8, kU64 = 1u << 9, kI64 = 1u << 10,
};
constexpr Dtypes kNone = 0;
constexpr Dtypes kAll = 0x7FF;  // any dtype (paths, not arithmetic)
constexpr int kDtypeCount = 11;
constexpr const char *kDtypeName[kDtypeCount] = {"int8_t", "uint8_t", "int16_t", "uint16_t", "half", "bfloat16_t",
                                                 "int32_t", "uint32_t", "float", "uint64_t", "int64_t"};

template <typename T>
constexpr Dtypes DtypeOf() {
    if constexpr (std::is_same_v<T, int8_t>) return kI8;
    else if constexpr (std::is_same_v<T, uint8_t>) return kU8;
    else if constexpr (std::is_same_v<T, int16_t>) return kI16;
    else if constexpr (std::is_same_v<T, uint16_t>) return kU16;
    else if constexpr (std::is_same_v<T, half>) return kF16;
    else if constexpr (std::is_same_v<T, bfloat16_t>) return kBf16;
    else if constexpr (std::is_same_v<T, int32_t>) return kI32;
    else if constexpr (std::is_same_v<T, uint32_t>) return kU32;
    else if constexpr (std::is_same_v<T, float>) return kF32;
    else if constexpr (std::is_same_v<T, uint64_t>) return kU64;
    else if constexpr (std::is_same_v<T, int64_t>) return kI64;
    else return kNone;
}

// ---- the APIs ----
enum class Api : uint8_t {
    Add, Sub, Mul, Div, Max, Adds, Muls, Maxs, Exp, Ln, Abs, Duplicate,
    Compare, Compares, Select, And, Or, ShiftLeft, ShiftRight, CreateVecIndex, Gather, Brcb,
    ReduceMax, ReduceSum, WholeReduceMax, WholeReduceSum, BlockReduceMax, BlockReduceSum,
    DataCopy, DataCopyPad, DataCacheCleanAndInvalid, SetAtomicAdd,
    Mmad, MatmulUbPath, SetLocalWorkspace, CrossCoreFlag, SyncAll,
    FusedMulAdd, MatmulQuant,
    Count
};

struct ApiRow {
    Api api;
    const char *name;              // as the API is called (and as MissingOnArch names it)
    const char *what;              // what is missing when the whole API is: the instruction or path
    Dtypes dtypes[kArchCount];     // kNone: the arch has no such API
    const char *source;            // asc-devkit page (docs/zh/api/SIMD-API/基础API/) or impl file
};

// The arithmetic units by arch (asc-devkit "数据类型" of each page): Atlas A2/A3 and 310P AI Core
// compute int16_t, half, int32_t and float; 910A half, int32_t and float (its tensor-scalar forms
// half and float only). dav-c100's reductions (vcmax, vcadd, vcgmax, vcgadd, vcpadd) take half
// only: no float row reduction exists on 910A.
constexpr Dtypes kArith4 = kI16 | kF16 | kI32 | kF32;
constexpr Dtypes kArith910A = kF16 | kI32 | kF32;
constexpr Dtypes kHalfFloat = kF16 | kF32;
constexpr Dtypes kBits16 = kI16 | kU16;
constexpr Dtypes kMove = kI8 | kU8 | kI16 | kU16 | kF16 | kI32 | kU32 | kF32 | kU64 | kI64;  // copies: all but bf16
constexpr Dtypes kBrcbTypes = kI16 | kU16 | kF16 | kI32 | kU32 | kF32;

constexpr ApiRow kApis[] = {
    {Api::Add, "Add", "Add", {kArith910A, kArith4, kArith4}, "Memory矢量计算/基础算术/Add.md"},
    {Api::Sub, "Sub", "Sub", {kArith910A, kArith4, kArith4}, "Memory矢量计算/基础算术/Sub.md"},
    {Api::Mul, "Mul", "Mul", {kArith910A, kArith4, kArith4}, "Memory矢量计算/基础算术/Mul.md"},
    {Api::Div, "Div", "Div", {kHalfFloat, kHalfFloat, kHalfFloat}, "Memory矢量计算/基础算术/Div.md"},
    {Api::Max, "Max", "Max", {kArith910A, kArith4, kArith4}, "Memory矢量计算/基础算术/Max.md"},
    {Api::Adds, "Adds", "Adds", {kHalfFloat, kArith4, kArith4}, "Memory矢量计算/基础算术/Adds.md"},
    {Api::Muls, "Muls", "Muls", {kHalfFloat, kArith4, kArith4}, "Memory矢量计算/基础算术/Muls.md"},
    {Api::Maxs, "Maxs", "Maxs (vmaxs)", {kNone, kArith4, kArith4},
     "Memory矢量计算/基础算术/Maxs.md; impl/basic_api/dav_c100/kernel_operator_vec_binary_scalar_impl.h: "
     "ASCENDC_REPORT_NOT_SUPPORT"},
    {Api::Exp, "Exp", "Exp", {kHalfFloat, kHalfFloat, kHalfFloat}, "Memory矢量计算/基础算术/Exp.md"},
    {Api::Ln, "Ln", "Ln", {kHalfFloat, kHalfFloat, kHalfFloat}, "Memory矢量计算/基础算术/Ln.md"},
    {Api::Abs, "Abs", "Abs", {kHalfFloat, kHalfFloat, kHalfFloat}, "Memory矢量计算/基础算术/Abs.md"},
    {Api::Duplicate, "Duplicate", "Duplicate", {kBrcbTypes | kBf16, kBrcbTypes | kBf16, kBrcbTypes | kBf16},
     "Memory矢量计算/数据填充/Duplicate.md"},
    {Api::Compare, "Compare", "Compare", {kHalfFloat, kHalfFloat, kHalfFloat | kI32},
     "Memory矢量计算/比较与选择/Compare.md"},
    {Api::Compares, "Compares", "Compares (tensor-scalar compare)", {kNone, kHalfFloat, kHalfFloat | kI32},
     "Memory矢量计算/比较与选择/Compares.md"},
    {Api::Select, "Select", "Select", {kHalfFloat, kHalfFloat, kHalfFloat}, "Memory矢量计算/比较与选择/Select.md"},
    {Api::And, "And", "And", {kBits16, kBits16, kBits16}, "Memory矢量计算/逻辑计算/And.md"},
    {Api::Or, "Or", "Or", {kBits16, kBits16, kBits16}, "Memory矢量计算/逻辑计算/Or.md"},
    {Api::ShiftLeft, "ShiftLeft", "ShiftLeft", {kNone, kNone, kBits16 | kI32 | kU32},
     "Memory矢量计算/逻辑计算/ShiftLeft.md"},
    {Api::ShiftRight, "ShiftRight", "ShiftRight", {kNone, kNone, kBits16 | kI32 | kU32},
     "Memory矢量计算/逻辑计算/ShiftRight.md"},
    // 310P: the page marks the API supported but lists dtypes for A2/A3 only; taken as A2/A3's.
    {Api::CreateVecIndex, "CreateVecIndex", "CreateVecIndex", {kNone, kArith4, kArith4},
     "Memory矢量计算/数据填充/CreateVecIndex.md"},
    {Api::Gather, "Gather", "Gather", {kNone, kBrcbTypes, kBrcbTypes | kBf16}, "Memory矢量计算/离散与聚合/Gather.md"},
    {Api::Brcb, "Brcb", "Brcb", {kNone, kBrcbTypes, kBrcbTypes | kBf16},
     "Memory矢量计算/数据填充/Brcb.md; impl/basic_api/dav_c100/kernel_operator_vec_brcb_impl.h"},
    {Api::ReduceMax, "ReduceMax", "ReduceMax", {kF16, kHalfFloat, kHalfFloat}, "Memory矢量计算/归约计算/ReduceMax.md"},
    {Api::ReduceSum, "ReduceSum", "ReduceSum", {kF16, kHalfFloat, kHalfFloat}, "Memory矢量计算/归约计算/ReduceSum.md"},
    {Api::WholeReduceMax, "WholeReduceMax", "WholeReduceMax (vcmax)", {kF16, kHalfFloat, kHalfFloat},
     "Memory矢量计算/归约计算/ReduceRepeat.md (hiascend atlasascendc_api_07_0079)"},
    {Api::WholeReduceSum, "WholeReduceSum", "WholeReduceSum (vcadd)", {kF16, kHalfFloat, kHalfFloat},
     "Memory矢量计算/归约计算/ReduceRepeat.md"},
    {Api::BlockReduceMax, "BlockReduceMax", "BlockReduceMax (vcgmax)", {kF16, kHalfFloat, kHalfFloat},
     "Memory矢量计算/归约计算/ReduceDataBlock.md (hiascend atlasascendc_api_07_0082)"},
    {Api::BlockReduceSum, "BlockReduceSum", "BlockReduceSum (vcgadd)", {kF16, kHalfFloat, kHalfFloat},
     "Memory矢量计算/归约计算/ReduceDataBlock.md"},
    {Api::DataCopy, "DataCopy", "DataCopy", {kMove, kMove, kMove | kBf16},
     "Memory矢量计算/数据搬运/DataCopy（GM与UB连续数据搬运）.md, DataCopy（UBToUB连续数据搬运）.md"},
    {Api::DataCopyPad, "DataCopyPad", "the unaligned GM <-> UB copy (DataCopyPad)", {kNone, kNone, kMove | kBf16},
     "Memory矢量计算/数据搬运/DataCopyPad（GMToUB非对齐数据搬运）.md; impl/basic_api/dav_m200, dav_c100 "
     "kernel_operator_data_copy_impl.h: unsupported API"},
    {Api::DataCacheCleanAndInvalid, "DataCacheCleanAndInvalid", "DataCacheCleanAndInvalid of GM",
     {kNone, kAll, kAll}, "impl/basic_api/kernel_operator_cache_intf_impl.h (the GM form: 2201 and 2002)"},
    {Api::SetAtomicAdd, "SetAtomicAdd", "SetAtomicAdd", {kF32, kF32 | kF16 | kI16, kF32 | kF16 | kI16 | kI32 | kI8 | kBf16},
     "原子操作/SetAtomicAdd.md; impl/basic_api/dav_{c100,m200,c220}/kernel_operator_set_atomic_impl.h"},
    {Api::Mmad, "Mmad", "Mmad", {kF16 | kI8, kF16 | kI8, kF16 | kBf16 | kF32 | kI8},
     "impl/basic_api/dav_{c100,m200,c220}/kernel_operator_mm_impl.h MmadCal (the A and B operand types)"},
    {Api::MatmulUbPath, "Matmul", "a Matmul operand or result in UB", {kAll, kAll, kNone},
     "impl/adv_api/detail/matmul (A from UB, C to UB: __NPU_ARCH__ 1001 / 2002; on 2201 the AIC and the "
     "AIVs share only GM)"},
    {Api::SetLocalWorkspace, "Matmul::SetLocalWorkspace", "SetLocalWorkspace", {kAll, kAll, kNone},
     "impl/adv_api/detail/matmul/resource/local_workspace/matmul_local_workspace.h (1001 / 2002 only)"},
    {Api::CrossCoreFlag, "CrossCoreSetFlag", "CrossCoreSetFlag / CrossCoreWaitFlag", {kNone, kNone, kAll},
     "impl/basic_api/dav_c100/kernel_operator_sync_impl.h: not supported; coupled cores have no cross-core flags"},
    {Api::SyncAll, "SyncAll", "the hardware SyncAll<isAIVOnly>() (no workspace arguments)", {kNone, kNone, kAll},
     "同步控制/核间同步/SyncAll.md, 硬同步原型: A2/A3 only (the software form with a GM workspace, which the "
     "simulator does not implement, serves the others); impl/basic_api/dav_c100/kernel_operator_sync_impl.h"},
    {Api::FusedMulAdd, "FusedMulAdd", "FusedMulAdd", {kNone, kHalfFloat, kHalfFloat},
     "Memory矢量计算/复合计算/FusedMulAdd.md (Atlas 训练系列产品: not supported)"},
    {Api::MatmulQuant, "Matmul::SetQuantScalar", "the Matmul API's quantization of C (FixPipe DEQF16 / VDEQF16)",
     {kNone, kAll, kAll},
     "高阶API/矩阵计算/Matmul-Kernel侧接口/SetQuantScalar.md, SetQuantVector.md (Atlas 训练系列产品: not supported)"},
};
static_assert(sizeof(kApis) / sizeof(kApis[0]) == static_cast<size_t>(Api::Count), "one row per Api");
constexpr bool RowsInOrder() {
    for (size_t i = 0; i < static_cast<size_t>(Api::Count); ++i) {
        if (static_cast<size_t>(kApis[i].api) != i) return false;
    }
    return true;
}
static_assert(RowsInOrder(), "kApis rows in Api order (the lookup indexes them)");

constexpr const ApiRow &RowOf(Api api) { return kApis[static_cast<size_t>(api)]; }

// "half, float" for a set of dtypes.
inline std::string DtypeList(Dtypes d) {
    std::string s;
    for (int i = 0; i < kDtypeCount; ++i) {
        if ((d >> i) & 1u) s += (s.empty() ? "" : ", ") + std::string(kDtypeName[i]);
    }
    return s.empty() ? "none" : s;
}

// Stops the core: `api` (with the dtype `d` when the arch has the API in other dtypes) is not on its chip.
[[noreturn]] inline void Missing(const kernel::CoreContext &core, Api api, Dtypes d, const char *apiName) {
    const ApiRow &row = RowOf(api);
    const Dtypes have = row.dtypes[ColumnOf(core.npuArch)];
    const std::string src = std::string(" (asc-devkit ") + row.source + ")";
    if (have == kNone) {
        const bool path = api == Api::DataCopyPad || api == Api::MatmulUbPath;
        kernel::MissingOnArch(core, path ? "data path" : "instruction", apiName, row.what, src);
    }
    kernel::MissingOnArch(core, "dtype", apiName, std::string(row.name) + " on " + DtypeList(d),
                          std::string(": ") + kProduct[ColumnOf(core.npuArch)] + " provides it for " +
                              DtypeList(have) + src);
}

// The check at an API entry: `d` (one DtypeOf bit, or kAll for a path with no dtype) must be in
// the row's column of the core's arch. apiName overrides the row's name in the message (e.g.
// "Matmul::IterateAll" for the UB path).
inline void Require(const kernel::CoreContext &core, Api api, Dtypes d, const char *apiName = nullptr) {
    const Dtypes have = RowOf(api).dtypes[ColumnOf(core.npuArch)];
    if ((have & d) == 0 || (d == kAll && have != kAll)) Missing(core, api, d, apiName ? apiName : RowOf(api).name);
}
template <typename T>
inline void Require(const kernel::CoreContext &core, Api api) {
    Require(core, api, DtypeOf<T>());
}

// ---- Cast: (src, dst) -> the round modes each arch takes (bit m = RoundMode value m) ----
// Cast.md, the tables "<product>支持的数据类型组合情况". CAST_NONE means CAST_RINT where the
// conversion loses precision (Cast.md, RoundMode), so float -> half on 310P / 910A rounds to
// nearest even with CAST_NONE although it does not take CAST_RINT.
using Modes = uint8_t;
enum : Modes { kNoneM = 1u << 0, kRint = 1u << 1, kFloor = 1u << 2, kCeil = 1u << 3, kRound = 1u << 4,
               kTrunc = 1u << 5, kOdd = 1u << 6 };
constexpr Modes kRounding = kRint | kFloor | kCeil | kRound | kTrunc;  // the five rounding modes
constexpr const char *kModeName[7] = {"CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL",
                                      "CAST_ROUND", "CAST_TRUNC", "CAST_ODD"};
struct CastRow {
    Dtypes src, dst;
    Modes modes[kArchCount];  // 0: the pair does not exist on that arch
};
constexpr CastRow kCasts[] = {
    {kF16, kF32, {kNoneM, kNoneM, kNoneM}},
    {kF32, kF16, {kOdd | kNoneM, kOdd | kNoneM, kRounding | kOdd | kNoneM}},
    {kBf16, kF32, {0, 0, kNoneM}},
    {kF32, kBf16, {0, 0, kRounding}},
    {kI32, kF32, {kNoneM, kNoneM, kRounding | kNoneM}},
    {kF32, kI32, {0, 0, kRounding}},
    {kF16, kI32, {kRounding, kRounding, kRounding}},
    {kBf16, kI32, {0, 0, kRounding}},
    {kF32, kF32, {0, 0, kRounding}},
    {kI16, kF32, {0, 0, kNoneM}},
    {kF32, kI16, {0, 0, kRounding}},
    {kU8, kF16, {kNoneM, kNoneM, kNoneM}},
    {kF16, kU8, {kFloor | kCeil | kRound | kTrunc | kNoneM, kFloor | kCeil | kRound | kTrunc | kNoneM,
                 kRounding | kNoneM}},
    {kI8, kF16, {kNoneM, kNoneM, kNoneM}},
    {kF16, kI8, {kFloor | kCeil | kRound | kTrunc | kNoneM, kFloor | kCeil | kRound | kTrunc | kNoneM,
                 kRounding | kNoneM}},
};

inline std::string ModeList(Modes m) {
    std::string s;
    for (int i = 0; i < 7; ++i) {
        if ((m >> i) & 1u) s += (s.empty() ? "" : ", ") + std::string(kModeName[i]);
    }
    return s;
}

// The Cast check: the pair on the core's arch ("dtype"), then the mode ("Cast mode").
inline void RequireCast(const kernel::CoreContext &core, Dtypes src, Dtypes dst, int mode) {
    const ArchColumn col = ColumnOf(core.npuArch);
    const std::string pair = DtypeList(src) + " -> " + DtypeList(dst);
    for (const CastRow &row : kCasts) {
        if (row.src != src || row.dst != dst) continue;
        const Modes m = row.modes[col];
        if (m == 0) break;
        if (mode < 0 || mode > 6 || ((m >> mode) & 1u) == 0) {
            kernel::Violation("Cast mode", "Cast",
                              pair + " takes " + ModeList(m) + " on " + core.socName + " (arch " +
                                  std::to_string(core.npuArch) + ", asc-devkit Cast.md)");
        }
        return;
    }
    kernel::MissingOnArch(core, "dtype", "Cast", pair,
                          std::string(": not in Cast.md's table for ") + kProduct[col]);
}
template <typename Dst, typename Src>
inline void RequireCast(const kernel::CoreContext &core, int mode) {
    RequireCast(core, DtypeOf<Src>(), DtypeOf<Dst>(), mode);
}

// ---- WholeReduceMax's ReduceOrder (ReduceRepeat.md "不同芯片支持的ReduceOrder"; dav_m200's
// WholeReduceMaxImpl tells ORDER_VALUE_INDEX from everything else only) ----
constexpr const char *kOrderName[4] = {"ORDER_VALUE_INDEX", "ORDER_INDEX_VALUE", "ORDER_ONLY_VALUE",
                                       "ORDER_ONLY_INDEX"};
constexpr uint8_t kReduceOrders[kArchCount] = {1u << 0, (1u << 0) | (1u << 1), 0xF};
inline void RequireReduceOrder(const kernel::CoreContext &core, const char *api, int order) {
    const uint8_t have = kReduceOrders[ColumnOf(core.npuArch)];
    if (order < 0 || order > 3 || ((have >> order) & 1u) == 0) {
        std::string list;
        for (int i = 0; i < 4; ++i) {
            if ((have >> i) & 1u) list += (list.empty() ? "" : ", ") + std::string(kOrderName[i]);
        }
        kernel::MissingOnArch(core, "reduce order", api, kOrderName[order & 3],
                              std::string(": ") + kProduct[ColumnOf(core.npuArch)] + " takes " + list +
                                  " (asc-devkit ReduceRepeat.md)");
    }
}

// ---- Select's SELMODE (Select.md, "支持模式"): Atlas A2/A3 and the 310P AI Core take modes 0
// (VSEL_CMPMASK_SPR), 1 (VSEL_TENSOR_SCALAR_MODE) and 2 (VSEL_TENSOR_TENSOR_MODE); the Atlas
// training series mode 0 only ----
constexpr uint8_t kSelectModes[kArchCount] = {1u << 0, 0x7, 0x7};
constexpr const char *kSelectModeName[3] = {"VSEL_CMPMASK_SPR", "VSEL_TENSOR_SCALAR_MODE", "VSEL_TENSOR_TENSOR_MODE"};
inline void RequireSelectMode(const kernel::CoreContext &core, int mode) {
    const uint8_t have = kSelectModes[ColumnOf(core.npuArch)];
    if (mode < 0 || mode > 2 || ((have >> mode) & 1u) == 0) {
        kernel::MissingOnArch(core, "select mode", "Select", kSelectModeName[mode < 0 || mode > 2 ? 0 : mode],
                              std::string(": ") + kProduct[ColumnOf(core.npuArch)] + " takes " +
                                  (have == 1u ? "VSEL_CMPMASK_SPR only" : "modes 0, 1 and 2") +
                                  " (asc-devkit 比较与选择/Select.md)");
    }
}

// ---- kernel types (KernelMetaType values) a kernel may declare with KERNEL_TASK_TYPE_DEFAULT
// (设置Kernel类型.md, "kernel type取值约束"): A2/A3 the AIV / AIC / MIX types (0..5); the Atlas
// inference series KERNEL_TYPE_AICORE (6) and KERNEL_TYPE_MIX_VECTOR_CORE (9); the Atlas
// training series no KERNEL_TASK_TYPE at all ----
constexpr uint32_t kKernelTypes[kArchCount] = {0, (1u << 6) | (1u << 9), 0x3Fu};
constexpr const char *kKernelTypeName[10] = {
    "KERNEL_TYPE_AIV_ONLY",    "KERNEL_TYPE_AIC_ONLY",  "KERNEL_TYPE_MIX_AIV_1_0", "KERNEL_TYPE_MIX_AIC_1_0",
    "KERNEL_TYPE_MIX_AIC_1_1", "KERNEL_TYPE_MIX_AIC_1_2", "KERNEL_TYPE_AICORE",    "KERNEL_TYPE_VECTORCORE",
    "KERNEL_TYPE_MIX_AICORE",  "KERNEL_TYPE_MIX_VECTOR_CORE"};
inline std::string KernelTypeList(uint32_t mask) {
    std::string s;
    for (int i = 0; i < 10; ++i) {
        if ((mask >> i) & 1u) s += (s.empty() ? "" : ", ") + std::string(kKernelTypeName[i]);
    }
    return s;
}

}  // namespace surface
}  // namespace acl_fa_sim

namespace AscendC {
namespace sim {
// KERNEL_TASK_TYPE_DEFAULT: the declared type must be one the chip takes (kKernelTypes) and the
// one the kernel was launched with.
inline void CheckKernelType(uint32_t declared) {
    namespace s = acl_fa_sim::surface;
    auto &core = acl_fa_sim::kernel::Enter("KERNEL_TASK_TYPE_DEFAULT");
    const uint32_t takes = s::kKernelTypes[s::ColumnOf(core.npuArch)];
    if (takes == 0) {
        acl_fa_sim::kernel::MissingOnArch(core, "kernel type", "KERNEL_TASK_TYPE_DEFAULT", "KERNEL_TASK_TYPE");
    }
    if (declared >= 32 || ((takes >> declared) & 1u) == 0) {
        acl_fa_sim::kernel::MissingOnArch(core, "kernel type", "KERNEL_TASK_TYPE_DEFAULT",
                                          "kernel type " + std::to_string(declared),
                                          std::string(": ") + s::kProduct[s::ColumnOf(core.npuArch)] +
                                              " takes " + s::KernelTypeList(takes) + " (设置Kernel类型.md)");
    }
    if (declared != core.kernelType) {
        acl_fa_sim::kernel::Violation("kernel type", "KERNEL_TASK_TYPE_DEFAULT",
                                      "kernel declares type " + std::to_string(declared) +
                                          " but was launched as type " + std::to_string(core.kernelType));
    }
}
}  // namespace sim
}  // namespace AscendC
