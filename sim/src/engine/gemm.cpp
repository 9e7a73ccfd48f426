// gemm.cpp -- the fp32 GEMM behind the Matmul API: packed panels, a register-blocked
// micro-kernel (MR rows x NR columns of C held in vector registers), cache blocking over
// K (KC) and M (MC). One micro-kernel source, instantiated for AVX-512 (16-float
// vectors), AVX2+FMA (8-float) and baseline SSE (4-float); the CPU picks at run time.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ascendc_sim/core.h"
#include "scratch.h"

namespace acl_fa_sim {
namespace kernel {
namespace {

constexpr int KC = 256;  // K depth of one packed panel pair (A strip + B strip stay in L1/L2)
constexpr int MC = 120;  // rows of A packed at once (multiple of every MR below)

template <int W>
struct Vec {
    typedef float type __attribute__((vector_size(W * 4)));
};

// C[0:mr, 0:nr] (+)= A[MR x kc] * B[kc x NR]. A is a packed MR-interleaved strip (A_PACKED:
// element (i, p) at Ap[p * MR + i]) or its mr rows in place (row stride lda; the rows past mr
// repeat row mr - 1, so they stay inside A, and are not stored); row p of B is at Bp + p * ldbp
// (NR for a packed strip, the row stride for B in place). Each element of C is the same chain of
// products in p order either way.
template <int MR, int NV, int W, bool A_PACKED>
inline __attribute__((always_inline)) void MicroKernel(int kc, const float *Ap, int lda, const float *Bp, int ldbp,
                                                       float *C, int ldc, bool accumulate, int mr, int nr) {
    using V = typename Vec<W>::type;
    constexpr int NR = NV * W;
    V acc[MR][NV];
    for (int i = 0; i < MR; ++i)
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    const float *aRow[MR];
    for (int i = 0; i < MR; ++i) aRow[i] = Ap + size_t(std::min(i, mr - 1)) * lda;
    for (int p = 0; p < kc; ++p) {
        V b[NV];
        for (int v = 0; v < NV; ++v) std::memcpy(&b[v], Bp + size_t(p) * ldbp + v * W, sizeof(V));
        for (int i = 0; i < MR; ++i) {
            const float a = A_PACKED ? Ap[p * MR + i] : aRow[i][p];
            for (int v = 0; v < NV; ++v) acc[i][v] += b[v] * a;
        }
    }
    if (mr == MR && nr == NR) {
        for (int i = 0; i < MR; ++i) {
            for (int v = 0; v < NV; ++v) {
                V c;
                float *dst = C + i * ldc + v * W;
                if (accumulate) {
                    std::memcpy(&c, dst, sizeof(V));
                    c += acc[i][v];
                } else {
                    c = acc[i][v];
                }
                std::memcpy(dst, &c, sizeof(V));
            }
        }
        return;
    }
    float tile[MR][NR];
    std::memcpy(tile, acc, sizeof(tile));
    for (int i = 0; i < mr; ++i)
        for (int j = 0; j < nr; ++j) C[i * ldc + j] = accumulate ? C[i * ldc + j] + tile[i][j] : tile[i][j];
}

// Packs A[m x kc] (row stride lda) into MR-row strips, zero-padded.
template <int MR>
void PackA(int m, int kc, const float *A, int lda, float *out) {
    for (int i0 = 0; i0 < m; i0 += MR) {
        const int mr = std::min(MR, m - i0);
        for (int p = 0; p < kc; ++p) {
            for (int i = 0; i < mr; ++i) out[p * MR + i] = A[(i0 + i) * lda + p];
            for (int i = mr; i < MR; ++i) out[p * MR + i] = 0.0f;
        }
        out += kc * MR;
    }
}

// Packs B[kc x n] (row stride ldb) into NR-column strips, zero-padded.
template <int NR>
void PackB(int kc, int n, const float *B, int ldb, float *out) {
    for (int j0 = 0; j0 < n; j0 += NR) {
        const int nr = std::min(NR, n - j0);
        for (int p = 0; p < kc; ++p) {
            const float *src = B + p * ldb + j0;
            for (int j = 0; j < nr; ++j) out[p * NR + j] = src[j];
            for (int j = nr; j < NR; ++j) out[p * NR + j] = 0.0f;
        }
        out += kc * NR;
    }
}

// out[q * ldo + r] = in[r * ldi + q] for an 8 x 8 block (r, q < 8), in vector shuffles: the
// unpack / shuffle / 128-bit-lane steps of the usual AVX transpose (SSE pairs on the baseline).
inline __attribute__((always_inline)) void Transpose8x8(const float *in, size_t ldi, float *out, size_t ldo) {
    typedef float V8 __attribute__((vector_size(32)));
    typedef int I8 __attribute__((vector_size(32)));
    V8 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) std::memcpy(&r[i], in + i * ldi, sizeof(V8));
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], I8{0, 8, 1, 9, 4, 12, 5, 13});
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], I8{2, 10, 3, 11, 6, 14, 7, 15});
    }
    for (int i = 0; i < 8; i += 4) {
        for (int h = 0; h < 2; ++h) {
            u[i + 2 * h] = __builtin_shuffle(t[i + h], t[i + h + 2], I8{0, 1, 8, 9, 4, 5, 12, 13});
            u[i + 2 * h + 1] = __builtin_shuffle(t[i + h], t[i + h + 2], I8{2, 3, 10, 11, 6, 7, 14, 15});
        }
    }
    for (int i = 0; i < 4; ++i) {
        const V8 lo = __builtin_shuffle(u[i], u[i + 4], I8{0, 1, 2, 3, 8, 9, 10, 11});
        const V8 hi = __builtin_shuffle(u[i], u[i + 4], I8{4, 5, 6, 7, 12, 13, 14, 15});
        std::memcpy(out + i * ldo, &lo, sizeof(V8));
        std::memcpy(out + (i + 4) * ldo, &hi, sizeof(V8));
    }
}

// Packs B[kc x n] given as its transpose Bt[n x kc] (row stride ldbt, the Matmul API's
// isTransposeB operand, e.g. K rows for Q.K^T) into the same NR-column strips as PackB, so the
// operand is never transposed in memory first: 8 x 8 blocks at a time, the edges one by one.
template <int NR>
inline __attribute__((always_inline)) void PackBTransposed(int kc, int n, const float *Bt, int ldbt, float *out) {
    static_assert(NR % 8 == 0, "strips hold whole 8-column blocks");
    for (int j0 = 0; j0 < n; j0 += NR) {
        const int nr = std::min(NR, n - j0);
        const int j8 = nr / 8 * 8, p8 = kc / 8 * 8;
        for (int j = 0; j < j8; j += 8) {
            const float *src = Bt + size_t(j0 + j) * ldbt;
            for (int p = 0; p < p8; p += 8) Transpose8x8(src + p, size_t(ldbt), out + size_t(p) * NR + j, NR);
            for (int jj = j; jj < j + 8; ++jj) {
                for (int p = p8; p < kc; ++p) out[p * NR + jj] = Bt[size_t(j0 + jj) * ldbt + p];
            }
        }
        for (int j = j8; j < nr; ++j) {
            const float *src = Bt + size_t(j0 + j) * ldbt;
            for (int p = 0; p < kc; ++p) out[p * NR + j] = src[p];
        }
        for (int j = nr; j < NR; ++j) {
            for (int p = 0; p < kc; ++p) out[p * NR + j] = 0.0f;
        }
        out += kc * NR;
    }
}

// A strip packed for the micro-kernel is worth its copy when several B strips reuse it, and a
// packed B strip when several A strips do; below this many users the operand is read in place
// (the small tiles of narrow attention bands: 16 x 16 score blocks, 16-key P.V).
constexpr int kMinReuseToPack = 4;

template <int MR, int NV, int W>
inline __attribute__((always_inline)) void GemmBody(int m, int n, int k, const float *A, int lda, const float *B,
                                                    int ldb, bool transB, float *C, int ldc, bool accumulate) {
    constexpr int NR = NV * W;
    static_assert(MC % MR == 0, "MC must hold whole MR strips");
    thread_local std::vector<float> apack, bpack;
    const int nStrips = (n + NR - 1) / NR;
    // B rows in place for whole NR-column strips (not transposed, few A strips); a partial last
    // strip is still packed (zero-padded columns).
    const bool bInPlace = !transB && (m + MR - 1) / MR < kMinReuseToPack;
    const int nInPlace = bInPlace ? n / NR * NR : 0;
    const bool aInPlace = nStrips < kMinReuseToPack;
    float *const bpackData = Scratch(bpack, size_t(KC) * NR * nStrips);
    float *const apackData = Scratch(apack, size_t(KC) * MC);
    for (int pc = 0; pc < k; pc += KC) {
        const int kc = std::min(KC, k - pc);
        const bool acc = accumulate || pc > 0;
        if (transB) {
            PackBTransposed<NR>(kc, n, B + pc, ldb, bpackData);
        } else if (nInPlace < n) {
            PackB<NR>(kc, n - nInPlace, B + size_t(pc) * ldb + nInPlace, ldb, bpackData + size_t(nInPlace / NR) * kc * NR);
        }
        for (int ic = 0; ic < m; ic += MC) {
            const int mc = std::min(MC, m - ic);
            if (!aInPlace) PackA<MR>(mc, kc, A + size_t(ic) * lda + pc, lda, apackData);
            for (int jr = 0; jr < n; jr += NR) {
                const bool bRows = jr < nInPlace;
                const float *bp = bRows ? B + size_t(pc) * ldb + jr : bpackData + size_t(jr / NR) * kc * NR;
                const int ldbp = bRows ? ldb : NR;
                for (int ir = 0; ir < mc; ir += MR) {
                    float *c = C + size_t(ic + ir) * ldc + jr;
                    const int mr = std::min(MR, mc - ir), nr = std::min(NR, n - jr);
                    if (aInPlace) {
                        MicroKernel<MR, NV, W, false>(kc, A + size_t(ic + ir) * lda + pc, lda, bp, ldbp, c, ldc, acc,
                                                      mr, nr);
                    } else {
                        MicroKernel<MR, NV, W, true>(kc, apackData + size_t(ir / MR) * kc * MR, MR, bp, ldbp, c, ldc,
                                                     acc, mr, nr);
                    }
                }
            }
        }
    }
}

__attribute__((target("avx512f,fma"))) void GemmAvx512(int m, int n, int k, const float *A, int lda,
                                                        const float *B, int ldb, bool transB, float *C, int ldc,
                                                        bool accumulate) {
    GemmBody<8, 2, 16>(m, n, k, A, lda, B, ldb, transB, C, ldc, accumulate);  // 16 zmm accumulators
}

__attribute__((target("avx2,fma"))) void GemmAvx2(int m, int n, int k, const float *A, int lda, const float *B,
                                                   int ldb, bool transB, float *C, int ldc, bool accumulate) {
    GemmBody<6, 2, 8>(m, n, k, A, lda, B, ldb, transB, C, ldc, accumulate);  // 12 ymm accumulators
}

void GemmBaseline(int m, int n, int k, const float *A, int lda, const float *B, int ldb, bool transB, float *C,
                  int ldc, bool accumulate) {
    GemmBody<4, 2, 4>(m, n, k, A, lda, B, ldb, transB, C, ldc, accumulate);  // 8 xmm accumulators
}

using GemmFn = void (*)(int, int, int, const float *, int, const float *, int, bool, float *, int, bool);

GemmFn PickGemm() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) return GemmAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmAvx2;
    return GemmBaseline;
}

}  // namespace

void Sgemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb, float *c, int ldc,
           bool accumulate, bool transB) {
    static const GemmFn fn = PickGemm();
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int i = 0; i < m; ++i) std::fill(c + size_t(i) * ldc, c + size_t(i) * ldc + n, 0.0f);
        return;
    }
    fn(m, n, k, a, lda, b, ldb, transB, c, ldc, accumulate);
}

}  // namespace kernel
}  // namespace acl_fa_sim
