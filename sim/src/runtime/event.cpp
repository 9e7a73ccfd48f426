// event.cpp -- events: create/destroy, record in stream order, synchronize, query, elapsed time,
// and a stream waiting for an event (aclrtStreamWaitEvent, aclrtSetOpWaitTimeout).
//
// A record is a task on the stream; when the worker reaches it the event takes a host
// steady-clock timestamp and completes. Times are the simulator's host times, not NPU times.
//
// A wait is a task on the waiting stream that holds that stream's later tasks back until the
// event's record it captured has completed: the latest record issued before the wait call, or,
// for an event never recorded, its first record (an event of aclrtCreateEvent[WithFlag] is "not
// ready" until recorded -- aclrtQueryEventStatus says so -- so a wait on it waits for the record;
// docs/simulator.md). aclrtSetOpWaitTimeout bounds the waits issued after it (seconds, 0 = no
// limit, the default); a wait past it fails the stream with ACL_ERROR_RT_WAIT_TIMEOUT, reported
// by the next synchronize, as the ACL documentation of aclrtStreamWaitEvent describes.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "stream.h"

namespace acl_fa_sim {
namespace rt {
namespace {

using Clock = std::chrono::steady_clock;

// Flags the simulator understands; ACL_EVENT_TIME_LINE enables aclrtEventElapsedTime.
constexpr uint32_t kSupportedFlags = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;

struct Event {
    uint32_t flags = 0;
    std::mutex mutex;
    std::condition_variable completedCv;
    uint64_t recorded = 0;   // records issued; guarded by mutex
    uint64_t completed = 0;  // highest record the stream has reached; guarded by mutex
    Clock::time_point stamp; // time of the completed record; guarded by mutex
    bool destroyed = false;  // aclrtDestroyEvent ran; a pending wait fails; guarded by mutex
};

struct EventRegistry {
    std::mutex mutex;
    std::map<void *, std::shared_ptr<Event>> events;  // guarded by mutex
};

// Never destroyed, and replaced in a forked child, as the device registry.
EventRegistry *g_events = new EventRegistry;

aclError FindEvent(const char *api, const char *argName, aclrtEvent handle, std::shared_ptr<Event> *out) {
    if (handle == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", api, argName);
    EventRegistry &registry = *g_events;
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.events.find(handle);
    if (it == registry.events.end()) {
        return Fail(ACL_ERROR_RT_PARAM_INVALID, "%s: %s %p is not a live event (destroyed or never created)", api,
                    argName, handle);
    }
    *out = it->second;
    return ACL_SUCCESS;
}

// The start of `api`, a task that records or waits for an event: the fault point, the live event
// and the stream (NULL: the current context's default).
aclError EventOnStream(const char *api, aclrtEvent event, aclrtStream stream, std::shared_ptr<Event> *target,
                       std::shared_ptr<Stream> *onStream) {
    if (aclfaSimShouldFail(api)) return ACL_ERROR_RT_INTERNAL_ERROR;
    const aclError ret = FindEvent(api, "event", event, target);
    return ret != ACL_SUCCESS ? ret : ResolveStream(api, stream, onStream);
}

aclError CreateEvent(const char *api, aclrtEvent *event, uint32_t flags) {
    if (event == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", api);
    if ((flags & ~kSupportedFlags) != 0) {
        return Fail(ACL_ERROR_INVALID_PARAM,
                    "%s: flag 0x%x has bits the simulator does not support (only ACL_EVENT_SYNC 0x1 and "
                    "ACL_EVENT_TIME_LINE 0x8)",
                    api, flags);
    }
    int32_t device = 0;
    aclError ret = CurrentDevice(api, &device);
    if (ret != ACL_SUCCESS) return ret;
    auto created = std::make_shared<Event>();
    created->flags = flags;
    {
        EventRegistry &registry = *g_events;
        std::lock_guard<std::mutex> lock(registry.mutex);
        registry.events[created.get()] = created;
    }
    ++Live().events;
    *event = created.get();
    return ACL_SUCCESS;
}

// State of one record task: the event and the record number it completes.
struct RecordTask {
    std::shared_ptr<Event> event;
    uint64_t sequence;
};

aclError RunRecord(void *state, std::string *) {
    RecordTask *task = static_cast<RecordTask *>(state);
    Event &event = *task->event;
    std::lock_guard<std::mutex> lock(event.mutex);
    if (task->sequence > event.completed) {
        event.completed = task->sequence;
        event.stamp = Clock::now();
    }
    event.completedCv.notify_all();
    return ACL_SUCCESS;
}

void ReleaseRecord(void *state) { delete static_cast<RecordTask *>(state); }

// aclrtSetOpWaitTimeout's value in seconds (0: waits never time out).
std::atomic<uint32_t> g_opWaitTimeoutSeconds{0};

// How often a blocked wait looks at its stream's stop request and the event's destruction.
constexpr auto kWaitSlice = std::chrono::milliseconds(20);

// State of one wait task: the event, the record number it waits for, the limit captured at the
// call, and the waiting stream (alive while its worker runs the task).
struct WaitTask {
    std::shared_ptr<Event> event;
    uint64_t sequence;
    uint32_t timeoutSeconds;
    const Stream *stream;
};

aclError RunWait(void *state, std::string *message) {
    WaitTask *task = static_cast<WaitTask *>(state);
    Event &event = *task->event;
    const auto start = Clock::now();
    const auto limit = std::chrono::seconds(task->timeoutSeconds);
    std::unique_lock<std::mutex> lock(event.mutex);
    for (;;) {
        if (event.completed >= task->sequence) return ACL_SUCCESS;
        if (event.destroyed) {
            *message = "the event was destroyed while the stream waited for its record " +
                       std::to_string(task->sequence) + " (destroy an event only after the waits on it completed)";
            return ACL_ERROR_RT_PARAM_INVALID;
        }
        if (task->stream->StopRequested()) {
            *message = "the stream was destroyed while it waited for an event that never completed";
            return ACL_ERROR_RT_WAIT_TIMEOUT;
        }
        if (task->timeoutSeconds != 0 && Clock::now() - start >= limit) {
            *message = "the event's record " + std::to_string(task->sequence) + " (of " +
                       std::to_string(event.recorded) + " issued) did not complete within aclrtSetOpWaitTimeout = " +
                       std::to_string(task->timeoutSeconds) + " s";
            return ACL_ERROR_RT_WAIT_TIMEOUT;
        }
        event.completedCv.wait_for(lock, kWaitSlice);
    }
}

void ReleaseWait(void *state) { delete static_cast<WaitTask *>(state); }

}  // namespace

void AbandonEventsInChild() { g_events = new EventRegistry; }
}  // namespace rt
}  // namespace acl_fa_sim

using namespace acl_fa_sim::rt;

extern "C" {

aclError aclrtCreateEvent(aclrtEvent *event) {
    if (aclfaSimShouldFail("aclrtCreateEvent")) return ACL_ERROR_RT_NO_EVENT_RESOURCE;
    // Default events can be timed, as on the chip.
    return CreateEvent("aclrtCreateEvent", event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE);
}

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    if (aclfaSimShouldFail("aclrtCreateEventWithFlag")) return ACL_ERROR_RT_NO_EVENT_RESOURCE;
    return CreateEvent("aclrtCreateEventWithFlag", event, flag);
}

aclError aclrtDestroyEvent(aclrtEvent event) {
    if (aclfaSimShouldFail("aclrtDestroyEvent")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (event == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: event is NULL");
    std::shared_ptr<Event> destroyed;
    EventRegistry &registry = *g_events;
    const aclError ret = TakeLive(registry.mutex, registry.events, event, "aclrtDestroyEvent", "event", &destroyed,
                                  [](const Event &) { return ACL_SUCCESS; });
    if (ret != ACL_SUCCESS) return ret;
    {
        std::lock_guard<std::mutex> lock(destroyed->mutex);
        destroyed->destroyed = true;
        destroyed->completedCv.notify_all();
    }
    --Live().events;  // a pending record or wait keeps its own reference
    return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    std::shared_ptr<Event> target;
    std::shared_ptr<Stream> onStream;
    const aclError ret = EventOnStream("aclrtRecordEvent", event, stream, &target, &onStream);
    if (ret != ACL_SUCCESS) return ret;
    uint64_t sequence;
    {
        std::lock_guard<std::mutex> lock(target->mutex);
        sequence = ++target->recorded;
    }
    Task task;
    task.name = "aclrtRecordEvent";
    task.run = RunRecord;
    task.state = new RecordTask{target, sequence};
    task.release = ReleaseRecord;
    task.runAfterFailure = true;
    Enqueue(*onStream, std::move(task));
    return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    std::shared_ptr<Event> target;
    std::shared_ptr<Stream> waiting;
    const aclError ret = EventOnStream("aclrtStreamWaitEvent", event, stream, &target, &waiting);
    if (ret != ACL_SUCCESS) return ret;
    uint64_t sequence;
    {
        std::lock_guard<std::mutex> lock(target->mutex);
        sequence = target->recorded > 0 ? target->recorded : 1;  // never recorded: its first record
    }
    Task task;
    task.name = "aclrtStreamWaitEvent";
    task.run = RunWait;
    task.state = new WaitTask{target, sequence, g_opWaitTimeoutSeconds.load(), waiting.get()};
    task.release = ReleaseWait;
    Enqueue(*waiting, std::move(task));
    return ACL_SUCCESS;
}

aclError aclrtSetOpWaitTimeout(uint32_t timeout) {
    if (aclfaSimShouldFail("aclrtSetOpWaitTimeout")) return ACL_ERROR_RT_INTERNAL_ERROR;
    g_opWaitTimeoutSeconds.store(timeout);
    return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
    if (aclfaSimShouldFail("aclrtQueryEventStatus")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (status == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
    std::shared_ptr<Event> target;
    aclError ret = FindEvent("aclrtQueryEventStatus", "event", event, &target);
    if (ret != ACL_SUCCESS) return ret;
    std::lock_guard<std::mutex> lock(target->mutex);
    const bool complete = target->recorded > 0 && target->completed >= target->recorded;
    *status = complete ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
    if (aclfaSimShouldFail("aclrtSynchronizeEvent")) return ACL_ERROR_RT_INTERNAL_ERROR;
    std::shared_ptr<Event> target;
    aclError ret = FindEvent("aclrtSynchronizeEvent", "event", event, &target);
    if (ret != ACL_SUCCESS) return ret;
    std::unique_lock<std::mutex> lock(target->mutex);
    const uint64_t wanted = target->recorded;  // never recorded: nothing to wait for
    target->completedCv.wait(lock, [&] { return target->completed >= wanted; });
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    if (aclfaSimShouldFail("aclrtEventElapsedTime")) return ACL_ERROR_RT_INTERNAL_ERROR;
    if (ms == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is NULL");
    std::shared_ptr<Event> events[2];
    const char *names[2] = {"startEvent", "endEvent"};
    aclError ret = FindEvent("aclrtEventElapsedTime", names[0], startEvent, &events[0]);
    if (ret == ACL_SUCCESS) ret = FindEvent("aclrtEventElapsedTime", names[1], endEvent, &events[1]);
    if (ret != ACL_SUCCESS) return ret;
    Clock::time_point stamps[2];
    for (int i = 0; i < 2; ++i) {
        Event &event = *events[i];
        std::lock_guard<std::mutex> lock(event.mutex);
        if ((event.flags & ACL_EVENT_TIME_LINE) == 0) {
            return Fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                        "aclrtEventElapsedTime: %s was created without ACL_EVENT_TIME_LINE and has no timestamp",
                        names[i]);
        }
        if (event.recorded == 0) {
            return Fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "aclrtEventElapsedTime: %s was never recorded",
                        names[i]);
        }
        if (event.completed < event.recorded) {
            return Fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                        "aclrtEventElapsedTime: %s has not completed yet (synchronize its stream or the event first)",
                        names[i]);
        }
        stamps[i] = event.stamp;
    }
    const double elapsed = std::chrono::duration<double, std::milli>(stamps[1] - stamps[0]).count();
    if (elapsed < 0) {
        return Fail(ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                    "aclrtEventElapsedTime: endEvent completed %.3f ms before startEvent", -elapsed);
    }
    *ms = static_cast<float>(elapsed);
    return ACL_SUCCESS;
}

}  // extern "C"
