// ascendc_sim/kernel_macros.h -- compiler keywords, scalar types and kernel-level macros
// of Ascend C, as host C++ (asc-devkit impl/basic_api/utils/kernel_utils_macros.h,
// impl/utils/sys_macros.h; the bisheng builtins __gm__, pipe_t, half, bfloat16_t).
#pragma once

#include <cstdint>
#include <cstring>

#include "ascendc_sim/core.h"

// Address-space and function qualifiers: no meaning on the host.
#define __global__
#define __aicore__
#define __gm__
#define __ubuf__
#define __inout_pipe__(pipe)
#define __sync_alias__
#define __sync_noalias__

#define GM_ADDR __gm__ uint8_t *

// fp16: IEEE binary16; conversions from float round to nearest, ties to even.
using half = _Float16;

// bf16 storage: the upper 16 bits of an fp32; conversion from float rounds to nearest even
// (NaN stays a quiet NaN).
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(FromFloat(f)) {}
    bfloat16_t(double d) : bits(FromFloat(static_cast<float>(d))) {}
    bfloat16_t(int i) : bits(FromFloat(static_cast<float>(i))) {}
    operator float() const {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
    static uint16_t FromFloat(float f) {
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
        u += 0x7fffu + ((u >> 16) & 1u);
        return static_cast<uint16_t>(u >> 16);
    }
};

// Hardware pipelines (bisheng builtin enum pipe_t).
typedef enum {
    PIPE_S = 0,  // scalar
    PIPE_V,      // vector
    PIPE_M,      // cube
    PIPE_MTE1,   // L1 -> L0A/L0B
    PIPE_MTE2,   // GM -> L1/L0/UB
    PIPE_MTE3,   // UB -> GM/L1
    PIPE_ALL,
    PIPE_MTE4 = 7,
    PIPE_MTE5 = 8,
    PIPE_V2 = 9,
    PIPE_FIX = 10,
} pipe_t;

typedef enum { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 } event_t;

// Kernel task types (KERNEL_TASK_TYPE_DEFAULT values).
enum KernelMetaType : uint8_t {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_AICORE,
    KERNEL_TYPE_VECTORCORE,
    KERNEL_TYPE_MIX_AICORE,
    KERNEL_TYPE_MIX_VECTOR_CORE,
    KERNEL_TYPE_MAX,
};

namespace AscendC {
// Type identity (asc-devkit impl/basic_api/utils/kernel_utils_ceil_oom_que.h).
template <typename T, typename U>
struct IsSameType {
    static constexpr bool value = false;
};
template <typename T>
struct IsSameType<T, T> {
    static constexpr bool value = true;
};

namespace sim {
// CheckKernelType (KERNEL_TASK_TYPE_DEFAULT) is in ascendc_sim/arch_surface.h, with the kernel types
// each architecture takes.
inline bool IsAic() { return acl_fa_sim::kernel::Enter("ASCEND_IS_AIC").isAic; }
inline uint64_t TilingKey() { return acl_fa_sim::kernel::Enter("TILING_KEY_IS").tilingKey; }
template <typename T>
inline void CopyTilingData(T *dst, const uint8_t *tiling) {
    acl_fa_sim::kernel::Enter("GET_TILING_DATA");
    if (tiling == nullptr) {
        acl_fa_sim::kernel::Violation("tiling data", "GET_TILING_DATA", "tiling pointer is NULL");
    }
    std::memcpy(static_cast<void *>(dst), tiling, sizeof(T));
}
}  // namespace sim
}  // namespace AscendC

#define KERNEL_TASK_TYPE_DEFAULT(value) AscendC::sim::CheckKernelType(static_cast<uint32_t>(value))
#define ASCEND_IS_AIC (AscendC::sim::IsAic())
#define ASCEND_IS_AIV (!AscendC::sim::IsAic())
#define ASCEND_IS_NOT_AIC (!AscendC::sim::IsAic())
#define ASCEND_IS_NOT_AIV (AscendC::sim::IsAic())
#define TILING_KEY_IS(k) (AscendC::sim::TilingKey() == static_cast<uint64_t>(k))
// Registers the plain tiling struct GET_TILING_DATA fills (block scope, before GET_TILING_DATA).
#define REGISTER_TILING_DEFAULT(tiling_struct) using AclFaSimDefaultTiling_ = tiling_struct
#define GET_TILING_DATA(tiling_data, tiling_arg) \
    AclFaSimDefaultTiling_ tiling_data;          \
    AscendC::sim::CopyTilingData(&tiling_data, (tiling_arg))
// GET_TILING_DATA_WITH_STRUCT(struct, var, tiling): the tiling as the named struct, on the stack
// (基础API/Kernel-Tiling/GET_TILING_DATA_WITH_STRUCT.md; what Hccl::InitV2's initTiling points at).
#define GET_TILING_DATA_WITH_STRUCT(tiling_struct, tiling_data, tiling_arg) \
    tiling_struct tiling_data;                                             \
    AscendC::sim::CopyTilingData(&tiling_data, (tiling_arg))
