/*
 * driver_overhead.c -- the aclnn calls one Session.flash_attention call makes, from C, timed
 * per call: upload q/k/v, launch the cached repeatable executor, synchronize, download out.
 * Built and run by bench/driver_overhead.py against the simulator's headers and libraries.
 *
 * usage: driver_overhead HEADS SEQ DIM CALLS
 *   -> prints "us_per_call <median of CALLS> cpu_us_per_call <median>": wall time, and the CPU time
 *      of the calling thread (CLOCK_THREAD_CPUTIME_ID: not the stream's or the cores' threads, and
 *      not time spent waiting or preempted, so it depends little on the host's load)
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnn_flash_attention.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        int rc_ = (int)(call);                                                             \
        if (rc_ != 0) {                                                                    \
            fprintf(stderr, "%s failed with %d: %s\n", #call, rc_, aclGetRecentErrMsg()); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static double clock_us(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A BNSD tensor [1, heads, seq, last] of `type` over dev (contiguous strides). */
static aclTensor *make_tensor(void *dev, int64_t heads, int64_t seq, int64_t last, int rank, aclDataType type) {
    int64_t dims[4] = {1, heads, seq, last};
    int64_t strides[4] = {heads * seq * last, seq * last, last, 1};
    aclTensor *t = aclCreateTensor(dims, (uint64_t)rank, type, strides, 0, ACL_FORMAT_ND, dims, (uint64_t)rank, dev);
    if (t == NULL) {
        fprintf(stderr, "aclCreateTensor failed: %s\n", aclGetRecentErrMsg());
        exit(1);
    }
    return t;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s HEADS SEQ DIM CALLS\n", argv[0]);
        return 2;
    }
    const int64_t heads = atoll(argv[1]), seq = atoll(argv[2]), dim = atoll(argv[3]);
    const int calls = atoi(argv[4]);
    const size_t bytes = (size_t)(heads * seq * dim) * 2; /* fp16 */
    const size_t lse_bytes = (size_t)(heads * seq) * 4;   /* fp32 [1, heads, seq] */

    uint16_t *host[4];
    for (int i = 0; i < 4; ++i) {
        host[i] = malloc(bytes);
        for (size_t e = 0; e < bytes / 2; ++e) host[i][e] = (uint16_t)(0x3800 + (e * 7 + i) % 512); /* 0.5 .. 1.0 */
    }
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    void *dev[5];
    for (int i = 0; i < 4; ++i) CHECK(aclrtMalloc(&dev[i], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dev[4], lse_bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    aclTensor *q = make_tensor(dev[0], heads, seq, dim, 4, ACL_FLOAT16);
    aclTensor *k = make_tensor(dev[1], heads, seq, dim, 4, ACL_FLOAT16);
    aclTensor *v = make_tensor(dev[2], heads, seq, dim, 4, ACL_FLOAT16);
    aclTensor *out = make_tensor(dev[3], heads, seq, dim, 4, ACL_FLOAT16);
    aclTensor *lse = make_tensor(dev[4], heads, seq, 1, 3, ACL_FLOAT);

    char layout[] = "BNSD";
    uint64_t ws_size = 0;
    aclOpExecutor *executor = NULL;
    CHECK(aclnnFlashAttentionGetWorkspaceSize(q, k, v, 1.0, false, layout, heads, heads, 0, 0, out, lse, &ws_size,
                                              &executor));
    CHECK(aclSetAclOpExecutorRepeatable(executor));
    void *ws = NULL;
    if (ws_size) CHECK(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));

    double *us = malloc(sizeof(double) * (size_t)calls), *cpu_us = malloc(sizeof(double) * (size_t)calls);
    for (int c = -1; c < calls; ++c) { /* call -1: warm-up */
        const double t0 = clock_us(CLOCK_MONOTONIC), cpu0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < 3; ++i) CHECK(aclrtMemcpy(dev[i], bytes, host[i], bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclnnFlashAttention(ws, ws_size, executor, stream));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclrtMemcpy(host[3], bytes, dev[3], bytes, ACL_MEMCPY_DEVICE_TO_HOST));
        if (c >= 0) {
            cpu_us[c] = clock_us(CLOCK_THREAD_CPUTIME_ID) - cpu0;
            us[c] = clock_us(CLOCK_MONOTONIC) - t0;
        }
    }
    qsort(us, (size_t)calls, sizeof(double), cmp_double);
    qsort(cpu_us, (size_t)calls, sizeof(double), cmp_double);
    printf("us_per_call %.3f cpu_us_per_call %.3f\n", us[calls / 2], cpu_us[calls / 2]);

    CHECK(aclDestroyAclOpExecutor(executor));
    aclDestroyTensor(q);
    aclDestroyTensor(k);
    aclDestroyTensor(v);
    aclDestroyTensor(out);
    aclDestroyTensor(lse);
    if (ws) CHECK(aclrtFree(ws));
    for (int i = 0; i < 5; ++i) CHECK(aclrtFree(dev[i]));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    for (int i = 0; i < 4; ++i) free(host[i]);
    free(us);
    free(cpu_us);
    return 0;
}
