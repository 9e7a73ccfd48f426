// ascendc_sim/data_copy.h -- DataCopy and DataCopyPad between GM and UB (asc-devkit
// include/basic_api/kernel_operator_data_copy_intf.h, kernel_struct_data_copy.h).
//
// Units (Atlas A2): DataCopy moves whole 32-byte blocks; its DataCopyParams blockLen,
// srcStride and dstStride count 32-byte blocks on both sides. DataCopyPad's blockLen is
// in bytes; the GM-side stride in bytes, the UB-side stride in 32-byte blocks; in UB every
// block starts 32-byte aligned and is padded to a 32-byte multiple.
// Rules checked: UB address 32-byte aligned, DataCopy length a 32-byte multiple (the chip
// would silently drop the tail), UB range inside the tensor, GM range inside the
// GlobalTensor's buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ascendc_sim/arch_surface.h"
#include "ascendc_sim/optrace.h"
#include "ascendc_sim/tensor.h"

namespace AscendC {

constexpr uint32_t ONE_BLK_SIZE = 32;  // bytes in a data block

struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    union {
        uint16_t srcGap = 0;
        uint16_t srcStride;
    };
    union {
        uint16_t dstGap = 0;
        uint16_t dstStride;
    };
};

struct DataCopyExtParams {
    DataCopyExtParams() {}
    DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn,
                      const uint32_t dstStrideIn, const uint32_t rsvIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn), rsv(rsvIn) {}
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // bytes
    uint32_t srcStride = 0;  // gap after each block: bytes in GM, 32-byte blocks in UB
    uint32_t dstStride = 0;
    uint32_t rsv = 0;
};

struct DataCopyPadParams {
    DataCopyPadParams() {}
    DataCopyPadParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue,
                      const uint64_t padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;
    uint8_t rightPadding = 0;
    uint64_t paddingValue = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    DataCopyPadExtParams() {}
    DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, T padValue)
        : isPad(isPadValue), leftPadding(leftPadValue), rightPadding(rightPadValue), paddingValue(padValue) {}
    bool isPad = false;
    uint8_t leftPadding = 0;   // elements
    uint8_t rightPadding = 0;  // elements
    T paddingValue = 0;
};

namespace sim {
// The architecture check of an API entry (ascendc_sim/arch_surface.h): stops the core unless its
// chip has `api` for dtype T. Returns the core (Enter).
template <typename T>
inline acl_fa_sim::kernel::CoreContext &OnArch(acl_fa_sim::surface::Api api) {
    auto &core = acl_fa_sim::kernel::Enter(acl_fa_sim::surface::RowOf(api).name);
    acl_fa_sim::surface::Require<T>(core, api);
    return core;
}
// The same for a path with no dtype of its own (DataCacheCleanAndInvalid, the Matmul UB paths).
inline acl_fa_sim::kernel::CoreContext &OnArchPath(acl_fa_sim::surface::Api api, const char *apiName) {
    auto &core = acl_fa_sim::kernel::Enter(apiName);
    acl_fa_sim::surface::Require(core, api, acl_fa_sim::surface::kAll, apiName);
    return core;
}

// Checks a local operand: UB position when ubOnly, 32-byte aligned start, `bytes` inside the view.
void CheckLocal(const char *api, const char *operand, TPosition pos, uint64_t addr, uint64_t bytes,
                uint64_t viewBytes, bool ubOnly = true);
// A DataCopy length must be whole 32-byte blocks.
void CheckCopyLength(const char *api, uint64_t bytes);
void CountVector(uint64_t elems);

template <typename T>
void CheckLocalT(const char *api, const char *operand, const LocalTensor<T> &t, uint64_t bytes) {
    // The passing case inline (it is every call of a correct kernel); CheckLocal names the failure.
    const uint64_t viewBytes = uint64_t(t.GetSize()) * sizeof(T);
    if (!IsUbPosition(t.SimPos()) || t.GetPhyAddr() % 32 != 0 || bytes > viewBytes) {
        CheckLocal(api, operand, t.SimPos(), t.GetPhyAddr(), bytes, viewBytes);
    }
}
inline uint64_t Align32(uint64_t v) { return (v + 31) & ~uint64_t(31); }

// Element type tags shared with the engine: 0 float, 1 half, 2 bfloat16, 3 int32, -1 other.
template <typename T> constexpr int TypeTag() {
    if constexpr (std::is_same_v<T, float>) return 0;
    else if constexpr (std::is_same_v<T, half>) return 1;
    else if constexpr (std::is_same_v<T, bfloat16_t>) return 2;
    else if constexpr (std::is_same_v<T, int32_t>) return 3;
    else return -1;
}

// Adds `bytes` of src (elements tagged `tag`) into GM at dst under the launch's atomic
// lock, after checking that tag is the SetAtomicAdd type; counts atomicAddBytes.
void AtomicAddToGm(acl_fa_sim::kernel::CoreContext &core, const char *api, void *dst, const void *src,
                   uint64_t bytes, int tag);

// The data movement of a local->GM transfer (bounds already checked): a copy, or with
// SetAtomicAdd<T>() in effect an element-wise add into GM (asc-devkit SetAtomicAdd: it
// applies to the transfers VECOUT/L0C/L1 -> GM that follow it).
template <typename T>
void StoreToGm(acl_fa_sim::kernel::CoreContext &core, const char *api, void *dst, const void *src, uint64_t bytes) {
    if (core.atomicAdd) {
        AtomicAddToGm(core, api, dst, src, bytes, TypeTag<T>());
    } else {
        std::memcpy(dst, src, bytes);
    }
}

// Trace ranges of a local operand: `bytes` (or `count` blocks of `bytes`, `stride` apart) from its start.
template <typename T>
acl_fa_sim::kernel::MemRange LocalOf(const LocalTensor<T> &t, uint64_t bytes, bool isWrite, uint32_t count = 1,
                                     uint64_t stride = 0) {
    acl_fa_sim::kernel::MemRange r = acl_fa_sim::kernel::LocalRange(!IsUbPosition(t.SimPos()), t.GetPhyAddr(), bytes,
                                                                    isWrite);
    r.count = count;
    r.stride = stride;
    return r;
}
// A GM <-> UB/L1 copy on the trace: MTE2 inward, MTE3 outward, `bytes` moved in total.
inline void TraceCopy(acl_fa_sim::kernel::CoreContext &core, const char *api, bool toGm, uint64_t bytes,
                      const acl_fa_sim::kernel::MemRange &gm, const acl_fa_sim::kernel::MemRange &local) {
    if (!acl_fa_sim::kernel::Tracing(core)) return;
    const acl_fa_sim::kernel::MemRange ranges[2] = {gm, local};
    acl_fa_sim::kernel::TraceExec(core, toGm ? acl_fa_sim::kernel::Pipe::MTE3 : acl_fa_sim::kernel::Pipe::MTE2,
                                  acl_fa_sim::kernel::Unit::BYTES, bytes, api, ranges, 2);
}
// A vector instruction of `repeats` repeats (256 B each) on the trace; `transcendental` for
// Exp/Ln. ranges: the operands it writes and reads.
inline void TraceVector(const char *api, uint64_t repeats, std::initializer_list<acl_fa_sim::kernel::MemRange> ranges,
                        bool transcendental = false) {
    acl_fa_sim::kernel::CoreContext *core = acl_fa_sim::kernel::CurrentCore();
    if (core == nullptr || !acl_fa_sim::kernel::Tracing(*core)) return;
    acl_fa_sim::kernel::TraceExec(*core, acl_fa_sim::kernel::Pipe::V,
                                  transcendental ? acl_fa_sim::kernel::Unit::EXP_REPEATS
                                                 : acl_fa_sim::kernel::Unit::REPEATS,
                                  repeats, api, ranges.begin(), static_cast<int>(ranges.size()));
}
inline uint64_t RepeatsOf(uint64_t bytes) { return (bytes + 255) / 256; }

// A UB -> UB copy runs on the vector pipe.
inline void TraceLocalCopy(acl_fa_sim::kernel::CoreContext &core, const char *api, uint64_t bytes,
                           const acl_fa_sim::kernel::MemRange &dst, const acl_fa_sim::kernel::MemRange &src) {
    if (!acl_fa_sim::kernel::Tracing(core)) return;
    const acl_fa_sim::kernel::MemRange ranges[2] = {src, dst};
    acl_fa_sim::kernel::TraceExec(core, acl_fa_sim::kernel::Pipe::V, acl_fa_sim::kernel::Unit::REPEATS,
                                  (bytes + 255) / 256, api, ranges, 2);
}
}  // namespace sim

// ---- DataCopy, count form ----
namespace sim {
// The contiguous GM <-> UB copy of `count` elements, UB -> GM when `toGm`.
template <typename T>
void CopyGmUb(const bool toGm, const GlobalTensor<T> &gm, const LocalTensor<T> &local, const uint32_t count) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::DataCopy);
    const uint64_t bytes = uint64_t(count) * sizeof(T);
    CheckCopyLength("DataCopy", bytes);
    CheckLocalT("DataCopy", toGm ? "src" : "dst", local, bytes);
    acl_fa_sim::kernel::GmAccess(core, "DataCopy", gm.SimData(), bytes, gm.SimLo(), gm.SimHi(), toGm);
    TraceCopy(core, "DataCopy", toGm, bytes, acl_fa_sim::kernel::GmRange(gm.SimData(), bytes, toGm),
              LocalOf(local, bytes, !toGm));
    if (toGm) {
        StoreToGm<T>(core, "DataCopy", gm.SimData(), local.SimData(), bytes);
    } else {
        std::memcpy(local.SimData(), gm.SimData(), bytes);
    }
}
}  // namespace sim

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const uint32_t count) {
    sim::CopyGmUb(false, src, dst, count);
}
template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count) {
    sim::CopyGmUb(true, dst, src, count);
}
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const uint32_t count) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::DataCopy);
    const uint64_t bytes = uint64_t(count) * sizeof(T);
    sim::CheckCopyLength("DataCopy", bytes);
    sim::CheckLocalT("DataCopy", "dst", dst, bytes);
    sim::CheckLocalT("DataCopy", "src", src, bytes);
    sim::TraceLocalCopy(core, "DataCopy", bytes, sim::LocalOf(dst, bytes, true), sim::LocalOf(src, bytes, false));
    std::memmove(dst.SimData(), src.SimData(), bytes);
}

// ---- DataCopy, DataCopyParams form (all units 32-byte blocks) ----
namespace sim {
// The GM <-> UB copies of the DataCopyParams form: blockCount strided blocks of blockLen 32-byte
// blocks, UB -> GM when `toGm`. The strides are the destination's and the source's.
template <typename T>
void BlockCopyGmUb(const bool toGm, const GlobalTensor<T> &gm, const LocalTensor<T> &local, const DataCopyParams &p) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::DataCopy);
    const uint64_t blk = uint64_t(p.blockLen) * ONE_BLK_SIZE;
    if (p.blockCount == 0 || blk == 0) return;
    const uint64_t gmStep = blk + uint64_t(toGm ? p.dstStride : p.srcStride) * ONE_BLK_SIZE;
    const uint64_t ubStep = blk + uint64_t(toGm ? p.srcStride : p.dstStride) * ONE_BLK_SIZE;
    CheckLocalT("DataCopy", toGm ? "src" : "dst", local, (p.blockCount - 1) * ubStep + blk);
    TraceCopy(core, "DataCopy", toGm, p.blockCount * blk,
              acl_fa_sim::kernel::GmRange(gm.SimData(), blk, toGm, p.blockCount, gmStep),
              LocalOf(local, blk, !toGm, p.blockCount, ubStep));
    uint8_t *g = reinterpret_cast<uint8_t *>(gm.SimData());
    uint8_t *u = reinterpret_cast<uint8_t *>(local.SimData());
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        acl_fa_sim::kernel::GmAccess(core, "DataCopy", g, blk, gm.SimLo(), gm.SimHi(), toGm);
        if (toGm) {
            StoreToGm<T>(core, "DataCopy", g, u, blk);
        } else {
            std::memcpy(u, g, blk);
        }
        g += gmStep;
        u += ubStep;
    }
}
}  // namespace sim

template <typename T>
void DataCopy(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyParams &p) {
    sim::BlockCopyGmUb(false, src, dst, p);
}
template <typename T>
void DataCopy(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p) {
    sim::BlockCopyGmUb(true, dst, src, p);
}
template <typename T>
void DataCopy(const LocalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p) {
    auto &core = sim::OnArch<T>(acl_fa_sim::surface::Api::DataCopy);
    const uint64_t blk = uint64_t(p.blockLen) * ONE_BLK_SIZE;
    if (p.blockCount == 0 || blk == 0) return;
    sim::CheckLocalT("DataCopy", "dst", dst, (p.blockCount - 1) * (blk + uint64_t(p.dstStride) * ONE_BLK_SIZE) + blk);
    sim::CheckLocalT("DataCopy", "src", src, (p.blockCount - 1) * (blk + uint64_t(p.srcStride) * ONE_BLK_SIZE) + blk);
    sim::TraceLocalCopy(core, "DataCopy", p.blockCount * blk,
                        sim::LocalOf(dst, blk, true, p.blockCount, blk + uint64_t(p.dstStride) * ONE_BLK_SIZE),
                        sim::LocalOf(src, blk, false, p.blockCount, blk + uint64_t(p.srcStride) * ONE_BLK_SIZE));
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        std::memmove(reinterpret_cast<uint8_t *>(dst.SimData()) + i * (blk + uint64_t(p.dstStride) * ONE_BLK_SIZE),
                     reinterpret_cast<const uint8_t *>(src.SimData()) + i * (blk + uint64_t(p.srcStride) * ONE_BLK_SIZE),
                     blk);
    }
}

namespace sim {
// What both DataCopyPad directions check first: the architecture and whole elements per block.
template <typename T>
acl_fa_sim::kernel::CoreContext &EnterDataCopyPad(const DataCopyExtParams &p) {
    // DataCopyPad exists on dav-c220 only of the simulated architectures (arch_surface.h): on the
    // coupled chips GM copies move whole 32-byte blocks (DataCopy).
    auto &core = OnArch<T>(acl_fa_sim::surface::Api::DataCopyPad);
    if (p.blockLen % sizeof(T) != 0) {
        acl_fa_sim::kernel::Violation("DataCopyPad parameters", "DataCopyPad",
                                      "blockLen " + std::to_string(p.blockLen) + " is not a multiple of the " +
                                          std::to_string(sizeof(T)) + "-byte element");
    }
    return core;
}
}  // namespace sim

// ---- DataCopyPad GM -> UB ----
template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                 const DataCopyPadExtParams<T> &pad) {
    auto &core = sim::EnterDataCopyPad<T>(p);
    if (pad.leftPadding * sizeof(T) > ONE_BLK_SIZE || pad.rightPadding * sizeof(T) > ONE_BLK_SIZE) {
        acl_fa_sim::kernel::Violation("DataCopyPad parameters", "DataCopyPad",
                                      "leftPadding/rightPadding (" + std::to_string(pad.leftPadding) + ", " +
                                          std::to_string(pad.rightPadding) + " elements) exceed 32 bytes");
    }
    if (p.blockCount == 0) return;
    const uint64_t left = pad.leftPadding * sizeof(T), right = pad.rightPadding * sizeof(T);
    const uint64_t ubBlock = sim::Align32(left + p.blockLen + right);
    const uint64_t ubStep = ubBlock + uint64_t(p.dstStride) * ONE_BLK_SIZE;
    sim::CheckLocalT("DataCopyPad", "dst", dst, (p.blockCount - 1) * ubStep + ubBlock);
    sim::TraceCopy(core, "DataCopyPad", false, uint64_t(p.blockCount) * p.blockLen,
                   acl_fa_sim::kernel::GmRange(src.SimData(), p.blockLen, false, p.blockCount,
                                               p.blockLen + uint64_t(p.srcStride)),
                   sim::LocalOf(dst, ubBlock, true, p.blockCount, ubStep));
    const uint8_t *g = reinterpret_cast<const uint8_t *>(src.SimData());
    uint8_t *u = reinterpret_cast<uint8_t *>(dst.SimData());
    const uint64_t elems = ubBlock / sizeof(T);
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        acl_fa_sim::kernel::GmAccess(core, "DataCopyPad", g, p.blockLen, src.SimLo(), src.SimHi(), false);
        T *row = reinterpret_cast<T *>(u);
        std::memcpy(u + left, g, p.blockLen);
        const uint64_t dataEnd = (left + p.blockLen) / sizeof(T);
        if (pad.isPad) {
            // pads and the dummy tail take paddingValue
            for (uint64_t e = 0; e < pad.leftPadding; ++e) row[e] = pad.paddingValue;
            for (uint64_t e = dataEnd; e < elems; ++e) row[e] = pad.paddingValue;
        } else if (left == 0 && right == 0 && p.blockLen > 0) {
            // no pads: the dummy tail repeats the block's first element
            for (uint64_t e = dataEnd; e < elems; ++e) row[e] = row[0];
        }
        g += p.blockLen + uint64_t(p.srcStride);
        u += ubStep;
    }
}
template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyParams &p,
                 const DataCopyPadParams &pad) {
    T value;
    std::memcpy(&value, &pad.paddingValue, sizeof(T));
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0),
                DataCopyPadExtParams<T>(pad.isPad, pad.leftPadding, pad.rightPadding, value));
}

// ---- DataCopyPad UB -> GM ----
template <typename T>
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyExtParams &p) {
    auto &core = sim::EnterDataCopyPad<T>(p);
    if (p.blockCount == 0) return;
    const uint64_t ubBlock = sim::Align32(p.blockLen);
    const uint64_t ubStep = ubBlock + uint64_t(p.srcStride) * ONE_BLK_SIZE;
    sim::CheckLocalT("DataCopyPad", "src", src, (p.blockCount - 1) * ubStep + p.blockLen);
    sim::TraceCopy(core, "DataCopyPad", true, uint64_t(p.blockCount) * p.blockLen,
                   acl_fa_sim::kernel::GmRange(dst.SimData(), p.blockLen, true, p.blockCount,
                                               p.blockLen + uint64_t(p.dstStride)),
                   sim::LocalOf(src, p.blockLen, false, p.blockCount, ubStep));
    uint8_t *g = reinterpret_cast<uint8_t *>(dst.SimData());
    const uint8_t *u = reinterpret_cast<const uint8_t *>(src.SimData());
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        acl_fa_sim::kernel::GmAccess(core, "DataCopyPad", g, p.blockLen, dst.SimLo(), dst.SimHi(), true);
        sim::StoreToGm<T>(core, "DataCopyPad", g, u, p.blockLen);
        g += p.blockLen + uint64_t(p.dstStride);
        u += ubStep;
    }
}
template <typename T>
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyParams &p) {
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0));
}

// ---- data cache (asc-devkit include/basic_api/kernel_operator_cache_intf.h; impl/basic_api/kernel_reg.h) ----
enum class CacheLine : uint64_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class DcciDst : uint64_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };

// Writes back and invalidates the scalar unit's data cache for GM (the simulator has no cache:
// GlobalTensor::SetValue writes GM at once). The two-parameter GM form exists on dav-c220 and
// dav-m200, not on dav-c100 (kernel_operator_cache_intf_impl.h).
template <typename T, CacheLine entireType>
void DataCacheCleanAndInvalid(const GlobalTensor<T> &dst) {
    (void)dst;
    sim::OnArchPath(acl_fa_sim::surface::Api::DataCacheCleanAndInvalid, "DataCacheCleanAndInvalid");
}

}  // namespace AscendC
