// clique.cpp -- root info, joining a clique in shared memory, the communicator registry.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "hccl_internal.h"

namespace acl_fa_sim {
namespace hccl {
namespace {

constexpr char kRootMagic[] = "acl-fa-sim-hccl";
// Staging per channel: ~256 MiB of shared memory for the whole clique at most (pages are only
// touched as messages pass), between 64 KiB and 4 MiB per ordered pair.
constexpr uint64_t kStagingBudget = 256ull << 20;
constexpr uint64_t kMinChunk = 64ull << 10, kMaxChunk = 4ull << 20;

std::string DataName(const std::string &controlName) { return controlName + ".d"; }

void *MapShared(const std::string &name, size_t bytes, bool create, std::string *error) {
    int fd = shm_open(name.c_str(), create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR, 0600);
    if (fd < 0) {
        const int saved = errno;  // callers tell EEXIST / ENOENT apart
        *error = std::string(create ? "cannot create" : "cannot open") + " shared memory " + name + ": " +
                 strerror(saved);
        errno = saved;
        return nullptr;
    }
    if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        *error = "cannot size shared memory " + name + ": " + strerror(errno);
        close(fd);
        shm_unlink(name.c_str());
        return nullptr;
    }
    void *addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (addr == MAP_FAILED) {
        *error = "cannot map shared memory " + name + ": " + strerror(errno);
        return nullptr;
    }
    return addr;
}

bool ParseRootInfo(const HcclRootInfo &rootInfo, RootInfoBody *body) {
    memcpy(body, rootInfo.internal, sizeof(*body));
    body->shmName[sizeof(body->shmName) - 1] = '\0';
    return memcmp(body->magic, kRootMagic, sizeof(kRootMagic)) == 0 && body->shmName[0] == '/';
}

void UnlinkClique(const std::string &controlName) {
    shm_unlink(controlName.c_str());
    shm_unlink(DataName(controlName).c_str());
}

// Shared memory of cliques that can no longer form: names are unlinked once every rank has
// mapped them, or when a join times out, but a root info that is never joined (or whose ranks all
// died before the last one joined) has nobody to remove it. Such a clique is stale when it is older
// than HCCL_CONNECT_TIMEOUT and neither its maker nor any rank that joined it is alive; then no
// rank can still join it in time. Runs whenever a root info is made.
void SweepStaleCliques(double connectTimeout) {
    DIR *dir = opendir("/dev/shm");
    if (dir == nullptr) return;
    const std::string prefix = "aclfa_hccl_";
    while (dirent *entry = readdir(dir)) {
        std::string file = entry->d_name;
        if (file.compare(0, prefix.size(), prefix) != 0 || file.size() < 2 ||
            file.compare(file.size() - 2, 2, ".d") == 0) {
            continue;
        }
        const int32_t creator = static_cast<int32_t>(atoi(file.c_str() + prefix.size()));
        if (ProcessAlive(creator)) continue;
        std::string name = "/" + file, ignored;
        auto *control = static_cast<Control *>(MapShared(name, sizeof(Control), /*create=*/false, &ignored));
        if (control == nullptr) continue;
        bool stale = __atomic_load_n(&control->magic, __ATOMIC_ACQUIRE) == kControlMagic &&
                     MonotonicSeconds() - control->createdAt > connectTimeout;
        for (uint32_t r = 0; stale && r < kMaxRanks; ++r) {
            if (control->rankJoined[r] && ProcessAlive(control->rankPid[r])) stale = false;
        }
        munmap(control, sizeof(Control));
        if (stale) UnlinkClique(name);
    }
    closedir(dir);
}

std::mutex g_registryMutex;
std::map<void *, std::shared_ptr<Comm>> g_comms;  // live handles; guarded by g_registryMutex

}  // namespace

// kill(pid, 0) also succeeds for a process that has exited but is not reaped yet (a zombie: its
// parent has not waited for it), so the state letter of /proc/<pid>/stat decides: Z (zombie) or
// X (dead) is gone (proc(5): the field after the command name's closing parenthesis). Without
// procfs, kill's answer stands.
bool ProcessAlive(int32_t pid) {
    if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
    FILE *file = fopen(path, "r");
    if (file == nullptr) return access("/proc/self/stat", F_OK) != 0;  // gone since kill, unless no procfs
    char text[512];
    size_t n = fread(text, 1, sizeof(text) - 1, file);
    fclose(file);
    text[n] = '\0';
    const char *end = strrchr(text, ')');  // the command name may itself hold ')'
    if (end == nullptr || end[1] != ' ' || end[2] == '\0') return true;
    return end[2] != 'Z' && end[2] != 'X';
}

Comm::~Comm() {
    if (data != nullptr) munmap(data, dataBytes);
    if (control != nullptr) munmap(control, sizeof(Control));
}

double MonotonicSeconds() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double EnvSeconds(const char *name, double fallback) {
    const char *text = getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char *end = nullptr;
    double value = strtod(text, &end);
    return (end != text && *end == '\0' && value > 0) ? value : fallback;
}

ControlLock::ControlLock(Control *control) : control_(control) { Lock(); }

void ControlLock::Unlock() { pthread_mutex_unlock(&control_->mutex); }

void ControlLock::Lock() {
    int rc = pthread_mutex_lock(&control_->mutex);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&control_->mutex);
        Abort(*control_, ACL_ERROR_RT_DEVICE_TASK_ABORT,
              "a rank's process died inside an HCCL call (its lock on the communicator was recovered)");
    }
}

ControlLock::~ControlLock() { pthread_mutex_unlock(&control_->mutex); }

void ControlLock::WaitUntil(double deadline) {
    double seconds = deadline - MonotonicSeconds();
    if (seconds <= 0) return;
    timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + static_cast<long long>((seconds - static_cast<long long>(seconds)) * 1e9);
    until.tv_sec += static_cast<time_t>(seconds) + ns / 1000000000LL;
    until.tv_nsec = ns % 1000000000LL;
    int rc = pthread_cond_timedwait(&control_->changed, &control_->mutex, &until);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&control_->mutex);
        Abort(*control_, ACL_ERROR_RT_DEVICE_TASK_ABORT,
              "a rank's process died inside an HCCL call (its lock on the communicator was recovered)");
    }
}

void Abort(Control &control, aclError code, const std::string &message) {
    if (control.abortCode == 0) {
        control.abortCode = code;
        snprintf(control.abortMessage, sizeof(control.abortMessage), "%s", message.c_str());
    }
    pthread_cond_broadcast(&control.changed);
}

namespace {

// Initializes a control block just created (zero-filled by ftruncate) under `name` and fills the
// root info that names it.
void InitControl(Control *control, const char *name, HcclRootInfo *rootInfo) {
    // ftruncate zero-filled the block: every counter starts at 0, every chunk empty.
    pthread_mutexattr_t mutexAttr;
    pthread_mutexattr_init(&mutexAttr);
    pthread_mutexattr_setpshared(&mutexAttr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&mutexAttr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&control->mutex, &mutexAttr);
    pthread_mutexattr_destroy(&mutexAttr);
    pthread_condattr_t condAttr;
    pthread_condattr_init(&condAttr);
    pthread_condattr_setpshared(&condAttr, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&condAttr, CLOCK_MONOTONIC);
    pthread_cond_init(&control->changed, &condAttr);
    pthread_condattr_destroy(&condAttr);
    control->createdAt = MonotonicSeconds();
    control->creatorPid = static_cast<int32_t>(getpid());
    __atomic_store_n(&control->magic, kControlMagic, __ATOMIC_RELEASE);

    RootInfoBody body{};
    memcpy(body.magic, kRootMagic, sizeof(kRootMagic));
    snprintf(body.shmName, sizeof(body.shmName), "%s", name);
    body.creatorPid = static_cast<int32_t>(getpid());
    memset(rootInfo->internal, 0, sizeof(rootInfo->internal));
    memcpy(rootInfo->internal, &body, sizeof(body));
}

}  // namespace

HcclResult MakeRootInfo(HcclRootInfo *rootInfo, std::string *error) {
    SweepStaleCliques(EnvSeconds("HCCL_CONNECT_TIMEOUT", 120.0));
    static std::atomic<uint64_t> counter{0};
    char name[64];
    snprintf(name, sizeof(name), "/aclfa_hccl_%d_%llu_%llx", static_cast<int>(getpid()),
             static_cast<unsigned long long>(++counter),
             static_cast<unsigned long long>(MonotonicSeconds() * 1e9));
    auto *control = static_cast<Control *>(MapShared(name, sizeof(Control), /*create=*/true, error));
    if (control == nullptr) return HCCL_E_SYSCALL;
    InitControl(control, name, rootInfo);
    munmap(control, sizeof(Control));
    return HCCL_SUCCESS;
}

HcclResult NamedRootInfo(const std::string &name, bool create, double deadline, HcclRootInfo *rootInfo,
                         std::string *error) {
    if (create) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            std::string failure;
            auto *control = static_cast<Control *>(MapShared(name, sizeof(Control), /*create=*/true, &failure));
            if (control != nullptr) {
                InitControl(control, name.c_str(), rootInfo);
                munmap(control, sizeof(Control));
                return HCCL_SUCCESS;
            }
            if (errno != EEXIST) {
                *error = failure;
                return HCCL_E_SYSCALL;
            }
            // One made from the same rank table before: stale when its maker exited (a job that
            // failed before every rank joined); else another job forms a clique from this table.
            auto *old = static_cast<Control *>(MapShared(name, sizeof(Control), /*create=*/false, &failure));
            const int32_t maker = old != nullptr ? old->creatorPid : 0;
            if (old != nullptr) munmap(old, sizeof(Control));
            if (ProcessAlive(maker) && maker != static_cast<int32_t>(getpid())) {
                *error = "another job (pid " + std::to_string(maker) +
                         ") is forming a communicator from the same rank table; run one job per rank table";
                return HCCL_E_UNAVAIL;
            }
            UnlinkClique(name);
        }
        *error = "cannot create shared memory " + name + " for the rank table's communicator";
        return HCCL_E_SYSCALL;
    }
    // Rank table ranks other than 0 wait for rank 0's control block.
    for (;;) {
        std::string failure;
        auto *control = static_cast<Control *>(MapShared(name, sizeof(Control), /*create=*/false, &failure));
        if (control != nullptr) {
            const bool ready = __atomic_load_n(&control->magic, __ATOMIC_ACQUIRE) == kControlMagic &&
                               ProcessAlive(control->creatorPid);
            const int32_t maker = control->creatorPid;
            munmap(control, sizeof(Control));
            if (ready) {
                RootInfoBody body{};
                memcpy(body.magic, kRootMagic, sizeof(kRootMagic));
                snprintf(body.shmName, sizeof(body.shmName), "%s", name.c_str());
                body.creatorPid = maker;
                memset(rootInfo->internal, 0, sizeof(rootInfo->internal));
                memcpy(rootInfo->internal, &body, sizeof(body));
                return HCCL_SUCCESS;
            }
        }
        if (MonotonicSeconds() > deadline) {
            *error = "rank 0 of the rank table did not create the communicator within HCCL_CONNECT_TIMEOUT";
            return HCCL_E_TIMEOUT;
        }
        usleep(10000);
    }
}

HcclResult Join(const HcclRootInfo &rootInfo, uint32_t nRanks, uint32_t rank, int32_t device,
                std::shared_ptr<Comm> *out, std::string *error) {
    return JoinOnServer(rootInfo, nRanks, rank, device, std::string(), out, error);
}

HcclResult JoinOnServer(const HcclRootInfo &rootInfo, uint32_t nRanks, uint32_t rank, int32_t device,
                        const std::string &server, std::shared_ptr<Comm> *out, std::string *error) {
    if (server.size() >= kServerIdBytes) {
        *error = "server id \"" + server + "\" is longer than " + std::to_string(kServerIdBytes - 1) + " bytes";
        return HCCL_E_PARA;
    }
    RootInfoBody body;
    if (!ParseRootInfo(rootInfo, &body)) {
        *error = "rootInfo was not made by HcclGetRootInfo (pass the bytes it wrote, unchanged, to every rank)";
        return HCCL_E_PARA;
    }
    auto comm = std::make_shared<Comm>();
    comm->shmName = body.shmName;
    comm->rank = rank;
    comm->nRanks = nRanks;
    comm->device = device;
    comm->server = server;
    comm->control = static_cast<Control *>(MapShared(body.shmName, sizeof(Control), /*create=*/false, error));
    if (comm->control == nullptr) {
        *error += " (the root info is stale: every rank has joined it already, or its maker exited)";
        return HCCL_E_NOT_FOUND;
    }
    Control &control = *comm->control;
    if (__atomic_load_n(&control.magic, __ATOMIC_ACQUIRE) != kControlMagic) {
        *error = std::string("shared memory ") + body.shmName + " is not an HCCL clique of this simulator";
        return HCCL_E_PARA;
    }
    ControlLock lock(comm->control);
    if (control.nRanks == 0) {
        // First to join: fixes the rank count and makes the staging segment.
        uint64_t pairs = static_cast<uint64_t>(nRanks) * nRanks;
        uint64_t chunk = kStagingBudget / pairs;
        chunk = chunk < kMinChunk ? kMinChunk : (chunk > kMaxChunk ? kMaxChunk : chunk);
        chunk &= ~uint64_t{63};
        void *data = MapShared(DataName(comm->shmName), pairs * chunk, /*create=*/true, error);
        if (data == nullptr) return HCCL_E_SYSCALL;
        munmap(data, pairs * chunk);
        control.chunkBytes = chunk;
        control.nRanks = nRanks;
    } else if (control.nRanks != nRanks) {
        *error = "rank " + std::to_string(rank) + " gives nRanks=" + std::to_string(nRanks) +
                 " but the ranks that joined before it gave nRanks=" + std::to_string(control.nRanks);
        return HCCL_E_PARA;
    }
    if (control.rankJoined[rank]) {
        *error = "rank " + std::to_string(rank) + " has already joined this root info (pid " +
                 std::to_string(control.rankPid[rank]) + "): each rank id joins once";
        return HCCL_E_PARA;
    }
    for (uint32_t other = 0; other < nRanks; ++other) {
        // Devices are numbered per (simulated) server, whichever process drives them.
        if (control.rankJoined[other] && control.rankDevice[other] == device &&
            server == control.rankServer[other]) {
            *error = "ranks " + std::to_string(other) + " and " + std::to_string(rank) + " both use device " +
                     std::to_string(device) + (server.empty() ? std::string() : " of server " + server) +
                     ": each rank needs a device of its own";
            return HCCL_E_PARA;
        }
    }
    snprintf(control.rankServer[rank], kServerIdBytes, "%s", server.c_str());
    control.rankJoined[rank] = 1;
    control.rankPid[rank] = static_cast<int32_t>(getpid());
    control.rankDevice[rank] = device;
    ++control.joined;
    pthread_cond_broadcast(&control.changed);
    *out = std::move(comm);
    return HCCL_SUCCESS;
}

HcclResult AwaitClique(Comm &comm, std::string *error) {
    Control &control = *comm.control;
    const double limit = EnvSeconds("HCCL_CONNECT_TIMEOUT", 120.0);
    const double deadline = MonotonicSeconds() + limit;
    {
        ControlLock lock(comm.control);
        while (control.joined < control.nRanks && MonotonicSeconds() < deadline) lock.WaitUntil(deadline);
        if (control.joined < control.nRanks) {
            std::string missing;
            for (uint32_t r = 0; r < control.nRanks; ++r) {
                if (!control.rankJoined[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            }
            *error = "rank " + std::to_string(comm.rank) + ": rank(s) " + missing + " of " +
                     std::to_string(control.nRanks) + " never joined within HCCL_CONNECT_TIMEOUT=" +
                     std::to_string(static_cast<int>(limit)) + " s";
            Abort(control, ACL_ERROR_RT_TASK_TIMEOUT, *error);
            // The clique can no longer form: late joiners find the names gone (a stale root info).
            UnlinkClique(comm.shmName);
            return HCCL_E_TIMEOUT;
        }
    }
    comm.dataBytes = static_cast<size_t>(control.nRanks) * control.nRanks * control.chunkBytes;
    comm.data = static_cast<uint8_t *>(MapShared(DataName(comm.shmName), comm.dataBytes, /*create=*/false, error));
    if (comm.data == nullptr) return HCCL_E_SYSCALL;
    ControlLock lock(comm.control);
    if (++control.mapped == control.nRanks) {
        // Every rank holds both mappings: the names are no longer needed.
        UnlinkClique(comm.shmName);
    }
    return HCCL_SUCCESS;
}

HcclComm Register(std::shared_ptr<Comm> comm) {
    void *handle = comm.get();
    std::lock_guard<std::mutex> lock(g_registryMutex);
    g_comms[handle] = std::move(comm);
    return handle;
}

std::shared_ptr<Comm> Lookup(HcclComm handle) {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    auto it = g_comms.find(handle);
    return it == g_comms.end() ? nullptr : it->second;
}

std::string CommName(const Comm &comm) {
    // The clique's control-block name without its leading '/': one name for every rank of the
    // clique, as real HCCL's comm identifier (HcclGetCommName) is the group's.
    return comm.shmName.empty() || comm.shmName[0] != '/' ? comm.shmName : comm.shmName.substr(1);
}

HcclComm FindByName(const std::string &name, int32_t device) {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    for (const auto &entry : g_comms) {
        if (entry.second->device == device && CommName(*entry.second) == name) return entry.first;
    }
    return nullptr;
}

bool Unregister(HcclComm handle) {
    std::lock_guard<std::mutex> lock(g_registryMutex);
    return g_comms.erase(handle) > 0;
}

}  // namespace hccl
}  // namespace acl_fa_sim
