// ascendc_sim/cross_core.h -- GM atomic add and the all-core barrier (asc-devkit
// include/basic_api/kernel_operator_set_atomic_intf.h, kernel_operator_block_sync_intf.h;
// docs: SetAtomicAdd.md, SyncAll.md).
//
// SetAtomicAdd<T>() makes the core's following transfers to GM (DataCopy / DataCopyPad
// UB -> GM here) add their T elements to GM instead of overwriting, until SetAtomicNone().
// The adds of all cores are serialized, each element exactly once; their order is the order
// in which the cores reach them, which the launcher varies from run to run (cores start in
// an unspecified order on the chip), so float sums built this way are not bitwise
// reproducible -- as on the chip. A Matmul result reaches GM through the cube's own path:
// its atomic mode is IterateAll's enAtomic argument, not the vector core's SetAtomicAdd.
//
// SyncAll<isAIVOnly>() (hard sync): every vector core of the launch (isAIVOnly = true), or
// every core (false), waits until all of them have called it. A barrier some core can never
// reach -- it left the kernel without calling it, or did not arrive within the time limit
// (ACL_FA_SIM_SYNC_TIMEOUT seconds, default 60) -- is reported as a hang naming those cores,
// instead of blocking forever.
#pragma once

#include "ascendc_sim/data_copy.h"

namespace AscendC {

namespace sim {
void SetAtomicAddImpl(int typeTag);
void SetAtomicNoneImpl();
void SyncAllImpl(bool aivOnly);
}  // namespace sim

template <typename T>
__aicore__ inline void SetAtomicAdd() {
    static_assert(sim::TypeTag<T>() >= 0, "the simulator's SetAtomicAdd supports float, half, bfloat16_t, int32_t");
    sim::SetAtomicAddImpl(sim::TypeTag<T>());
}

__aicore__ inline void SetAtomicNone() { sim::SetAtomicNoneImpl(); }

template <bool isAIVOnly = true>
__aicore__ inline void SyncAll() {
    sim::SyncAllImpl(isAIVOnly);
}

}  // namespace AscendC
