// ascendc_sim/hccl_context.h -- GetHcclContext / SetHcclContext (asc-devkit
// include/basic_api/kernel_common.h; docs HCCL-Context/GetHcclContext.md): the communication
// context of group `index` (0 or 1; other indices give nullptr / are ignored, as there). The
// launch gives every core the contexts its launcher set (acl_fa_sim::SetLaunchHcclContext).
#pragma once

#include <cstdint>

#include "ascendc_sim/core.h"
#include "ascendc_sim/kernel_macros.h"

namespace AscendC {

template <uint32_t index>
__aicore__ inline void SetHcclContext(__gm__ uint8_t *context)
{
    if constexpr (index > 1) {
        return;
    } else {
        acl_fa_sim::kernel::Enter("SetHcclContext").hcclContext[index] = context;
    }
}

template <uint32_t index>
__aicore__ inline __gm__ uint8_t *__gm__ GetHcclContext(void)
{
    if constexpr (index > 1) {
        return nullptr;
    } else {
        return acl_fa_sim::kernel::Enter("GetHcclContext").hcclContext[index];
    }
}

}  // namespace AscendC
