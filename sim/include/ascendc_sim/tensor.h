// ascendc_sim/tensor.h -- TPosition, LocalTensor and GlobalTensor (asc-devkit
// impl/basic_api/common_types.h, include/basic_api/kernel_tensor.h).
//
// LocalTensor: a view of `size` elements at byte offset `addr` (the local physical
// address) of a core's UB or L1 arena, tagged with the queue buffer it came from.
// GlobalTensor: a view into GM, carrying the bounds given to SetGlobalBuffer; every
// access is checked against them (and they were checked against the live allocation).
#pragma once

#include <cstdint>
#include <string>

#include "ascendc_sim/kernel_macros.h"
#include "ascendc_sim/optrace.h"

namespace AscendC {

enum class TPosition : uint8_t {
    GM,
    A1,
    A2,
    B1,
    B2,
    C1,
    C2,
    CO1,
    CO2,
    VECIN,
    VECOUT,
    VECCALC,
    LCM = VECCALC,
    SPM,
    SHM = SPM,
    TSCM,
    C2PIPE2GM,
    C2PIPE2LOCAL,
    MAX,
};
using QuePosition = TPosition;

enum class TBufState : uint8_t { FREE = 0, OCCUPIED, ENQUE, DEQUE };

namespace sim {
inline bool IsUbPosition(TPosition p) {
    return p == TPosition::VECIN || p == TPosition::VECOUT || p == TPosition::VECCALC;
}
const char *PositionName(TPosition p);

// The queue buffer a LocalTensor belongs to (state machine of TQue); null for TBuf.
struct QueueCore;
struct BufRef {
    QueueCore *que = nullptr;
    int8_t slot = -1;
};

// One scalar-unit load or store on the trace.
inline void TraceScalarAccess(acl_fa_sim::kernel::CoreContext &core, const char *api,
                              const acl_fa_sim::kernel::MemRange &range) {
    acl_fa_sim::kernel::TraceExec(core, acl_fa_sim::kernel::Pipe::S, acl_fa_sim::kernel::Unit::SCALAR_ACCESSES, 1,
                                  api, &range, 1);
}
[[noreturn]] inline void IndexOutOfRange(const char *api, uint64_t index, uint64_t size) {
    acl_fa_sim::kernel::Violation("LocalTensor bounds", api,
                                  "index " + std::to_string(index) + " outside the tensor's " +
                                      std::to_string(size) + " elements");
}
}  // namespace sim

template <typename T>
class LocalTensor {
public:
    using PrimType = T;
    LocalTensor() = default;

    // Internal: made by TPipe / TQue / TBuf.
    LocalTensor(T *data, uint32_t addr, uint32_t size, TPosition pos, sim::BufRef ref)
        : data_(data), addr_(addr), size_(size), cap_(size), pos_(pos), ref_(ref) {}

    T GetValue(const uint32_t index) const { return SimScalarAccess("LocalTensor::GetValue", index, false); }
    template <typename S>
    void SetValue(const uint32_t index, const S value) const {
        SimScalarAccess("LocalTensor::SetValue", index, true) = static_cast<T>(value);
    }
    T &operator()(const uint32_t offset) const { return SimScalarAccess("LocalTensor::operator()", offset, true); }
    // A view starting `offset` elements in; offset == size gives an empty view.
    LocalTensor operator[](const uint32_t offset) const {
        acl_fa_sim::kernel::Enter("LocalTensor::operator[]");
        if (offset > size_) sim::IndexOutOfRange("LocalTensor::operator[]", offset, size_);
        return LocalTensor(data_ + offset, addr_ + offset * static_cast<uint32_t>(sizeof(T)), size_ - offset,
                           pos_, ref_);
    }
    template <typename U>
    LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>(reinterpret_cast<U *>(data_), addr_,
                              static_cast<uint32_t>(uint64_t(size_) * sizeof(T) / sizeof(U)), pos_, ref_);
    }
    uint64_t GetPhyAddr() const { return addr_; }
    uint64_t GetPhyAddr(const uint32_t offset) const { return addr_ + offset * sizeof(T); }
    uint32_t GetSize() const { return size_; }
    // Shrinks (or restores up to the length it was made with) the element count of this view.
    void SetSize(const uint32_t size) {
        acl_fa_sim::kernel::Enter("LocalTensor::SetSize");
        if (size > cap_) sim::IndexOutOfRange("LocalTensor::SetSize", size, cap_);
        size_ = size;
    }
    int32_t GetPosition() const { return static_cast<int32_t>(pos_); }

    // Simulator internals (used by the API implementations).
    T *SimData() const { return data_; }
    TPosition SimPos() const { return pos_; }
    sim::BufRef SimRef() const { return ref_; }
    // Element `index` as a trace range of this tensor's arena.
    acl_fa_sim::kernel::MemRange SimElementRange(uint32_t index, bool isWrite) const {
        const bool ub = pos_ == TPosition::VECIN || pos_ == TPosition::VECOUT || pos_ == TPosition::VECCALC;
        return acl_fa_sim::kernel::LocalRange(!ub, addr_ + uint64_t(index) * sizeof(T), sizeof(T), isWrite);
    }
    // Element `index` reached by the scalar unit through `api` (GetValue, SetValue, operator()):
    // bounds-checked, counted as one scalar access and traced.
    T &SimScalarAccess(const char *api, const uint32_t index, const bool isWrite) const {
        auto &core = acl_fa_sim::kernel::Enter(api);
        if (index >= size_) sim::IndexOutOfRange(api, index, size_);
        ++core.stats->scalarAccesses;
        if (acl_fa_sim::kernel::Tracing(core)) sim::TraceScalarAccess(core, api, SimElementRange(index, isWrite));
        return data_[index];
    }

private:
    T *data_ = nullptr;
    uint32_t addr_ = 0;   // byte offset in the core's arena of pos_
    uint32_t size_ = 0;   // elements
    uint32_t cap_ = 0;    // elements the view was made with (SetSize limit)
    TPosition pos_ = TPosition::GM;
    sim::BufRef ref_;
};

template <typename T>
class GlobalTensor {
public:
    using PrimType = T;
    GlobalTensor() = default;

    // bufferSize in elements; the range must lie inside one live device allocation.
    void SetGlobalBuffer(__gm__ T *buffer, uint64_t bufferSize) {
        auto &core = acl_fa_sim::kernel::Enter("GlobalTensor::SetGlobalBuffer");
        const uint64_t bytes = bufferSize * sizeof(T);
        acl_fa_sim::kernel::CheckGlobalBuffer(core, buffer, bytes);
        Bind(buffer, reinterpret_cast<const uint8_t *>(buffer) + bytes);
    }
    // Size unknown: bounded by the end of the allocation that holds `buffer`.
    void SetGlobalBuffer(__gm__ T *buffer) {
        auto &core = acl_fa_sim::kernel::Enter("GlobalTensor::SetGlobalBuffer");
        Bind(buffer, acl_fa_sim::kernel::CheckGlobalBuffer(core, buffer, 0));
    }
    const __gm__ T *GetPhyAddr() const { return ptr_; }
    __gm__ T *GetPhyAddr(const uint64_t offset) const { return ptr_ + offset; }
    T GetValue(const uint64_t offset) const { return SimScalarAccess("GlobalTensor::GetValue", offset, false); }
    void SetValue(const uint64_t offset, T value) { SimScalarAccess("GlobalTensor::SetValue", offset, true) = value; }
    // Elements from this view's start to the end of the buffer.
    uint64_t GetSize() const {
        return ptr_ == nullptr ? 0 : static_cast<uint64_t>(reinterpret_cast<const uint8_t *>(hi_) -
                                                           reinterpret_cast<const uint8_t *>(ptr_)) /
                                         sizeof(T);
    }
    GlobalTensor operator[](const uint64_t offset) const {
        GlobalTensor t = *this;
        t.ptr_ = ptr_ + offset;
        return t;
    }
    template <typename U>
    GlobalTensor<U> ReinterpretCast() const {
        GlobalTensor<U> t;
        t.SimBind(reinterpret_cast<U *>(ptr_), lo_, hi_);
        return t;
    }

    // Simulator internals.
    T *SimData() const { return ptr_; }
    const void *SimLo() const { return lo_; }
    const void *SimHi() const { return hi_; }
    void SimBind(T *ptr, const void *lo, const void *hi) {
        ptr_ = ptr;
        lo_ = lo;
        hi_ = hi;
    }
    // Element `offset` reached by the scalar unit through `api` (GetValue, SetValue): checked
    // against the bound buffer, counted as GM bytes and one scalar access, traced.
    T &SimScalarAccess(const char *api, const uint64_t offset, const bool isWrite) const {
        auto &core = acl_fa_sim::kernel::Enter(api);
        acl_fa_sim::kernel::GmAccess(core, api, ptr_ + offset, sizeof(T), lo_, hi_, isWrite);
        ++core.stats->scalarAccesses;
        if (acl_fa_sim::kernel::Tracing(core)) {
            sim::TraceScalarAccess(core, api, acl_fa_sim::kernel::GmRange(ptr_ + offset, sizeof(T), isWrite));
        }
        return ptr_[offset];
    }

private:
    void Bind(T *buffer, const void *hi) { SimBind(buffer, buffer, hi); }
    T *ptr_ = nullptr;
    const void *lo_ = nullptr;  // [lo_, hi_): the bytes SetGlobalBuffer allowed
    const void *hi_ = nullptr;
};

}  // namespace AscendC
