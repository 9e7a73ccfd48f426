// launch.cpp -- LaunchKernel: runs a kernel's simulated cores on host threads, gives each
// its identity and arenas, collects the first rule violation and the counters.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "acl_fa_sim.h"
#include "ascendc_sim/kernel_macros.h"
#include "ascendc_sim/sync.h"
#include "cross_core_internal.h"
#include "engine_internal.h"
#include "timing.h"
#include "worker_pool.h"

namespace acl_fa_sim {
namespace kernel {

__thread CoreContext *tlsCurrentCore = nullptr;  // core.h

namespace {

thread_local uint64_t tlsNextTilingKey = 0;
thread_local std::vector<uint64_t> tlsNextWorkItems;  // per AIC, for the next launch
thread_local uint8_t *tlsNextHcclContext[2] = {nullptr, nullptr};  // GetHcclContext<0/1> of the next launch

std::mutex gStatsMutex;
aclfaSimLaunchStats gLastStats;
bool gHaveStats = false;

// UB bytes are filled with this at the start of each core (0xFF.. is a NaN in fp16 and
// fp32): a kernel that reads UB it never wrote sees NaNs, as it would see garbage on chip.
constexpr uint8_t kUbPoison = 0xFF;

// Upper bound of ACL_FA_SIM_THREADS (each worker holds one UB and one L1 arena).
constexpr size_t kMaxWorkerThreads = 1024;

// One invocation of the kernel body.
struct Invocation {
    bool isAic;
    uint32_t blockIdx;
};

// Which cores a kernel type launches; fills ratio (AIVs per AIC) and returns the list.
bool PlanCores(uint32_t kernelType, uint32_t blockDim, const aclfaSimChip &chip, uint32_t *ratio,
               std::vector<Invocation> *out, std::string *error) {
    uint32_t aic = 0, aivPerBlock = 0;
    switch (kernelType) {
        case KERNEL_TYPE_AIV_ONLY: case KERNEL_TYPE_MIX_AIV_1_0: aivPerBlock = 1; break;
        case KERNEL_TYPE_AIC_ONLY: case KERNEL_TYPE_MIX_AIC_1_0: aic = 1; break;
        case KERNEL_TYPE_MIX_AIC_1_1: aic = 1; aivPerBlock = 1; break;
        case KERNEL_TYPE_MIX_AIC_1_2: aic = 1; aivPerBlock = 2; break;
        case KERNEL_TYPE_AICORE: aic = 1; break;
        case KERNEL_TYPE_VECTORCORE: aivPerBlock = 1; break;
        default:
            *error = "unsupported kernel type " + std::to_string(kernelType);
            return false;
    }
    const bool mix = kernelType == KERNEL_TYPE_MIX_AIC_1_1 || kernelType == KERNEL_TYPE_MIX_AIC_1_2 ||
                     kernelType == KERNEL_TYPE_MIX_AIV_1_0 || kernelType == KERNEL_TYPE_MIX_AIC_1_0 ||
                     kernelType == KERNEL_TYPE_AIV_ONLY || kernelType == KERNEL_TYPE_AIC_ONLY;
    if (kernelType == KERNEL_TYPE_AICORE && !chip.coupled) {
        *error = std::string("kernel type KERNEL_TYPE_AICORE (") + std::to_string(kernelType) +
                 ") is for coupled AI Cores (Atlas inference / training series); the simulated chip " + chip.name +
                 " has separate cube and vector cores";
        return false;
    }
    if (mix && chip.coupled) {
        *error = std::string("kernel type ") + std::to_string(kernelType) +
                 " needs separate cube and vector cores (Ascend910B / Ascend910_93); the simulated chip " + chip.name +
                 " has coupled AI Cores";
        return false;
    }
    *ratio = std::max<uint32_t>(aivPerBlock, 1);
    for (uint32_t b = 0; b < blockDim && aic; ++b) out->push_back({true, b});
    for (uint32_t b = 0; b < blockDim * aivPerBlock; ++b) out->push_back({false, b});
    return true;
}

// Host worker threads that run the simulated cores: ACL_FA_SIM_THREADS (a positive integer)
// when set, else std::thread::hardware_concurrency(). Results do not depend on it: every core
// writes only its own outputs and counters, so any count gives bit-identical outputs.
bool WorkerThreads(size_t *threads, std::string *error) {
    const char *text = std::getenv("ACL_FA_SIM_THREADS");
    if (text == nullptr || *text == '\0') {
        // Asked once: glibc reads /sys/devices/system/cpu/online for it, about 10 us per launch.
        static const size_t hostThreads = std::max<size_t>(1, std::thread::hardware_concurrency());
        *threads = hostThreads;
        return true;
    }
    char *end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0' || text[0] == '-' || value == 0 || value > kMaxWorkerThreads) {
        *error = std::string("ACL_FA_SIM_THREADS=\"") + text + "\" must be an integer from 1 to " +
                 std::to_string(kMaxWorkerThreads);
        return false;
    }
    *threads = static_cast<size_t>(value);
    return true;
}

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
// a generator of one 64-bit word of state, for std::shuffle.
struct SplitMix64 {
    using result_type = uint64_t;
    uint64_t state;
    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return ~result_type{0}; }
    result_type operator()() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

// A start order of the cores: a permutation of [0, n) that changes from launch to launch, as the
// chip promises no order either (results that depend on it, such as GM atomic adds, differ
// between runs, as on the chip). The entropy device is read once per process (reading it per
// launch cost more than a small kernel's work); each launch then draws from its own generator,
// seeded by one more step of a process-wide SplitMix64 counter: no lock (that a fork could leave
// held in the child) and no large thread_local (the library's static TLS is small).
void ShuffledOrder(size_t n, std::vector<size_t> *order) {
    static std::atomic<uint64_t> launches{[] {
        std::random_device device;
        return (uint64_t{device()} << 32) ^ device();
    }()};
    SplitMix64 seeder{launches.fetch_add(1, std::memory_order_relaxed)};
    SplitMix64 generator{seeder()};
    order->resize(n);
    std::iota(order->begin(), order->end(), size_t{0});
    std::shuffle(order->begin(), order->end(), generator);
}

void MaxInto(uint64_t &dst, uint64_t v) { dst = std::max(dst, v); }

void SumInto(aclfaSimCoreStats &t, const aclfaSimCoreStats &c) {
    t.gmReadBytes += c.gmReadBytes;
    t.gmWriteBytes += c.gmWriteBytes;
    t.cubeMacs += c.cubeMacs;
    t.vectorElems += c.vectorElems;
    t.scalarAccesses += c.scalarAccesses;
    MaxInto(t.ubHighWater, c.ubHighWater);
    MaxInto(t.l1HighWater, c.l1HighWater);
    t.workItems += c.workItems;
    t.atomicAddBytes += c.atomicAddBytes;
    t.syncAllCalls += c.syncAllCalls;
    t.interBlockFlagCalls += c.interBlockFlagCalls;
}

// Arenas of one worker thread, reused by the cores it runs.
//
// The UB is poisoned at each core's start, but only as far as the cores before could have
// written it: every UB byte a kernel can write lies in a buffer TPipe::InitBuffer carved from
// [0, ub.used) (checks.cpp InitQueue, the only place that hands out arena bytes), and every API
// that writes through a LocalTensor checks its span against the tensor (CheckLocalT,
// VecOperands, the index checks of LocalTensor). So a core leaves [ub.highWater, capacity) as
// it found it -- poisoned -- and ubDirty, the largest highWater since the last poisoning, bounds
// what the next core must refill (a small kernel uses a few KiB of the 192 KiB).
struct WorkerMemory {
    std::vector<uint8_t> ub, l1;
    size_t ubDirty = 0;  // bytes of ub from the start that may differ from kUbPoison

    // Sizes the arenas for the chip (it may have changed since the last launch).
    void Fit(const aclfaSimChip &chip) {
        if (ub.size() != chip.ubBytes) {
            ub.resize(chip.ubBytes);
            ubDirty = ub.size();  // new bytes are zeros, not poison
        }
        l1.resize(chip.l1Bytes);
    }
    // UB as a core must find it: every byte kUbPoison.
    void PoisonUb() {
        std::memset(ub.data(), kUbPoison, std::min(ubDirty, ub.size()));
        ubDirty = 0;
    }
};

}  // namespace

std::mutex &StatsMutex() { return gStatsMutex; }

std::string DescribeCore(const CoreContext &core) {
    std::string s = std::string(core.isAic ? "AIC " : "AIV ") + std::to_string(core.blockIdx);
    if (!core.isAic && core.taskRatio > 1) {
        s += " (block " + std::to_string(core.blockIdx / core.taskRatio) + ", sub-block " +
             std::to_string(core.subBlockIdx) + ")";
    }
    return s;
}

void Violation(const char *rule, const char *api, const std::string &detail) {
    CoreContext *core = tlsCurrentCore;
    std::string where = core ? DescribeCore(*core) : std::string("no core");
    throw RuleViolation(std::string("rule '") + rule + "' violated on " + where + " in " + api + ": " + detail);
}

void MissingOnArch(const CoreContext &core, const char *rule, const char *api, const std::string &what,
                   const std::string &why) {
    Violation(rule, api, what + " does not exist on " + core.socName + " (arch " + std::to_string(core.npuArch) + ")" +
                             why);
}

void NoCore(const char *api) {
    throw RuleViolation(std::string(api) + " called outside a kernel launch (no simulated core on this thread)");
}

}  // namespace kernel

void SetLaunchTilingKey(uint64_t key) { kernel::tlsNextTilingKey = key; }

void SetLaunchWorkItems(std::vector<uint64_t> perAic) { kernel::tlsNextWorkItems = std::move(perAic); }

void SetLaunchHcclContext(uint32_t index, void *context) {
    if (index < 2) kernel::tlsNextHcclContext[index] = static_cast<uint8_t *>(context);
}

aclError LaunchKernel(const char *kernelName, uint32_t blockDim, uint32_t kernelType,
                      const std::function<void()> &body, std::string *error) {
    using namespace kernel;
    const aclfaSimChip *chip = aclfaSimGetChip();
    const uint64_t tilingKey = tlsNextTilingKey;
    tlsNextTilingKey = 0;
    const std::vector<uint64_t> workItems = std::move(tlsNextWorkItems);
    tlsNextWorkItems.clear();
    uint8_t *const hcclContext[2] = {tlsNextHcclContext[0], tlsNextHcclContext[1]};
    tlsNextHcclContext[0] = tlsNextHcclContext[1] = nullptr;
    std::string err;
    uint32_t ratio = 1;
    std::vector<Invocation> inv;
    if (blockDim == 0) err = "blockDim is 0";
    else if (blockDim > 65535) err = "blockDim " + std::to_string(blockDim) + " exceeds 65535";
    if (err.empty()) PlanCores(kernelType, blockDim, *chip, &ratio, &inv, &err);
    size_t threads = 1;
    if (err.empty()) WorkerThreads(&threads, &err);
    if (!err.empty()) {
        if (error) *error = std::string("launch of ") + kernelName + " failed: " + err;
        return ACL_ERROR_INVALID_PARAM;
    }

    // Counters: block b of a type lands in slot b % capacity (more blocks than slots fold).
    auto stats = std::make_unique<aclfaSimLaunchStats>();
    std::memset(stats.get(), 0, sizeof(*stats));
    std::snprintf(stats->kernelName, sizeof stats->kernelName, "%s", kernelName);
    stats->blockDim = blockDim;
    stats->kernelType = kernelType;
    uint32_t aicCount = 0, aivCount = 0;
    for (const auto &i : inv) (i.isAic ? aicCount : aivCount)++;
    stats->aicUsed = std::min<uint32_t>(aicCount, ACLFA_SIM_MAX_AIC);
    stats->aivUsed = std::min<uint32_t>(aivCount, ACLFA_SIM_MAX_AIV);
    // per-core scratch counters (the AIC slots receive atomic adds from their AIVs' Matmul calls)
    std::vector<aclfaSimCoreStats> aicStats(std::max<uint32_t>(stats->aicUsed, 1)), aivStats(inv.size());
    // (AIV-only launches keep one unused AIC slot so that cubeStats is never null)

    // Instruction trace (when on): one per invocation; Matmul jobs of a MIX AIV run on its
    // group's AIC (invocations list the AICs first), everything else on the core itself.
    const bool tracing = OpTraceMode() != 0;
    LaunchTrace launchTrace;
    if (tracing) {
        launchTrace.traces.resize(inv.size());
        launchTrace.cores.resize(inv.size());
        const bool groups = aicCount > 0 && aivCount > 0 && !chip->coupled;
        for (size_t k = 0; k < inv.size(); ++k) {
            TracedCore &tc = launchTrace.cores[k];
            tc.isAic = inv[k].isAic;
            tc.blockIdx = inv[k].blockIdx;
            tc.traceCore = static_cast<uint16_t>(inv[k].isAic ? 1000 + inv[k].blockIdx : inv[k].blockIdx);
            tc.server = static_cast<uint32_t>(groups && !inv[k].isAic ? inv[k].blockIdx / ratio : k);
            launchTrace.traces[k].keepRanges = (OpTraceMode() & ACLFA_SIM_TRACE_RACES) != 0;
        }
    }

    volatile bool abortFlag = false;
    std::mutex errMutex;
    std::string firstError;
    std::atomic<size_t> next{0};
    const size_t workers = std::min(threads, inv.size());
    const auto t0 = std::chrono::steady_clock::now();

    std::vector<size_t> order;
    ShuffledOrder(inv.size(), &order);

    // SyncAll and the flags: a core waiting lends its place to a spare host thread, so the
    // cores it waits for run even with ACL_FA_SIM_THREADS=1.
    SpareThreads::Group spares;
    std::function<void()> work;
    std::vector<bool> coreIsAic(inv.size());
    std::vector<uint32_t> coreBlock(inv.size()), coreGroup(inv.size());
    const bool mixGroups = aicCount > 0 && aivCount > 0 && !chip->coupled;
    for (size_t k = 0; k < inv.size(); ++k) {
        coreIsAic[k] = inv[k].isAic;
        coreBlock[k] = inv[k].blockIdx;
        coreGroup[k] = !mixGroups ? static_cast<uint32_t>(k) : inv[k].isAic ? inv[k].blockIdx : inv[k].blockIdx / ratio;
    }
    CrossCore crossCore(std::move(coreIsAic), std::move(coreBlock), ratio, std::move(coreGroup), &abortFlag, [&] {
        if (next.load() < inv.size()) SpareThreads::Instance().Start(work, spares);
    });

    work = [&]() {
        // Arenas of this host thread, kept across launches (sized anew if the chip changed).
        // (On the heap: the thread_local is one pointer in the library's static TLS block, which
        // glibc keeps small for libraries loaded by dlopen.)
        thread_local std::unique_ptr<WorkerMemory> memory;
        if (!memory) memory = std::make_unique<WorkerMemory>();
        WorkerMemory &mem = *memory;
        mem.Fit(*chip);
        for (size_t n = next.fetch_add(1); n < inv.size(); n = next.fetch_add(1)) {
            const size_t k = order[n];
            const Invocation &me = inv[k];
            CoreContext core;
            core.isAic = me.isAic;
            core.coupled = chip->coupled != 0;
            core.npuArch = chip->npuArch;
            core.socName = chip->name;
            core.blockIdx = me.blockIdx;
            core.blockNum = blockDim;
            core.taskRatio = ratio;
            core.subBlockIdx = me.isAic ? 0 : me.blockIdx % ratio;
            core.kernelType = kernelType;
            core.tilingKey = tilingKey;
            core.hcclContext[0] = hcclContext[0];
            core.hcclContext[1] = hcclContext[1];
            core.sysWorkspaceBytes = LibApiWorkspaceBytes(*chip);
            core.ub = Arena{mem.ub.data(), chip->ubBytes, 0, 0};
            core.l1 = Arena{mem.l1.data(), chip->l1Bytes, 0, 0};
            core.l0aBytes = chip->l0aBytes;
            core.l0bBytes = chip->l0bBytes;
            core.l0cBytes = chip->l0cBytes;
            const uint32_t aicSlot = (me.isAic ? me.blockIdx : me.blockIdx / ratio) % aicStats.size();
            core.stats = me.isAic ? &aicStats[aicSlot] : &aivStats[k];
            core.cubeStats = &aicStats[aicSlot];
            core.traceCore = static_cast<uint16_t>(me.isAic ? 1000 + me.blockIdx : me.blockIdx);
            core.abortFlag = &abortFlag;
            core.crossCore = &crossCore;
            core.launchIndex = static_cast<uint32_t>(k);
            core.opTrace = tracing ? &launchTrace.traces[k] : nullptr;
            mem.PoisonUb();
            tlsCurrentCore = &core;
            try {
                body();
                CheckEventsDrained(core);
            } catch (const RuleViolation &v) {
                std::lock_guard<std::mutex> lock(errMutex);
                if (firstError.empty()) firstError = v.what();
                abortFlag = true;
            } catch (const CoreStopped &) {
            } catch (const std::exception &e) {
                std::lock_guard<std::mutex> lock(errMutex);
                if (firstError.empty()) firstError = std::string("kernel raised: ") + e.what();
                abortFlag = true;
            }
            tlsCurrentCore = nullptr;
            mem.ubDirty = core.ub.highWater;  // PoisonUb() left 0
            if (abortFlag) crossCore.Abort();
            crossCore.Finished(static_cast<uint32_t>(k));
        }
    };
    if (hcclContext[0] == nullptr && hcclContext[1] == nullptr) {
        WorkerPool::Instance().Run(workers, work);
    } else {
        // A kernel that communicates (Hccl client) waits for its peers' kernels, which may be
        // launches of other threads of this process (ranks as threads): they must run at the
        // same time, so it does not queue for the process's pool (one launch at a time) but
        // runs on threads of its own.
        std::vector<std::thread> own;
        for (size_t w = 1; w < workers; ++w) own.emplace_back(work);
        work();
        for (std::thread &t : own) t.join();
    }
    spares.Wait();  // no core is left to start one more: the workers' jobs returned
    stats->wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tracing && firstError.empty()) {
        // The model (and the race rule) run after the cores, on this thread: deterministic.
        const std::string problem = PublishLaunchTrace(std::move(launchTrace));
        if (!problem.empty()) firstError = problem;
    }

    for (size_t k = 0; k < inv.size(); ++k) {
        if (inv[k].isAic) continue;
        SumInto(stats->aiv[inv[k].blockIdx % ACLFA_SIM_MAX_AIV], aivStats[k]);
    }
    for (size_t a = 0; a < aicStats.size() && a < ACLFA_SIM_MAX_AIC; ++a) {
        if (stats->aicUsed) SumInto(stats->aic[a], aicStats[a]);
    }
    for (uint32_t a = 0; a < stats->aicUsed && a < workItems.size(); ++a) stats->aic[a].workItems = workItems[a];
    for (uint32_t a = 0; a < stats->aicUsed; ++a) SumInto(stats->total, stats->aic[a]);
    for (uint32_t v = 0; v < stats->aivUsed; ++v) SumInto(stats->total, stats->aiv[v]);
    {
        std::lock_guard<std::mutex> lock(gStatsMutex);
        gLastStats = *stats;
        gHaveStats = true;
    }
    if (!firstError.empty()) {
        if (error) *error = std::string("kernel ") + kernelName + ": " + firstError;
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    return ACL_SUCCESS;
}

}  // namespace acl_fa_sim

extern "C" aclError aclfaSimGetLastLaunchStats(aclfaSimLaunchStats *stats) {
    if (stats == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(acl_fa_sim::kernel::gStatsMutex);
    if (!acl_fa_sim::kernel::gHaveStats) return ACL_ERROR_FAILURE;
    *stats = acl_fa_sim::kernel::gLastStats;
    return ACL_SUCCESS;
}
