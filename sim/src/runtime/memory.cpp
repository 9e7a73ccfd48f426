// memory.cpp -- device and host memory: aclrtMalloc/Free, aclrtMallocHost/FreeHost,
// aclrtMemcpy/MemcpyAsync/Memset, aclrtGetMemInfo, aclfaSimFindDeviceAllocation.
//
// Device memory is host memory laid out as
//     [front guard 64 B][user bytes: size][padding to round32(size) + 32][tail guard >= 64 B]
// (the real aclrtMalloc rounds to 32 B and adds 32 B, torch-npu torch_npu/include/acl/acl_rt.h). The user start is 64-B
// aligned; guards hold a pattern checked on free. Each device has a simulated HBM capacity
// (current chip, or ACL_FA_SIM_HBM_BYTES) charged with the padded sizes.
// Copies follow the real kind rules: the device side of a copy must lie inside one live
// aclrtMalloc block (requested size, not padding), the host side must not be device memory.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "stream.h"

namespace acl_fa_sim {
namespace rt {
namespace {

constexpr size_t kGuardBytes = 64;  // also the user-start alignment
constexpr uint8_t kGuardPattern = 0xA5;

struct Block {
    uint8_t *raw;    // what aligned_alloc returned
    size_t total;    // bytes at raw
    uint8_t *base;   // user start = raw + kGuardBytes
    size_t size;     // requested bytes
    size_t padded;   // round32(size) + 32: charged to the device capacity
    int32_t device;
};

struct MemoryState {
    std::mutex mutex;
    std::map<uintptr_t, Block> device;  // keyed by raw address
    std::map<uintptr_t, size_t> host;   // aclrtMallocHost blocks: start -> size
    uint64_t inUse[kMaxDevices] = {};   // padded bytes per device
};

// Never destroyed: frees may come during process exit. Replaced in a forked child, where the
// parent's blocks are not the child's to free (their bytes stay mapped: a host view of one
// may still be read there).
MemoryState *g_memory = new MemoryState;

MemoryState &Mem() { return *g_memory; }

size_t RoundUp(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The device block whose raw extent contains p, or nullptr. Caller holds the mutex.
const Block *BlockContaining(MemoryState &mem, const void *p) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    auto it = mem.device.upper_bound(address);
    if (it == mem.device.begin()) return nullptr;
    --it;
    const Block &block = it->second;
    return address < it->first + block.total ? &block : nullptr;
}

const char *KindName(aclrtMemcpyKind kind) {
    switch (kind) {
        case ACL_MEMCPY_HOST_TO_HOST: return "ACL_MEMCPY_HOST_TO_HOST";
        case ACL_MEMCPY_HOST_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_DEVICE";
        case ACL_MEMCPY_DEVICE_TO_HOST: return "ACL_MEMCPY_DEVICE_TO_HOST";
        case ACL_MEMCPY_DEVICE_TO_DEVICE: return "ACL_MEMCPY_DEVICE_TO_DEVICE";
        case ACL_MEMCPY_DEFAULT: return "ACL_MEMCPY_DEFAULT";
        case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: return "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE";
        case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INNER_DEVICE_TO_DEVICE";
        case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: return "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE";
    }
    return "?";
}

// Checks that [p, p + count) lies in the user bytes of one live device block.
aclError CheckDeviceRange(const char *api, const char *arg, const void *p, size_t count, const char *why) {
    MemoryState &mem = Mem();
    std::lock_guard<std::mutex> lock(mem.mutex);
    const Block *block = BlockContaining(mem, p);
    if (block == nullptr) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID,
                    "%s: %s %p is not device memory (no live aclrtMalloc block contains it) but %s needs a device "
                    "pointer",
                    api, arg, p, why);
    }
    const uint8_t *start = static_cast<const uint8_t *>(p);
    if (start < block->base || start >= block->base + block->size) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID,
                    "%s: %s %p lies in the guard or padding of device block %p (size %zu), not in its bytes", api, arg,
                    p, static_cast<void *>(block->base), block->size);
    }
    const size_t available = static_cast<size_t>(block->base + block->size - start);
    if (count > available) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID,
                    "%s: %s range of %zu bytes at offset %zu runs %zu bytes past the end of device block %p (size %zu)",
                    api, arg, count, static_cast<size_t>(start - block->base), count - available,
                    static_cast<void *>(block->base), block->size);
    }
    return ACL_SUCCESS;
}

aclError CheckHostPointer(const char *api, const char *arg, const void *p, const char *why) {
    MemoryState &mem = Mem();
    std::lock_guard<std::mutex> lock(mem.mutex);
    const Block *block = BlockContaining(mem, p);
    if (block != nullptr) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID,
                    "%s: %s %p lies in device block %p (size %zu) but %s needs a host pointer", api, arg, p,
                    static_cast<void *>(block->base), block->size, why);
    }
    return ACL_SUCCESS;
}

bool IsDevicePointer(const void *p) {
    MemoryState &mem = Mem();
    std::lock_guard<std::mutex> lock(mem.mutex);
    return BlockContaining(mem, p) != nullptr;
}

// Validates a copy for `api`; on success *deviceToDevice says whether the 64-B rule applies.
aclError CheckCopy(const char *api, void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                   bool *deviceToDevice) {
    if (dst == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "%s: dst is NULL", api);
    if (src == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "%s: src is NULL", api);
    if (count > destMax) {
        return Fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu exceeds destMax %zu", api, count, destMax);
    }
    bool dstDevice, srcDevice;
    switch (kind) {
        case ACL_MEMCPY_HOST_TO_HOST: dstDevice = false; srcDevice = false; break;
        case ACL_MEMCPY_HOST_TO_DEVICE:
        case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: dstDevice = true; srcDevice = false; break;
        case ACL_MEMCPY_DEVICE_TO_HOST: dstDevice = false; srcDevice = true; break;
        case ACL_MEMCPY_DEVICE_TO_DEVICE:
        case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
        case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: dstDevice = true; srcDevice = true; break;
        case ACL_MEMCPY_DEFAULT:  // the runtime tells the sides from the addresses
            dstDevice = IsDevicePointer(dst);
            srcDevice = IsDevicePointer(src);
            break;
        default:
            return Fail(ACL_ERROR_INVALID_PARAM, "%s: kind %d is not an aclrtMemcpyKind (0..7)", api,
                        static_cast<int>(kind));
    }
    const char *why = KindName(kind);
    aclError ret = dstDevice ? CheckDeviceRange(api, "dst", dst, count, why) : CheckHostPointer(api, "dst", dst, why);
    if (ret != ACL_SUCCESS) return ret;
    ret = srcDevice ? CheckDeviceRange(api, "src", src, count, why) : CheckHostPointer(api, "src", src, why);
    if (ret != ACL_SUCCESS) return ret;
    *deviceToDevice = dstDevice && srcDevice;
    return ACL_SUCCESS;
}

// Returns the first guard byte that lost its pattern, or nullptr.
const uint8_t *DamagedGuard(const Block &block) {
    for (const uint8_t *p = block.raw; p < block.base; ++p) {
        if (*p != kGuardPattern) return p;
    }
    for (const uint8_t *p = block.base + block.padded; p < block.raw + block.total; ++p) {
        if (*p != kGuardPattern) return p;
    }
    return nullptr;
}

// State of one aclrtMemcpyAsync task.
struct CopyTask {
    void *dst;
    const void *src;
    size_t count;
    bool dstDevice, srcDevice;
};

aclError RunCopy(void *state, std::string *message) {
    CopyTask *copy = static_cast<CopyTask *>(state);
    // The blocks may have been freed between the enqueue and now (a use after free on the chip).
    if ((copy->dstDevice && CheckDeviceRange("aclrtMemcpyAsync", "dst", copy->dst, copy->count, "the copy") != 0) ||
        (copy->srcDevice && CheckDeviceRange("aclrtMemcpyAsync", "src", copy->src, copy->count, "the copy") != 0)) {
        const char *detail = aclGetRecentErrMsg();
        *message = std::string("device memory freed before the copy ran: ") + (detail != nullptr ? detail : "");
        return ACL_ERROR_RT_DEVICE_MEM_ERROR;
    }
    memmove(copy->dst, copy->src, copy->count);
    return ACL_SUCCESS;
}

void ReleaseCopy(void *state) { delete static_cast<CopyTask *>(state); }

// State of one aclrtMemsetAsync task: `count` bytes at `dst` set to `value`.
struct MemsetTask {
    void *dst;
    int32_t value;
    size_t count;
    bool device;
};

aclError RunMemset(void *state, std::string *message) {
    MemsetTask *set = static_cast<MemsetTask *>(state);
    if (set->device && CheckDeviceRange("aclrtMemsetAsync", "devPtr", set->dst, set->count, "the memset") != 0) {
        const char *detail = aclGetRecentErrMsg();
        *message = std::string("device memory freed before the memset ran: ") + (detail != nullptr ? detail : "");
        return ACL_ERROR_RT_DEVICE_MEM_ERROR;
    }
    memset(set->dst, set->value, set->count);
    return ACL_SUCCESS;
}

void ReleaseMemset(void *state) { delete static_cast<MemsetTask *>(state); }

bool IsDdrAttr(aclrtMemAttr attr) {
    return attr == ACL_DDR_MEM || attr == ACL_DDR_MEM_HUGE || attr == ACL_DDR_MEM_NORMAL ||
           attr == ACL_DDR_MEM_P2P_HUGE || attr == ACL_DDR_MEM_P2P_NORMAL;
}

}  // namespace

void AbandonMemoryInChild() { g_memory = new MemoryState; }

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    if (aclfaSimShouldFail("aclrtMalloc")) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
    if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size must be greater than 0");
    const uint32_t basePolicy = static_cast<uint32_t>(policy) & 0xffu;
    const uint32_t extraBits = static_cast<uint32_t>(policy) & ~0xffu;
    const uint32_t knownExtra = ACL_MEM_TYPE_LOW_BAND_WIDTH | ACL_MEM_TYPE_HIGH_BAND_WIDTH |
                                ACL_MEM_ACCESS_USER_SPACE_READONLY;
    if (basePolicy > ACL_MEM_MALLOC_HUGE1G_ONLY_P2P || (extraBits & ~knownExtra) != 0) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: policy 0x%x is not an aclrtMemMallocPolicy",
                    static_cast<unsigned>(policy));
    }
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtMalloc", &device);
    if (ret != ACL_SUCCESS) return ret;

    const size_t padded = RoundUp(size, 32) + 32;
    if (padded < size) return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: size %zu overflows", size);
    const uint64_t capacity = HbmCapacityBytes();
    MemoryState &mem = Mem();
    {
        std::lock_guard<std::mutex> lock(mem.mutex);
        const uint64_t used = mem.inUse[device];
        if (used > capacity || padded > capacity - used) {
            return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                        "aclrtMalloc: out of device memory on device %d: requested %zu bytes (%zu with padding), "
                        "free %llu of %llu bytes",
                        device, size, padded, static_cast<unsigned long long>(used > capacity ? 0 : capacity - used),
                        static_cast<unsigned long long>(capacity));
        }
        mem.inUse[device] += padded;  // reserved now, so concurrent callers see it
    }
    Block block;
    block.total = kGuardBytes + RoundUp(padded, kGuardBytes) + kGuardBytes;
    block.raw = static_cast<uint8_t *>(aligned_alloc(kGuardBytes, block.total));
    if (block.raw == nullptr) {
        std::lock_guard<std::mutex> lock(mem.mutex);
        mem.inUse[device] -= padded;
        return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION,
                    "aclrtMalloc: the host could not back %zu bytes of simulated device memory", block.total);
    }
    block.base = block.raw + kGuardBytes;
    block.size = size;
    block.padded = padded;
    block.device = device;
    memset(block.raw, kGuardPattern, kGuardBytes);
    memset(block.base + padded, kGuardPattern, block.total - kGuardBytes - padded);
    {
        std::lock_guard<std::mutex> lock(mem.mutex);
        mem.device[reinterpret_cast<uintptr_t>(block.raw)] = block;
    }
    ++Live().deviceAllocations;
    Live().deviceBytes += static_cast<int64_t>(size);
    *devPtr = block.base;
    return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr) {
    if (aclfaSimShouldFail("aclrtFree")) return ACL_ERROR_RT_MEMORY_FREE;
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
    MemoryState &mem = Mem();
    Block block;
    {
        std::lock_guard<std::mutex> lock(mem.mutex);
        const Block *found = BlockContaining(mem, devPtr);
        if (found == nullptr) {
            if (mem.host.count(reinterpret_cast<uintptr_t>(devPtr)) != 0) {
                return Fail(ACL_ERROR_RT_PARAM_INVALID,
                            "aclrtFree: %p was allocated with aclrtMallocHost; free it with aclrtFreeHost", devPtr);
            }
            return Fail(ACL_ERROR_RT_PARAM_INVALID,
                        "aclrtFree: %p is not a live device allocation (already freed, or never from aclrtMalloc)",
                        devPtr);
        }
        if (found->base != devPtr) {
            return Fail(ACL_ERROR_RT_PARAM_INVALID,
                        "aclrtFree: %p is inside device block %p (size %zu), not its start; pass what aclrtMalloc "
                        "returned",
                        devPtr, static_cast<void *>(found->base), found->size);
        }
        block = *found;
        mem.device.erase(reinterpret_cast<uintptr_t>(block.raw));
        mem.inUse[block.device] -= block.padded;
    }
    --Live().deviceAllocations;
    Live().deviceBytes -= static_cast<int64_t>(block.size);
    const uint8_t *damaged = DamagedGuard(block);
    aclError ret = ACL_SUCCESS;
    if (damaged != nullptr) {
        const long offset = static_cast<long>(damaged - block.base);
        ret = Fail(ACL_ERROR_RT_MEMORY_FREE,
                   "aclrtFree: the guard region %s device block %p (size %zu) was overwritten at offset %ld: "
                   "something wrote out of bounds; the block is freed",
                   offset < 0 ? "before" : "after", devPtr, block.size, offset);
    }
    free(block.raw);
    return ret;
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    if (aclfaSimShouldFail("aclrtMallocHost")) return ACL_ERROR_RT_MEMORY_ALLOCATION;
    if (hostPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
    if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: size must be greater than 0");
    void *p = aligned_alloc(kGuardBytes, RoundUp(size, kGuardBytes));
    if (p == nullptr) return Fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMallocHost: cannot allocate %zu bytes", size);
    {
        MemoryState &mem = Mem();
        std::lock_guard<std::mutex> lock(mem.mutex);
        mem.host[reinterpret_cast<uintptr_t>(p)] = size;
    }
    ++Live().hostAllocations;
    *hostPtr = p;
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr) {
    if (aclfaSimShouldFail("aclrtFreeHost")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (hostPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
    {
        MemoryState &mem = Mem();
        std::lock_guard<std::mutex> lock(mem.mutex);
        if (mem.host.erase(reinterpret_cast<uintptr_t>(hostPtr)) == 0) {
            if (BlockContaining(mem, hostPtr) != nullptr) {
                return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtFreeHost: %p is device memory; free it with aclrtFree",
                            hostPtr);
            }
            return Fail(ACL_ERROR_RT_PARAM_INVALID,
                        "aclrtFreeHost: %p is not a live aclrtMallocHost block (already freed, or never allocated)",
                        hostPtr);
        }
    }
    --Live().hostAllocations;
    free(hostPtr);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    if (aclfaSimShouldFail("aclrtMemcpy")) return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtMemcpy", &device);
    if (ret != ACL_SUCCESS) return ret;
    bool deviceToDevice = false;
    ret = CheckCopy("aclrtMemcpy", dst, destMax, src, count, kind, &deviceToDevice);
    if (ret != ACL_SUCCESS) return ret;
    memmove(dst, src, count);
    return ACL_SUCCESS;
}

// A matrix copy: `height` rows of `width` bytes, row r from src + r * spitch to dst + r * dpitch.
// The real runtime takes only ACL_MEMCPY_HOST_TO_DEVICE and ACL_MEMCPY_DEVICE_TO_HOST here and
// answers ACL_ERROR_RT_FEATURE_NOT_SUPPORT for other kinds (hicann/runtime API reference pages
// aclrtMemcpy2d and aclrtMemcpy2dAsync, which also caps height at 5 * 1024 * 1024; docs/compat.md);
// a width wider than either pitch would overlap rows. The device side's whole extent
// ((height - 1) * pitch + width bytes) must lie in one live block, as for aclrtMemcpy.
aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                       aclrtMemcpyKind kind) {
    static const size_t kMaxHeight = 5u * 1024u * 1024u;
    if (aclfaSimShouldFail("aclrtMemcpy2d")) return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtMemcpy2d", &device);
    if (ret != ACL_SUCCESS) return ret;
    if (dst == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy2d: dst is NULL");
    if (src == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy2d: src is NULL");
    if (kind != ACL_MEMCPY_HOST_TO_DEVICE && kind != ACL_MEMCPY_DEVICE_TO_HOST) {
        return Fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                    "aclrtMemcpy2d: kind %s is not supported (ACL_MEMCPY_HOST_TO_DEVICE or ACL_MEMCPY_DEVICE_TO_HOST "
                    "only)",
                    KindName(kind));
    }
    if (width > dpitch || width > spitch) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy2d: width %zu exceeds dpitch %zu or spitch %zu", width,
                    dpitch, spitch);
    }
    if (height > kMaxHeight) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy2d: height %zu exceeds the maximum %zu", height, kMaxHeight);
    }
    if (width == 0 || height == 0) return ACL_SUCCESS;
    const bool toDevice = kind == ACL_MEMCPY_HOST_TO_DEVICE;
    const size_t dstExtent = (height - 1) * dpitch + width;
    const size_t srcExtent = (height - 1) * spitch + width;
    const char *why = KindName(kind);
    ret = toDevice ? CheckDeviceRange("aclrtMemcpy2d", "dst", dst, dstExtent, why)
                   : CheckHostPointer("aclrtMemcpy2d", "dst", dst, why);
    if (ret != ACL_SUCCESS) return ret;
    ret = toDevice ? CheckHostPointer("aclrtMemcpy2d", "src", src, why)
                   : CheckDeviceRange("aclrtMemcpy2d", "src", src, srcExtent, why);
    if (ret != ACL_SUCCESS) return ret;
    uint8_t *out = static_cast<uint8_t *>(dst);
    const uint8_t *in = static_cast<const uint8_t *>(src);
    for (size_t row = 0; row < height; ++row) memmove(out + row * dpitch, in + row * spitch, width);
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
    if (aclfaSimShouldFail("aclrtMemcpyAsync")) return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    std::shared_ptr<Stream> target;
    aclError ret = ResolveStream("aclrtMemcpyAsync", stream, &target);
    if (ret != ACL_SUCCESS) return ret;
    bool deviceToDevice = false;
    ret = CheckCopy("aclrtMemcpyAsync", dst, destMax, src, count, kind, &deviceToDevice);
    if (ret != ACL_SUCCESS) return ret;
    if (deviceToDevice && (reinterpret_cast<uintptr_t>(dst) % 64 != 0 || reinterpret_cast<uintptr_t>(src) % 64 != 0)) {
        return Fail(ACL_ERROR_RT_ADDR_UNALIGNED,
                    "aclrtMemcpyAsync: device-to-device copies need 64-byte aligned addresses (dst %p, src %p)", dst,
                    src);
    }
    Task task;
    task.name = "aclrtMemcpyAsync";
    task.run = RunCopy;
    task.state = new CopyTask{dst, src, count, IsDevicePointer(dst), IsDevicePointer(src)};
    task.release = ReleaseCopy;
    Enqueue(*target, std::move(task));
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    if (aclfaSimShouldFail("aclrtMemset")) return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: devPtr is NULL");
    if (count > maxCount) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: count %zu exceeds maxCount %zu", count, maxCount);
    }
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtMemset", &device);
    if (ret != ACL_SUCCESS) return ret;
    // The runtime tells host from device by the address (torch-npu torch_npu/include/acl/acl_rt.h).
    if (IsDevicePointer(devPtr)) {
        ret = CheckDeviceRange("aclrtMemset", "devPtr", devPtr, count, "the device memset");
        if (ret != ACL_SUCCESS) return ret;
    }
    memset(devPtr, value, count);
    return ACL_SUCCESS;
}

// aclrtMemset in stream order; as for aclrtMemset, the runtime tells host from device memory by
// the address (torch-npu torch_npu/include/acl/acl_rt.h).
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    if (aclfaSimShouldFail("aclrtMemsetAsync")) return ACL_ERROR_RT_DRV_INTERNAL_ERROR;
    if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemsetAsync: devPtr is NULL");
    if (count > maxCount) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMemsetAsync: count %zu exceeds maxCount %zu", count, maxCount);
    }
    std::shared_ptr<Stream> target;
    aclError ret = ResolveStream("aclrtMemsetAsync", stream, &target);
    if (ret != ACL_SUCCESS) return ret;
    const bool device = IsDevicePointer(devPtr);
    if (device) {
        ret = CheckDeviceRange("aclrtMemsetAsync", "devPtr", devPtr, count, "the device memset");
        if (ret != ACL_SUCCESS) return ret;
    }
    Task task;
    task.name = "aclrtMemsetAsync";
    task.run = RunMemset;
    task.state = new MemsetTask{devPtr, value, count, device};
    task.release = ReleaseMemset;
    Enqueue(*target, std::move(task));
    return ACL_SUCCESS;
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total) {
    if (aclfaSimShouldFail("aclrtGetMemInfo")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (free == nullptr || total == nullptr) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: free and total must not be NULL");
    }
    if (attr < ACL_DDR_MEM || attr > ACL_MEM_P2P_HUGE1G) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: attr %d is not an aclrtMemAttr (0..17)",
                    static_cast<int>(attr));
    }
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtGetMemInfo", &device);
    if (ret != ACL_SUCCESS) return ret;
    if (IsDdrAttr(attr)) {  // the simulated chips have HBM only
        *free = 0;
        *total = 0;
        return ACL_SUCCESS;
    }
    const uint64_t capacity = HbmCapacityBytes();
    MemoryState &mem = Mem();
    std::lock_guard<std::mutex> lock(mem.mutex);
    *total = static_cast<size_t>(capacity);
    const uint64_t used = mem.inUse[device];  // may exceed a capacity lowered by a later aclInit
    *free = static_cast<size_t>(used > capacity ? 0 : capacity - used);
    return ACL_SUCCESS;
}

int aclfaSimFindDeviceAllocation(const void *ptr, void **base, size_t *size) {
    MemoryState &mem = Mem();
    std::lock_guard<std::mutex> lock(mem.mutex);
    const Block *block = BlockContaining(mem, ptr);
    if (block == nullptr) return 0;
    const uint8_t *p = static_cast<const uint8_t *>(ptr);
    if (p < block->base || p >= block->base + block->size) return 0;
    if (base != nullptr) *base = block->base;
    if (size != nullptr) *size = block->size;
    return 1;
}

}  // extern "C"
