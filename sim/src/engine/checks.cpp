// checks.cpp -- the O(1) rule checks behind the Ascend C API calls: GM ranges and
// allocations, local operands, TPipe/TQue buffers, event flags; plus the GM trace.
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ascendc_sim/data_copy.h"
#include "ascendc_sim/sync.h"
#include "ascendc_sim/tpipe.h"
#include "engine_internal.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

std::mutex gTraceMutex;
std::vector<aclfaSimGmAccess> gTrace;
volatile bool gTraceOn = false;

std::string Hex(const void *p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

void Trace(uint16_t coreId, const void *addr, uint64_t bytes, bool isWrite) {
    std::lock_guard<std::mutex> lock(gTraceMutex);
    gTrace.push_back({reinterpret_cast<uint64_t>(addr), static_cast<uint32_t>(bytes), coreId,
                      static_cast<uint16_t>(isWrite)});
}

}  // namespace

std::mutex &TraceMutex() { return gTraceMutex; }

uint64_t LibApiWorkspaceBytes(const aclfaSimChip &chip) {
    return chip.npuArch == 2201 ? 16ull << 20 : 2ull << 20;
}

void GmCheck(CoreContext &core, const char *api, const void *addr, uint64_t bytes, const void *lo, const void *hi) {
    (void)core;
    if (bytes == 0) return;
    if (lo == nullptr) {
        Violation("GM bounds", api, "the GlobalTensor has no buffer (SetGlobalBuffer was not called)");
    }
    const uint8_t *a = static_cast<const uint8_t *>(addr);
    if (a < lo || a + bytes > hi) {
        Violation("GM bounds", api,
                  "access [" + Hex(a) + ", +" + std::to_string(bytes) + " B) leaves the GlobalTensor's buffer [" +
                      Hex(lo) + ", +" +
                      std::to_string(static_cast<const uint8_t *>(hi) - static_cast<const uint8_t *>(lo)) + " B)");
    }
}

void GmAccess(CoreContext &core, const char *api, const void *addr, uint64_t bytes, const void *lo, const void *hi,
              bool isWrite) {
    GmCheck(core, api, addr, bytes, lo, hi);
    (isWrite ? core.stats->gmWriteBytes : core.stats->gmReadBytes) += bytes;
    if (gTraceOn && bytes) Trace(core.traceCore, addr, bytes, isWrite);
}

void TraceCube(CoreContext &core, const void *addr, uint64_t rows, uint64_t rowBytes, uint64_t strideBytes,
               bool isWrite) {
    if (!gTraceOn || addr == nullptr || rows == 0 || rowBytes == 0) return;
    const uint16_t aic = static_cast<uint16_t>(1000 + (core.isAic ? core.blockIdx : core.blockIdx / core.taskRatio));
    const uint8_t *p = static_cast<const uint8_t *>(addr);
    if (rows == 1 || strideBytes == rowBytes) {
        Trace(aic, p, rows * rowBytes, isWrite);
        return;
    }
    for (uint64_t r = 0; r < rows; ++r) Trace(aic, p + r * strideBytes, rowBytes, isWrite);
}

const uint8_t *CheckGlobalBuffer(CoreContext &core, const void *ptr, uint64_t bytes) {
    (void)core;
    void *base = nullptr;
    size_t size = 0;
    if (ptr == nullptr) Violation("GM allocation", "GlobalTensor::SetGlobalBuffer", "buffer is NULL");
    if (!aclfaSimFindDeviceAllocation(ptr, &base, &size)) {
        Violation("GM allocation", "GlobalTensor::SetGlobalBuffer",
                  "address " + Hex(ptr) + " is not inside any live device allocation (aclrtMalloc)");
    }
    const uint8_t *b = static_cast<const uint8_t *>(base), *p = static_cast<const uint8_t *>(ptr);
    if (p + bytes > b + size) {
        Violation("GM allocation", "GlobalTensor::SetGlobalBuffer",
                  "buffer of " + std::to_string(bytes) + " B at offset " + std::to_string(p - b) +
                      " runs past the end of its " + std::to_string(size) + "-byte allocation");
    }
    return bytes ? p + bytes : b + size;
}

void CountCube(CoreContext &core, uint64_t macs, uint64_t rd, uint64_t wr, uint64_t l1Bytes) {
    aclfaSimCoreStats *s = core.cubeStats;
    __atomic_fetch_add(&s->cubeMacs, macs, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->gmReadBytes, rd, __ATOMIC_RELAXED);
    __atomic_fetch_add(&s->gmWriteBytes, wr, __ATOMIC_RELAXED);
    uint64_t cur = __atomic_load_n(&s->l1HighWater, __ATOMIC_RELAXED);
    while (l1Bytes > cur &&
           !__atomic_compare_exchange_n(&s->l1HighWater, &cur, l1Bytes, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void CheckEventsDrained(const CoreContext &core) {
    for (int e = 0; e < AscendC::kHardEventCount; ++e) {
        for (int id = 0; id < kEventIdsPerEvent; ++id) {
            if (core.eventPending[e][id]) {
                Violation("event pairing", "kernel end",
                          std::string("SetFlag<HardEvent::") + AscendC::sim::HardEventName(e) + ">(" +
                              std::to_string(id) + ") was never waited for");
            }
        }
    }
}

}  // namespace kernel
}  // namespace acl_fa_sim

extern "C" aclError aclfaSimSetGmTrace(int enable) {
    std::lock_guard<std::mutex> lock(acl_fa_sim::kernel::gTraceMutex);
    acl_fa_sim::kernel::gTrace.clear();
    acl_fa_sim::kernel::gTraceOn = enable != 0;
    return ACL_SUCCESS;
}

extern "C" aclError aclfaSimGetGmTrace(const aclfaSimGmAccess **records, uint64_t *count) {
    if (records == nullptr || count == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(acl_fa_sim::kernel::gTraceMutex);
    *records = acl_fa_sim::kernel::gTrace.data();
    *count = acl_fa_sim::kernel::gTrace.size();
    return ACL_SUCCESS;
}

namespace AscendC {
namespace sim {

using acl_fa_sim::kernel::Enter;
using acl_fa_sim::kernel::Violation;

const char *PositionName(TPosition p) {
    static const char *names[] = {"GM",  "A1",     "A2",     "B1",      "B2",  "C1",  "C2",
                                  "CO1", "CO2",    "VECIN",  "VECOUT",  "VECCALC", "SPM", "TSCM",
                                  "C2PIPE2GM", "C2PIPE2LOCAL"};
    const unsigned i = static_cast<unsigned>(p);
    return i < sizeof(names) / sizeof(names[0]) ? names[i] : "?";
}

const char *HardEventName(int evt) {
    static const char *names[] = {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M",   "M_MTE1",   "MTE2_V",   "V_MTE2",
                                  "MTE3_V",    "V_MTE3",    "M_V",      "V_M",      "V_V",      "MTE3_MTE1",
                                  "MTE1_MTE3", "MTE1_V",    "MTE2_M",   "M_MTE2",   "V_MTE1",   "M_FIX",
                                  "FIX_M",     "MTE3_MTE2", "MTE2_MTE3", "S_V",     "V_S",      "S_MTE2",
                                  "MTE2_S",    "S_MTE3",    "MTE3_S",   "MTE2_FIX", "FIX_MTE2", "FIX_S",
                                  "M_S",       "FIX_MTE3",  "MTE1_FIX", "FIX_MTE1", "FIX_FIX"};
    return evt >= 0 && evt < kHardEventCount ? names[evt] : "?";
}

void CheckLocal(const char *api, const char *operand, TPosition pos, uint64_t addr, uint64_t bytes,
                uint64_t viewBytes, bool ubOnly) {
    if (ubOnly && !IsUbPosition(pos)) {
        Violation("operand position", api,
                  std::string(operand) + " is a " + PositionName(pos) + " tensor; this API works on UB (VECIN/VECOUT/VECCALC)");
    }
    if (addr % 32 != 0) {
        Violation("32-byte UB alignment", api,
                  std::string(operand) + " starts at UB address " + std::to_string(addr) + ", not 32-byte aligned");
    }
    if (bytes > viewBytes) {
        Violation("LocalTensor bounds", api,
                  std::string(operand) + " needs " + std::to_string(bytes) + " B but the tensor holds " +
                      std::to_string(viewBytes) + " B");
    }
}

void CheckCopyLength(const char *api, uint64_t bytes) {
    if (bytes % 32 != 0) {
        Violation("DataCopy length alignment", api,
                  std::to_string(bytes) + " B is not a multiple of 32 B; the chip would copy only " +
                      std::to_string(bytes / 32 * 32) + " B (use DataCopyPad for unaligned lengths)");
    }
}

void CountVector(uint64_t elems) { acl_fa_sim::kernel::CurrentCore()->stats->vectorElems += elems; }

// ---- queues ----
void QueueViolation(const QueueCore &q, const char *api, const std::string &detail) {
    Violation("queue state", api, std::string(q.kind) + " at " + PositionName(q.pos) + ": " + detail);
}

void CheckQueueLive(const QueueCore &q, const char *api) {
    if (q.liveEpoch == nullptr) QueueViolation(q, api, "not initialised (TPipe::InitBuffer)");
    if (*q.liveEpoch != q.pipeEpoch) QueueViolation(q, api, "its TPipe was reset; InitBuffer it again");
}

void InitQueue(QueueCore &q, PipeState &pipe, uint32_t num, uint32_t len, const char *api) {
    auto &core = Enter(api);
    if (q.liveEpoch != nullptr && *q.liveEpoch == q.pipeEpoch) QueueViolation(q, api, "initialised twice");
    if (num == 0 || num > kMaxQueueBuffers) {
        QueueViolation(q, api, "num " + std::to_string(num) + " must be in [1, " + std::to_string(kMaxQueueBuffers) + "]");
    }
    const bool ub = IsUbPosition(q.pos);
    const bool l1 = q.pos == TPosition::A1 || q.pos == TPosition::B1 || q.pos == TPosition::C1;
    if (!ub && !l1) {
        QueueViolation(q, api, "the simulator places queues in UB (VECIN/VECOUT/VECCALC) or L1 (A1/B1/C1) only");
    }
    if (!core.coupled && ub && core.isAic) QueueViolation(q, api, "an AIC has no Unified Buffer");
    if (!core.coupled && l1 && !core.isAic) QueueViolation(q, api, "an AIV has no L1 buffer");
    acl_fa_sim::kernel::Arena &arena = ub ? core.ub : core.l1;
    const uint64_t bytes = uint64_t(num) * Align32(len);
    if (arena.used + bytes > arena.capacity) {
        Violation(ub ? "UB capacity" : "L1 capacity", api,
                  std::to_string(num) + " x " + std::to_string(Align32(len)) + " B at " + PositionName(q.pos) +
                      " needs " + std::to_string(bytes) + " B but only " +
                      std::to_string(arena.capacity - arena.used) + " of " + std::to_string(arena.capacity) +
                      " B are free");
    }
    q.num = static_cast<uint8_t>(num);
    q.len = static_cast<uint32_t>(Align32(len));
    q.addr = static_cast<uint32_t>(arena.used);
    q.data = arena.base + arena.used;
    q.pipeEpoch = pipe.epoch;
    q.liveEpoch = &pipe.epoch;
    q.head = q.count = 0;
    for (auto &s : q.state) s = TBufState::FREE;
    arena.used += bytes;
    if (arena.used > arena.highWater) arena.highWater = arena.used;
    uint64_t &hw = ub ? core.stats->ubHighWater : core.stats->l1HighWater;
    if (arena.highWater > hw) hw = arena.highWater;
}

// ---- events ----
static void CheckEventArgs(int evt, int32_t id, const char *api) {
    if (evt < 0 || evt >= kHardEventCount) Violation("event pairing", api, "unknown HardEvent " + std::to_string(evt));
    if (id < 0 || id >= acl_fa_sim::kernel::kEventIdsPerEvent) {
        Violation("event pairing", api, "event id " + std::to_string(id) + " outside [0, 8)");
    }
}

// The source and destination pipes of a HardEvent, from its name "SRC_DST".
static void EventPipes(int evt, acl_fa_sim::kernel::Pipe *src, acl_fa_sim::kernel::Pipe *dst) {
    using acl_fa_sim::kernel::Pipe;
    auto parse = [](const std::string &name) {
        if (name == "S") return Pipe::S;
        if (name == "V") return Pipe::V;
        if (name == "M") return Pipe::M;
        if (name == "MTE1") return Pipe::MTE1;
        if (name == "MTE2") return Pipe::MTE2;
        if (name == "MTE3") return Pipe::MTE3;
        return Pipe::FIX;
    };
    const std::string name = HardEventName(evt);
    const size_t cut = name.find('_');
    *src = parse(name.substr(0, cut));
    *dst = parse(name.substr(cut + 1));
}

// HardEvent flags on the trace: key evt * 8 + id.
static void TraceEvent(acl_fa_sim::kernel::CoreContext &core, bool set, int evt, int32_t id, const char *api) {
    if (!acl_fa_sim::kernel::Tracing(core)) return;
    acl_fa_sim::kernel::Pipe src, dst;
    EventPipes(evt, &src, &dst);
    acl_fa_sim::kernel::TraceFlag(core, set, src, dst, uint64_t(evt) * acl_fa_sim::kernel::kEventIdsPerEvent + id, api);
}

void PipeBarrierImpl(int pipe) {
    using acl_fa_sim::kernel::Pipe;
    auto &core = Enter("PipeBarrier");
    if (!acl_fa_sim::kernel::Tracing(core)) return;
    Pipe p;
    switch (pipe) {
        case PIPE_S: p = Pipe::S; break;
        case PIPE_V: p = Pipe::V; break;
        case PIPE_M: p = Pipe::M; break;
        case PIPE_MTE1: p = Pipe::MTE1; break;
        case PIPE_MTE2: p = Pipe::MTE2; break;
        case PIPE_MTE3: p = Pipe::MTE3; break;
        case PIPE_FIX: p = Pipe::FIX; break;
        case PIPE_ALL: p = Pipe::COUNT; break;
        default: return;  // pipes the timing model does not have
    }
    acl_fa_sim::kernel::TraceBarrier(core, p, "PipeBarrier");
}

void SetFlagImpl(int evt, int32_t id) {
    auto &core = Enter("SetFlag");
    CheckEventArgs(evt, id, "SetFlag");
    if (core.eventPending[evt][id]) {
        Violation("event pairing", "SetFlag",
                  std::string("HardEvent::") + HardEventName(evt) + " id " + std::to_string(id) +
                      " set twice without a WaitFlag in between");
    }
    core.eventPending[evt][id] = 1;
    TraceEvent(core, true, evt, id, "SetFlag");
}

void WaitFlagImpl(int evt, int32_t id) {
    auto &core = Enter("WaitFlag");
    CheckEventArgs(evt, id, "WaitFlag");
    if (!core.eventPending[evt][id]) {
        Violation("event pairing", "WaitFlag",
                  std::string("HardEvent::") + HardEventName(evt) + " id " + std::to_string(id) +
                      " was not set (the chip would wait forever)");
    }
    core.eventPending[evt][id] = 0;
    TraceEvent(core, false, evt, id, "WaitFlag");
}

TEventID AllocEventId(uint32_t &inUse, const char *api) {
    Enter(api);
    for (int id = 0; id < acl_fa_sim::kernel::kEventIdsPerEvent; ++id) {
        if (!(inUse & (1u << id))) {
            inUse |= 1u << id;
            return static_cast<TEventID>(id);
        }
    }
    Violation("event ids", api, "all 8 event ids of this HardEvent are allocated");
}

void ReleaseEventId(uint32_t &inUse, int32_t id, const char *api) {
    Enter(api);
    if (id < 0 || id >= acl_fa_sim::kernel::kEventIdsPerEvent || !(inUse & (1u << id))) {
        Violation("event ids", api, "event id " + std::to_string(id) + " is not allocated");
    }
    inUse &= ~(1u << id);
}

// A free id for a one-off SetFlag/WaitFlag pair, without reserving it.
TEventID FetchEventId(uint32_t &inUse, const char *api) {
    Enter(api);
    for (int id = 0; id < acl_fa_sim::kernel::kEventIdsPerEvent; ++id) {
        if (!(inUse & (1u << id))) return static_cast<TEventID>(id);
    }
    Violation("event ids", api, "all 8 event ids of this HardEvent are allocated");
}

}  // namespace sim

TPipe::TPipe() {
    auto &core = acl_fa_sim::kernel::Enter("TPipe::TPipe");
    state_.ubStart = core.ub.used;
    state_.l1Start = core.l1.used;
    core.currentPipe = this;
}

void TPipe::Reset() {
    auto &core = acl_fa_sim::kernel::Enter("TPipe::Reset");
    core.ub.used = state_.ubStart;
    core.l1.used = state_.l1Start;
    ++state_.epoch;
}

}  // namespace AscendC
