// ascendc_sim/tpipe.h -- TPipe, TQue, TBuf (asc-devkit include/basic_api/kernel_tpipe.h).
//
// TPipe::InitBuffer places a queue's `num` buffers of `len` bytes (rounded up to 32 B)
// in the core's UB (VECIN/VECOUT/VECCALC) or L1 (A1/B1/C1) arena; past capacity it is a
// violation. Each queue buffer runs the state machine
//     FREE --AllocTensor--> OCCUPIED --EnQue--> ENQUE --DeQue--> DEQUE --FreeTensor--> FREE
// (FreeTensor also accepted from OCCUPIED); at most `depth` buffers are enqueued at once.
#pragma once

#include <cstdint>
#include <string>

#include "ascendc_sim/sync.h"
#include "ascendc_sim/tensor.h"

namespace AscendC {

namespace sim {
constexpr int kMaxQueueBuffers = 16;

struct QueueCore {
    const char *kind = "TQue";  // "TQue" or "TBuf", for messages
    TPosition pos = TPosition::VECIN;
    int32_t depth = 0;
    uint8_t num = 0;          // buffers
    uint32_t len = 0;         // bytes per buffer, 32-byte aligned
    uint32_t addr = 0;        // arena offset of buffer 0
    uint8_t *data = nullptr;  // host address of buffer 0
    uint64_t pipeEpoch = 0;   // TPipe epoch the buffers belong to (stale after TPipe::Reset)
    const uint64_t *liveEpoch = nullptr;  // the owning TPipe's current epoch
    TBufState state[kMaxQueueBuffers] = {};
    int8_t fifo[kMaxQueueBuffers] = {};
    int32_t head = 0, count = 0;
};

// The pipes a TQue's EnQue -> DeQue orders (producer -> consumer), by its position; FreeTensor
// -> AllocTensor orders them back (the buffer is refilled only after its consumer is done).
// false where a queue implies no synchronisation (VECCALC, TBuf).
inline bool QueuePipes(const QueueCore &q, acl_fa_sim::kernel::Pipe *producer, acl_fa_sim::kernel::Pipe *consumer) {
    using acl_fa_sim::kernel::Pipe;
    if (q.depth == 0) return false;
    switch (q.pos) {
        case TPosition::VECIN: *producer = Pipe::MTE2; *consumer = Pipe::V; return true;
        case TPosition::VECOUT: *producer = Pipe::V; *consumer = Pipe::MTE3; return true;
        case TPosition::A1: case TPosition::B1: *producer = Pipe::MTE2; *consumer = Pipe::MTE1; return true;
        case TPosition::A2: case TPosition::B2: *producer = Pipe::MTE1; *consumer = Pipe::M; return true;
        case TPosition::CO1: *producer = Pipe::M; *consumer = Pipe::FIX; return true;
        default: return false;
    }
}
// Traces the implicit flag of queue buffer `slot`: `release` for FreeTensor -> AllocTensor
// (consumer -> producer), else EnQue -> DeQue (producer -> consumer).
inline void TraceQueueFlag(QueueCore &q, int slot, bool release, bool set, const char *api) {
    acl_fa_sim::kernel::CoreContext *core = acl_fa_sim::kernel::CurrentCore();
    acl_fa_sim::kernel::Pipe producer, consumer;
    if (core == nullptr || !acl_fa_sim::kernel::Tracing(*core) || !QueuePipes(q, &producer, &consumer)) return;
    const uint64_t key = (1ull << 63) | (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&q)) << 6) |
                         (static_cast<uint64_t>(slot) << 1) | (release ? 1u : 0u);
    acl_fa_sim::kernel::TraceFlag(*core, set, release ? consumer : producer, release ? producer : consumer, key, api);
}

// Checks that the queue was initialised by a TPipe that has not been reset since.
void CheckQueueLive(const QueueCore &q, const char *api);
[[noreturn]] void QueueViolation(const QueueCore &q, const char *api, const std::string &detail);

template <typename T>
LocalTensor<T> SlotTensor(QueueCore &q, int slot) {
    return LocalTensor<T>(reinterpret_cast<T *>(q.data + uint64_t(slot) * q.len), q.addr + slot * q.len,
                          q.len / static_cast<uint32_t>(sizeof(T)), q.pos, BufRef{&q, static_cast<int8_t>(slot)});
}

// The queue buffer that `ref` names must belong to `q`.
inline int OwnSlot(QueueCore &q, BufRef ref, const char *api) {
    if (ref.que != &q || ref.slot < 0) {
        QueueViolation(q, api, "the tensor was not allocated from this queue");
    }
    return ref.slot;
}

// What a TPipe owns: the arena ranges above its start offsets, valid while epoch is unchanged.
struct PipeState {
    uint64_t ubStart = 0, l1Start = 0;
    uint64_t epoch = 0;
    uint32_t eventIdsInUse[kHardEventCount] = {};  // bit i: event id i allocated
};

// Places one queue's buffers in the current core's arena (engine tpipe.cpp).
void InitQueue(QueueCore &q, PipeState &pipe, uint32_t num, uint32_t len, const char *api);
}  // namespace sim

template <TPosition src, TPosition dst, int32_t depth, auto mask = 0>
class TQueBind {
public:
    TQueBind() {
        q_.depth = depth;
        q_.pos = src;
    }

    template <typename T>
    LocalTensor<T> AllocTensor() {
        acl_fa_sim::kernel::Enter("TQue::AllocTensor");
        sim::CheckQueueLive(q_, "TQue::AllocTensor");
        for (int i = 0; i < q_.num; ++i) {
            if (q_.state[i] == TBufState::FREE) {
                q_.state[i] = TBufState::OCCUPIED;
                sim::TraceQueueFlag(q_, i, true, false, "TQue::AllocTensor");
                return sim::SlotTensor<T>(q_, i);
            }
        }
        sim::QueueViolation(q_, "TQue::AllocTensor",
                            "all " + std::to_string(q_.num) +
                                " buffers are in use (FreeTensor one first; the chip would wait forever)");
    }
    template <typename T>
    void AllocTensor(LocalTensor<T> &tensor) { tensor = AllocTensor<T>(); }

    template <typename T>
    void FreeTensor(LocalTensor<T> &tensor) {
        acl_fa_sim::kernel::Enter("TQue::FreeTensor");
        sim::CheckQueueLive(q_, "TQue::FreeTensor");
        int slot = sim::OwnSlot(q_, tensor.SimRef(), "TQue::FreeTensor");
        if (q_.state[slot] == TBufState::FREE) sim::QueueViolation(q_, "TQue::FreeTensor", "buffer freed twice");
        if (q_.state[slot] == TBufState::ENQUE) {
            sim::QueueViolation(q_, "TQue::FreeTensor", "buffer is still enqueued (DeQue it first)");
        }
        q_.state[slot] = TBufState::FREE;
        sim::TraceQueueFlag(q_, slot, true, true, "TQue::FreeTensor");
    }
    template <typename T>
    bool EnQue(const LocalTensor<T> &tensor) {
        acl_fa_sim::kernel::Enter("TQue::EnQue");
        sim::CheckQueueLive(q_, "TQue::EnQue");
        int slot = sim::OwnSlot(q_, tensor.SimRef(), "TQue::EnQue");
        if (q_.state[slot] != TBufState::OCCUPIED) {
            sim::QueueViolation(q_, "TQue::EnQue", "only a buffer from AllocTensor (not yet enqueued) can be enqueued");
        }
        if (q_.count >= depth) {
            sim::QueueViolation(q_, "TQue::EnQue", "queue depth " + std::to_string(depth) + " exceeded");
        }
        q_.fifo[(q_.head + q_.count) % sim::kMaxQueueBuffers] = static_cast<int8_t>(slot);
        ++q_.count;
        q_.state[slot] = TBufState::ENQUE;
        sim::TraceQueueFlag(q_, slot, false, true, "TQue::EnQue");
        return true;
    }
    template <typename T>
    LocalTensor<T> DeQue() {
        acl_fa_sim::kernel::Enter("TQue::DeQue");
        sim::CheckQueueLive(q_, "TQue::DeQue");
        if (q_.count == 0) sim::QueueViolation(q_, "TQue::DeQue", "queue is empty (the chip would wait forever)");
        int slot = q_.fifo[q_.head];
        q_.head = (q_.head + 1) % sim::kMaxQueueBuffers;
        --q_.count;
        q_.state[slot] = TBufState::DEQUE;
        sim::TraceQueueFlag(q_, slot, false, false, "TQue::DeQue");
        return sim::SlotTensor<T>(q_, slot);
    }
    template <typename T>
    void DeQue(LocalTensor<T> &tensor) { tensor = DeQue<T>(); }

    bool VacantInQue() { return q_.count < depth; }
    bool HasTensorInQue() { return q_.count > 0; }
    int32_t GetTensorCountInQue() { return q_.count; }
    bool HasIdleBuffer() {
        for (int i = 0; i < q_.num; ++i) {
            if (q_.state[i] == TBufState::FREE) return true;
        }
        return false;
    }
    template <typename T>
    TBufState GetState(const LocalTensor<T> &tensor) const {
        sim::BufRef r = tensor.SimRef();
        return (r.que == &q_ && r.slot >= 0) ? q_.state[r.slot] : TBufState::FREE;
    }

    sim::QueueCore &SimQueue() { return q_; }

protected:
    sim::QueueCore q_;
};

template <TPosition pos, int32_t depth, auto mask = 0>
class TQue : public TQueBind<pos, pos, depth, mask> {
public:
    TQue() = default;
};

template <TPosition pos = TPosition::LCM>
class TBuf : public TQueBind<pos, pos, 0, 0> {
public:
    TBuf() { this->q_.kind = "TBuf"; }
    template <typename T>
    LocalTensor<T> Get() {
        acl_fa_sim::kernel::Enter("TBuf::Get");
        sim::CheckQueueLive(this->q_, "TBuf::Get");
        return Whole<T>();
    }
    // The first len elements of the buffer.
    template <typename T>
    LocalTensor<T> Get(uint32_t len) {
        acl_fa_sim::kernel::Enter("TBuf::Get");
        sim::CheckQueueLive(this->q_, "TBuf::Get");
        if (uint64_t(len) * sizeof(T) > this->q_.len) {
            sim::QueueViolation(this->q_, "TBuf::Get",
                                "asked for " + std::to_string(uint64_t(len) * sizeof(T)) + " bytes of a " +
                                    std::to_string(this->q_.len) + "-byte buffer");
        }
        LocalTensor<T> t = Whole<T>();
        t.SetSize(len);
        return t;
    }
    // size elements starting at byte offset bufOffset of the buffer.
    template <typename T>
    LocalTensor<T> GetWithOffset(uint32_t size, uint32_t bufOffset) {
        acl_fa_sim::kernel::Enter("TBuf::GetWithOffset");
        sim::CheckQueueLive(this->q_, "TBuf::GetWithOffset");
        if (uint64_t(bufOffset) + uint64_t(size) * sizeof(T) > this->q_.len) {
            sim::QueueViolation(this->q_, "TBuf::GetWithOffset", "range past the end of the buffer");
        }
        return LocalTensor<T>(reinterpret_cast<T *>(this->q_.data + bufOffset), this->q_.addr + bufOffset, size,
                              this->q_.pos, sim::BufRef{});
    }

private:
    template <typename T>
    LocalTensor<T> Whole() {
        return LocalTensor<T>(reinterpret_cast<T *>(this->q_.data), this->q_.addr,
                              this->q_.len / static_cast<uint32_t>(sizeof(T)), this->q_.pos, sim::BufRef{});
    }
};

class TPipe {
public:
    TPipe();
    ~TPipe() = default;
    void Init() {}

    // num buffers of len bytes for a TQue (or TQueBind).
    template <class T>
    bool InitBuffer(T &que, uint8_t num, uint32_t len) {
        sim::InitQueue(que.SimQueue(), state_, num, len, "TPipe::InitBuffer");
        return true;
    }
    template <TPosition pos>
    bool InitBuffer(TBuf<pos> &buf, uint32_t len) {
        sim::InitQueue(buf.SimQueue(), state_, 1, len, "TPipe::InitBuffer");
        return true;
    }

    template <HardEvent evt>
    TEventID AllocEventID();
    template <HardEvent evt>
    void ReleaseEventID(TEventID id);
    template <HardEvent evt>
    TEventID FetchEventID();
    TEventID FetchEventID(HardEvent evt);

    // Frees every buffer this pipe placed; queues initialised before become unusable.
    void Reset();
    void Destroy() { Reset(); }

private:
    sim::PipeState state_;
};

template <HardEvent evt>
TEventID TPipe::AllocEventID() {
    return sim::AllocEventId(state_.eventIdsInUse[static_cast<int>(evt)], "TPipe::AllocEventID");
}
template <HardEvent evt>
void TPipe::ReleaseEventID(TEventID id) {
    sim::ReleaseEventId(state_.eventIdsInUse[static_cast<int>(evt)], id, "TPipe::ReleaseEventID");
}
template <HardEvent evt>
TEventID TPipe::FetchEventID() {
    return sim::FetchEventId(state_.eventIdsInUse[static_cast<int>(evt)], "TPipe::FetchEventID");
}
inline TEventID TPipe::FetchEventID(HardEvent evt) {
    return sim::FetchEventId(state_.eventIdsInUse[static_cast<int>(evt)], "TPipe::FetchEventID");
}

}  // namespace AscendC

// The core's current TPipe (the one constructed last).
inline AscendC::TPipe *GetTPipePtr() {
    return static_cast<AscendC::TPipe *>(acl_fa_sim::kernel::Enter("GetTPipePtr").currentPipe);
}
