// device.cpp -- devices, contexts and the stream registry.
//
// Model (RT docs/zh/api_ref/04_device_management.md, 05_context_management.md):
// - aclrtSetDevice binds the calling thread to the device's default context (created by the
//   first SetDevice, shared by all threads) and adds a reference; aclrtResetDevice drops one,
//   aclrtResetDeviceForce all; the last one drains the device's streams and releases the
//   default context and its default stream.
// - aclrtCreateContext makes an explicit context (own default stream) current on the thread.
// - Explicit streams, contexts and events are never released behind the caller's back: a
//   reset drains them but they stay live (and counted) until destroyed, so a leak shows in
//   aclfaSimGetLiveCounts.
// - Handles are the objects' addresses; every API looks them up in the registry first.
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "stream.h"

namespace acl_fa_sim {
namespace rt {
namespace {

struct Context {
    int32_t device;
    bool isDefault;
    std::shared_ptr<Stream> defaultStream;
};

struct DeviceState {
    int64_t refCount = 0;  // aclrtSetDevice references
    std::shared_ptr<Context> defaultContext;
};

struct Registry {
    std::mutex mutex;
    DeviceState devices[kMaxDevices];
    std::map<void *, std::shared_ptr<Context>> contexts;  // default and explicit
    std::map<void *, std::shared_ptr<Stream>> streams;    // explicit streams
};

// Never destroyed: stream workers may still run while the process exits. Replaced (the old
// one abandoned with its streams) in a forked child.
Registry *g_registry = new Registry;

Registry &Reg() { return *g_registry; }

thread_local std::weak_ptr<Context> t_current;

std::shared_ptr<Context> MakeContext(int32_t device, bool isDefault) {
    auto context = std::make_shared<Context>();
    context->device = device;
    context->isDefault = isDefault;
    context->defaultStream = std::make_shared<Stream>(device, /*isDefault=*/true);
    return context;
}

aclError CheckDeviceId(const char *api, int32_t deviceId) {
    const uint32_t count = DeviceCount();
    if (deviceId < 0 || static_cast<uint32_t>(deviceId) >= count) {
        return Fail(ACL_ERROR_RT_INVALID_DEVICEID,
                    "%s: deviceId %d is out of range [0, %u) (ACL_FA_SIM_DEVICE_COUNT sets the count)", api,
                    deviceId, count);
    }
    return ACL_SUCCESS;
}

aclError CurrentContext(const char *api, std::shared_ptr<Context> *out) {
    std::shared_ptr<Context> context = t_current.lock();
    if (!context) {
        return Fail(ACL_ERROR_RT_CONTEXT_NULL,
                    "%s: no current context on this thread (call aclrtSetDevice or aclrtSetCurrentContext first; "
                    "a reset device releases its default context)",
                    api);
    }
    *out = std::move(context);
    return ACL_SUCCESS;
}

// Every stream that runs work for `device`: default streams of its contexts and explicit ones.
std::vector<std::shared_ptr<Stream>> StreamsOfDevice(int32_t device) {
    Registry &reg = Reg();
    std::lock_guard<std::mutex> lock(reg.mutex);
    std::vector<std::shared_ptr<Stream>> streams;
    for (auto &entry : reg.contexts) {
        if (entry.second->device == device) streams.push_back(entry.second->defaultStream);
    }
    for (auto &entry : reg.streams) {
        if (entry.second->device() == device) streams.push_back(entry.second);
    }
    return streams;
}

// Drains the device's streams and releases its default context. Caller must have set
// refCount to 0 and taken `context` out of the registry.
void ReleaseDefaultContext(int32_t device, std::shared_ptr<Context> context) {
    for (auto &stream : StreamsOfDevice(device)) stream->Synchronize("aclrtResetDevice");
    if (context) context->defaultStream->Stop();
}

// Takes one reference (force: all) of `device`; on the last one releases it.
aclError ResetDevice(const char *api, int32_t deviceId, bool force) {
    aclError ret = CheckDeviceId(api, deviceId);
    if (ret != ACL_SUCCESS) return ret;
    std::shared_ptr<Context> released;
    {
        Registry &reg = Reg();
        std::lock_guard<std::mutex> lock(reg.mutex);
        DeviceState &device = reg.devices[deviceId];
        if (device.refCount == 0) {
            return Fail(ACL_ERROR_RT_INVALID_DEVICEID,
                        "%s: device %d is not set (no aclrtSetDevice reference left to reset)", api, deviceId);
        }
        device.refCount = force ? 0 : device.refCount - 1;
        if (device.refCount > 0) return ACL_SUCCESS;
        released = std::move(device.defaultContext);
        reg.contexts.erase(released.get());
    }
    ReleaseDefaultContext(deviceId, std::move(released));
    return ACL_SUCCESS;
}

}  // namespace

aclError CurrentDevice(const char *api, int32_t *device) {
    std::shared_ptr<Context> context;
    aclError ret = CurrentContext(api, &context);
    if (ret == ACL_SUCCESS) *device = context->device;
    return ret;
}

aclError ResolveStream(const char *api, aclrtStream handle, std::shared_ptr<Stream> *out) {
    std::shared_ptr<Context> context;
    aclError ret = CurrentContext(api, &context);
    if (ret != ACL_SUCCESS) return ret;
    if (handle == nullptr) {
        *out = context->defaultStream;
        return ACL_SUCCESS;
    }
    std::shared_ptr<Stream> stream;
    {
        Registry &reg = Reg();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto it = reg.streams.find(handle);
        if (it == reg.streams.end()) {
            return Fail(ACL_ERROR_RT_PARAM_INVALID, "%s: stream %p is not a live stream (destroyed or never created)",
                        api, handle);
        }
        stream = it->second;
    }
    if (stream->device() != context->device) {
        return Fail(ACL_ERROR_RT_STREAM_CONTEXT, "%s: stream %p belongs to device %d but the current device is %d", api,
                    handle, stream->device(), context->device);
    }
    *out = std::move(stream);
    return ACL_SUCCESS;
}

int64_t DevicesSetCount() {
    Registry &reg = Reg();
    std::lock_guard<std::mutex> lock(reg.mutex);
    int64_t total = 0;
    for (const DeviceState &device : reg.devices) total += device.refCount;
    return total;
}

void AbandonDevicesInChild() {
    g_registry = new Registry;
    // The forking thread is the child's only thread; its current context is the parent's.
    t_current.reset();
}

void ReleaseAllDevices() {
    for (uint32_t id = 0; id < kMaxDevices; ++id) {
        std::shared_ptr<Context> released;
        {
            Registry &reg = Reg();
            std::lock_guard<std::mutex> lock(reg.mutex);
            DeviceState &device = reg.devices[id];
            if (device.refCount == 0 && !device.defaultContext) continue;
            device.refCount = 0;
            released = std::move(device.defaultContext);
            if (released) reg.contexts.erase(released.get());
        }
        ReleaseDefaultContext(static_cast<int32_t>(id), std::move(released));
    }
}

}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclrtGetDeviceCount(uint32_t *count) {
    if (aclfaSimShouldFail("aclrtGetDeviceCount")) return ACL_ERROR_RT_NO_DEVICE;
    if (count == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    *count = DeviceCount();
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    if (aclfaSimShouldFail("aclrtSetDevice")) return ACL_ERROR_RT_DEV_SETUP_ERROR;
    if (!IsInitialized()) return Fail(ACL_ERROR_UNINITIALIZE, "aclrtSetDevice: call aclInit first");
    aclError ret = CheckDeviceId("aclrtSetDevice", deviceId);
    if (ret != ACL_SUCCESS) return ret;
    Registry &reg = Reg();
    std::lock_guard<std::mutex> lock(reg.mutex);
    DeviceState &device = reg.devices[deviceId];
    if (!device.defaultContext) {
        device.defaultContext = MakeContext(deviceId, /*isDefault=*/true);
        reg.contexts[device.defaultContext.get()] = device.defaultContext;
    }
    ++device.refCount;
    t_current = device.defaultContext;
    return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
    if (aclfaSimShouldFail("aclrtResetDevice")) return ACL_ERROR_RT_INTERNAL_ERROR;
    return ResetDevice("aclrtResetDevice", deviceId, /*force=*/false);
}

aclError aclrtResetDeviceForce(int32_t deviceId) {
    if (aclfaSimShouldFail("aclrtResetDeviceForce")) return ACL_ERROR_RT_INTERNAL_ERROR;
    return ResetDevice("aclrtResetDeviceForce", deviceId, /*force=*/true);
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (deviceId == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    return CurrentDevice("aclrtGetDevice", deviceId);
}

aclError aclrtSynchronizeDevice(void) {
    if (aclfaSimShouldFail("aclrtSynchronizeDevice")) return ACL_ERROR_RT_AICORE_EXCEPTION;
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtSynchronizeDevice", &device);
    if (ret != ACL_SUCCESS) return ret;
    aclError first = ACL_SUCCESS;
    for (auto &stream : StreamsOfDevice(device)) {
        aclError streamRet = stream->Synchronize("aclrtSynchronizeDevice");
        if (first == ACL_SUCCESS) first = streamRet;
    }
    return first;
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
    if (aclfaSimShouldFail("aclrtCreateContext")) return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL;
    if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is NULL");
    if (!IsInitialized()) return Fail(ACL_ERROR_UNINITIALIZE, "aclrtCreateContext: call aclInit first");
    aclError ret = CheckDeviceId("aclrtCreateContext", deviceId);
    if (ret != ACL_SUCCESS) return ret;
    std::shared_ptr<Context> created = MakeContext(deviceId, /*isDefault=*/false);
    {
        Registry &reg = Reg();
        std::lock_guard<std::mutex> lock(reg.mutex);
        reg.contexts[created.get()] = created;
    }
    ++Live().contexts;
    t_current = created;
    *context = created.get();
    return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
    if (aclfaSimShouldFail("aclrtDestroyContext")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyContext: context is NULL");
    std::shared_ptr<Context> destroyed;
    Registry &reg = Reg();
    const aclError ret = TakeLive(reg.mutex, reg.contexts, context, "aclrtDestroyContext", "context", &destroyed,
                                  [context](const Context &live) {
                                      if (!live.isDefault) return ACL_SUCCESS;
                                      return Fail(ACL_ERROR_INVALID_PARAM,
                                                  "aclrtDestroyContext: context %p is the default context of "
                                                  "device %d; aclrtResetDevice releases it",
                                                  context, live.device);
                                  });
    if (ret != ACL_SUCCESS) return ret;
    destroyed->defaultStream->Stop();
    --Live().contexts;
    return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
    if (aclfaSimShouldFail("aclrtSetCurrentContext")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtSetCurrentContext: context is NULL");
    Registry &reg = Reg();
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.contexts.find(context);
    if (it == reg.contexts.end()) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtSetCurrentContext: context %p is not a live context", context);
    }
    t_current = it->second;
    return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
    if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
    std::shared_ptr<Context> current;
    aclError ret = CurrentContext("aclrtGetCurrentContext", &current);
    if (ret == ACL_SUCCESS) *context = current.get();
    return ret;
}

aclError aclrtCreateStream(aclrtStream *stream) {
    if (aclfaSimShouldFail("aclrtCreateStream")) return ACL_ERROR_RT_NO_STREAM_RESOURCE;
    if (stream == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    int32_t device = 0;
    aclError ret = CurrentDevice("aclrtCreateStream", &device);
    if (ret != ACL_SUCCESS) return ret;
    auto created = std::make_shared<Stream>(device, /*isDefault=*/false);
    {
        Registry &reg = Reg();
        std::lock_guard<std::mutex> lock(reg.mutex);
        reg.streams[created.get()] = created;
    }
    ++Live().streams;
    *stream = created.get();
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (aclfaSimShouldFail("aclrtDestroyStream")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (stream == nullptr) {
        return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: stream is NULL (the default stream cannot be destroyed)");
    }
    std::shared_ptr<Stream> destroyed;
    Registry &reg = Reg();
    const aclError ret = TakeLive(reg.mutex, reg.streams, stream, "aclrtDestroyStream", "stream", &destroyed,
                                  [](const Stream &) { return ACL_SUCCESS; });
    if (ret != ACL_SUCCESS) return ret;
    destroyed->Stop();  // runs what is queued first, as the real API waits for the tasks
    --Live().streams;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    if (aclfaSimShouldFail("aclrtSynchronizeStream")) return ACL_ERROR_RT_AICORE_EXCEPTION;
    std::shared_ptr<Stream> target;
    aclError ret = ResolveStream("aclrtSynchronizeStream", stream, &target);
    if (ret != ACL_SUCCESS) return ret;
    return target->Synchronize("aclrtSynchronizeStream");
}

// timeout in ms: -1 waits for ever, > 0 that long (RT docs/zh/api_ref/06_stream_management.md),
// 0 only checks (the acl_rt.h comment of ACL 1.17); a timeout is ACL_ERROR_RT_STREAM_SYNC_TIMEOUT.
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    if (aclfaSimShouldFail("aclrtSynchronizeStreamWithTimeout")) return ACL_ERROR_RT_AICORE_EXCEPTION;
    if (timeout < -1) {
        return Fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtSynchronizeStreamWithTimeout: timeout %d is invalid (-1 waits for ever, 0 checks, > 0 waits "
                    "that many ms)",
                    timeout);
    }
    std::shared_ptr<Stream> target;
    aclError ret = ResolveStream("aclrtSynchronizeStreamWithTimeout", stream, &target);
    if (ret != ACL_SUCCESS) return ret;
    return target->Synchronize("aclrtSynchronizeStreamWithTimeout", timeout);
}

}  // extern "C"
