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
//
// CrossCoreSetFlag<modeId, pipe>(flagId) / CrossCoreWaitFlag<modeId, pipe>(flagId) (asc-devkit
// include/basic_api/kernel_operator_block_sync_intf.h; dav_c220: ffts_cross_core_sync(pipe,
// msg(mode, flagId)) and wait_flag_dev(flagId); docs: CrossCoreSetFlag.md): the hardware flags
// of a separated-core chip (910B, 910_93). Each core has a counter per flagId, 0 at launch; a
// wait blocks every later instruction of the core while its counter is 0, then takes 1 from it.
// A set is sent once `pipe` has finished the instructions issued before it, and counts as:
//   mode 0  the cores of the setter's kind (all AIVs, or all AICs) of the launch: when every one
//           of them has set flagId once more, each of their counters gains 1 (a barrier);
//   mode 1  the AIVs of the setter's AI Core group, in the same way;
//   mode 2  from the AIC: each AIV of its group gains 1; from an AIV: the group's AIC gains 1
//           once every AIV of the group has set it once more.
// Rules (docs): flagId in [0, 10] for kernels (11..14 serve SyncAll and the runtime), modeId in
// [0, 2], the set's pipe neither PIPE_S nor PIPE_ALL, a counter holds at most 16 sets; modes 1
// and 2 need a MIX kernel (a group of AIC and AIVs); the coupled chips (910A, 310P) have no such
// flags. The wait's modeId and pipe do not change what it does on these chips. A wait no core
// can end -- every other core left the kernel or waits itself -- is reported at once as a hang
// naming the waiting cores, one lasting beyond ACL_FA_SIM_SYNC_TIMEOUT after that time.
// (The Matmul API's own client/server flags are not simulated as flags: a MIX kernel whose AIC
// serves Matmul requests runs no kernel code after REGIST_MATMUL_OBJ.)
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
// set: CrossCoreSetFlag, else CrossCoreWaitFlag; pipe: the pipe_t value.
void CrossCoreFlagImpl(bool set, int modeId, int pipe, uint16_t flagId);
}  // namespace sim

template <typename T>
__aicore__ inline void SetAtomicAdd() {
    static_assert(sim::TypeTag<T>() >= 0, "the simulator's SetAtomicAdd supports float, half, bfloat16_t, int32_t");
    sim::OnArch<T>(acl_fa_sim::surface::Api::SetAtomicAdd);
    sim::SetAtomicAddImpl(sim::TypeTag<T>());
}

__aicore__ inline void SetAtomicNone() { sim::SetAtomicNoneImpl(); }

namespace sim {
// IBSet (set) and IBWait (!set) on the tensors' simulator views.
inline void InterBlockFlag(bool set, bool isAIVOnly, const GlobalTensor<int32_t> &gmWorkspace,
                           const LocalTensor<int32_t> &ubWorkspace, int32_t blockIdx, int32_t eventID) {
    InterBlockFlagImpl(set, isAIVOnly, gmWorkspace.SimData(), gmWorkspace.SimLo(), gmWorkspace.SimHi(),
                       ubWorkspace.SimData(), ubWorkspace.GetSize(), IsUbPosition(ubWorkspace.SimPos()), blockIdx,
                       eventID);
}
}  // namespace sim

template <bool isAIVOnly = true>
__aicore__ inline void IBSet(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
                             int32_t blockIdx, int32_t eventID) {
    sim::InterBlockFlag(true, isAIVOnly, gmWorkspace, ubWorkspace, blockIdx, eventID);
}

template <bool isAIVOnly = true>
__aicore__ inline void IBWait(const GlobalTensor<int32_t> &gmWorkspace, const LocalTensor<int32_t> &ubWorkspace,
                              int32_t blockIdx, int32_t eventID) {
    sim::InterBlockFlag(false, isAIVOnly, gmWorkspace, ubWorkspace, blockIdx, eventID);
}

template <uint8_t modeId, pipe_t pipe>
__aicore__ inline void CrossCoreSetFlag(uint16_t flagId) {
    sim::OnArchPath(acl_fa_sim::surface::Api::CrossCoreFlag, "CrossCoreSetFlag");  // not on coupled cores
    sim::CrossCoreFlagImpl(true, modeId, static_cast<int>(pipe), flagId);
}

template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
__aicore__ inline void CrossCoreWaitFlag(uint16_t flagId) {
    sim::OnArchPath(acl_fa_sim::surface::Api::CrossCoreFlag, "CrossCoreWaitFlag");
    sim::CrossCoreFlagImpl(false, modeId, static_cast<int>(pipe), flagId);
}

template <bool isAIVOnly = true>
__aicore__ inline void SyncAll() {
    sim::OnArchPath(acl_fa_sim::surface::Api::SyncAll, "SyncAll");  // the hardware form: A2/A3 only
    sim::SyncAllImpl(isAIVOnly);
}

}  // namespace AscendC
