// hccl_internal.h -- what the modules of the simulated HCCL (libhccl.so) share. Not installed.
//
// Model. A clique (the ranks of one communicator) lives in POSIX shared memory, so that ranks
// may be threads of one process (HcclCommInitAll) or processes of one host (HcclGetRootInfo +
// HcclCommInitRootInfo, root info passed out of band): a control block (one process-shared
// robust mutex and condition variable, the join table, one Channel per ordered rank pair) made
// by HcclGetRootInfo, and a data segment (one staging chunk per ordered pair) made by the first
// rank to join. Every collective and point-to-point call becomes a list of Items (messages to
// send to and receive from peers) run by a task on the caller's stream; the task ends only when
// every item has met its peer's matching item. A channel carries one message at a time, in
// chunks of the staging size; a message's header (call, dtype, count) lets the receiver detect
// calls that disagree, which aborts the clique with a message naming both ranks.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl_fa_sim.h"
#include "acl_fa_sim_hccl.h"
#include "hccl/hccl.h"

namespace acl_fa_sim {
namespace hccl {

constexpr uint32_t kMaxRanks = 64;  // = the simulator's device limit (ACL_FA_SIM_DEVICE_COUNT)
constexpr size_t kServerIdBytes = 64;  // a server id (rank table server_id) with its NUL

// What a message belongs to; a receiver accepts only the kind its own call expects.
enum class Call : uint32_t { kPointToPoint = 0, kAllReduce, kAllGather, kAlltoAll, kBarrier, kAlltoAllV, kBroadcast };
const char *CallName(Call call);

// Whether process `pid` still runs: false for one that exited, zombies included (clique.cpp).
bool ProcessAlive(int32_t pid);

struct MessageHeader {
    Call call;
    uint32_t dataType;  // HcclDataType
    uint64_t count;     // elements
    uint64_t bytes;
};

enum ChunkState : uint32_t { kChunkEmpty = 0, kChunkFilling, kChunkFull, kChunkDraining };

// One ordered rank pair src -> dst, in the control block. Guarded by Control::mutex.
struct Channel {
    uint64_t posted;     // messages whose header the sender has posted
    uint64_t delivered;  // messages the receiver has taken in full; posted - delivered <= 1
    MessageHeader header;  // of message `posted`, valid while posted > delivered
    uint32_t chunkState;   // ChunkState of the staging chunk
    uint64_t chunkBytes;   // bytes in the chunk when full
    aclfaSimHcclLinkStats stats;
};

constexpr uint64_t kControlMagic = 0x61636c6661686363ULL;  // "aclfahcc"

struct Control {
    uint64_t magic;
    pthread_mutex_t mutex;   // process-shared, robust
    pthread_cond_t changed;  // process-shared, CLOCK_MONOTONIC; broadcast on every state change
    uint32_t nRanks;         // 0 until the first rank joins
    uint32_t joined;
    uint32_t mapped;         // ranks that mapped the data segment; the last one unlinks the names
    uint64_t chunkBytes;     // staging chunk per channel
    double createdAt;        // MonotonicSeconds() when HcclGetRootInfo made it (boot-wide clock)
    uint8_t rankJoined[kMaxRanks];
    int32_t rankPid[kMaxRanks];
    int32_t rankDevice[kMaxRanks];
    int32_t abortCode;       // aclError of the failure that aborted the clique, 0 = healthy
    char abortMessage[1024];
    Channel channels[kMaxRanks][kMaxRanks];  // [src][dst]
    // The simulated host ("server") of each rank: its rank table's server_id, or ACL_FA_SIM_HOST
    // for a rank joined from root info ("" = this host). Device ids are per server: two ranks
    // share a device id only on different servers; links between servers are scale-out links.
    char rankServer[kMaxRanks][kServerIdBytes];
    int32_t creatorPid;      // the process that made the control block (a rank table's rank 0)
};

// What the root info holds (inside HcclRootInfo::internal).
struct RootInfoBody {
    char magic[16];      // "acl-fa-sim-hccl"
    char shmName[64];    // control block's POSIX shm name
    int32_t creatorPid;
};

// One rank's view of a clique: a communicator handle. Shared by the tasks that use it, so a
// destroyed comm stays mapped until its last task ends.
struct Comm {
    ~Comm();
    std::string shmName;
    Control *control = nullptr;
    uint8_t *data = nullptr;
    size_t dataBytes = 0;
    uint32_t rank = 0;
    uint32_t nRanks = 0;
    int32_t device = 0;
    std::string server;  // simulated host, as Control::rankServer[rank]
    uint8_t *Chunk(uint32_t src, uint32_t dst) const {
        return data + (static_cast<size_t>(src) * nRanks + dst) * control->chunkBytes;
    }
};

// ---- clique.cpp: root info, joining, the communicator registry --------------------------
HcclResult MakeRootInfo(HcclRootInfo *rootInfo, std::string *error);
// Maps the root info's control block and joins it as `rank` of `nRanks` on `device` (no wait).
HcclResult Join(const HcclRootInfo &rootInfo, uint32_t nRanks, uint32_t rank, int32_t device,
                std::shared_ptr<Comm> *comm, std::string *error);
// Join on simulated host `server` ("" = this host): device ids are per server.
HcclResult JoinOnServer(const HcclRootInfo &rootInfo, uint32_t nRanks, uint32_t rank, int32_t device,
                        const std::string &server, std::shared_ptr<Comm> *comm, std::string *error);
// A clique found by name instead of root info (rank tables): `create` makes the control block
// under `name` (a stale one, whose maker exited, is replaced); otherwise waits until `deadline`
// (MonotonicSeconds) for its maker. Either way fills *rootInfo for JoinOnServer.
HcclResult NamedRootInfo(const std::string &name, bool create, double deadline, HcclRootInfo *rootInfo,
                         std::string *error);
// Waits until all ranks joined (HCCL_CONNECT_TIMEOUT), then maps the data segment.
HcclResult AwaitClique(Comm &comm, std::string *error);
HcclComm Register(std::shared_ptr<Comm> comm);
std::shared_ptr<Comm> Lookup(HcclComm handle);
// The comm's name (HcclGetCommName): the same on every rank of its clique.
std::string CommName(const Comm &comm);
// The live comm of this process named `name` whose device is `device`; nullptr when none.
HcclComm FindByName(const std::string &name, int32_t device);
bool Unregister(HcclComm handle);

// Locks the control block; a lock whose owner died is recovered and aborts the clique.
class ControlLock {
public:
    explicit ControlLock(Control *control);
    ~ControlLock();
    ControlLock(const ControlLock &) = delete;
    ControlLock &operator=(const ControlLock &) = delete;
    // Waits for a change until `deadline` (CLOCK_MONOTONIC seconds).
    void WaitUntil(double deadline);
    // Around a copy whose chunk the caller has claimed (Filling/Draining).
    void Unlock();
    void Lock();
private:
    Control *control_;
};
double MonotonicSeconds();
// Seconds from the env var `name` (a positive number), else `fallback`.
double EnvSeconds(const char *name, double fallback);
// Marks the clique failed (first failure wins); control must be locked.
void Abort(Control &control, aclError code, const std::string &message);

// ---- transfer.cpp: the progress engine ---------------------------------------------------
struct Item {
    bool send = false;
    uint32_t peer = 0;
    uint8_t *buffer = nullptr;  // device memory of this rank (host memory in the simulator)
    MessageHeader header{};     // sent, or expected from the peer
    // progress
    bool posted = false;  // send: header posted; recv: header checked
    uint64_t offset = 0;
    bool done = false;
};
// Runs the items to completion (HCCL_EXEC_TIMEOUT without progress is a hang). On failure
// returns the aclError the stream reports and sets *message.
aclError RunItems(Comm &comm, const char *api, std::vector<Item> &items, std::string *message);

// ---- links.cpp ----------------------------------------------------------------------------
aclfaSimHcclLink LinkBetween(int32_t srcDevice, int32_t dstDevice);
// The link between two ranks of a clique: scale-out between servers, else LinkBetween.
aclfaSimHcclLink LinkBetweenRanks(const Control &control, uint32_t src, uint32_t dst);

// ---- rank_table.cpp: HCCL rank table files (JSON, version 1.0 / 1.2) ----------------------
struct RankTableEntry {
    uint32_t rank = 0;    // rank_id
    int32_t device = 0;   // device_id: numbered from 0 on each server
    std::string server;   // server_id
    std::string deviceIp;  // device_ip (kept, unused by the simulator)
};
// Reads and checks the rank table at `path`: entries indexed by rank (0 .. n-1, each once),
// device ids unique per server. False with *error naming the field and its place.
bool ReadRankTable(const char *path, std::vector<RankTableEntry> *ranks, std::string *digest, std::string *error);

// ---- dtypes / reduce (reduce.cpp) --------------------------------------------------------
// Element size of an HcclDataType the simulator moves, 0 when it does not know the type.
size_t DataTypeSize(uint32_t dataType);
const char *DataTypeName(uint32_t dataType);
// dst = dst (op) src over count elements; false when the type cannot be reduced.
bool ReduceInto(void *dst, const void *src, uint64_t count, uint32_t dataType, uint32_t op);

}  // namespace hccl
}  // namespace acl_fa_sim
