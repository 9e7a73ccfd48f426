/*
 * host_lane_rate.c -- how many int32 lanes per nanosecond this host's vector unit runs through
 * an element loop over L1-resident arrays, the pace that bounds the simulator's integer vector
 * instructions (sim/src/engine/vec_int.cpp). Two loops of n elements, repeated:
 *   plain:   c[i] = a[i] + b[i]                     (no check: the ceiling for any element loop)
 *   checked: the same with the overflow flag the engine ORs per element (the sign trick of
 *            vec_int.cpp's Lane<kAdd, int32_t>: (a ^ r) & (b ^ r) < 0 iff a + b overflowed)
 * Usage: host_lane_rate N REPS   (prints "plain X checked Y" in lanes per ns)
 * Built by bench/host_lane_rate.py with the compiler's best flags for this host.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

__attribute__((noinline)) static void plain(int32_t *restrict c, const int32_t *restrict a,
                                            const int32_t *restrict b, size_t n) {
    for (size_t i = 0; i < n; ++i) c[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
}

__attribute__((noinline)) static int32_t checked(int32_t *restrict c, const int32_t *restrict a,
                                                 const int32_t *restrict b, size_t n) {
    int32_t flag = 0;
    for (size_t i = 0; i < n; ++i) {
        const int32_t r = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
        flag |= (a[i] ^ r) & (b[i] ^ r);
        c[i] = r;
    }
    return flag;
}

int main(int argc, char **argv) {
    const size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1280;
    const size_t reps = argc > 2 ? (size_t)atol(argv[2]) : 200000;
    int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    for (size_t i = 0; i < n; ++i) {
        a[i] = (int32_t)(i & 0xFFFF);
        b[i] = (int32_t)((i * 7) & 0x7FFF);
    }
    double best_plain = 0, best_checked = 0;
    int32_t flags = 0;
    for (int round = 0; round < 5; ++round) { /* best of 5: the least disturbed by other load */
        double t0 = now_ns();
        for (size_t r = 0; r < reps; ++r) plain(c, a, b, n);
        double t1 = now_ns();
        for (size_t r = 0; r < reps; ++r) flags |= checked(c, a, b, n);
        double t2 = now_ns();
        const double p = (double)(n * reps) / (t1 - t0), k = (double)(n * reps) / (t2 - t1);
        if (p > best_plain) best_plain = p;
        if (k > best_checked) best_checked = k;
    }
    printf("plain %.1f checked %.1f%s\n", best_plain, best_checked, flags < 0 ? " (overflow)" : "");
    free(a);
    free(b);
    free(c);
    return 0;
}
