// cross_core.cpp -- GM atomic add, the SyncAll barrier, the IBSet/IBWait flags and the
// CrossCoreSetFlag/CrossCoreWaitFlag counters (ascendc_sim/cross_core.h).
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "ascendc_sim/cross_core.h"
#include "ascendc_sim/optrace.h"
#include "cross_core_internal.h"
#include "engine_internal.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

// One lock for every GM atomic add of the process: adds are applied one transfer at a time,
// so each element receives every contribution exactly once.
std::mutex gAtomicMutex;

const char *TagName(int tag) {
    switch (tag) {
        case 0: return "float";
        case 1: return "half";
        case 2: return "bfloat16_t";
        case 3: return "int32_t";
        default: return "an unsupported type";
    }
}

template <typename F>
void AddConverted(uint16_t *dst, const uint16_t *src, size_t n, F toF32, void (*fromF32)(const float *, uint16_t *, size_t)) {
    float a, b;
    for (size_t i = 0; i < n; ++i) {
        toF32(dst + i, &a, 1);
        toF32(src + i, &b, 1);
        a += b;
        fromF32(&a, dst + i, 1);
    }
}

// How long a flag wait yields the CPU before it sleeps (WaitForFlag).
constexpr std::chrono::microseconds kFlagSpin{20};

// Seconds a core waits at SyncAll before the barrier is reported as a hang.
double SyncTimeoutSeconds() {
    const char *text = std::getenv("ACL_FA_SIM_SYNC_TIMEOUT");
    if (text == nullptr || *text == '\0') return 60.0;
    char *end = nullptr;
    const double v = std::strtod(text, &end);
    return (*end == '\0' && v > 0) ? v : 60.0;
}

}  // namespace

std::mutex &AtomicMutex() { return gAtomicMutex; }

void AddToGm(void *dst, const void *src, uint64_t bytes, int tag) {
    std::lock_guard<std::mutex> lock(gAtomicMutex);
    switch (tag) {
        case 0: {
            float *d = static_cast<float *>(dst);
            const float *s = static_cast<const float *>(src);
            for (uint64_t i = 0; i < bytes / 4; ++i) d[i] += s[i];
            break;
        }
        case 1:
            AddConverted(static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src), bytes / 2,
                         ConvertF16ToF32, ConvertF32ToF16);
            break;
        case 2:
            AddConverted(static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src), bytes / 2,
                         ConvertBf16ToF32, ConvertF32ToBf16);
            break;
        case 3: {
            int32_t *d = static_cast<int32_t *>(dst);
            const int32_t *s = static_cast<const int32_t *>(src);
            for (uint64_t i = 0; i < bytes / 4; ++i) d[i] = int32_t(uint32_t(d[i]) + uint32_t(s[i]));
            break;
        }
        default: break;
    }
}

CrossCore::CrossCore(std::vector<bool> isAic, std::vector<uint32_t> blockIdx, uint32_t taskRatio,
                     std::vector<uint32_t> group, const volatile bool *abortFlag,
                     std::function<void()> startSpareWorker)
    : isAic_(std::move(isAic)), blockIdx_(std::move(blockIdx)), taskRatio_(taskRatio), group_(std::move(group)),
      flagWake_(isAic_.size()), arrived_(isAic_.size(), false), finished_(isAic_.size(), false),
      flagWait_(isAic_.size(), nullptr), flagWant_(isAic_.size(), 0), flagCall_(isAic_.size()),
      coreFlags_(isAic_.size()), coreFlagSets_(isAic_.size()), coreFlagWait_(isAic_.size(), -1),
      abortFlag_(abortFlag), startSpareWorker_(std::move(startSpareWorker)), timeout_(SyncTimeoutSeconds()) {
    for (auto &modes : coreFlagSets_) {
        for (auto &flags : modes) flags.fill(0);
    }
}

bool CrossCore::Takes(uint32_t core, bool aivOnly) const { return !aivOnly || !isAic_[core]; }

std::string CrossCore::Name(uint32_t c) const {
    CoreContext core;
    core.isAic = isAic_[c];
    core.blockIdx = blockIdx_[c];
    core.taskRatio = taskRatio_;
    core.subBlockIdx = isAic_[c] ? 0 : blockIdx_[c] % taskRatio_;
    return DescribeCore(core);
}

std::string CrossCore::Missing(bool aivOnly, bool finishedOnly) const {
    std::string out;
    uint32_t listed = 0, more = 0;
    for (uint32_t c = 0; c < isAic_.size(); ++c) {
        if (!Takes(c, aivOnly) || arrived_[c] || (finishedOnly && !finished_[c])) continue;
        if (listed < 16) {
            out += (listed ? ", " : "") + Name(c);
            ++listed;
        } else {
            ++more;
        }
    }
    if (more) out += " and " + std::to_string(more) + " more";
    return out;
}

void CrossCore::Arrive(CoreContext &core, bool aivOnly) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::string kind = aivOnly ? "SyncAll<true>" : "SyncAll<false>";
    if (count_ > 0 && pendingAivOnly_ != aivOnly) {
        Violation("SyncAll", "SyncAll",
                  kind + " while other cores wait in SyncAll<" + (pendingAivOnly_ ? "true" : "false") +
                      ">: the two barriers never meet");
    }
    pendingAivOnly_ = aivOnly;
    arrived_[core.launchIndex] = true;
    ++count_;
    uint32_t participants = 0;
    for (uint32_t c = 0; c < isAic_.size(); ++c) participants += Takes(c, aivOnly) ? 1 : 0;
    const uint64_t generation = generation_;
    if (count_ == participants) {
        ++generation_;
        count_ = 0;
        std::fill(arrived_.begin(), arrived_.end(), false);
        ++core.stats->syncAllCalls;
        wake_.notify_all();
        return;
    }
    // The cores this one waits for may not have started yet: while it blocks, another host
    // thread runs the cores still waiting to start (ACL_FA_SIM_THREADS bounds the running ones).
    WakeFlagWaitersIfStuck();
    lock.unlock();
    startSpareWorker_();
    lock.lock();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    const std::string barrier = kind + " barrier #" + std::to_string(generation + 1);
    while (generation_ == generation) {
        if (*abortFlag_) throw CoreStopped{};
        const std::string gone = Missing(aivOnly, true);
        if (!gone.empty()) {
            Violation("SyncAll", "SyncAll",
                      "hang: " + barrier + " can never complete; " + gone +
                          " left the kernel without reaching it (a barrier must be reached by every core it syncs)");
        }
        if (wake_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == generation &&
            !*abortFlag_) {
            Violation("SyncAll", "SyncAll",
                      "hang: " + barrier + " not complete after " + std::to_string(timeout_) + " s (ACL_FA_SIM_SYNC_TIMEOUT); " +
                          Missing(aivOnly, false) + " never arrived");
        }
    }
    ++core.stats->syncAllCalls;
}

bool CrossCore::NoCoreCanMove() const {
    for (uint32_t c = 0; c < isAic_.size(); ++c) {
        const bool waitsForFlag = (flagWait_[c] != nullptr && *flagWait_[c] != flagWant_[c]) ||
                                  (coreFlagWait_[c] >= 0 && coreFlags_[c][coreFlagWait_[c]].empty());
        if (!finished_[c] && !arrived_[c] && !waitsForFlag) return false;
    }
    return true;
}

std::string CrossCore::FlagWaiters() const {
    std::string out;
    uint32_t listed = 0, more = 0;
    for (uint32_t c = 0; c < isAic_.size(); ++c) {
        if (flagWait_[c] == nullptr && coreFlagWait_[c] < 0) continue;
        if (listed < 16) {
            out += (listed ? ", " : "") + Name(c) + " in " + flagCall_[c];
            ++listed;
        } else {
            ++more;
        }
    }
    if (more) out += " and " + std::to_string(more) + " more";
    return out;
}

void CrossCore::WakeFlagWaiters() {
    for (uint32_t c = 0; c < flagWake_.size(); ++c) {
        if (flagWait_[c] != nullptr || coreFlagWait_[c] >= 0) flagWake_[c].notify_one();
    }
}

void CrossCore::WakeFlagWaitersIfStuck() {
    if (NoCoreCanMove()) WakeFlagWaiters();
}

void CrossCore::WaitForFlag(std::unique_lock<std::mutex> &lock, uint32_t me, const std::function<bool()> &ready,
                            const char *rule, const std::string &call, const std::string &hint) {
    WakeFlagWaitersIfStuck();
    // As at SyncAll: the core that will set the flag may not have started yet.
    lock.unlock();
    startSpareWorker_();
    lock.lock();
    // A short wait yields the CPU rather than sleeping: most flags are set within microseconds
    // (the AIV pair's meetings, the cube's answers), while a sleep and its wake cost a context
    // switch each way and, on an idle host CPU, a wake-up IPI -- for B1 N1 S16 D16 the AIVs'
    // meetings took ~48 us of a ~65 us launch sleeping, ~25 us yielding. The setter's notify
    // costs nothing while no one sleeps. After kFlagSpin the wait sleeps as before.
    for (const auto spinEnd = std::chrono::steady_clock::now() + kFlagSpin;
         !ready() && !*abortFlag_ && std::chrono::steady_clock::now() < spinEnd;) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    while (!ready()) {
        if (*abortFlag_) throw CoreStopped{};
        if (NoCoreCanMove()) {
            Violation(rule, rule,
                      "hang: " + call + " can never return: every core of the launch has left the kernel, waits "
                      "at SyncAll or waits for a flag; waiting for a flag: " + FlagWaiters() + " (" + hint + ")");
        }
        if (flagWake_[me].wait_until(lock, deadline) == std::cv_status::timeout && !ready() && !*abortFlag_) {
            Violation(rule, rule,
                      "hang: " + call + " not returned after " + std::to_string(timeout_) +
                          " s (ACL_FA_SIM_SYNC_TIMEOUT); waiting for a flag: " + FlagWaiters());
        }
    }
}

void CrossCore::InterBlockFlag(CoreContext &core, bool set, int32_t *flag, int32_t *ub, const std::string &call) {
    const int32_t want = set ? 0 : 1;
    const uint32_t me = core.launchIndex;
    std::unique_lock<std::mutex> lock(mutex_);
    if (*flag != want) {
        flagWait_[me] = flag;
        flagWant_[me] = want;
        flagCall_[me] = call;
        struct Clear {
            std::vector<const int32_t *> &wait;
            uint32_t me;
            ~Clear() { wait[me] = nullptr; }
        } clear{flagWait_, me};
        WaitForFlag(lock, me, [&] { return *flag == want; }, set ? "IBSet" : "IBWait", call,
                    set ? "IBSet waits for a flag an IBWait has not consumed"
                        : "each IBWait needs an IBSet with the same gmWorkspace, blockIdx and eventID");
    }
    std::memcpy(ub, flag, 32);  // the call's DataCopy of the flag's block into UB
    ub[0] = 1 - want;
    flag[0] = 1 - want;
    WakeFlagWaiters();  // the GM flag's waiter is not known here
}

std::vector<uint32_t> CrossCore::CoreFlagPeers(uint32_t core, int mode) const {
    std::vector<uint32_t> peers;
    if (mode == 2 && isAic_[core]) return {core};
    for (uint32_t c = 0; c < isAic_.size(); ++c) {
        if (mode == 0 ? isAic_[c] == isAic_[core] : (!isAic_[c] && group_[c] == group_[core])) peers.push_back(c);
    }
    return peers;
}

std::vector<uint32_t> CrossCore::CoreFlagTargets(uint32_t core, int mode) const {
    if (mode != 2) return CoreFlagPeers(core, mode);
    std::vector<uint32_t> targets;
    for (uint32_t c = 0; c < isAic_.size(); ++c) {
        if (group_[c] == group_[core] && isAic_[c] != isAic_[core]) targets.push_back(c);
    }
    return targets;
}

void CrossCore::CoreFlagSet(CoreContext &core, int mode, int flagId, const std::string &call) {
    const uint32_t me = core.launchIndex;
    std::lock_guard<std::mutex> lock(mutex_);
    const std::vector<uint32_t> peers = CoreFlagPeers(me, mode);
    if (++coreFlagSets_[me][mode][flagId] > kCoreFlagMaxSets) {
        Violation("CrossCoreSetFlag", "CrossCoreSetFlag",
                  call + ": " + std::to_string(kCoreFlagMaxSets) + " earlier sets of this flagId still wait for the other "
                  "cores of the mode to set it; a flag's counter holds at most " + std::to_string(kCoreFlagMaxSets) +
                  " sets");
    }
    for (uint32_t p : peers) {
        if (coreFlagSets_[p][mode][flagId] == 0) return;  // the 1 is given when the last peer sets
    }
    for (uint32_t p : peers) --coreFlagSets_[p][mode][flagId];
    for (uint32_t t : CoreFlagTargets(me, mode)) {
        auto &counter = coreFlags_[t][flagId];
        if (counter.size() >= kCoreFlagMaxSets) {
            Violation("CrossCoreSetFlag", "CrossCoreSetFlag",
                      call + ": the counter of flagId " + std::to_string(flagId) + " on " + Name(t) + " already holds " +
                          std::to_string(kCoreFlagMaxSets) + " sets no CrossCoreWaitFlag took; it holds at most " +
                          std::to_string(kCoreFlagMaxSets));
        }
        counter.push_back(peers);
        flagWake_[t].notify_one();
    }
}

std::vector<uint32_t> CrossCore::CoreFlagWait(CoreContext &core, int flagId, const std::string &call) {
    const uint32_t me = core.launchIndex;
    std::unique_lock<std::mutex> lock(mutex_);
    auto &counter = coreFlags_[me][flagId];
    if (counter.empty()) {
        coreFlagWait_[me] = flagId;
        flagCall_[me] = call;
        struct Clear {
            std::vector<int> &wait;
            uint32_t me;
            ~Clear() { wait[me] = -1; }
        } clear{coreFlagWait_, me};
        WaitForFlag(lock, me, [&] { return !counter.empty(); }, "CrossCoreWaitFlag", call,
                    "each CrossCoreWaitFlag needs a CrossCoreSetFlag of the same flagId from every core of its mode");
    }
    std::vector<uint32_t> sources = std::move(counter.front());
    counter.erase(counter.begin());
    return sources;
}

void CrossCore::Finished(uint32_t core) {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_[core] = true;
    wake_.notify_all();
    WakeFlagWaitersIfStuck();
}

void CrossCore::Abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
    WakeFlagWaiters();
}

void LendHostThread(CoreContext &core) {
    if (core.crossCore != nullptr) core.crossCore->LendHostThread();
}

}  // namespace kernel
}  // namespace acl_fa_sim

namespace AscendC {
namespace sim {

void AtomicAddToGm(acl_fa_sim::kernel::CoreContext &core, const char *api, void *dst, const void *src, uint64_t bytes,
                   int tag) {
    if (tag != core.atomicType) {
        acl_fa_sim::kernel::Violation("atomic type", api,
                                      std::string("SetAtomicAdd<") + acl_fa_sim::kernel::TagName(core.atomicType) +
                                          "> is in effect but the transfer moves " + acl_fa_sim::kernel::TagName(tag) +
                                          " elements");
    }
    acl_fa_sim::kernel::AddToGm(dst, src, bytes, tag);
    core.stats->atomicAddBytes += bytes;
}

void SetAtomicAddImpl(int typeTag) {
    auto &core = acl_fa_sim::kernel::Enter("SetAtomicAdd");
    core.atomicAdd = true;
    core.atomicType = typeTag;
}

void SetAtomicNoneImpl() {
    auto &core = acl_fa_sim::kernel::Enter("SetAtomicNone");
    core.atomicAdd = false;
    core.atomicType = -1;
}

void SyncAllImpl(bool aivOnly) {
    auto &core = acl_fa_sim::kernel::Enter("SyncAll");
    if (aivOnly && core.isAic && !core.coupled) {
        acl_fa_sim::kernel::Violation("SyncAll", "SyncAll",
                                      "SyncAll<true> synchronises the vector cores only; a cube core takes part "
                                      "in SyncAll<false>");
    }
    // the model's barrier families: 1 vector cores only, 2 every core
    acl_fa_sim::kernel::TraceSyncAll(core, aivOnly && !core.coupled ? 1 : 2, "SyncAll");
    core.crossCore->Arrive(core, aivOnly && !core.coupled);
}

void InterBlockFlagImpl(bool set, bool aivOnly, int32_t *gm, const void *gmLo, const void *gmHi, int32_t *ub,
                        uint32_t ubElems, bool ubInUb, int32_t blockIdx, int32_t eventID) {
    namespace k = acl_fa_sim::kernel;
    const char *api = set ? "IBSet" : "IBWait";
    auto &core = k::Enter(api);
    if (core.isAic && !core.coupled) return;  // separated cores: only the vector cores take part
    // The flags' core count: GetBlockNum(), doubled in MIX mode (isAIVOnly = false) on a chip
    // with separate cube and vector cores (impl: blockNum * 2 on __NPU_ARCH__ 2201).
    const int64_t coreNum = static_cast<int64_t>(core.blockNum) * (!aivOnly && !core.coupled ? 2 : 1);
    const std::string call = std::string(api) + "(blockIdx " + std::to_string(blockIdx) + ", eventID " +
                             std::to_string(eventID) + ")";
    if (blockIdx < 0 || blockIdx >= coreNum) {
        k::Violation(api, api,
                     call + ": blockIdx must be in [0, " + std::to_string(coreNum - 1) + "] (the core count is " +
                         "GetBlockNum()" + (!aivOnly && !core.coupled ? " * 2 with isAIVOnly = false" : "") + ")");
    }
    if (eventID < 0) k::Violation(api, api, call + ": eventID must be >= 0");
    if (!ubInUb) k::Violation(api, api, call + ": ubWorkspace must be a UB tensor (VECIN, VECCALC or VECOUT)");
    if (ubElems < 8) {
        k::Violation(api, api, call + ": ubWorkspace holds " + std::to_string(ubElems * 4) + " B; it needs 32 B");
    }
    int32_t *flag = gm + (coreNum * 8 * eventID + static_cast<int64_t>(blockIdx) * 8);
    const auto *lo = static_cast<const uint8_t *>(gmLo), *hi = static_cast<const uint8_t *>(gmHi);
    const auto *at = reinterpret_cast<const uint8_t *>(flag);
    if (at < lo || at + 32 > hi) {
        k::Violation(api, api,
                     call + ": gmWorkspace holds " + std::to_string(hi - reinterpret_cast<const uint8_t *>(gm)) +
                         " B from its start; this flag needs coreNum * 32 * eventID + blockIdx * 32 + 32 = " +
                         std::to_string(coreNum * 32 * eventID + int64_t{blockIdx} * 32 + 32) + " B");
    }
    // Program order drains every pipe before and after (the call's PIPE_ALL barriers); the
    // trace records them, the flag's read (MTE2), the scalar test and write of ub[0] and the
    // flag's write (MTE3). Cross-core flag key: the flag's address, tagged by the top bit.
    const uint64_t key = (uint64_t{1} << 63) | reinterpret_cast<uint64_t>(flag);
    k::TraceBarrier(core, k::Pipe::COUNT, api);
    if (!set) k::TraceCrossFlag(core, false, k::Pipe::S, key, api);
    k::TraceExec(core, k::Pipe::MTE2, k::Unit::BYTES, 32, api);
    k::TraceBarrier(core, k::Pipe::COUNT, api);
    k::TraceExec(core, k::Pipe::S, k::Unit::SCALAR_ACCESSES, 2, api);
    k::TraceExec(core, k::Pipe::MTE3, k::Unit::BYTES, 32, api);
    if (set) k::TraceCrossFlag(core, true, k::Pipe::MTE3, key, api);
    k::TraceBarrier(core, k::Pipe::COUNT, api);
    core.crossCore->InterBlockFlag(core, set, flag, ub, call);
    // Counters: the successful poll only (the number of polls before it depends on host timing).
    core.stats->gmReadBytes += 32;
    core.stats->gmWriteBytes += 32;
    core.stats->scalarAccesses += 2;
    ++core.stats->interBlockFlagCalls;
}

namespace {

const char *PipeTName(int pipe) {
    switch (pipe) {
        case PIPE_S: return "PIPE_S";
        case PIPE_V: return "PIPE_V";
        case PIPE_M: return "PIPE_M";
        case PIPE_MTE1: return "PIPE_MTE1";
        case PIPE_MTE2: return "PIPE_MTE2";
        case PIPE_MTE3: return "PIPE_MTE3";
        case PIPE_ALL: return "PIPE_ALL";
        case PIPE_FIX: return "PIPE_FIX";
        default: return "an unknown pipe";
    }
}

// The trace's pipe of a set (the AIC's sets on PIPE_MTE3 order nothing it issued: it has no
// MTE3 transfers to wait for); false for PIPE_S, PIPE_ALL and the pipes the model lacks.
bool SetPipe(int pipe, acl_fa_sim::kernel::Pipe *out) {
    using acl_fa_sim::kernel::Pipe;
    switch (pipe) {
        case PIPE_V: *out = Pipe::V; return true;
        case PIPE_M: *out = Pipe::M; return true;
        case PIPE_MTE1: *out = Pipe::MTE1; return true;
        case PIPE_MTE2: *out = Pipe::MTE2; return true;
        case PIPE_MTE3: *out = Pipe::MTE3; return true;
        case PIPE_FIX: *out = Pipe::FIX; return true;
        default: return false;
    }
}

// Trace key of the counter of `flagId` on core `target` as raised by core `source`: each
// (target, flagId, source) is one FIFO of sets in the timing model. Bit 62 keeps the keys apart
// from IBSet's (bit 63, a GM address).
uint64_t CoreFlagKey(uint32_t target, uint32_t source, int flagId) {
    return (uint64_t{1} << 62) | (uint64_t{target} << 24) | (uint64_t{source} << 5) | static_cast<uint64_t>(flagId);
}

}  // namespace

void CrossCoreFlagImpl(bool set, int modeId, int pipe, uint16_t flagId) {
    namespace k = acl_fa_sim::kernel;
    const char *api = set ? "CrossCoreSetFlag" : "CrossCoreWaitFlag";
    auto &core = k::Enter(api);
    const std::string call = std::string(api) + "<" + std::to_string(modeId) + ", " + PipeTName(pipe) + ">(" +
                             std::to_string(flagId) + ")";
    // (CrossCoreSetFlag / CrossCoreWaitFlag ask ascendc_sim/arch_surface.h first: none on coupled cores.)
    if (flagId > 10) {
        k::Violation(api, api,
                     call + ": flagId must be in [0, 10] (11..14 serve SyncAll and the runtime's cross-core sync)");
    }
    const bool mix = core.kernelType == KERNEL_TYPE_MIX_AIC_1_1 || core.kernelType == KERNEL_TYPE_MIX_AIC_1_2;
    if (set) {
        if (modeId > 2) k::Violation(api, api, call + ": modeId must be 0, 1 or 2 on this chip");
        if (modeId == 1 && core.isAic) {
            k::Violation(api, api, call + ": mode 1 synchronises the AIVs of an AI Core group; an AIC sets mode 0 or 2");
        }
        if (modeId != 0 && !mix) {
            k::Violation(api, api,
                         call + ": modes 1 and 2 synchronise the cores of an AI Core group of a MIX kernel; this "
                         "kernel is not MIX (KERNEL_TYPE_MIX_AIC_1_1 / KERNEL_TYPE_MIX_AIC_1_2)");
        }
    }
    k::Pipe tracePipe = k::Pipe::S;
    if (set && !SetPipe(pipe, &tracePipe)) {
        k::Violation(api, api,
                     call + ": the set's pipe must be PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3 or PIPE_FIX "
                     "(not PIPE_S or PIPE_ALL on this chip)");
    }
    if (set) {
        // One cross-core set per counter it may raise: the model pairs a wait with the sets
        // the functional run says made its 1.
        for (uint32_t t : core.crossCore->CoreFlagTargets(core.launchIndex, modeId)) {
            k::TraceCrossFlag(core, true, tracePipe, CoreFlagKey(t, core.launchIndex, flagId), api, true);
        }
        core.crossCore->CoreFlagSet(core, modeId, flagId, call);
    } else {
        // wait_flag_dev holds every later instruction of the core: the scalar unit waits.
        for (uint32_t source : core.crossCore->CoreFlagWait(core, flagId, call)) {
            k::TraceCrossFlag(core, false, k::Pipe::S, CoreFlagKey(core.launchIndex, source, flagId), api, true);
        }
    }
}

}  // namespace sim
}  // namespace AscendC
