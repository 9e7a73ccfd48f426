// timing.cpp -- the discrete-event pipeline model and the pipe-race rule (docs/timing_model.md).
//
// Replay. Every core runs its trace in program order. The scalar unit issues one instruction
// every scalarIssueCycles; an instruction on pipe P starts at max(issue time, P free) and holds
// P for its cost, so each pipe is in order and the pipes overlap. SetFlag<SRC_DST> fires when
// SRC has finished what was issued before it; WaitFlag holds DST (or the scalar unit) until
// then. TQue EnQue/DeQue and FreeTensor/AllocTensor are such flags between the queue's producer
// and consumer pipes. A Matmul request reaches the group's AIC matmulRequestCycles after issue;
// the AIC runs requests one at a time in arrival order as a pipeline of MTE2 -> MTE1 -> cube ->
// FixPipe over the job's base tiles; the requester's scalar unit waits at WaitIterateAll (or at
// a synchronous call). SyncAll releases its cores when the last arrives. Cores are processed in
// global order of their scalar time, so requests reach a shared cube in time order and the
// result depends on nothing but the trace and the costs.
//
// Bandwidth. Every core reads GM at one rate b <= corePortBytesPerCycle and writes it at the
// same fraction b / corePortBytesPerCycle of its write ports (FixPipe corePortWriteBytesPerCycle,
// MTE3 mte3BytesPerCycle). b is the largest rate at which the launch's average GM rate (all GM
// bytes / modeled time) stays within the chip's gmBytesPerCycle, found by bisection between
// gmBytesPerCycle / active cores (always within) and the port limit: cores share the chip's
// bandwidth by their average concurrency (bursts above the average are not modeled).
//
// Races (Rule 3). Each (core, pipe) is a thread with a vector clock; program order on a pipe,
// flags, queue hand-offs, Matmul request -> job -> wait, SyncAll and cross-core flags (IBSet,
// CrossCoreSetFlag) are the edges; an instruction issued after the scalar unit waited for
// something inherits that wait.
// Each memory range remembers its last writer (thread, clock). A read whose last writer is
// another thread not ordered before it is a race on the chip, where the pipes run concurrently.
#include "timing.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include "acl_fa_sim.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

constexpr int kPipes = kPipeCount;
constexpr size_t kMaxRaceThreads = 4096;  // clocks are dense: threads^2 entries
inline int Pi(Pipe p) { return static_cast<int>(p); }

using Clock = std::vector<uint32_t>;

void Join(Clock &a, const Clock &b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i], b[i]);
}

struct Token {
    double time = 0;
    Clock clock;  // empty unless races are checked
};

struct Writer {
    uint64_t hi;
    uint32_t thread;
    uint32_t epoch;
    uint32_t core;  // issuing core of the writing instruction
    uint32_t op;    // its index in that core's trace
};

struct CoreState {
    size_t next = 0;
    double scalar = 0;  // time the scalar unit issues the next instruction
    double pipeFree[kPipes] = {};
    bool issued = false;  // the current instruction's issue cycles are paid (it blocked)
    bool blocked = false;
    uint32_t syncRound = 0;
    std::unordered_map<uint64_t, std::deque<Token>> flags;
    std::vector<double> jobDone;
    std::vector<Clock> jobClock;
    uint64_t scalarVersion = 1;  // bumped when the scalar unit's clock joins a wait
    uint64_t joinedVersion[kPipes] = {};
    bool gmActive = false;
};

struct SyncBarrier {
    uint32_t arrived = 0;
    double latest = 0;
    std::vector<uint32_t> cores;
};

// One GM range of an instruction at its modeled time: `count` accesses of `bytes`, `stride`
// apart (one access when contiguous), expanded into aclfaSimGmAccess records only for the
// result, so the sort moves ranges, not rows.
struct GmEvent {
    double time;
    uint32_t core;  // issuing core index (tie-break)
    uint32_t seq;
    uint32_t sub;   // the range's index in its instruction
    uint16_t coreId;
    bool isWrite;
    uint64_t addr, stride;
    uint32_t bytes, count;
};

class Replay {
public:
    Replay(const LaunchTrace &t, const aclfaSimPipeCosts &c, int keep, bool races, double coreBw, ModelResult *out)
        : trace_(t), c_(c), keepOps_((keep & KEEP_OPS) != 0), keepGm_((keep & KEEP_GM) != 0), out_(out),
          st_(t.cores.size()), coreBw_(coreBw) {
        const size_t threads = t.cores.size() * kPipes;
        races_ = races && threads <= kMaxRaceThreads;
        if (races_) vc_.assign(threads, Clock(threads, 0));
    }

    void Run() {
        Prepare();
        using Entry = std::pair<double, uint32_t>;
        std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
        for (uint32_t i = 0; i < st_.size(); ++i) {
            if (!trace_.traces[i].ops.empty()) heap.push({0.0, i});
        }
        while (!heap.empty() && out_->race.empty()) {
            const uint32_t core = heap.top().second;
            heap.pop();
            std::vector<uint32_t> woken;
            const bool more = Step(core, &woken);
            if (more) heap.push({st_[core].scalar, core});
            for (uint32_t w : woken) heap.push({st_[w].scalar, w});
        }
        if (out_->race.empty()) {
            for (uint32_t i = 0; i < st_.size(); ++i) {
                if (st_[i].next < trace_.traces[i].ops.size()) {
                    out_->error = "the replay stopped at instruction " + std::to_string(st_[i].next) + " (" +
                                  Api(trace_.traces[i].ops[st_[i].next]) + ") of " + Describe(i) +
                                  ": it waits for a SyncAll or cross-core flag no other core provides";
                    break;
                }
            }
        }
        Finish();
    }

private:
    static const char *Api(const TraceOp &op) { return op.api ? op.api : "?"; }

    std::string Describe(uint32_t core) const {
        const TracedCore &tc = trace_.cores[core];
        return std::string(tc.isAic ? "AIC " : "AIV ") + std::to_string(tc.blockIdx);
    }

    // Active cores, SyncAll participants and the per-core bandwidth.
    void Prepare() {
        uint32_t active = 0;
        for (uint32_t i = 0; i < st_.size(); ++i) {
            for (const TraceOp &op : trace_.traces[i].ops) {
                if (op.kind == OpKind::EXEC && (op.pipe == Pipe::MTE2 || op.pipe == Pipe::MTE3)) st_[i].gmActive = true;
                if (op.kind == OpKind::MM_ISSUE) st_[trace_.cores[i].server].gmActive = true;
                if (op.kind == OpKind::SYNC_ALL) {
                    auto &n = syncParticipants_[op.key];
                    if (n.empty() || n.back() != i) n.push_back(i);
                }
            }
            st_[i].jobDone.assign(trace_.traces[i].jobs.size(), 0.0);
            if (races_) st_[i].jobClock.assign(trace_.traces[i].jobs.size(), Clock());
        }
        for (const CoreState &s : st_) active += s.gmActive ? 1 : 0;
        active = std::max<uint32_t>(active, 1);
        if (coreBw_ <= 0) coreBw_ = std::min(c_.corePortBytesPerCycle, c_.gmBytesPerCycle / active);
        out_->stats.activeCores = active;
        out_->stats.coreGmBytesPerCycle = coreBw_;
    }

    // A write port's rate at the launch's share of the chip's bandwidth (bytes per cycle).
    double WriteRate(double port) const { return port * coreBw_ / c_.corePortBytesPerCycle; }
    double FixpipeToGmRate() const {
        return std::min(c_.fixpipeBytesPerCycle, WriteRate(c_.corePortWriteBytesPerCycle));
    }

    double ExecCost(const TraceOp &op) {
        const double u = static_cast<double>(op.units);
        if (op.pipe == Pipe::MTE2 || op.pipe == Pipe::MTE3) gmBytes_ += u;
        switch (op.pipe) {
            case Pipe::V:
                return c_.vectorIssueCycles +
                       u * (op.unit == Unit::EXP_REPEATS ? c_.vectorExpRepeatCycles : c_.vectorRepeatCycles);
            case Pipe::MTE2: return c_.mte2LatencyCycles + u / coreBw_;
            case Pipe::MTE3: return c_.mte3LatencyCycles + u / WriteRate(c_.mte3BytesPerCycle);
            case Pipe::MTE1: return u / c_.mte1BytesPerCycle;
            case Pipe::FIX: return c_.fixpipeLatencyCycles + u / FixpipeToGmRate();
            case Pipe::M: return u * c_.cubeFractalCycles;
            default: return u * c_.scalarAccessCycles;
        }
    }

    void Busy(uint32_t core, int pipe, double cycles) {
        const TracedCore &tc = trace_.cores[core];
        out_->stats.busy[pipe] += cycles;
        if (tc.isAic) {
            out_->stats.aicBusy[tc.blockIdx % ACLFA_SIM_MAX_AIC][pipe] += cycles;
        } else {
            out_->stats.aivBusy[tc.blockIdx % ACLFA_SIM_MAX_AIV][pipe] += cycles;
        }
    }

    void Span(uint32_t core, int pipe, double start, double end, const char *api, uint64_t units, uint8_t kind,
              uint32_t seq) {
        if (!keepOps_ || end <= start) return;
        aclfaSimModeledOp r;
        r.start = start;
        r.end = end;
        r.api = api;
        r.units = units;
        r.core = trace_.cores[core].traceCore;
        r.pipe = static_cast<uint8_t>(pipe);
        r.kind = kind;
        r.seq = seq;
        out_->ops.push_back(r);
    }

    void GmEvents(uint32_t issuer, uint32_t seq, double time, uint16_t coreId, const MemRange &r, uint32_t sub) {
        if (!keepGm_ || r.space != Space::GM) return;
        // Contiguous rows are one access: the L2 model touches the same lines in the same order.
        const bool contiguous = r.stride == r.bytes && uint64_t(r.bytes) * r.count <= UINT32_MAX;
        const uint32_t bytes = contiguous ? r.bytes * r.count : r.bytes;
        const uint32_t count = contiguous ? 1 : r.count;
        gm_.push_back({time, issuer, seq, sub, coreId, r.isWrite, r.addr, r.stride, bytes, count});
        gmRecords_ += count;
    }

    // ---- race rule ----
    uint32_t Thread(uint32_t core, int pipe) const { return core * kPipes + pipe; }

    // Ops issued to `pipe` after the scalar unit waited inherit that wait (not the scalar
    // unit's own accesses: those need their own flag to the pipe).
    void InheritScalar(uint32_t core, int pipe) {
        if (!races_ || pipe == Pi(Pipe::S)) return;
        CoreState &s = st_[core];
        if (s.joinedVersion[pipe] == s.scalarVersion) return;
        Clock &dst = vc_[Thread(core, pipe)];
        const Clock &sc = vc_[Thread(core, Pi(Pipe::S))];
        const uint32_t self = Thread(core, Pi(Pipe::S));
        for (size_t i = 0; i < dst.size(); ++i) {
            if (i != self) dst[i] = std::max(dst[i], sc[i]);
        }
        s.joinedVersion[pipe] = s.scalarVersion;
    }

    uint64_t SpaceKey(uint32_t core, Space space) const {
        return space == Space::GM ? 0 : ((uint64_t(core) + 1) << 2) | static_cast<uint64_t>(space);
    }

    std::string RangeText(const MemRange &r, uint64_t lo, uint64_t hi) const {
        char buf[96];
        const char *space = r.space == Space::GM ? "GM" : (r.space == Space::UB ? "UB" : "L1");
        std::snprintf(buf, sizeof buf, "%s [0x%llx, 0x%llx)", space, static_cast<unsigned long long>(lo),
                      static_cast<unsigned long long>(hi));
        return buf;
    }

    // "Exp (instruction 7 of AIV 0, pipe V)"; a cube job names the AIC that ran it.
    std::string OpText(uint32_t thread, uint32_t issuer, uint32_t opIndex) const {
        const uint32_t execCore = thread / kPipes;
        const TraceOp &op = trace_.traces[issuer].ops[opIndex];
        std::string s = std::string(Api(op)) + " (instruction " + std::to_string(opIndex) + " of " + Describe(issuer);
        if (execCore != issuer) s += ", run by the cube of " + Describe(execCore);
        return s + ", pipe " + PipeName(static_cast<Pipe>(thread % kPipes)) + ")";
    }

    // Checks the reads of `r` by `thread`, then records its writes.
    void Access(uint32_t thread, uint32_t issuer, uint32_t opIndex, const MemRange &r) {
        if (!races_ || !out_->race.empty()) return;
        auto &shadow = shadow_[SpaceKey(issuer, r.space)];
        const Clock &now = vc_[thread];
        for (uint32_t b = 0; b < r.count; ++b) {
            const uint64_t lo = r.addr + uint64_t(b) * r.stride, hi = lo + r.bytes;
            auto it = shadow.upper_bound(lo);
            if (it != shadow.begin()) --it;
            if (!r.isWrite) {
                for (; it != shadow.end() && it->first < hi; ++it) {
                    const Writer &w = it->second;
                    if (w.hi <= lo || w.thread == thread || now[w.thread] >= w.epoch) continue;
                    out_->race = "rule 'pipe race' violated on " + Describe(issuer) + " in " +
                                 Api(trace_.traces[issuer].ops[opIndex]) + ": " + OpText(thread, issuer, opIndex) +
                                 " reads " + RangeText(r, std::max(lo, it->first), std::min(hi, w.hi)) +
                                 " last written by " + OpText(w.thread, w.core, w.op) +
                                 " with no ordering edge between them (no SetFlag/WaitFlag, queue EnQue/DeQue, cross-core flag, "
                                 "Matmul wait or SyncAll orders the write before the read; the pipes run "
                                 "concurrently on the chip)";
                    return;
                }
                continue;
            }
            // Write: cut [lo, hi) out of the overlapping writers, then insert it.
            while (it != shadow.end() && it->first < hi) {
                if (it->second.hi <= lo) {
                    ++it;
                    continue;
                }
                const uint64_t s0 = it->first;
                const Writer w = it->second;
                it = shadow.erase(it);
                if (s0 < lo) {
                    Writer left = w;
                    left.hi = lo;
                    shadow.emplace(s0, left);
                }
                if (w.hi > hi) {
                    shadow.emplace(hi, w);
                    break;
                }
            }
            shadow[lo] = Writer{hi, thread, now[thread], issuer, opIndex};
        }
    }

    void Ranges(uint32_t thread, uint32_t core, uint32_t opIndex, const TraceOp &op) {
        const OpTrace &t = trace_.traces[core];
        for (uint32_t i = 0; i < op.rangeCount; ++i) {
            const MemRange &r = t.ranges[op.rangeBegin + i];
            if (!r.isWrite) Access(thread, core, opIndex, r);
        }
        for (uint32_t i = 0; i < op.rangeCount; ++i) {
            const MemRange &r = t.ranges[op.rangeBegin + i];
            if (r.isWrite) Access(thread, core, opIndex, r);
        }
    }

    void Tick(uint32_t thread) {
        if (races_) ++vc_[thread][thread];
    }

    // ---- one instruction ----
    // Returns true when the core has more to run now; blocked or finished cores return false
    // (a blocked core is put back by whoever releases it, listed in *woken).
    bool Step(uint32_t core, std::vector<uint32_t> *woken) {
        CoreState &s = st_[core];
        const OpTrace &t = trace_.traces[core];
        const uint32_t seq = static_cast<uint32_t>(s.next);
        const TraceOp &op = t.ops[s.next];
        if (!s.issued) {
            s.scalar += c_.scalarIssueCycles;
            s.issued = true;
        }
        const double issue = s.scalar;
        const int p = Pi(op.pipe), p2 = Pi(op.pipe2);
        switch (op.kind) {
            case OpKind::EXEC: {
                const double cost = ExecCost(op);
                double start;
                if (op.pipe == Pipe::S) {
                    start = issue;
                    s.scalar = start + cost;
                } else {
                    start = std::max(issue, s.pipeFree[p]);
                    s.pipeFree[p] = start + cost;
                }
                Busy(core, p, cost);
                Span(core, p, start, start + cost, op.api, op.units, 0, seq);
                for (uint32_t i = 0; i < op.rangeCount; ++i) {
                    GmEvents(core, seq, start, trace_.cores[core].traceCore, t.ranges[op.rangeBegin + i], i);
                }
                InheritScalar(core, p);
                Tick(Thread(core, p));
                Ranges(Thread(core, p), core, seq, op);
                ++out_->stats.ops;
                break;
            }
            case OpKind::SET_FLAG:
            case OpKind::CROSS_SET:
            case OpKind::CORE_FLAG_SET: {
                double when = issue;
                if (op.pipe != Pipe::S) {
                    when = std::max(issue, s.pipeFree[p]);
                    s.pipeFree[p] = when;
                }
                Token tok;
                tok.time = when + (op.kind == OpKind::CROSS_SET       ? c_.syncAllCycles
                                   : op.kind == OpKind::CORE_FLAG_SET ? c_.crossCoreFlagCycles
                                                                      : c_.flagLatencyCycles);
                if (races_) {
                    InheritScalar(core, p);
                    tok.clock = vc_[Thread(core, p)];
                }
                if (op.kind == OpKind::SET_FLAG) {
                    s.flags[op.key].push_back(std::move(tok));
                } else {
                    crossFlags_[op.key].push_back(std::move(tok));
                    auto w = crossWaiters_.find(op.key);
                    if (w != crossWaiters_.end() && !w->second.empty()) {
                        const uint32_t waiter = w->second.front();
                        w->second.pop_front();
                        st_[waiter].blocked = false;
                        woken->push_back(waiter);
                    }
                }
                break;
            }
            case OpKind::WAIT_FLAG:
            case OpKind::CROSS_WAIT:
            case OpKind::CORE_FLAG_WAIT: {
                auto &tokens = op.kind == OpKind::WAIT_FLAG ? s.flags[op.key] : crossFlags_[op.key];
                if (tokens.empty()) {
                    if (op.kind != OpKind::WAIT_FLAG) {
                        s.blocked = true;
                        crossWaiters_[op.key].push_back(core);
                        return false;
                    }
                    break;  // an AllocTensor of a buffer never freed: nothing to wait for
                }
                Token tok = std::move(tokens.front());
                tokens.pop_front();
                WaitUntil(core, p2, issue, tok.time, op.api, seq);
                if (races_) {
                    Join(vc_[Thread(core, p2)], tok.clock);
                    if (op.pipe2 == Pipe::S) ++s.scalarVersion;
                }
                break;
            }
            case OpKind::BARRIER: {
                if (op.pipe == Pipe::COUNT) {
                    double all = s.scalar;
                    for (double f : s.pipeFree) all = std::max(all, f);
                    WaitUntil(core, Pi(Pipe::S), issue, all, op.api, seq);
                    s.scalar += c_.barrierCycles;
                    for (double &f : s.pipeFree) f = s.scalar;
                    if (races_) {
                        for (int q = 1; q < kPipes; ++q) Join(vc_[Thread(core, 0)], vc_[Thread(core, q)]);
                        ++s.scalarVersion;
                    }
                } else if (op.pipe != Pipe::S) {
                    s.pipeFree[p] = std::max(s.pipeFree[p], issue) + c_.barrierCycles;
                }
                break;
            }
            case OpKind::MM_ISSUE:
                RunJob(core, op, seq);
                break;
            case OpKind::COMM_START: {
                // The HCCL server takes the task when the scalar unit writes the message and
                // moves it over the links for `units` cycles (docs/hccl.md, "Fused ring"). One
                // server per context runs its tasks one after the other, in commit order
                // (kernel_server.cpp): a task starts when the previous one of its context ended.
                double &serverFree = commServerFree_[op.key >> 7];  // key: context << 7 | handle (hccl.h)
                serverFree = std::max(issue, serverFree) + static_cast<double>(op.units);
                commDone_[op.key] = serverFree;
                auto w = commWaiters_.find(op.key);
                if (w != commWaiters_.end()) {
                    for (uint32_t waiter : w->second) {
                        st_[waiter].blocked = false;
                        woken->push_back(waiter);
                    }
                    commWaiters_.erase(w);
                }
                break;
            }
            case OpKind::COMM_WAIT: {
                auto d = commDone_.find(op.key);
                if (d == commDone_.end()) {  // its Commit (on another core) is not replayed yet
                    s.blocked = true;
                    commWaiters_[op.key].push_back(core);
                    return false;
                }
                WaitUntil(core, Pi(Pipe::S), issue, d->second, op.api, seq);
                break;
            }
            case OpKind::MM_WAIT: {
                WaitUntil(core, Pi(Pipe::S), issue, s.jobDone[op.key], op.api, seq);
                if (races_) {
                    Join(vc_[Thread(core, 0)], s.jobClock[op.key]);
                    ++s.scalarVersion;
                }
                break;
            }
            case OpKind::SYNC_ALL: {
                double ready = s.scalar;
                for (double f : s.pipeFree) ready = std::max(ready, f);
                const uint64_t id = (op.key << 20) ^ s.syncRound;
                SyncBarrier &b = barriers_[id];
                b.latest = std::max(b.latest, ready);
                b.cores.push_back(core);
                ++b.arrived;
                const size_t expected = syncParticipants_[op.key].size();
                if (b.arrived < expected) {
                    s.blocked = true;
                    ++s.next;  // the barrier completes for this core when released
                    s.issued = false;
                    return false;
                }
                const double release = b.latest + c_.syncAllCycles;
                Clock all;
                if (races_) {
                    all.assign(vc_.size(), 0);
                    for (uint32_t m : b.cores) {
                        for (int q = 0; q < kPipes; ++q) Join(all, vc_[Thread(m, q)]);
                    }
                }
                for (uint32_t m : b.cores) {
                    CoreState &ms = st_[m];
                    Span(m, Pi(Pipe::S), ms.scalar, release, op.api, 0, 1, seq);
                    ms.scalar = release;
                    for (double &f : ms.pipeFree) f = release;
                    ++ms.syncRound;
                    if (races_) {
                        for (int q = 0; q < kPipes; ++q) Join(vc_[Thread(m, q)], all);
                        ++ms.scalarVersion;
                    }
                    if (m != core) {
                        ms.blocked = false;
                        if (ms.next < trace_.traces[m].ops.size()) woken->push_back(m);
                    }
                }
                barriers_.erase(id);
                break;
            }
        }
        ++s.next;
        s.issued = false;
        return s.next < t.ops.size();
    }

    // `pipe` of `core` (or its scalar unit) stalls until `until`.
    void WaitUntil(uint32_t core, int pipe, double issue, double until, const char *api, uint32_t seq) {
        CoreState &s = st_[core];
        if (pipe == Pi(Pipe::S)) {
            if (until > s.scalar) {
                Span(core, pipe, s.scalar, until, api, 0, 1, seq);
                s.scalar = until;
            }
            return;
        }
        const double ready = std::max(issue, s.pipeFree[pipe]);
        if (until > ready) Span(core, pipe, ready, until, api, 0, 1, seq);
        s.pipeFree[pipe] = std::max(ready, until);
    }

    // A Matmul request of `core` on its server's cube: MTE2 loads, MTE1 to L0, cube, FixPipe out,
    // pipelined over the job's base tiles (fill and drain of one tile per stage).
    void RunJob(uint32_t core, const TraceOp &op, uint32_t seq) {
        CoreState &s = st_[core];
        const MatmulWork &w = trace_.traces[core].jobs[op.key];
        const uint32_t server = trace_.cores[core].server;
        CoreState &sv = st_[server];
        const double arrival = s.scalar + (server == core ? 0.0 : c_.matmulRequestCycles);
        double start = arrival;
        const int stages[4] = {Pi(Pipe::MTE2), Pi(Pipe::MTE1), Pi(Pipe::M), Pi(Pipe::FIX)};
        for (int q : stages) start = std::max(start, sv.pipeFree[q]);

        auto up = [](uint64_t v, uint64_t a) { return (v + a - 1) / a; };
        const uint64_t c0 = 32 / std::max<uint32_t>(w.aBytes, 1);
        const uint64_t fractals = up(w.m, 16) * up(w.n, 16) * up(w.k, c0);
        const uint64_t mBlocks = up(w.m, std::max<uint32_t>(w.baseM, 1)), nBlocks = up(w.n, std::max<uint32_t>(w.baseN, 1));
        const uint64_t tiles = std::max<uint64_t>(1, mBlocks * nBlocks * up(w.k, std::max<uint32_t>(w.baseK, 1)));
        const double l0Bytes = double(w.aBytes) * up(w.m, 16) * 16 * up(w.k, c0) * c0 * nBlocks +
                               double(w.bBytes) * up(w.k, c0) * c0 * up(w.n, 16) * 16 * mBlocks;
        gmBytes_ += double(w.gmReadBytes) + (w.outToGm ? double(w.outBytes) : 0.0);
        // Operands from UB (coupled chips) move at the core's port rate without GM bandwidth;
        // results to UB leave FixPipe at its own rate.
        const double x[4] = {w.gmReadBytes / coreBw_ + w.localReadBytes / c_.corePortBytesPerCycle,
                             l0Bytes / c_.mte1BytesPerCycle, fractals * c_.cubeFractalCycles,
                             w.outBytes / (w.outToGm ? FixpipeToGmRate() : c_.fixpipeBytesPerCycle)};
        double sum = 0, peak = 0;
        for (double v : x) {
            sum += v;
            peak = std::max(peak, v);
        }
        const double body = (sum + (tiles - 1) * peak) / tiles;
        const double end = start + c_.mte2LatencyCycles + c_.fixpipeLatencyCycles + body;
        // Stage spans: each stage starts one tile after the previous one's start.
        double stageStart = start;
        const double lat[4] = {c_.mte2LatencyCycles, 0, 0, c_.fixpipeLatencyCycles};
        const uint64_t units[4] = {w.gmReadBytes + w.localReadBytes, uint64_t(l0Bytes), uint64_t(w.m) * w.n * w.k,
                                   w.outBytes};
        double stageAt[4];
        for (int i = 0; i < 4; ++i) {
            stageAt[i] = i == 3 ? std::max(stageStart, end - lat[3] - x[3]) : stageStart;
            Span(server, stages[i], stageAt[i], std::min(end, stageAt[i] + lat[i] + x[i]), op.api, units[i], 2, seq);
            Busy(server, stages[i], x[i]);  // transfer and compute time; the latencies are not counted
            stageStart += (i == 0 ? lat[0] : 0) + x[i] / tiles;
        }
        for (int q : stages) sv.pipeFree[q] = end;
        s.jobDone[op.key] = end + c_.flagLatencyCycles;

        const OpTrace &t = trace_.traces[core];
        const uint16_t serverId = trace_.cores[server].traceCore;
        for (uint32_t i = 0; i < op.rangeCount; ++i) {
            const MemRange &r = t.ranges[op.rangeBegin + i];
            GmEvents(core, seq, r.isWrite ? stageAt[3] : stageAt[0], serverId, r, i);
        }
        if (races_) {
            InheritScalar(core, Pi(Pipe::MTE2));
            Clock request = vc_[Thread(core, Pi(Pipe::S))];
            const uint32_t mte2 = Thread(server, Pi(Pipe::MTE2)), cube = Thread(server, Pi(Pipe::M)),
                           fix = Thread(server, Pi(Pipe::FIX));
            Join(vc_[mte2], request);
            Tick(mte2);
            for (uint32_t i = 0; i < op.rangeCount; ++i) {
                const MemRange &r = t.ranges[op.rangeBegin + i];
                if (!r.isWrite) Access(mte2, core, seq, r);
            }
            Join(vc_[cube], vc_[mte2]);
            Tick(cube);
            Join(vc_[fix], vc_[cube]);
            Tick(fix);
            for (uint32_t i = 0; i < op.rangeCount; ++i) {
                const MemRange &r = t.ranges[op.rangeBegin + i];
                if (r.isWrite) Access(fix, core, seq, r);
            }
            s.jobClock[op.key] = vc_[fix];
        }
    }

    void Finish() {
        aclfaSimModelStats &st = out_->stats;
        out_->gmBytes = gmBytes_;
        st.clockMHz = c_.clockMHz;
        st.racesChecked = races_ ? 1 : 0;
        double last = 0;
        uint32_t aic = 0, aiv = 0;
        for (uint32_t i = 0; i < st_.size(); ++i) {
            double end = st_[i].scalar;
            for (double f : st_[i].pipeFree) end = std::max(end, f);
            last = std::max(last, end);
            const TracedCore &tc = trace_.cores[i];
            if (tc.isAic) {
                st.aicEnd[tc.blockIdx % ACLFA_SIM_MAX_AIC] = std::max(st.aicEnd[tc.blockIdx % ACLFA_SIM_MAX_AIC], end);
                aic = std::max(aic, std::min<uint32_t>(tc.blockIdx + 1, ACLFA_SIM_MAX_AIC));
            } else {
                st.aivEnd[tc.blockIdx % ACLFA_SIM_MAX_AIV] = std::max(st.aivEnd[tc.blockIdx % ACLFA_SIM_MAX_AIV], end);
                aiv = std::max(aiv, std::min<uint32_t>(tc.blockIdx + 1, ACLFA_SIM_MAX_AIV));
            }
        }
        st.cycles = last;
        st.aicUsed = aic;
        st.aivUsed = aiv;
        if (keepOps_) {
            std::stable_sort(out_->ops.begin(), out_->ops.end(),
                             [](const aclfaSimModeledOp &a, const aclfaSimModeledOp &b) {
                                 return a.core != b.core ? a.core < b.core : a.start < b.start;
                             });
        }
        if (!keepGm_) return;
        std::sort(gm_.begin(), gm_.end(), [](const GmEvent &a, const GmEvent &b) {
            if (a.time != b.time) return a.time < b.time;
            if (a.core != b.core) return a.core < b.core;
            if (a.seq != b.seq) return a.seq < b.seq;
            return a.sub < b.sub;
        });
        out_->gm.reserve(gmRecords_);
        for (const GmEvent &e : gm_) {
            for (uint32_t i = 0; i < e.count; ++i) {
                aclfaSimGmAccess a;
                a.addr = e.addr + uint64_t(i) * e.stride;
                a.bytes = e.bytes;
                a.core = e.coreId;
                a.isWrite = e.isWrite ? 1 : 0;
                out_->gm.push_back(a);
            }
        }
    }

    const LaunchTrace &trace_;
    const aclfaSimPipeCosts c_;
    const bool keepOps_, keepGm_;
    bool races_ = false;
    ModelResult *out_;
    std::vector<CoreState> st_;
    std::vector<Clock> vc_;
    std::unordered_map<uint64_t, std::map<uint64_t, Writer>> shadow_;
    std::unordered_map<uint64_t, std::deque<Token>> crossFlags_;
    std::unordered_map<uint64_t, std::deque<uint32_t>> crossWaiters_;
    std::unordered_map<uint64_t, double> commDone_;                  // HCCL task -> its modeled end
    std::unordered_map<uint64_t, double> commServerFree_;            // HCCL context -> its server's last task end
    std::unordered_map<uint64_t, std::vector<uint32_t>> commWaiters_;  // cores waiting for a task not started yet
    std::unordered_map<uint64_t, std::vector<uint32_t>> syncParticipants_;
    std::unordered_map<uint64_t, SyncBarrier> barriers_;
    std::vector<GmEvent> gm_;
    uint64_t gmRecords_ = 0;  // aclfaSimGmAccess records gm_ expands to
    double coreBw_ = 0;
    double gmBytes_ = 0;
};

// ---- the last traced launch ----
std::mutex gMutex;            // the last traced launch; taken only when a launch was traced
std::atomic<int> gMode{0};    // read by every launch without a lock (safe across fork)
LaunchTrace gTrace;
aclfaSimPipeCosts gCosts;     // the costs gResult was modeled with
ModelResult gResult;          // without the schedule until asked for (gHaveOps)
bool gHave = false;
bool gHaveOps = false;

// No modeled time beats a physical bound (docs/timing_model.md "Memory bound"): the launch takes
// at least its GM bytes over the chip's L2 rate and its compulsory HBM bytes over the HBM rate.
// The replay shares gmBytesPerCycle by average concurrency, so the first bound only binds where
// latencies and averages leave it short; the second is what the replay does not model at all
// (every GM access is served at the L2 rate).
void ApplyMemoryBounds(const LaunchTrace &trace, const aclfaSimPipeCosts &costs, ModelResult *out) {
    aclfaSimModelStats &st = out->stats;
    st.pipelineCycles = st.cycles;
    st.gmBytes = out->gmBytes;
    st.compulsoryHbmBytes = trace.compulsoryHbmBytes;
    st.l2BoundCycles = costs.gmBytesPerCycle > 0 ? out->gmBytes / costs.gmBytesPerCycle : 0.0;
    st.hbmBoundCycles = costs.hbmBytesPerCycle > 0 ? trace.compulsoryHbmBytes / costs.hbmBytesPerCycle : 0.0;
    st.cycles = std::max({st.pipelineCycles, st.l2BoundCycles, st.hbmBoundCycles});
}

}  // namespace

void ModelLaunch(const LaunchTrace &trace, const aclfaSimPipeCosts &costs, int keep, bool checkRaces,
                 ModelResult *out) {
    // Bisection for the per-core GM rate (see "Bandwidth" above), on replays without schedule.
    ModelResult probe;
    Replay(trace, costs, 0, false, 0.0, &probe).Run();
    double lo = probe.stats.coreGmBytesPerCycle, hi = costs.corePortBytesPerCycle, rate = lo;
    auto within = [&](double bw) {
        ModelResult r;
        Replay(trace, costs, 0, false, bw, &r).Run();
        return r.stats.cycles <= 0 || r.gmBytes / r.stats.cycles <= costs.gmBytesPerCycle;
    };
    if (probe.error.empty() && hi > lo) {
        if (within(hi)) {
            rate = hi;
        } else {
            for (int i = 0; i < 8; ++i) {
                const double mid = 0.5 * (lo + hi);
                (within(mid) ? lo : hi) = mid;
            }
            rate = lo;
        }
    }
    *out = ModelResult();
    Replay(trace, costs, keep, checkRaces, rate, out).Run();
    ApplyMemoryBounds(trace, costs, out);
}

int OpTraceMode() { return gMode.load(std::memory_order_relaxed); }

std::string PublishLaunchTrace(LaunchTrace &&trace) {
    aclfaSimPipeCosts costs;
    aclfaSimGetPipeCosts(nullptr, &costs);
    ModelResult result;
    const bool races = (OpTraceMode() & ACLFA_SIM_TRACE_RACES) != 0;
    trace.compulsoryHbmBytes = CompulsoryHbmBytes(trace, aclfaSimGetChip()->l2Bytes);
    ModelLaunch(trace, costs, KEEP_GM, races, &result);
    std::string message = !result.race.empty() ? result.race : result.error;
    std::lock_guard<std::mutex> lock(gMutex);
    gTrace = std::move(trace);
    gCosts = costs;
    gResult = std::move(result);
    gHave = true;
    gHaveOps = false;
    return message;
}

}  // namespace kernel
}  // namespace acl_fa_sim

using namespace acl_fa_sim::kernel;

extern "C" aclError aclfaSimSetOpTrace(int mode) {
    if (mode < 0 || mode > (ACLFA_SIM_TRACE_OPS | ACLFA_SIM_TRACE_RACES)) return ACL_ERROR_INVALID_PARAM;
    if (mode == ACLFA_SIM_TRACE_RACES) mode |= ACLFA_SIM_TRACE_OPS;  // races need the trace
    gMode.store(mode, std::memory_order_relaxed);
    return ACL_SUCCESS;
}

extern "C" aclError aclfaSimGetModelStats(aclfaSimModelStats *stats) {
    if (stats == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(gMutex);
    if (!gHave) return ACL_ERROR_FAILURE;
    *stats = gResult.stats;
    return ACL_SUCCESS;
}

extern "C" aclError aclfaSimGetModeledOps(const aclfaSimModeledOp **ops, uint64_t *count) {
    if (ops == nullptr || count == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(gMutex);
    if (!gHave) return ACL_ERROR_FAILURE;
    if (!gHaveOps) {
        // The same replay as the published one (same trace, costs and GM rate), keeping the schedule.
        ModelResult withOps;
        Replay(gTrace, gCosts, KEEP_OPS, false, gResult.stats.coreGmBytesPerCycle, &withOps).Run();
        gResult.ops = std::move(withOps.ops);
        gHaveOps = true;
    }
    *ops = gResult.ops.data();
    *count = gResult.ops.size();
    return ACL_SUCCESS;
}

extern "C" aclError aclfaSimGetModeledGmTrace(const aclfaSimGmAccess **records, uint64_t *count) {
    if (records == nullptr || count == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(gMutex);
    if (!gHave) return ACL_ERROR_FAILURE;
    *records = gResult.gm.data();
    *count = gResult.gm.size();
    return ACL_SUCCESS;
}

extern "C" aclError aclfaSimRemodel(const aclfaSimPipeCosts *costs, aclfaSimModelStats *stats) {
    if (costs == nullptr || stats == nullptr) return ACL_ERROR_INVALID_PARAM;
    std::lock_guard<std::mutex> lock(gMutex);
    if (!gHave) return ACL_ERROR_FAILURE;
    ModelResult result;
    ModelLaunch(gTrace, *costs, 0, false, &result);
    *stats = result.stats;
    return ACL_SUCCESS;
}
