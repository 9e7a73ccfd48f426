// ascendc_sim/cross_core.h -- GM atomic add, the all-core barrier and the inter-core flags (asc-devkit
// include/basic_api/kernel_operator_set_atomic_intf.h, kernel_operator_block_sync_intf.h;
// docs: SetAtomicAdd.md, SyncAll.md, IBSet.md, IBWait.md).
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
//
// IBSet<isAIVOnly>(gm, ub, blockIdx, eventID) / IBWait<...>(same): a one-bit flag in GM shared
// by the cores, at gm[coreNum * 8 * eventID + blockIdx * 8] (one 32-B block per flag;
// coreNum = GetBlockNum(), times 2 on a separated-core chip when isAIVOnly is false). IBSet
// waits until the flag is 0 and writes 1; IBWait waits until it is 1 and writes 0 -- so a
// flag passes from one IBSet to one IBWait, and a second IBSet before that IBWait waits too.
// Both copy the flag's block through ub (32 B, VECIN/VECCALC/VECOUT) and drain all pipes
// before and after. The rules (docs: IBSet.md, IBWait.md): blockIdx in [0, coreNum - 1],
// eventID >= 0, the flag's block inside gm; gm zeroed before first use (the kernel's job: a
// flag found in another state just waits); on a separated-core chip the calls return at once
// on a cube core. A wait that can never end -- every other core of the launch has left the
// kernel or waits itself -- or lasts beyond ACL_FA_SIM_SYNC_TIMEOUT is reported as a hang
// naming the waiting cores and their flags.
#pragma once

#include "ascendc_sim/data_copy.h"

namespace AscendC {

namespace sim {
void SetAtomicAddImpl(int typeTag);
void SetAtomicNoneImpl();
void SyncAllImpl(bool aivOnly);
// set: IBSet, else IBWait. flag: the flag's first int32 in GM ([gmLo, gmHi) the GlobalTensor's
// buffer); ub / ubElems: the UB scratch, ubInUb whether its TPosition is a UB one.
void InterBlockFlagImpl(bool set, bool aivOnly, int32_t *gm, const void *gmLo, const void *gmHi, int32_t *ub,
                        uint32_t ubElems, bool ubInUb, int32_t blockIdx, int32_t eventID);
}  // namespace sim

template <typename T>
__aicore__ inline void SetAtomicAdd() {
    static_assert(sim::TypeTag<T>() >= 0, "the simulator's SetAtomicAdd supports float, half, bfloat16_t, int32_t");
    sim::SetAtomicAddImpl(sim::TypeTag<T>());
}

__aicore__ inline void SetAtomicNone() { sim::SetAtomicNoneImpl(); }

template <bool isAIVOnly = true>
__aicore__ inline void IBSet(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
                             int32_t blockIdx, int32_t eventID) {
    sim::InterBlockFlagImpl(true, isAIVOnly, gmWorkspace.SimData(), gmWorkspace.SimLo(), gmWorkspace.SimHi(),
                            ubWorkspace.SimData(), ubWorkspace.GetSize(), sim::IsUbPosition(ubWorkspace.SimPos()), blockIdx,
                            eventID);
}

template <bool isAIVOnly = true>
__aicore__ inline void IBWait(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
                              int32_t blockIdx, int32_t eventID) {
    sim::InterBlockFlagImpl(false, isAIVOnly, gmWorkspace.SimData(), gmWorkspace.SimLo(), gmWorkspace.SimHi(),
                            ubWorkspace.SimData(), ubWorkspace.GetSize(), sim::IsUbPosition(ubWorkspace.SimPos()), blockIdx,
                            eventID);
}

template <bool isAIVOnly = true>
__aicore__ inline void SyncAll() {
    sim::SyncAllImpl(isAIVOnly);
}

}  // namespace AscendC
