// ascendc_sim/optrace.h -- the instruction trace: what each Ascend C API call would issue on
// the chip (pipe, size, memory ranges, ordering edges), recorded per simulated core for the
// pipeline timing model and the pipe-race rule (sim/src/engine/timing.cpp).
//
// Recording is off unless aclfaSimSetOpTrace enabled it; then CoreContext::opTrace is set and
// every API implementation reports through the functions below (one branch on a null pointer
// when off). A new API joins the trace by calling one of them where it does its work:
//   TraceExec      an instruction on one pipe (vector repeats, bytes moved, scalar accesses)
//   TraceFlag      SetFlag / WaitFlag between two pipes of this core (also the implicit flags of
//                  TQue EnQue/DeQue and FreeTensor/AllocTensor)
//   TraceBarrier   PipeBarrier<pipe>
//   TraceMatmul    a Matmul request (runs on the group's AIC, or on this core's cube when
//                  coupled) and, when synchronous, its wait; TraceMatmulWait for WaitIterateAll
//   TraceSyncAll   SyncAll: every participating core waits for all the others
//   TraceCrossFlag a flag shared between cores: IBSet / IBWait (GM), CrossCoreSetFlag /
//                  CrossCoreWaitFlag (the hardware's per-core counters, `coreFlag`)
// Ranges name the memory an instruction reads and writes: GM by host address, UB/L1 by arena
// offset of this core. The trace belongs to the core's own thread: no locking.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "ascendc_sim/core.h"

namespace acl_fa_sim {
namespace kernel {

// The pipes of an AI Core as CANN names them (pipe_t PIPE_S .. PIPE_MTE3, PIPE_FIX).
enum class Pipe : uint8_t { S = 0, V, M, MTE1, MTE2, MTE3, FIX, COUNT };
constexpr int kPipeCount = static_cast<int>(Pipe::COUNT);
const char *PipeName(Pipe p);

enum class OpKind : uint8_t {
    EXEC,        // occupies `pipe` for a cost given by `units` (repeats, bytes, accesses)
    SET_FLAG,    // on `pipe` after its earlier ops: signals `key` towards `pipe2`
    WAIT_FLAG,   // `pipe2` waits for the oldest pending signal of `key`
    BARRIER,     // PipeBarrier<pipe> (Pipe::COUNT for PIPE_ALL)
    MM_ISSUE,    // Matmul request, job `key` of the core's trace
    MM_WAIT,     // the scalar unit waits for job `key`
    SYNC_ALL,    // all-core barrier (`key` names the barrier family)
    CROSS_SET,   // cross-core flag `key` set from `pipe` (IBSet: a flag in GM)
    CROSS_WAIT,  // cross-core flag `key` waited on by `pipe2`
    CORE_FLAG_SET,   // CrossCoreSetFlag: one set of counter `key` (target core, flagId, setter) from `pipe`
    CORE_FLAG_WAIT,  // CrossCoreWaitFlag: `pipe2` waits for the oldest set of counter `key`
    COMM_START,  // Hccl Commit: the communication task `key` starts on the HCCL server and ends
                 // `units` cycles later (its modeled link time; lib/hccl/hccl.h)
    COMM_WAIT,   // Hccl Wait: the scalar unit waits for the end of communication task `key`
};

// What an EXEC op's `units` count, for the cost table.
enum class Unit : uint8_t {
    REPEATS,          // vector repeats of 256 B
    EXP_REPEATS,      // vector repeats of a transcendental (Exp, Ln)
    BYTES,            // bytes moved by an MTE
    SCALAR_ACCESSES,  // scalar-unit loads/stores (GetValue/SetValue)
};

enum class Space : uint8_t { GM = 0, UB, L1 };

// `count` blocks of `bytes`, `stride` bytes apart, from `addr`.
struct MemRange {
    uint64_t addr = 0;
    uint64_t stride = 0;
    uint32_t bytes = 0;
    uint32_t count = 1;
    Space space = Space::GM;
    bool isWrite = false;
};

struct TraceOp {
    const char *api = nullptr;  // the API call, for reports and race messages
    uint64_t key = 0;
    uint64_t units = 0;
    uint32_t rangeBegin = 0;    // ranges[rangeBegin, rangeBegin + rangeCount) of the trace
    uint8_t rangeCount = 0;
    OpKind kind = OpKind::EXEC;
    Pipe pipe = Pipe::S;
    Pipe pipe2 = Pipe::S;
    Unit unit = Unit::REPEATS;
};

// One Matmul request as the cube executes it.
struct MatmulWork {
    uint32_t m = 0, n = 0, k = 0;      // single shape of the request
    uint32_t baseM = 0, baseN = 0, baseK = 0;
    uint32_t aBytes = 0, bBytes = 0;   // element sizes of A and B
    uint64_t gmReadBytes = 0;          // operand loads from GM (the Matmul traffic model)
    uint64_t localReadBytes = 0;       // operand loads from this core's UB (coupled chips' A in VECCALC)
    uint64_t outBytes = 0;             // result bytes leaving L0C (fp32 or C's type)
    bool outToGm = true;               // false: C goes to this core's UB (coupled chips)
};

// Memory: a launch's trace holds every instruction of every core until the next traced launch
// (about 40 B an instruction, tens of millions at S = 32768), so the containers grow in chunks
// (no vector doubling) and UB/L1 ranges, which only the race rule reads, are dropped without it.
struct OpTrace {
    std::deque<TraceOp> ops;
    std::deque<MemRange> ranges;  // GM ranges always (the modeled GM order); UB/L1 ones with keepRanges
    std::vector<MatmulWork> jobs;
    bool keepRanges = false;      // races are checked
};

inline bool Tracing(const CoreContext &core) { return core.opTrace != nullptr; }

// The one recording function; the helpers below fill an op for it.
void RecordOp(CoreContext &core, const TraceOp &op, const MemRange *ranges, int rangeCount);

inline void TraceExec(CoreContext &core, Pipe pipe, Unit unit, uint64_t units, const char *api,
                      const MemRange *ranges = nullptr, int rangeCount = 0) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = OpKind::EXEC;
    op.pipe = pipe;
    op.unit = unit;
    op.units = units;
    RecordOp(core, op, ranges, rangeCount);
}
inline void TraceFlag(CoreContext &core, bool set, Pipe src, Pipe dst, uint64_t key, const char *api) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = set ? OpKind::SET_FLAG : OpKind::WAIT_FLAG;
    op.pipe = src;
    op.pipe2 = dst;
    op.key = key;
    RecordOp(core, op, nullptr, 0);
}
inline void TraceBarrier(CoreContext &core, Pipe pipe, const char *api) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = OpKind::BARRIER;
    op.pipe = pipe;
    RecordOp(core, op, nullptr, 0);
}
// Records the request (and its wait when `sync`); returns the job's key for TraceMatmulWait.
uint64_t TraceMatmul(CoreContext &core, const MatmulWork &work, bool sync, const MemRange *ranges, int rangeCount,
                     const char *api);
void TraceMatmulWait(CoreContext &core, uint64_t job, const char *api);
inline void TraceSyncAll(CoreContext &core, uint64_t family, const char *api) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = OpKind::SYNC_ALL;
    op.key = family;
    RecordOp(core, op, nullptr, 0);
}
inline void TraceCrossFlag(CoreContext &core, bool set, Pipe pipe, uint64_t key, const char *api,
                           bool coreFlag = false) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    if (coreFlag) {
        op.kind = set ? OpKind::CORE_FLAG_SET : OpKind::CORE_FLAG_WAIT;
    } else {
        op.kind = set ? OpKind::CROSS_SET : OpKind::CROSS_WAIT;
    }
    op.pipe = pipe;
    op.pipe2 = pipe;
    op.key = key;
    RecordOp(core, op, nullptr, 0);
}

// Hccl Commit (start) of task `key` lasting `cycles`, and Hccl Wait (the scalar unit waits for
// its end). A task is started once per launch (by the core that sends it) and may be waited
// for by any core.
inline void TraceComm(CoreContext &core, bool start, uint64_t key, uint64_t cycles, const char *api) {
    if (!Tracing(core)) return;
    TraceOp op;
    op.api = api;
    op.kind = start ? OpKind::COMM_START : OpKind::COMM_WAIT;
    op.key = key;
    op.units = cycles;
    RecordOp(core, op, nullptr, 0);
}
// A UB/L1 operand of `bytes` at arena offset `addr` (space from the tensor's position).
inline MemRange LocalRange(bool l1, uint64_t addr, uint64_t bytes, bool isWrite) {
    MemRange r;
    r.addr = addr;
    r.bytes = static_cast<uint32_t>(bytes);
    r.space = l1 ? Space::L1 : Space::UB;
    r.isWrite = isWrite;
    return r;
}
inline MemRange GmRange(const void *addr, uint64_t bytes, bool isWrite, uint32_t count = 1, uint64_t stride = 0) {
    MemRange r;
    r.addr = reinterpret_cast<uint64_t>(addr);
    r.bytes = static_cast<uint32_t>(bytes);
    r.count = count;
    r.stride = stride;
    r.space = Space::GM;
    r.isWrite = isWrite;
    return r;
}

}  // namespace kernel
}  // namespace acl_fa_sim
