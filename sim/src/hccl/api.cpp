// api.cpp -- the exported HCCL functions of the simulator (hccl/hccl.h) and its extension
// functions (acl_fa_sim_hccl.h).
//
// Argument errors are found at the call, before anything is enqueued, and return HCCL_E_PARA /
// HCCL_E_PTR with the reason in aclGetRecentErrMsg (as CANN's error manager records HCCL's
// messages). Errors found while the task runs (peers disagreeing, hangs) are the stream's:
// the next aclrtSynchronizeStream returns them with the message. Every function here can be
// made to fail by fault injection (ACL_FA_SIM_FAIL / aclfaSimSetFaults) under its own name.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "hccl_internal.h"

using namespace acl_fa_sim::hccl;

namespace {

HcclResult Fail(HcclResult code, const std::string &message) {
    aclfaSimSetErrMsg("%s", message.c_str());
    return code;
}

// Code a faulted call returns.
constexpr HcclResult kInjected = HCCL_E_INTERNAL;


// The comm of `handle`, or nullptr with the error recorded.
std::shared_ptr<Comm> CommOf(const char *api, HcclComm handle, HcclResult *ret) {
    if (handle == nullptr) {
        *ret = Fail(HCCL_E_PTR, std::string(api) + ": comm is NULL");
        return nullptr;
    }
    std::shared_ptr<Comm> comm = Lookup(handle);
    if (!comm) *ret = Fail(HCCL_E_PARA, std::string(api) + ": comm is not a live communicator (destroyed or never made)");
    return comm;
}

// Checks that [buf, buf + bytes) is device memory of the calling process.
HcclResult CheckBuffer(const char *api, const char *name, const void *buf, uint64_t bytes) {
    if (bytes == 0) return HCCL_SUCCESS;
    if (buf == nullptr) return Fail(HCCL_E_PTR, std::string(api) + ": " + name + " is NULL");
    void *base = nullptr;
    size_t size = 0;
    if (!aclfaSimFindDeviceAllocation(buf, &base, &size)) {
        return Fail(HCCL_E_PARA, std::string(api) + ": " + name + " is not device memory (aclrtMalloc)");
    }
    const uint64_t end = static_cast<uint64_t>(static_cast<const uint8_t *>(buf) - static_cast<uint8_t *>(base)) + bytes;
    if (end > size) {
        return Fail(HCCL_E_PARA, std::string(api) + ": " + name + " holds " + std::to_string(bytes) +
                                     " bytes from its address but its allocation ends " +
                                     std::to_string(end - size) + " bytes earlier");
    }
    return HCCL_SUCCESS;
}

HcclResult CheckType(const char *api, const char *name, uint32_t dataType) {
    if (DataTypeSize(dataType) == 0) {
        return Fail(HCCL_E_PARA, std::string(api) + ": " + name + " " + std::to_string(dataType) +
                                     " is not an HcclDataType the simulator supports");
    }
    return HCCL_SUCCESS;
}

HcclResult CheckRank(const char *api, const char *name, uint32_t peer, const Comm &comm) {
    if (peer >= comm.nRanks) {
        return Fail(HCCL_E_PARA, std::string(api) + ": " + name + " " + std::to_string(peer) +
                                     " is out of range: the communicator has " + std::to_string(comm.nRanks) + " ranks");
    }
    if (peer == comm.rank) {
        return Fail(HCCL_E_PARA, std::string(api) + ": " + name + " " + std::to_string(peer) +
                                     " is this rank itself");
    }
    return HCCL_SUCCESS;
}

// The calling thread's device must be the comm's (its stream is then the comm's device's).
HcclResult CheckDevice(const char *api, const Comm &comm) {
    int32_t device = -1;
    if (aclrtGetDevice(&device) != ACL_SUCCESS) {
        return Fail(HCCL_E_RUNTIME, std::string(api) + ": no device is current on this thread (aclrtSetDevice " +
                                        std::to_string(comm.device) + " first)");
    }
    if (device != comm.device) {
        return Fail(HCCL_E_PARA, std::string(api) + ": the communicator's rank " + std::to_string(comm.rank) +
                                     " is on device " + std::to_string(comm.device) +
                                     " but the current device is " + std::to_string(device));
    }
    return HCCL_SUCCESS;
}

// A call's work: the items, plus the local steps before and after the exchange.
struct OpTask {
    std::shared_ptr<Comm> comm;
    std::string api;
    std::vector<Item> items;
    // AllReduce: the peers' buffers land in `scratch`, then are reduced in rank order.
    std::vector<uint8_t> scratch;
    void *sendBuf = nullptr;
    void *recvBuf = nullptr;
    uint64_t count = 0;
    uint32_t dataType = 0;
    uint32_t reduceOp = 0;
    uint64_t localBytes = 0;  // AllGather/AlltoAll: own block copied locally
    const uint8_t *localSrc = nullptr;
    uint8_t *localDst = nullptr;
};

aclError RunOp(void *state, char *errBuf, size_t errBufLen) {
    OpTask &task = *static_cast<OpTask *>(state);
    if (task.localBytes > 0) memmove(task.localDst, task.localSrc, task.localBytes);
    std::string message;
    aclError ret = RunItems(*task.comm, task.api.c_str(), task.items, &message);
    if (ret != ACL_SUCCESS) {
        snprintf(errBuf, errBufLen, "%s", message.c_str());
        return ret;
    }
    if (task.api == "HcclAllReduce") {
        const Comm &comm = *task.comm;
        const uint64_t bytes = task.count * DataTypeSize(task.dataType);
        // result = buf_0 op buf_1 op ... in rank order; own buffer at its rank's place.
        std::vector<uint8_t> result(bytes);
        auto bufferOf = [&](uint32_t r) -> const uint8_t * {
            return r == comm.rank ? static_cast<const uint8_t *>(task.sendBuf) : task.scratch.data() + r * bytes;
        };
        memcpy(result.data(), bufferOf(0), bytes);
        for (uint32_t r = 1; r < comm.nRanks; ++r) ReduceInto(result.data(), bufferOf(r), task.count, task.dataType, task.reduceOp);
        memcpy(task.recvBuf, result.data(), bytes);
    }
    return ACL_SUCCESS;
}

void ReleaseOp(void *state) { delete static_cast<OpTask *>(state); }

HcclResult Enqueue(const char *api, std::unique_ptr<OpTask> task, aclrtStream stream) {
    task->api = api;
    OpTask *raw = task.release();
    if (aclfaSimStreamEnqueue(stream, api, RunOp, raw, ReleaseOp) != ACL_SUCCESS) {
        delete raw;
        return Fail(HCCL_E_RUNTIME, std::string(api) + ": the task could not be enqueued on the stream");
    }
    return HCCL_SUCCESS;
}

Item MakeItem(bool send, uint32_t peer, void *buffer, Call call, uint32_t dataType, uint64_t count) {
    Item item;
    item.send = send;
    item.peer = peer;
    item.buffer = static_cast<uint8_t *>(buffer);
    item.header = MessageHeader{call, dataType, count, count * DataTypeSize(dataType)};
    return item;
}

// Common prologue of the calls on a comm and a stream.
// What HcclGetRankSize and HcclGetRankId answer: `field` of the live comm, into *out (`outName`
// in the message when NULL).
HcclResult CommField(const char *api, HcclComm comm, uint32_t Comm::*field, uint32_t *out, const char *outName) {
    if (aclfaSimShouldFail(api)) return kInjected;
    HcclResult ret = HCCL_SUCCESS;
    std::shared_ptr<Comm> found = CommOf(api, comm, &ret);
    if (!found) return ret;
    if (out == nullptr) return Fail(HCCL_E_PTR, std::string(api) + ": " + outName + " is NULL");
    *out = (*found).*field;
    return HCCL_SUCCESS;
}

#define ACLFA_HCCL_PROLOGUE(api)                                                   \
    if (aclfaSimShouldFail(api)) return kInjected;                                 \
    HcclResult ret_ = HCCL_SUCCESS;                                                \
    std::shared_ptr<Comm> comm_ = CommOf(api, comm, &ret_);                        \
    if (!comm_) return ret_;                                                       \
    if ((ret_ = CheckDevice(api, *comm_)) != HCCL_SUCCESS) return ret_;

// HcclSend (send) and HcclRecv (!send): one point-to-point item of `count` elements between `buf`
// and rank `peer` (`bufName` and `peerName` name them in the messages).
HcclResult PointToPoint(const char *api, bool send, void *buf, const char *bufName, uint64_t count,
                        HcclDataType dataType, uint32_t peer, const char *peerName, HcclComm comm,
                        aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE(api)
    if ((ret_ = CheckType(api, "dataType", dataType)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckRank(api, peerName, peer, *comm_)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckBuffer(api, bufName, buf, count * DataTypeSize(dataType))) != HCCL_SUCCESS) return ret_;
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    task->items.push_back(MakeItem(send, peer, buf, Call::kPointToPoint, dataType, count));
    return Enqueue(api, std::move(task), stream);
}

// HcclCommInitClusterInfo(Config): rank `rank` of the rank table at `path`, on the current
// device, which must be the table's device_id for it. The ranks meet in a clique named after the
// table's contents: rank 0 makes it, the others wait for it (HCCL_CONNECT_TIMEOUT).
HcclResult InitFromRankTable(const char *api, const char *path, uint32_t rank, HcclComm *comm) {
    if (path == nullptr || comm == nullptr) {
        return Fail(HCCL_E_PTR, std::string(api) + ": " + (path == nullptr ? "clusterInfo" : "comm") + " is NULL");
    }
    std::vector<RankTableEntry> table;
    std::string digest, error;
    if (!ReadRankTable(path, &table, &digest, &error)) return Fail(HCCL_E_PARA, std::string(api) + ": " + error);
    if (rank >= table.size()) {
        return Fail(HCCL_E_PARA, std::string(api) + ": rank " + std::to_string(rank) + " is not in rank table " + path +
                                     " (rank_id 0 .. " + std::to_string(table.size() - 1) + ")");
    }
    const RankTableEntry &me = table[rank];
    int32_t device = -1;
    if (aclrtGetDevice(&device) != ACL_SUCCESS) {
        return Fail(HCCL_E_RUNTIME, std::string(api) + ": no device is current on this thread (aclrtSetDevice " +
                                        std::to_string(me.device) + " first: rank " + std::to_string(rank) +
                                        "'s device_id in the rank table)");
    }
    if (device != me.device) {
        return Fail(HCCL_E_PARA, std::string(api) + ": rank " + std::to_string(rank) + " is device_id " +
                                     std::to_string(me.device) + " of server " + me.server + " in rank table " + path +
                                     " but the current device is " + std::to_string(device));
    }
    const double deadline = MonotonicSeconds() + EnvSeconds("HCCL_CONNECT_TIMEOUT", 120.0);
    HcclRootInfo rootInfo;
    HcclResult ret = NamedRootInfo("/aclfa_hcclrt_" + digest, rank == 0, deadline, &rootInfo, &error);
    std::shared_ptr<Comm> joined;
    if (ret == HCCL_SUCCESS) {
        ret = JoinOnServer(rootInfo, static_cast<uint32_t>(table.size()), rank, device, me.server, &joined, &error);
    }
    if (ret == HCCL_SUCCESS) ret = AwaitClique(*joined, &error);
    if (ret != HCCL_SUCCESS) return Fail(ret, std::string(api) + ": " + error);
    *comm = Register(std::move(joined));
    return HCCL_SUCCESS;
}

}  // namespace

// hccl/hccl.h has no visibility marker (its library exports every declared function).
#pragma GCC visibility push(default)
extern "C" {

const char *HcclGetErrorString(HcclResult code) {
    // The meanings hccl_types.h gives each code.
    switch (code) {
        case HCCL_SUCCESS: return "success";
        case HCCL_E_PARA: return "parameter error";
        case HCCL_E_PTR: return "empty pointer";
        case HCCL_E_MEMORY: return "memory error";
        case HCCL_E_INTERNAL: return "internal error";
        case HCCL_E_NOT_SUPPORT: return "not support feature";
        case HCCL_E_NOT_FOUND: return "not found specific resource";
        case HCCL_E_UNAVAIL: return "resource unavailable";
        case HCCL_E_SYSCALL: return "call system interface error";
        case HCCL_E_TIMEOUT: return "timeout";
        case HCCL_E_OPEN_FILE_FAILURE: return "open file fail";
        case HCCL_E_TCP_CONNECT: return "tcp connect fail";
        case HCCL_E_ROCE_CONNECT: return "roce connect fail";
        case HCCL_E_TCP_TRANSFER: return "tcp transfer fail";
        case HCCL_E_ROCE_TRANSFER: return "roce transfer fail";
        case HCCL_E_RUNTIME: return "call runtime api fail";
        case HCCL_E_DRV: return "call driver api fail";
        case HCCL_E_PROFILING: return "call profiling api fail";
        case HCCL_E_CCE: return "call cce api fail";
        case HCCL_E_NETWORK: return "call network api fail";
        case HCCL_E_AGAIN: return "try again";
        case HCCL_E_REMOTE: return "error cqe";
        case HCCL_E_SUSPENDING: return "error communicator suspending";
        case HCCL_E_OPRETRY_FAIL: return "retry constraint";
        case HCCL_E_OOM: return "out of memory";
        default: return "unknown HcclResult";
    }
}

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
    if (aclfaSimShouldFail("HcclGetRootInfo")) return kInjected;
    if (rootInfo == nullptr) return Fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
    std::string error;
    HcclResult ret = MakeRootInfo(rootInfo, &error);
    return ret == HCCL_SUCCESS ? ret : Fail(ret, "HcclGetRootInfo: " + error);
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm) {
    if (aclfaSimShouldFail("HcclCommInitRootInfo")) return kInjected;
    const char *api = "HcclCommInitRootInfo";
    if (rootInfo == nullptr || comm == nullptr) {
        return Fail(HCCL_E_PTR, std::string(api) + ": " + (rootInfo == nullptr ? "rootInfo" : "comm") + " is NULL");
    }
    if (nRanks == 0 || nRanks > kMaxRanks) {
        return Fail(HCCL_E_PARA, std::string(api) + ": nRanks " + std::to_string(nRanks) + " is out of range [1, " +
                                     std::to_string(kMaxRanks) + "]");
    }
    if (rank >= nRanks) {
        return Fail(HCCL_E_PARA, std::string(api) + ": rank " + std::to_string(rank) + " is out of range [0, " +
                                     std::to_string(nRanks) + ")");
    }
    int32_t device = -1;
    if (aclrtGetDevice(&device) != ACL_SUCCESS) {
        return Fail(HCCL_E_RUNTIME, std::string(api) + ": no device is current on this thread (aclrtSetDevice first)");
    }
    std::shared_ptr<Comm> joined;
    std::string error;
    // ACL_FA_SIM_HOST (simulator only): the simulated host this process stands for; ranks of one
    // clique on different hosts may use the same device id, and their links are scale-out links.
    const char *host = getenv("ACL_FA_SIM_HOST");
    HcclResult ret = JoinOnServer(*rootInfo, nRanks, rank, device, host != nullptr ? host : "", &joined, &error);
    if (ret == HCCL_SUCCESS) ret = AwaitClique(*joined, &error);
    if (ret != HCCL_SUCCESS) return Fail(ret, std::string(api) + ": " + error);
    *comm = Register(std::move(joined));
    return HCCL_SUCCESS;
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
    if (aclfaSimShouldFail("HcclCommInitClusterInfo")) return kInjected;
    return InitFromRankTable("HcclCommInitClusterInfo", clusterInfo, rank, comm);
}

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank, HcclCommConfig *config,
                                         HcclComm *comm) {
    if (aclfaSimShouldFail("HcclCommInitClusterInfoConfig")) return kInjected;
    const char *api = "HcclCommInitClusterInfoConfig";
    if (config == nullptr) return Fail(HCCL_E_PTR, std::string(api) + ": config is NULL");
    uint32_t magic = 0;
    memcpy(&magic, config->reserved + sizeof(size_t), sizeof(magic));
    if (magic != HCCL_COMM_CONFIG_MAGIC_WORD) {
        return Fail(HCCL_E_PARA, std::string(api) + ": config was not initialized by HcclCommConfigInit");
    }
    // The simulator has no HCCL buffer, algorithm or QoS to configure: the fields are accepted.
    return InitFromRankTable(api, clusterInfo, rank, comm);
}

HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) {
    if (aclfaSimShouldFail("HcclCommInitAll")) return kInjected;
    const char *api = "HcclCommInitAll";
    if (devices == nullptr || comms == nullptr) {
        return Fail(HCCL_E_PTR, std::string(api) + ": " + (devices == nullptr ? "devices" : "comms") + " is NULL");
    }
    uint32_t count = 0;
    if (aclrtGetDeviceCount(&count) != ACL_SUCCESS) return Fail(HCCL_E_RUNTIME, std::string(api) + ": aclrtGetDeviceCount failed");
    if (ndev == 0 || ndev > kMaxRanks) {
        return Fail(HCCL_E_PARA, std::string(api) + ": ndev " + std::to_string(ndev) + " is out of range [1, " +
                                     std::to_string(kMaxRanks) + "]");
    }
    for (uint32_t i = 0; i < ndev; ++i) {
        if (devices[i] < 0 || static_cast<uint32_t>(devices[i]) >= count) {
            return Fail(HCCL_E_PARA, std::string(api) + ": devices[" + std::to_string(i) + "] = " +
                                         std::to_string(devices[i]) + " is out of range: the host has " +
                                         std::to_string(count) + " devices");
        }
        for (uint32_t j = 0; j < i; ++j) {
            if (devices[j] == devices[i]) {
                return Fail(HCCL_E_PARA, std::string(api) + ": devices[" + std::to_string(j) + "] and devices[" +
                                             std::to_string(i) + "] are both device " + std::to_string(devices[i]));
            }
        }
    }
    HcclRootInfo rootInfo;
    std::string error;
    HcclResult ret = MakeRootInfo(&rootInfo, &error);
    std::vector<std::shared_ptr<Comm>> made(ndev);
    for (uint32_t i = 0; i < ndev && ret == HCCL_SUCCESS; ++i) ret = Join(rootInfo, ndev, i, devices[i], &made[i], &error);
    for (uint32_t i = 0; i < ndev && ret == HCCL_SUCCESS; ++i) ret = AwaitClique(*made[i], &error);
    if (ret != HCCL_SUCCESS) return Fail(ret, std::string(api) + ": " + error);
    for (uint32_t i = 0; i < ndev; ++i) comms[i] = Register(std::move(made[i]));
    return HCCL_SUCCESS;
}

HcclResult HcclCommDestroy(HcclComm comm) {
    if (aclfaSimShouldFail("HcclCommDestroy")) return kInjected;
    if (comm == nullptr) return Fail(HCCL_E_PTR, "HcclCommDestroy: comm is NULL");
    // Tasks still queued keep the clique mapped until they end.
    if (!Unregister(comm)) return Fail(HCCL_E_PARA, "HcclCommDestroy: comm is not a live communicator");
    return HCCL_SUCCESS;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) {
    return CommField("HcclGetRankSize", comm, &Comm::nRanks, rankSize, "rankSize");
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) {
    return CommField("HcclGetRankId", comm, &Comm::rank, rank, "rank");
}

HcclResult HcclGetCommName(HcclComm comm, char *commName) {
    if (aclfaSimShouldFail("HcclGetCommName")) return kInjected;
    HcclResult ret = HCCL_SUCCESS;
    std::shared_ptr<Comm> found = CommOf("HcclGetCommName", comm, &ret);
    if (!found) return ret;
    if (commName == nullptr) return Fail(HCCL_E_PTR, "HcclGetCommName: commName is NULL");
    // commName holds up to ROOTINFO_INDENTIFIER_MAX_LENGTH (128) bytes (HCCL's reference).
    snprintf(commName, 128, "%s", CommName(*found).c_str());
    return HCCL_SUCCESS;
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                    aclrtStream stream) {
    return PointToPoint("HcclSend", true, sendBuf, "sendBuf", count, dataType, destRank, "destRank", comm, stream);
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                    aclrtStream stream) {
    return PointToPoint("HcclRecv", false, recvBuf, "recvBuf", count, dataType, srcRank, "srcRank", comm, stream);
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm, aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclBatchSendRecv")
    if (itemNum > 0 && sendRecvInfo == nullptr) return Fail(HCCL_E_PTR, "HcclBatchSendRecv: sendRecvInfo is NULL");
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    for (uint32_t i = 0; i < itemNum; ++i) {
        const HcclSendRecvItem &in = sendRecvInfo[i];
        const std::string where = "sendRecvInfo[" + std::to_string(i) + "]";
        if (in.sendRecvType != HCCL_SEND && in.sendRecvType != HCCL_RECV) {
            return Fail(HCCL_E_PARA, "HcclBatchSendRecv: " + where + ".sendRecvType " +
                                         std::to_string(in.sendRecvType) + " is neither HCCL_SEND nor HCCL_RECV");
        }
        const bool send = in.sendRecvType == HCCL_SEND;
        if ((ret_ = CheckType("HcclBatchSendRecv", (where + ".dataType").c_str(), in.dataType)) != HCCL_SUCCESS) return ret_;
        if ((ret_ = CheckRank("HcclBatchSendRecv", (where + ".remoteRank").c_str(), in.remoteRank, *comm_)) != HCCL_SUCCESS) return ret_;
        if ((ret_ = CheckBuffer("HcclBatchSendRecv", (where + ".buf").c_str(), in.buf, in.count * DataTypeSize(in.dataType))) != HCCL_SUCCESS) return ret_;
        task->items.push_back(MakeItem(send, in.remoteRank, in.buf, Call::kPointToPoint, in.dataType, in.count));
    }
    return Enqueue("HcclBatchSendRecv", std::move(task), stream);
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                         aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclBroadcast")
    if ((ret_ = CheckType("HcclBroadcast", "dataType", dataType)) != HCCL_SUCCESS) return ret_;
    if (root >= comm_->nRanks) {
        return Fail(HCCL_E_PARA, "HcclBroadcast: root " + std::to_string(root) + " is out of range: the communicator has " +
                                     std::to_string(comm_->nRanks) + " ranks");
    }
    if ((ret_ = CheckBuffer("HcclBroadcast", "buf", buf, count * DataTypeSize(dataType))) != HCCL_SUCCESS) return ret_;
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    // Direct algorithm: the root sends its buffer to every other rank (per-link bytes: count x
    // itemsize from the root to each peer, none between the others).
    if (comm_->rank == root) {
        for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
            if (peer != root) task->items.push_back(MakeItem(true, peer, buf, Call::kBroadcast, dataType, count));
        }
    } else {
        task->items.push_back(MakeItem(false, root, buf, Call::kBroadcast, dataType, count));
    }
    return Enqueue("HcclBroadcast", std::move(task), stream);
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                         aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclAllGather")
    if ((ret_ = CheckType("HcclAllGather", "dataType", dataType)) != HCCL_SUCCESS) return ret_;
    const uint64_t block = sendCount * DataTypeSize(dataType);
    if ((ret_ = CheckBuffer("HcclAllGather", "sendBuf", sendBuf, block)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckBuffer("HcclAllGather", "recvBuf", recvBuf, block * comm_->nRanks)) != HCCL_SUCCESS) return ret_;
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    uint8_t *recv = static_cast<uint8_t *>(recvBuf);
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        if (peer == comm_->rank) continue;
        task->items.push_back(MakeItem(true, peer, sendBuf, Call::kAllGather, dataType, sendCount));
        task->items.push_back(MakeItem(false, peer, recv + peer * block, Call::kAllGather, dataType, sendCount));
    }
    task->localSrc = static_cast<uint8_t *>(sendBuf);
    task->localDst = recv + comm_->rank * block;
    task->localBytes = block;
    return Enqueue("HcclAllGather", std::move(task), stream);
}

HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
                        uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclAlltoAll")
    if ((ret_ = CheckType("HcclAlltoAll", "sendType", sendType)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckType("HcclAlltoAll", "recvType", recvType)) != HCCL_SUCCESS) return ret_;
    if (sendType != recvType || sendCount != recvCount) {
        return Fail(HCCL_E_PARA, "HcclAlltoAll: the simulator moves blocks unchanged: sendCount/sendType (" +
                                     std::to_string(sendCount) + ", " + DataTypeName(sendType) +
                                     ") must equal recvCount/recvType (" + std::to_string(recvCount) + ", " +
                                     DataTypeName(recvType) + ")");
    }
    const uint64_t block = sendCount * DataTypeSize(sendType);
    if ((ret_ = CheckBuffer("HcclAlltoAll", "sendBuf", sendBuf, block * comm_->nRanks)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckBuffer("HcclAlltoAll", "recvBuf", recvBuf, block * comm_->nRanks)) != HCCL_SUCCESS) return ret_;
    if (sendBuf == recvBuf && comm_->nRanks > 1 && block > 0) {
        return Fail(HCCL_E_PARA, "HcclAlltoAll: sendBuf and recvBuf are the same buffer (in place is not supported)");
    }
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    uint8_t *send = static_cast<uint8_t *>(const_cast<void *>(sendBuf));
    uint8_t *recv = static_cast<uint8_t *>(const_cast<void *>(recvBuf));
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        if (peer == comm_->rank) continue;
        task->items.push_back(MakeItem(true, peer, send + peer * block, Call::kAlltoAll, sendType, sendCount));
        task->items.push_back(MakeItem(false, peer, recv + peer * block, Call::kAlltoAll, sendType, sendCount));
    }
    task->localSrc = send + comm_->rank * block;
    task->localDst = recv + comm_->rank * block;
    task->localBytes = block;
    return Enqueue("HcclAlltoAll", std::move(task), stream);
}

HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls, HcclDataType sendType,
                         const void *recvBuf, const void *recvCounts, const void *rdispls, HcclDataType recvType,
                         HcclComm comm, aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclAlltoAllV")
    if ((ret_ = CheckType("HcclAlltoAllV", "sendType", sendType)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckType("HcclAlltoAllV", "recvType", recvType)) != HCCL_SUCCESS) return ret_;
    if (sendType != recvType) {
        return Fail(HCCL_E_PARA, std::string("HcclAlltoAllV: the simulator moves elements unchanged: sendType ") +
                                     DataTypeName(sendType) + " must equal recvType " + DataTypeName(recvType));
    }
    const char *arrayNames[4] = {"sendCounts", "sdispls", "recvCounts", "rdispls"};
    const void *arrays[4] = {sendCounts, sdispls, recvCounts, rdispls};
    for (int i = 0; i < 4; ++i) {
        if (arrays[i] == nullptr) return Fail(HCCL_E_PTR, std::string("HcclAlltoAllV: ") + arrayNames[i] + " is NULL");
    }
    // Host arrays of nRanks uint64_t each, in elements (the real API's units).
    const uint64_t *sc = static_cast<const uint64_t *>(sendCounts), *sd = static_cast<const uint64_t *>(sdispls);
    const uint64_t *rc = static_cast<const uint64_t *>(recvCounts), *rd = static_cast<const uint64_t *>(rdispls);
    const uint64_t size = DataTypeSize(sendType);
    const uint32_t self = comm_->rank;
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        const std::string at = "[" + std::to_string(peer) + "]";
        if ((ret_ = CheckBuffer("HcclAlltoAllV", ("sendBuf block " + at).c_str(),
                                static_cast<const uint8_t *>(sendBuf) + sd[peer] * size, sc[peer] * size)) != HCCL_SUCCESS) {
            return ret_;
        }
        if ((ret_ = CheckBuffer("HcclAlltoAllV", ("recvBuf block " + at).c_str(),
                                static_cast<const uint8_t *>(recvBuf) + rd[peer] * size, rc[peer] * size)) != HCCL_SUCCESS) {
            return ret_;
        }
    }
    if (sc[self] != rc[self]) {
        return Fail(HCCL_E_PARA, "HcclAlltoAllV: rank " + std::to_string(self) + " sends itself sendCounts[" +
                                     std::to_string(self) + "] = " + std::to_string(sc[self]) + " elements but expects recvCounts[" +
                                     std::to_string(self) + "] = " + std::to_string(rc[self]));
    }
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    uint8_t *send = static_cast<uint8_t *>(const_cast<void *>(sendBuf));
    uint8_t *recv = static_cast<uint8_t *>(const_cast<void *>(recvBuf));
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        if (peer == self) continue;
        // Counts of zero still send a header, so a peer expecting data learns it gets none.
        task->items.push_back(MakeItem(true, peer, send + sd[peer] * size, Call::kAlltoAllV, sendType, sc[peer]));
        task->items.push_back(MakeItem(false, peer, recv + rd[peer] * size, Call::kAlltoAllV, recvType, rc[peer]));
    }
    task->localSrc = send + sd[self] * size;
    task->localDst = recv + rd[self] * size;
    task->localBytes = sc[self] * size;
    return Enqueue("HcclAlltoAllV", std::move(task), stream);
}

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                         HcclComm comm, aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclAllReduce")
    if ((ret_ = CheckType("HcclAllReduce", "dataType", dataType)) != HCCL_SUCCESS) return ret_;
    if (op != HCCL_REDUCE_SUM && op != HCCL_REDUCE_PROD && op != HCCL_REDUCE_MAX && op != HCCL_REDUCE_MIN) {
        return Fail(HCCL_E_PARA, "HcclAllReduce: op " + std::to_string(op) + " is not an HcclReduceOp");
    }
    if (dataType == HCCL_DATA_TYPE_INT128) return Fail(HCCL_E_NOT_SUPPORT, "HcclAllReduce: int128 cannot be reduced");
    const uint64_t bytes = count * DataTypeSize(dataType);
    if ((ret_ = CheckBuffer("HcclAllReduce", "sendBuf", sendBuf, bytes)) != HCCL_SUCCESS) return ret_;
    if ((ret_ = CheckBuffer("HcclAllReduce", "recvBuf", recvBuf, bytes)) != HCCL_SUCCESS) return ret_;
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    task->scratch.resize(bytes * comm_->nRanks);
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        if (peer == comm_->rank) continue;
        task->items.push_back(MakeItem(true, peer, sendBuf, Call::kAllReduce, dataType, count));
        task->items.push_back(MakeItem(false, peer, task->scratch.data() + peer * bytes, Call::kAllReduce, dataType, count));
    }
    task->sendBuf = sendBuf;
    task->recvBuf = recvBuf;
    task->count = count;
    task->dataType = dataType;
    task->reduceOp = op;
    return Enqueue("HcclAllReduce", std::move(task), stream);
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
    ACLFA_HCCL_PROLOGUE("HcclBarrier")
    auto task = std::make_unique<OpTask>();
    task->comm = comm_;
    for (uint32_t peer = 0; peer < comm_->nRanks; ++peer) {
        if (peer == comm_->rank) continue;
        task->items.push_back(MakeItem(true, peer, nullptr, Call::kBarrier, HCCL_DATA_TYPE_INT8, 0));
        task->items.push_back(MakeItem(false, peer, nullptr, Call::kBarrier, HCCL_DATA_TYPE_INT8, 0));
    }
    return Enqueue("HcclBarrier", std::move(task), stream);
}

// ---- extension functions -----------------------------------------------------------------

HcclResult aclfaSimHcclGetLinkModel(int32_t srcDevice, int32_t dstDevice, aclfaSimHcclLink *link) {
    if (link == nullptr) return Fail(HCCL_E_PTR, "aclfaSimHcclGetLinkModel: link is NULL");
    if (srcDevice < 0 || dstDevice < 0) return Fail(HCCL_E_PARA, "aclfaSimHcclGetLinkModel: device ids must be >= 0");
    *link = LinkBetween(srcDevice, dstDevice);
    return HCCL_SUCCESS;
}

HcclResult aclfaSimHcclGetLinkStats(HcclComm comm, uint32_t srcRank, uint32_t dstRank, aclfaSimHcclLinkStats *stats) {
    HcclResult ret = HCCL_SUCCESS;
    std::shared_ptr<Comm> found = CommOf("aclfaSimHcclGetLinkStats", comm, &ret);
    if (!found) return ret;
    if (stats == nullptr) return Fail(HCCL_E_PTR, "aclfaSimHcclGetLinkStats: stats is NULL");
    if (srcRank >= found->nRanks || dstRank >= found->nRanks) {
        return Fail(HCCL_E_PARA, "aclfaSimHcclGetLinkStats: ranks " + std::to_string(srcRank) + " -> " +
                                     std::to_string(dstRank) + " out of range [0, " + std::to_string(found->nRanks) + ")");
    }
    ControlLock lock(found->control);
    *stats = found->control->channels[srcRank][dstRank].stats;
    stats->link = LinkBetweenRanks(*found->control, srcRank, dstRank);
    return HCCL_SUCCESS;
}

HcclResult aclfaSimHcclResetLinkStats(HcclComm comm) {
    HcclResult ret = HCCL_SUCCESS;
    std::shared_ptr<Comm> found = CommOf("aclfaSimHcclResetLinkStats", comm, &ret);
    if (!found) return ret;
    ControlLock lock(found->control);
    for (uint32_t dst = 0; dst < found->nRanks; ++dst) found->control->channels[found->rank][dst].stats = {};
    return HCCL_SUCCESS;
}

}  // extern "C"
#pragma GCC visibility pop

namespace {
// Loading the simulated HCCL makes a multi-device host the default (ACL_FA_SIM_DEVICE_COUNT
// still decides when set).
struct DefaultDevices {
    DefaultDevices() { aclfaSimSetDefaultDeviceCount(8); }
} g_defaultDevices;
}  // namespace
