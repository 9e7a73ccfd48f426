// transfer.cpp -- the progress engine: runs one call's items (messages to and from peers)
// until each has met its peer's matching item, through the clique's staging chunks.
//
// Rules (see hccl_internal.h): a channel holds one message at a time; a sender posts a message
// only when the previous one on that channel is delivered; items of one call to (from) the same
// peer go in list order. A receiver checks the posted header against its own call before taking
// any byte; a mismatch, a hang (no progress for HCCL_EXEC_TIMEOUT seconds) or a peer's exit
// aborts the clique, so every rank waiting on it fails at once with the same message.
#include <signal.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

// Real HCCL's default HCCL_EXEC_TIMEOUT is 1836 s; the simulator honours the same variable.
constexpr double kDefaultExecTimeout = 1836.0;
// Longest sleep between checks for exited peers while waiting.
constexpr double kPollSeconds = 0.2;

std::string Describe(const MessageHeader &header) {
    return std::string(CallName(header.call)) + " of " + std::to_string(header.count) + " x " +
           DataTypeName(header.dataType);
}

// True when an earlier unfinished item of this call uses the same direction and peer.
bool Blocked(const std::vector<Item> &items, size_t index) {
    for (size_t j = 0; j < index; ++j) {
        if (!items[j].done && items[j].send == items[index].send && items[j].peer == items[index].peer) return true;
    }
    return false;
}

void CountMessage(Control &control, Comm &comm, uint32_t dst, uint64_t bytes) {
    aclfaSimHcclLinkStats &stats = control.channels[comm.rank][dst].stats;
    stats.link = LinkBetweenRanks(control, comm.rank, dst);
    stats.bytes += bytes;
    stats.messages += 1;
    stats.modeledSeconds += stats.link.latencyUs * 1e-6 + static_cast<double>(bytes) / (stats.link.bandwidthGBs * 1e9);
}

// What the waiting items still wait for, for a hang report.
std::string Pending(const Control &control, const Comm &comm, const std::vector<Item> &items) {
    std::string text;
    for (const Item &item : items) {
        if (item.done) continue;
        if (!text.empty()) text += "; ";
        const Channel &ch = item.send ? control.channels[comm.rank][item.peer] : control.channels[item.peer][comm.rank];
        if (item.send) {
            text += "send to rank " + std::to_string(item.peer) +
                    (item.posted ? " (rank " + std::to_string(item.peer) + " has not taken it)"
                                 : " (rank " + std::to_string(item.peer) + " has not taken the previous message)");
        } else {
            text += "receive from rank " + std::to_string(item.peer) +
                    (ch.posted > ch.delivered ? " (data pending)"
                                              : " (rank " + std::to_string(item.peer) + " has not made the matching call)");
        }
    }
    return text;
}

// A peer whose process is gone, or -1.
int ExitedPeer(const Control &control, const std::vector<Item> &items) {
    for (const Item &item : items) {
        if (item.done) continue;
        pid_t pid = control.rankPid[item.peer];
        if (pid > 0 && !ProcessAlive(pid)) return static_cast<int>(item.peer);  // zombies count as gone
    }
    return -1;
}

}  // namespace

const char *CallName(Call call) {
    switch (call) {
        case Call::kPointToPoint: return "HcclSend/HcclRecv";
        case Call::kAllReduce: return "HcclAllReduce";
        case Call::kAllGather: return "HcclAllGather";
        case Call::kAlltoAll: return "HcclAlltoAll";
        case Call::kBarrier: return "HcclBarrier";
        case Call::kAlltoAllV: return "HcclAlltoAllV";
        case Call::kBroadcast: return "HcclBroadcast";
    }
    return "?";
}

aclError RunItems(Comm &comm, const char *api, std::vector<Item> &items, std::string *message) {
    Control &control = *comm.control;
    const double limit = EnvSeconds("HCCL_EXEC_TIMEOUT", kDefaultExecTimeout);
    const std::string who = std::string(api) + " on rank " + std::to_string(comm.rank);
    ControlLock lock(comm.control);
    double deadline = MonotonicSeconds() + limit;
    for (;;) {
        if (control.abortCode != 0) {
            *message = who + ": the communicator was aborted: " + control.abortMessage;
            return control.abortCode;
        }
        bool progressed = false;
        for (size_t i = 0; i < items.size(); ++i) {
            Item &item = items[i];
            if (item.done) continue;
            if (Blocked(items, i)) continue;
            if (item.send) {
                Channel &ch = control.channels[comm.rank][item.peer];
                if (!item.posted) {
                    if (ch.posted != ch.delivered) continue;  // the previous message is still in flight
                    ch.header = item.header;
                    ++ch.posted;
                    item.posted = true;
                    CountMessage(control, comm, item.peer, item.header.bytes);
                    progressed = true;
                }
                if (item.offset == item.header.bytes) {
                    item.done = true;  // staged in full (a zero-byte message: the header is all)
                    progressed = true;
                    continue;
                }
                if (ch.chunkState != kChunkEmpty) continue;
                const uint64_t n = std::min<uint64_t>(control.chunkBytes, item.header.bytes - item.offset);
                ch.chunkState = kChunkFilling;
                lock.Unlock();
                memcpy(comm.Chunk(comm.rank, item.peer), item.buffer + item.offset, n);
                lock.Lock();
                ch.chunkBytes = n;
                ch.chunkState = kChunkFull;
                item.offset += n;
                item.done = item.offset == item.header.bytes;
                progressed = true;
            } else {
                Channel &ch = control.channels[item.peer][comm.rank];
                if (ch.posted == ch.delivered) continue;  // nothing posted yet
                if (!item.posted) {
                    const MessageHeader &got = ch.header;
                    if (got.call != item.header.call || got.dataType != item.header.dataType ||
                        got.count != item.header.count) {
                        *message = who + ": rank " + std::to_string(item.peer) + " sent " + Describe(got) +
                                   " but rank " + std::to_string(comm.rank) + " expects " + Describe(item.header) +
                                   " from it (every rank must make the matching call with the same count and "
                                   "data type)";
                        Abort(control, ACL_ERROR_RT_PARAM_INVALID, *message);
                        return ACL_ERROR_RT_PARAM_INVALID;
                    }
                    item.posted = true;
                }
                if (item.header.bytes == 0) {
                    ++ch.delivered;
                    item.done = progressed = true;
                    continue;
                }
                if (ch.chunkState != kChunkFull) continue;
                const uint64_t n = ch.chunkBytes;
                ch.chunkState = kChunkDraining;
                lock.Unlock();
                memcpy(item.buffer + item.offset, comm.Chunk(item.peer, comm.rank), n);
                lock.Lock();
                ch.chunkState = kChunkEmpty;
                item.offset += n;
                if (item.offset == item.header.bytes) {
                    ++ch.delivered;
                    item.done = true;
                }
                progressed = true;
            }
        }
        if (progressed) pthread_cond_broadcast(&control.changed);
        // Done as soon as every item is, before the next look at the abort: a send staged in full
        // has completed (eagerly) even if the peer aborts the communicator on seeing its header,
        // which it can while this rank copies the data unlocked.
        if (std::all_of(items.begin(), items.end(), [](const Item &item) { return item.done; })) return ACL_SUCCESS;
        if (progressed) {
            deadline = MonotonicSeconds() + limit;
            continue;
        }
        const double now = MonotonicSeconds();
        if (now >= deadline) {
            *message = who + " made no progress for HCCL_EXEC_TIMEOUT=" + std::to_string(static_cast<int>(limit)) +
                       " s, waiting for: " + Pending(control, comm, items) +
                       " (a rank that never makes the matching call hangs the others)";
            Abort(control, ACL_ERROR_RT_TASK_TIMEOUT, *message);
            return ACL_ERROR_RT_TASK_TIMEOUT;
        }
        int exited = ExitedPeer(control, items);
        if (exited >= 0) {
            const char *server = control.rankServer[exited];
            *message = who + ": rank " + std::to_string(exited) + " (pid " +
                       std::to_string(control.rankPid[exited]) +
                       (server[0] != '\0' ? std::string(", host ") + server : std::string()) +
                       ") exited while this call waited for it";
            Abort(control, ACL_ERROR_RT_DEVICE_TASK_ABORT, *message);
            return ACL_ERROR_RT_DEVICE_TASK_ABORT;
        }
        lock.WaitUntil(std::min(deadline, now + kPollSeconds));
    }
}

}  // namespace hccl
}  // namespace acl_fa_sim
