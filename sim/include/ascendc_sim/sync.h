// ascendc_sim/sync.h -- in-core synchronisation and system variables (asc-devkit
// impl/basic_api/kernel_event.h, include/basic_api/kernel_operator_sys_var_intf.h,
// kernel_operator_swap_mem_intf.h, the workspace API).
//
// The simulator runs a core's pipelines in program order, so flags change no data; they
// are checked: WaitFlag needs a pending SetFlag of the same (event, id) (else the chip
// would hang), SetFlag twice without a WaitFlag in between is reported, and a flag still
// set when the core finishes is reported by the launcher.
#pragma once

#include <cstdint>
#include <string>

#include "ascendc_sim/kernel_macros.h"

namespace AscendC {

enum class HardEvent : uint8_t {
    // src_dst
    MTE2_MTE1,
    MTE1_MTE2,
    MTE1_M,
    M_MTE1,
    MTE2_V,
    V_MTE2,
    MTE3_V,
    V_MTE3,
    M_V,
    V_M,
    V_V,
    MTE3_MTE1,
    MTE1_MTE3,
    MTE1_V,
    MTE2_M,
    M_MTE2,
    V_MTE1,
    M_FIX,
    FIX_M,
    MTE3_MTE2,
    MTE2_MTE3,
    S_V,
    V_S,
    S_MTE2,
    MTE2_S,
    S_MTE3,
    MTE3_S,
    MTE2_FIX,
    FIX_MTE2,
    FIX_S,
    M_S,
    FIX_MTE3,
    MTE1_FIX,
    FIX_MTE1,
    FIX_FIX,
    MAX,
};
using TEventID = int8_t;
constexpr int kHardEventCount = static_cast<int>(HardEvent::MAX);
static_assert(kHardEventCount <= acl_fa_sim::kernel::kMaxHardEvents, "event table too small");

namespace sim {
const char *HardEventName(int evt);
void SetFlagImpl(int evt, int32_t eventID);
void WaitFlagImpl(int evt, int32_t eventID);
TEventID AllocEventId(uint32_t &inUse, const char *api);
void ReleaseEventId(uint32_t &inUse, int32_t id, const char *api);
TEventID FetchEventId(uint32_t &inUse, const char *api);
}  // namespace sim

template <HardEvent event>
inline void SetFlag(int32_t eventID) {
    sim::SetFlagImpl(static_cast<int>(event), eventID);
}
template <HardEvent event>
inline void WaitFlag(int32_t eventID) {
    sim::WaitFlagImpl(static_cast<int>(event), eventID);
}
namespace sim {
void PipeBarrierImpl(int pipe);
}
// Program order already completes every earlier instruction: nothing to wait for here; the
// instruction trace records the barrier for the timing model.
template <pipe_t pipe>
inline void PipeBarrier() {
    sim::PipeBarrierImpl(static_cast<int>(pipe));
}

// ---- system variables ----
inline int64_t GetBlockIdx() { return acl_fa_sim::kernel::Enter("GetBlockIdx").blockIdx; }
inline int64_t GetBlockNum() { return acl_fa_sim::kernel::Enter("GetBlockNum").blockNum; }
inline int64_t GetSubBlockIdx() { return acl_fa_sim::kernel::Enter("GetSubBlockIdx").subBlockIdx; }
inline int64_t GetSubBlockNum() { return acl_fa_sim::kernel::Enter("GetSubBlockNum").taskRatio; }
inline int64_t GetTaskRatio() { return acl_fa_sim::kernel::Enter("GetTaskRatio").taskRatio; }
inline int64_t GetTaskRation() { return GetTaskRatio(); }

// The user part of the kernel's workspace argument: it starts after the system workspace
// (GetLibApiWorkSpaceSize bytes of the chip). Also records the system part for
// GetSysWorkSpacePtr when the launcher did not set it.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
    auto &core = acl_fa_sim::kernel::Enter("GetUserWorkspace");
    if (workspace == nullptr) return nullptr;
    if (core.sysWorkspace == nullptr) core.sysWorkspace = workspace;
    return workspace + core.sysWorkspaceBytes;
}

}  // namespace AscendC

inline __gm__ uint8_t *__gm__ GetSysWorkSpacePtr() {
    return acl_fa_sim::kernel::Enter("GetSysWorkSpacePtr").sysWorkspace;
}
