// kernel_server.cpp -- the HCCL server behind Ascend C's kernel-side client (lib/hccl/hccl.h):
// what the AICPU does for an MC2 kernel on the chip. One server per launch and communicator
// (aclfaSimHcclKernelContext): the working core prepares tasks (checked here against the
// communicator at once), commits them in order, and a server thread runs them one after the
// other through the clique's channels (transfer.cpp), so their messages meet the peers' in
// the same order. Every core may wait for a task; a failed task fails every Wait on it and the
// context's destruction.
//
// Modeled link time of a task (what the kernel's trace costs it, docs/hccl.md "Communication
// fused into the kernel"): each message pays latency + bytes / bandwidth of its link
// (LinkBetween); messages to peers of this server go over their own HCCS links in parallel,
// messages to other servers share this device's RoCE port one after the other. The task
// lasts the longer of the two.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acl_fa_sim_hccl_kernel.h"
#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

// AscendC::HcclCMDType values the server runs (lib/hccl/hccl_common.h).
constexpr uint32_t kCmdAllGather = 6;
constexpr uint32_t kCmdAlltoAllV = 8;
constexpr uint32_t kCmdAlltoAll = 10;
constexpr int32_t kMaxTasks = 63;
constexpr double kDefaultExecTimeout = 1836.0;  // HCCL_EXEC_TIMEOUT's default, as transfer.cpp

enum class TaskState { kFree, kPrepared, kCommitted, kDone, kFailed };

struct KernelTask {
    TaskState state = TaskState::kFree;
    const char *api = "";
    std::vector<Item> items;
    std::vector<std::pair<const uint8_t *, uint8_t *>> localCopies;  // own block(s): src, dst
    uint64_t localBytes = 0;  // bytes of each local copy
    double seconds = 0;  // modeled link time
    std::string error;
};

Item MakeMessage(bool send, uint32_t peer, uint8_t *buffer, Call call, uint32_t dataType, uint64_t count) {
    Item item;
    item.send = send;
    item.peer = peer;
    item.buffer = buffer;
    item.header = MessageHeader{call, dataType, count, count * DataTypeSize(dataType)};
    return item;
}

// Whether [buf, buf + bytes) lies in one live device allocation; else the reason.
bool DeviceRange(const uint8_t *buf, uint64_t bytes, const char *name, std::string *why) {
    if (bytes == 0) return true;
    void *base = nullptr;
    size_t size = 0;
    if (buf == nullptr || !aclfaSimFindDeviceAllocation(buf, &base, &size)) {
        *why = std::string(name) + " is not device memory (aclrtMalloc)";
        return false;
    }
    const uint64_t end = static_cast<uint64_t>(buf - static_cast<uint8_t *>(base)) + bytes;
    if (end > size) {
        *why = std::string(name) + " needs " + std::to_string(bytes) +
               " bytes from its address but its allocation ends " + std::to_string(end - size) + " bytes earlier";
        return false;
    }
    return true;
}

}  // namespace
}  // namespace hccl
}  // namespace acl_fa_sim

using namespace acl_fa_sim::hccl;

struct aclfaSimHcclKernelServer {
    std::shared_ptr<Comm> comm;
    aclfaSimHcclKernelContext context{};
    std::mutex mutex;
    std::condition_variable changed;
    KernelTask tasks[kMaxTasks];
    std::deque<int32_t> queue;  // committed, not yet run
    bool stopping = false;
    std::thread thread;

    // Runs committed tasks in commit order until stopping and the queue is empty.
    void Serve() {
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
            changed.wait(lock, [&] { return stopping || !queue.empty(); });
            if (queue.empty()) return;
            const int32_t h = queue.front();
            queue.pop_front();
            KernelTask &task = tasks[h];
            lock.unlock();
            for (auto &copy : task.localCopies) memmove(copy.second, copy.first, task.localBytes);
            std::string message;
            const aclError rc = RunItems(*comm, task.api, task.items, &message);
            lock.lock();
            task.state = rc == ACL_SUCCESS ? TaskState::kDone : TaskState::kFailed;
            task.error = message;
            changed.notify_all();
        }
    }
};

namespace {

// The modeled seconds of `items`' sends from this rank (see the file comment).
double ModeledSeconds(const Comm &comm, const std::vector<Item> &items) {
    const Control &control = *comm.control;
    std::vector<double> perPeer(comm.nRanks, 0.0);
    double roce = 0.0;
    for (const Item &item : items) {
        // A zero-count block of an AlltoAllV only tells the peer it gets nothing: not costed
        // (assumed: the server skips empty blocks; the simulator still sends their headers).
        if (!item.send || item.header.bytes == 0) continue;
        const aclfaSimHcclLink link = LinkBetween(control.rankDevice[comm.rank], control.rankDevice[item.peer]);
        const double t = link.latencyUs * 1e-6 + static_cast<double>(item.header.bytes) / (link.bandwidthGBs * 1e9);
        const int32_t perServer = static_cast<int32_t>(std::max<uint32_t>(link.devicesPerServer, 1));
        if (control.rankDevice[comm.rank] / perServer == control.rankDevice[item.peer] / perServer) {
            perPeer[item.peer] += t;
        } else {
            roce += t;
        }
    }
    return std::max(*std::max_element(perPeer.begin(), perPeer.end()), roce);
}

// AlltoAllV (Hccl::AlltoAllV): block j of sendCounts[j] elements at sdispls[j] to rank j, block i
// from rank i into rdispls[i]; repeat r moves every displacement on by r counts (hccl.h). A
// zero count still sends its header, so a receiver expecting data from a rank that sends none
// fails naming both (transfer.cpp) instead of hanging.
int32_t PrepareAlltoAllV(const Comm &comm, const aclfaSimHcclKernelTask *spec, KernelTask *task, char *err,
                         uint64_t errLen) {
    auto fail = [&](const std::string &why) {
        snprintf(err, errLen, "%s", why.c_str());
        return -1;
    };
    const uint32_t n = comm.nRanks, self = comm.rank;
    const uint64_t elem = DataTypeSize(spec->dataType);
    if (spec->sendCounts[self] != spec->recvCounts[self]) {
        return fail("rank " + std::to_string(self) + " sends itself sendCounts[" + std::to_string(self) + "] = " +
                    std::to_string(spec->sendCounts[self]) + " elements but expects recvCounts[" +
                    std::to_string(self) + "] = " + std::to_string(spec->recvCounts[self]));
    }
    task->api = "Hccl::AlltoAllV";
    task->localBytes = spec->sendCounts[self] * elem;
    for (uint32_t r = 0; r < spec->repeat; ++r) {
        for (uint32_t peer = 0; peer < n; ++peer) {
            uint8_t *send = spec->sendBuf + (spec->sdispls[peer] + r * spec->sendCounts[peer]) * elem;
            uint8_t *recv = spec->recvBuf + (spec->rdispls[peer] + r * spec->recvCounts[peer]) * elem;
            const std::string at = "[" + std::to_string(peer) + "] (repeat " + std::to_string(r) + ")";
            std::string why;
            if (!DeviceRange(send, spec->sendCounts[peer] * elem, ("sendBuf block" + at).c_str(), &why) ||
                !DeviceRange(recv, spec->recvCounts[peer] * elem, ("recvBuf block" + at).c_str(), &why)) {
                return fail(why);
            }
            if (peer == self) {
                if (task->localBytes != 0) task->localCopies.emplace_back(send, recv);
                continue;
            }
            task->items.push_back(MakeMessage(true, peer, send, Call::kAlltoAllV, spec->dataType, spec->sendCounts[peer]));
            task->items.push_back(MakeMessage(false, peer, recv, Call::kAlltoAllV, spec->dataType, spec->recvCounts[peer]));
        }
    }
    task->seconds = ModeledSeconds(comm, task->items);
    task->state = TaskState::kPrepared;
    return 0;
}

int32_t Prepare(aclfaSimHcclKernelServer *server, int32_t handle, const aclfaSimHcclKernelTask *spec, char *err,
                uint64_t errLen) {
    auto fail = [&](const std::string &why) {
        snprintf(err, errLen, "%s", why.c_str());
        return -1;
    };
    if (handle < 0 || handle >= kMaxTasks) return fail("handle " + std::to_string(handle) + " out of range");
    std::lock_guard<std::mutex> lock(server->mutex);
    KernelTask &task = server->tasks[handle];
    if (task.state != TaskState::kFree) {
        return fail("task " + std::to_string(handle) + " was prepared twice: the Prepare interfaces run on one kind "
                    "of core only (AIC or AIV) unless the Hccl config names the core type");
    }
    const Comm &comm = *server->comm;
    const size_t elem = DataTypeSize(spec->dataType);
    if (elem == 0) return fail("data type " + std::to_string(spec->dataType) + " is not one the simulator moves");
    const uint32_t n = comm.nRanks;
    const uint64_t block = spec->count * elem;
    const uint64_t stride = (spec->strideCount != 0 ? spec->strideCount : spec->count) * elem;
    if (spec->strideCount != 0 && spec->strideCount < spec->count) {
        return fail("strideCount " + std::to_string(spec->strideCount) + " is less than the count " +
                    std::to_string(spec->count) + ": the blocks would overlap");
    }
    task = KernelTask{};
    if (spec->opType == kCmdAlltoAllV) return PrepareAlltoAllV(comm, spec, &task, err, errLen);
    task.localBytes = block;
    const bool gather = spec->opType == kCmdAllGather;
    if (!gather && spec->opType != kCmdAlltoAll) {
        return fail("opType " + std::to_string(spec->opType) + " is not run by the simulator's HCCL server "
                    "(AllGather, AlltoAll, AlltoAllV)");
    }
    task.api = gather ? "Hccl::AllGather" : "Hccl::AlltoAll";
    const Call call = gather ? Call::kAllGather : Call::kAlltoAll;
    // Repeat i works on the buffers moved by i * count elements (hccl.h, "repeat").
    for (uint32_t r = 0; r < spec->repeat; ++r) {
        uint8_t *send = spec->sendBuf + r * block;
        uint8_t *recv = spec->recvBuf + r * block;
        std::string why;
        const uint64_t sendSpan = gather ? block : (n - 1) * stride + block;
        if (!DeviceRange(send, sendSpan, "sendBuf", &why) ||
            !DeviceRange(recv, (n - 1) * stride + block, "recvBuf", &why)) {
            return fail(why + " (repeat " + std::to_string(r) + ")");
        }
        for (uint32_t peer = 0; peer < n; ++peer) {
            uint8_t *out = gather ? send : send + peer * stride;
            if (peer == comm.rank) {
                task.localCopies.emplace_back(out, recv + comm.rank * stride);
                continue;
            }
            task.items.push_back(MakeMessage(true, peer, out, call, spec->dataType, spec->count));
            task.items.push_back(MakeMessage(false, peer, recv + peer * stride, call, spec->dataType, spec->count));
        }
    }
    task.seconds = ModeledSeconds(comm, task.items);
    task.state = TaskState::kPrepared;
    return 0;
}

double Commit(aclfaSimHcclKernelServer *server, int32_t handle) {
    std::lock_guard<std::mutex> lock(server->mutex);
    KernelTask &task = server->tasks[handle];
    if (task.state != TaskState::kPrepared) return 0.0;
    task.state = TaskState::kCommitted;
    server->queue.push_back(handle);
    server->changed.notify_all();
    return task.seconds;
}

int32_t Wait(aclfaSimHcclKernelServer *server, int32_t handle, const volatile bool *abortFlag, char *err,
             uint64_t errLen) {
    const double limit = EnvSeconds("HCCL_EXEC_TIMEOUT", kDefaultExecTimeout);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
    std::unique_lock<std::mutex> lock(server->mutex);
    for (;;) {
        const KernelTask &task = server->tasks[handle];
        if (task.state == TaskState::kDone) return 0;
        if (task.state == TaskState::kFailed) {
            snprintf(err, errLen, "%s", task.error.c_str());
            return -1;
        }
        if (abortFlag != nullptr && *abortFlag) {
            snprintf(err, errLen, "the launch stopped (another core failed)");
            return -1;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            snprintf(err, errLen, "task %d %s within HCCL_EXEC_TIMEOUT=%g s", handle,
                     task.state == TaskState::kCommitted ? "did not complete" : "was not committed by the working core",
                     limit);
            return -1;
        }
        server->changed.wait_for(lock, std::chrono::milliseconds(50));
    }
}

int32_t Query(aclfaSimHcclKernelServer *server, int32_t handle) {
    std::lock_guard<std::mutex> lock(server->mutex);
    const TaskState state = server->tasks[handle].state;
    return state == TaskState::kDone ? 1 : state == TaskState::kFailed ? -1 : 0;
}

}  // namespace

int32_t aclfaSimHcclKernelContextCreate(void *comm, aclfaSimHcclKernelContext **context) {
    if (context == nullptr) {
        aclfaSimSetErrMsg("aclfaSimHcclKernelContextCreate: context is NULL");
        return HCCL_E_PTR;
    }
    std::shared_ptr<Comm> c = Lookup(static_cast<HcclComm>(comm));
    if (!c) {
        aclfaSimSetErrMsg("aclfaSimHcclKernelContextCreate: comm is not a live communicator");
        return HCCL_E_PARA;
    }
    auto *server = new aclfaSimHcclKernelServer;
    server->comm = std::move(c);
    aclfaSimHcclKernelContext &ctx = server->context;
    ctx.magic = ACLFA_SIM_HCCL_KERNEL_CONTEXT_MAGIC;
    ctx.rankId = server->comm->rank;
    ctx.rankDim = server->comm->nRanks;
    ctx.server = server;
    ctx.prepare = Prepare;
    ctx.commit = Commit;
    ctx.wait = Wait;
    ctx.query = Query;
    server->thread = std::thread([server] { server->Serve(); });
    *context = &ctx;
    return HCCL_SUCCESS;
}

int32_t aclfaSimHcclCommForGroup(const char *group, int32_t device, void **comm) {
    if (group == nullptr || comm == nullptr) {
        aclfaSimSetErrMsg("aclfaSimHcclCommForGroup: %s is NULL", group == nullptr ? "group" : "comm");
        return HCCL_E_PTR;
    }
    *comm = FindByName(group, device);
    if (*comm == nullptr) {
        aclfaSimSetErrMsg("no live HCCL communicator named \"%s\" on device %d in this process (the group attr "
                          "of an MC2 op is HcclGetCommName of a comm of the launching device)", group, device);
        return HCCL_E_NOT_FOUND;
    }
    return HCCL_SUCCESS;
}

int32_t aclfaSimHcclKernelContextDestroy(aclfaSimHcclKernelContext *context) {
    if (context == nullptr) return HCCL_SUCCESS;
    aclfaSimHcclKernelServer *server = context->server;
    {
        std::lock_guard<std::mutex> lock(server->mutex);
        server->stopping = true;
        server->changed.notify_all();
    }
    server->thread.join();
    std::string failure;
    for (const KernelTask &task : server->tasks) {
        if (task.state == TaskState::kFailed && failure.empty()) failure = task.error;
    }
    context->magic = 0;
    delete server;
    if (!failure.empty()) {
        aclfaSimSetErrMsg("%s", failure.c_str());
        return HCCL_E_INTERNAL;
    }
    return HCCL_SUCCESS;
}
