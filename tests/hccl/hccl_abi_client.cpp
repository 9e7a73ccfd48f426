// A client of the simulated libhccl.so written against hccl/hccl.h alone, as an application on
// CANN would be: tests/sim/test_hccl_sim.py builds it and runs it as threads of one process
// ("threads N") or as one process per rank ("root FILE", then "rank FILE N R" in N processes).
// Prints "ok <what>" per passed check; exits 1 with a message on the first failure.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl_fa_sim_hccl.h"
#include "hccl/hccl.h"

#define CHECK_ACL(call)                                                                          \
    do {                                                                                         \
        aclError ret_ = (call);                                                                  \
        if (ret_ != ACL_SUCCESS) Die(#call, ret_, aclGetRecentErrMsg());                         \
    } while (0)
#define CHECK_HCCL(call)                                                                         \
    do {                                                                                         \
        HcclResult ret_ = (call);                                                                \
        if (ret_ != HCCL_SUCCESS) Die(#call, ret_, aclGetRecentErrMsg());                        \
    } while (0)

static void Die(const char *what, int code, const char *message) {
    fprintf(stderr, "FAILED %s -> %d: %s\n", what, code, message != nullptr ? message : "");
    exit(1);
}

static void Expect(bool ok, const std::string &what) {
    if (!ok) Die(what.c_str(), -1, "value check failed");
}

// Device buffer of n floats filled with f(i).
template <typename F>
static float *Upload(size_t n, F f) {
    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = f(i);
    void *dev = nullptr;
    CHECK_ACL(aclrtMalloc(&dev, n * sizeof(float) + 1, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_ACL(aclrtMemcpy(dev, n * sizeof(float), host.data(), n * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
    return static_cast<float *>(dev);
}

static std::vector<float> Download(const float *dev, size_t n) {
    std::vector<float> host(n);
    CHECK_ACL(aclrtMemcpy(host.data(), n * sizeof(float), dev, n * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    return host;
}

// The collectives every rank runs; values depend on rank and index so misplacement shows.
static void RunRank(HcclComm comm, int32_t device, uint32_t n, uint32_t r) {
    CHECK_ACL(aclrtSetDevice(device));
    aclrtStream stream = nullptr;
    CHECK_ACL(aclrtCreateStream(&stream));
    uint32_t size = 0, id = 0;
    CHECK_HCCL(HcclGetRankSize(comm, &size));
    CHECK_HCCL(HcclGetRankId(comm, &id));
    Expect(size == n && id == r, "rank size / id");

    // Ring exchange larger than a staging chunk: K and V to the next rank, from the previous.
    const size_t big = (5u << 20) / sizeof(float) + 3;  // > the 4 MiB chunk, odd tail
    const uint32_t next = (r + 1) % n, prev = (r + n - 1) % n;
    float *k = Upload(big, [&](size_t i) { return float(r * 1000003u + i % 9973); });
    float *v = Upload(big, [&](size_t i) { return -float(r * 7u + i % 101); });
    float *kIn = Upload(big, [](size_t) { return 0.f; });
    float *vIn = Upload(big, [](size_t) { return 0.f; });
    HcclSendRecvItem items[4] = {
        {HCCL_SEND, k, big, HCCL_DATA_TYPE_FP32, next}, {HCCL_SEND, v, big, HCCL_DATA_TYPE_FP32, next},
        {HCCL_RECV, kIn, big, HCCL_DATA_TYPE_FP32, prev}, {HCCL_RECV, vIn, big, HCCL_DATA_TYPE_FP32, prev}};
    CHECK_HCCL(HcclBatchSendRecv(items, 4, comm, stream));
    CHECK_ACL(aclrtSynchronizeStream(stream));
    std::vector<float> kGot = Download(kIn, big), vGot = Download(vIn, big);
    for (size_t i = 0; i < big; i += 997) {
        Expect(kGot[i] == float(prev * 1000003u + i % 9973) && vGot[i] == -float(prev * 7u + i % 101), "ring K/V");
    }
    Expect(kGot[big - 1] == float(prev * 1000003u + (big - 1) % 9973), "ring tail");
    printf("ok ring rank %u\n", r);

    aclfaSimHcclLinkStats stats;
    CHECK_HCCL(aclfaSimHcclGetLinkStats(comm, r, next, &stats));
    Expect(stats.bytes == 2 * big * sizeof(float) && stats.messages == 2, "link bytes = K + V");
    Expect(stats.modeledSeconds > 0 && stats.link.bandwidthGBs > 0, "modeled time");
    printf("ok link rank %u bytes %llu kind %s\n", r, (unsigned long long)stats.bytes, stats.link.kind);

    // AllGather, AlltoAll, AllReduce, Barrier.
    const size_t m = 1000;
    float *mine = Upload(m, [&](size_t i) { return float(r * 10000 + i); });
    float *all = Upload(m * n, [](size_t) { return 0.f; });
    CHECK_HCCL(HcclAllGather(mine, all, m, HCCL_DATA_TYPE_FP32, comm, stream));
    float *blocks = Upload(m * n, [&](size_t i) { return float(r * 1000000 + i); });
    float *swapped = Upload(m * n, [](size_t) { return 0.f; });
    CHECK_HCCL(HcclAlltoAll(blocks, m, HCCL_DATA_TYPE_FP32, swapped, m, HCCL_DATA_TYPE_FP32, comm, stream));
    float *sum = Upload(m, [](size_t) { return 0.f; });
    CHECK_HCCL(HcclAllReduce(mine, sum, m, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    CHECK_HCCL(HcclBarrier(comm, stream));
    CHECK_ACL(aclrtSynchronizeStream(stream));
    std::vector<float> gathered = Download(all, m * n), exchanged = Download(swapped, m * n), reduced = Download(sum, m);
    for (uint32_t q = 0; q < n; ++q) {
        for (size_t i = 0; i < m; i += 37) {
            Expect(gathered[q * m + i] == float(q * 10000 + i), "allgather");
            Expect(exchanged[q * m + i] == float(q * 1000000 + r * m + i), "alltoall");
        }
    }
    for (size_t i = 0; i < m; i += 37) {
        float expected = 0;
        for (uint32_t q = 0; q < n; ++q) expected += float(q * 10000 + i);
        Expect(reduced[i] == expected, "allreduce");
    }
    printf("ok collectives rank %u\n", r);

    for (void *p : {(void *)k, (void *)v, (void *)kIn, (void *)vIn, (void *)mine, (void *)all, (void *)blocks,
                    (void *)swapped, (void *)sum}) {
        CHECK_ACL(aclrtFree(p));
    }
    CHECK_ACL(aclrtDestroyStream(stream));
    CHECK_HCCL(HcclCommDestroy(comm));
    CHECK_ACL(aclrtResetDevice(device));
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    CHECK_ACL(aclInit(nullptr));
    std::string mode = argv[1];
    if (mode == "threads") {
        uint32_t n = static_cast<uint32_t>(atoi(argv[2]));
        std::vector<int32_t> devices(n);
        for (uint32_t i = 0; i < n; ++i) devices[i] = static_cast<int32_t>(i);
        std::vector<HcclComm> comms(n);
        CHECK_HCCL(HcclCommInitAll(n, devices.data(), comms.data()));
        std::vector<std::thread> threads;
        for (uint32_t i = 0; i < n; ++i) threads.emplace_back(RunRank, comms[i], devices[i], n, i);
        for (std::thread &t : threads) t.join();
    } else if (mode == "root") {
        HcclRootInfo root;
        CHECK_HCCL(HcclGetRootInfo(&root));
        FILE *f = fopen(argv[2], "wb");
        if (f == nullptr || fwrite(&root, sizeof(root), 1, f) != 1) Die("write root info", -1, argv[2]);
        fclose(f);
    } else if (mode == "rank") {
        HcclRootInfo root;
        FILE *f = fopen(argv[2], "rb");
        if (f == nullptr || fread(&root, sizeof(root), 1, f) != 1) Die("read root info", -1, argv[2]);
        fclose(f);
        uint32_t n = static_cast<uint32_t>(atoi(argv[3])), r = static_cast<uint32_t>(atoi(argv[4]));
        CHECK_ACL(aclrtSetDevice(static_cast<int32_t>(r)));
        HcclComm comm = nullptr;
        CHECK_HCCL(HcclCommInitRootInfo(n, &root, r, &comm));
        RunRank(comm, static_cast<int32_t>(r), n, r);
        CHECK_ACL(aclrtResetDevice(static_cast<int32_t>(r)));
    } else {
        return 2;
    }
    CHECK_ACL(aclFinalize());
    printf("ok done\n");
    return 0;
}
