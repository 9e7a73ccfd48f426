// matmul.cpp -- the Matmul API's host side: the TCubeTiling capacity check, operand
// conversion to fp32, the GEMM, the result conversion, and the cube counters.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "ascendc_sim/matmul.h"
#include "cross_core_internal.h"
#include "engine_internal.h"
#include "scratch.h"

namespace AscendC {
namespace sim {
namespace {

using acl_fa_sim::kernel::Violation;

std::string Num(int64_t v) { return std::to_string(v); }

int64_t Align(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Loads op (rows x cols as the matmul sees it) into dst[rows][cols] fp32; stored
// transposed when `trans` (then element (r, c) is at src[c * ld + r]). Tags as OperandTag.
void LoadOperand(const void *src, int tag, int64_t ld, bool trans, int rows, int cols, float *dst) {
    using namespace acl_fa_sim::kernel;
    thread_local std::vector<float> line;
    const int outer = trans ? cols : rows, inner = trans ? rows : cols;
    float *const lineData = acl_fa_sim::kernel::Scratch(line, size_t(inner));
    for (int o = 0; o < outer; ++o) {
        float *row = trans ? lineData : dst + int64_t(o) * cols;
        if (tag == 0) {
            std::copy_n(static_cast<const float *>(src) + o * ld, inner, row);
        } else if (tag == 3) {  // int32 (an int8 matmul's C, accumulated)
            const int32_t *s = static_cast<const int32_t *>(src) + o * ld;
            for (int i = 0; i < inner; ++i) row[i] = static_cast<float>(s[i]);
        } else if (tag == 4) {  // int8: exact in fp32
            const int8_t *s = static_cast<const int8_t *>(src) + o * ld;
            for (int i = 0; i < inner; ++i) row[i] = static_cast<float>(s[i]);
        } else {
            const uint16_t *s = static_cast<const uint16_t *>(src) + o * ld;
            (tag == 1 ? ConvertF16ToF32 : ConvertBf16ToF32)(s, row, inner);
        }
        if (trans) {
            for (int i = 0; i < inner; ++i) dst[int64_t(i) * cols + o] = row[i];
        }
    }
}

// Whether the Norm template's L1 buffer of an operand caches all its K tiles of one step along
// its major axis (stepM for A, stepN for B), so that they are loaded once and hit afterwards:
// asc-devkit impl/adv_api/detail/matmul/resource/cube_in_buffer/cube_in_buffer_normal.h
// CubeInBuffer::Init with cacheNum = depthA1 / depthB1 and reduceAxisCnt the K tiles (KLoop's
// total iterations): a cache (cacheSize_ = cacheNum) only when cacheNum >= reduceAxisCnt * step
// ("k full load"), except with one K tile and cacheNum 2, which is M / N double buffering and
// caches nothing.
bool KFullyCached(int depth, int64_t kTiles, int step) {
    if (depth < kTiles * step) return false;
    return !(kTiles == 1 && depth == 2);
}

// Operand bytes the cube loads from GM for one job. A is loaded once per N pass (baseN * stepN
// columns) and B once per M pass (baseM * stepM rows), except for the operand the iteration
// order revisits with its K tiles cached: with iterateOrder 0 (ORDER_M: M moves first) the
// Norm template indexes B's L1 tiles by (K tile, N block) only (copy_cube_in_norm.h,
// GetIterIndexInner for B), so a B cached whole along K serves every M block of its N column
// and is loaded once; with ORDER_N the same holds for A across the N blocks of its M row.
uint64_t OperandLoadBytes(const TCubeTiling &t, int m, int n, int k, uint32_t aBytes, uint32_t bBytes) {
    const int64_t mPass = std::max<int64_t>(1, (m + int64_t(t.baseM) * t.stepM - 1) / (int64_t(t.baseM) * t.stepM));
    const int64_t nPass = std::max<int64_t>(1, (n + int64_t(t.baseN) * t.stepN - 1) / (int64_t(t.baseN) * t.stepN));
    const int64_t kTiles = std::max<int64_t>(1, (k + int64_t(t.baseK) - 1) / t.baseK);
    const bool orderM = t.iterateOrder == 0;
    const int64_t aLoads = !orderM && KFullyCached(t.depthA1, kTiles, t.stepM) ? 1 : nPass;
    const int64_t bLoads = orderM && KFullyCached(t.depthB1, kTiles, t.stepN) ? 1 : mPass;
    return uint64_t(m) * k * aBytes * aLoads + uint64_t(k) * n * bBytes * bLoads;
}

}  // namespace

uint64_t CheckCubeTiling(const TCubeTiling &t, uint32_t aBytes, uint32_t bBytes, const char *api) {
    const aclfaSimChip &chip = *aclfaSimGetChip();
    auto fail = [&](const char *rule, const std::string &detail) {
        Violation(rule, api, detail + " (TCubeTiling baseM=" + Num(t.baseM) + " baseN=" + Num(t.baseN) +
                                 " baseK=" + Num(t.baseK) + " depthA1=" + Num(t.depthA1) + " depthB1=" +
                                 Num(t.depthB1) + " on " + chip.name + ")");
    };
    const int c0 = 32 / static_cast<int>(aBytes);  // K elements of one fractal row
    if (t.baseM <= 0 || t.baseN <= 0 || t.baseK <= 0) fail("Matmul tiling", "baseM/baseN/baseK must be positive");
    if (t.baseM % 16 || t.baseN % 16 || t.baseK % c0) {
        fail("Matmul tiling", "baseM and baseN must be multiples of 16 and baseK of " + Num(c0));
    }
    if (t.stepM <= 0 || t.stepN <= 0 || t.stepKa <= 0 || t.stepKb <= 0) {
        fail("Matmul tiling", "stepM/stepN/stepKa/stepKb must be positive");
    }
    const int64_t perA = int64_t(t.stepM) * t.stepKa, perB = int64_t(t.stepN) * t.stepKb;
    if (t.depthA1 < perA || t.depthA1 % perA || t.depthA1 / perA > 2) {
        fail("Matmul tiling", "depthA1 must be stepM*stepKa (" + Num(perA) + ") or twice that");
    }
    if (t.depthB1 < perB || t.depthB1 % perB || t.depthB1 / perB > 2) {
        fail("Matmul tiling", "depthB1 must be stepN*stepKb (" + Num(perB) + ") or twice that");
    }
    const uint64_t l0a = uint64_t(t.baseM) * t.baseK * aBytes * (t.dbL0A >= 2 ? 2 : 1);
    const uint64_t l0b = uint64_t(t.baseK) * t.baseN * bBytes * (t.dbL0B >= 2 ? 2 : 1);
    const uint64_t l0c = uint64_t(t.baseM) * t.baseN * 4 * (t.dbL0C >= 2 ? 2 : 1);
    if (l0a > chip.l0aBytes) fail("L0A capacity", "A tiles need " + Num(l0a) + " B of " + Num(chip.l0aBytes));
    if (l0b > chip.l0bBytes) fail("L0B capacity", "B tiles need " + Num(l0b) + " B of " + Num(chip.l0bBytes));
    if (l0c > chip.l0cBytes) fail("L0C capacity", "C tiles need " + Num(l0c) + " B of " + Num(chip.l0cBytes));
    const uint64_t l1 = uint64_t(t.depthA1) * t.baseM * t.baseK * aBytes +
                        uint64_t(t.depthB1) * t.baseK * t.baseN * bBytes +
                        (t.isBias ? uint64_t(t.baseN) * 4 : 0);
    if (l1 > chip.l1Bytes) fail("L1 capacity", "A1 + B1 buffers need " + Num(l1) + " B of " + Num(chip.l1Bytes));
    return l1;
}

float DequantScale(uint64_t quantScalar) {
    const uint32_t bits = static_cast<uint32_t>(quantScalar) & 0xFFFFE000u;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return scale;
}

void RunMatmul(const MatmulJob &j) {
    thread_local std::vector<float> a, b, c;
    using acl_fa_sim::kernel::Scratch;
    float *const aData = Scratch(a, size_t(j.m) * j.k);
    float *const bData = Scratch(b, size_t(j.k) * j.n);
    LoadOperand(j.a, j.aTag, j.lda, j.transA, j.m, j.k, aData);
    // A transposed B is converted as stored, [n, k], and packed from there by the GEMM.
    LoadOperand(j.b, j.bTag, j.ldb, false, j.transB ? j.n : j.k, j.transB ? j.k : j.n, bData);
    const int ldb = j.transB ? j.k : j.n;
    if (j.dequant) {
        // int8 x int8 summed exactly (below), then each int32 result times the scale in fp32 and
        // rounded to half (to nearest even) as FixPipe writes it: one rounding after the product [inf].
        if (j.accumulate) Violation("Matmul quant", "Matmul", "accumulating into a dequantized C is not simulated");
        if (j.k >= 1032) Violation("Matmul int8", "Matmul", "K = " + Num(j.k) + " is past the simulator's exact int8 range (K < 1032)");
        float *const cData = Scratch(c, size_t(j.m) * j.n);
        acl_fa_sim::kernel::Sgemm(j.m, j.n, j.k, aData, j.k, bData, ldb, cData, j.n, false, j.transB);
        for (size_t x = 0; x < size_t(j.m) * j.n; ++x) cData[x] *= j.deqScale;
        for (int i = 0; i < j.m; ++i) {
            acl_fa_sim::kernel::ConvertF32ToF16(cData + size_t(i) * j.n, static_cast<uint16_t *>(j.c) + i * j.ldc, j.n);
        }
        return;
    }
    if (j.gmAtomic && j.cTag == 3) Violation("Matmul int8", "Matmul", "an atomic int32 C is not simulated");
    if (j.gmAtomic) {
        // A * B first, then added to C row by row under the atomic lock (other cores may add too).
        thread_local std::vector<float> prod;
        thread_local std::vector<uint16_t> narrow;
        float *const prodData = Scratch(prod, size_t(j.m) * j.n);  // Sgemm without accumulate writes all of it
        acl_fa_sim::kernel::Sgemm(j.m, j.n, j.k, aData, j.k, bData, ldb, prodData, j.n, false, j.transB);
        const size_t elem = j.cTag == 0 ? 4 : 2;
        for (int i = 0; i < j.m; ++i) {
            const float *row = prodData + size_t(i) * j.n;
            void *dst = static_cast<uint8_t *>(j.c) + size_t(i) * j.ldc * elem;
            if (j.cTag == 0) {
                acl_fa_sim::kernel::AddToGm(dst, row, uint64_t(j.n) * 4, 0);
            } else {
                Scratch(narrow, size_t(j.n));
                (j.cTag == 1 ? acl_fa_sim::kernel::ConvertF32ToF16 : acl_fa_sim::kernel::ConvertF32ToBf16)(
                    row, narrow.data(), j.n);
                acl_fa_sim::kernel::AddToGm(dst, narrow.data(), uint64_t(j.n) * 2, j.cTag);
            }
        }
        return;
    }
    if (j.cTag == 3) {
        // int8 x int8 -> int32: every product and partial sum is an integer below 2^24 while
        // K * 127 * 128 < 2^24 (K < 1032; the host tilings keep K = head_dim <= 256), so the fp32
        // GEMM sums them exactly, in any order, as the cube's integer accumulation does.
        if (j.k >= 1032) Violation("Matmul int8", "Matmul", "K = " + Num(j.k) + " is past the simulator's exact int8 range (K < 1032)");
        float *const cData = Scratch(c, size_t(j.m) * j.n);
        if (j.accumulate) LoadOperand(j.c, 3, j.ldc, false, j.m, j.n, cData);
        acl_fa_sim::kernel::Sgemm(j.m, j.n, j.k, aData, j.k, bData, ldb, cData, j.n, j.accumulate, j.transB);
        for (int i = 0; i < j.m; ++i) {
            int32_t *dst = static_cast<int32_t *>(j.c) + int64_t(i) * j.ldc;
            for (int x = 0; x < j.n; ++x) dst[x] = static_cast<int32_t>(cData[size_t(i) * j.n + x]);
        }
        return;
    }
    if (j.cTag == 0) {
        acl_fa_sim::kernel::Sgemm(j.m, j.n, j.k, aData, j.k, bData, ldb, static_cast<float *>(j.c),
                                  static_cast<int>(j.ldc), j.accumulate, j.transB);
        return;
    }
    float *const cData = Scratch(c, size_t(j.m) * j.n);
    if (j.accumulate) LoadOperand(j.c, j.cTag, j.ldc, false, j.m, j.n, cData);
    acl_fa_sim::kernel::Sgemm(j.m, j.n, j.k, aData, j.k, bData, ldb, cData, j.n, j.accumulate, j.transB);
    for (int i = 0; i < j.m; ++i) {
        uint16_t *dst = static_cast<uint16_t *>(j.c) + i * j.ldc;
        (j.cTag == 1 ? acl_fa_sim::kernel::ConvertF32ToF16 : acl_fa_sim::kernel::ConvertF32ToBf16)(
            cData + size_t(i) * j.n, dst, j.n);
    }
}

void CountMatmul(acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, int m, int n, int k, uint32_t aBytes,
                 uint32_t bBytes, uint64_t cGmBytes, const GmRows &a, const GmRows &b, const GmRows &c) {
    const int64_t c0 = 32 / aBytes;
    const uint64_t macs = uint64_t(Align(m, 16)) * Align(n, 16) * Align(k, c0);
    // A from UB: no GM reads.
    const uint64_t reads = OperandLoadBytes(t, m, n, k, a.addr == nullptr ? 0 : aBytes, bBytes);
    const uint64_t l1 = uint64_t(t.depthA1) * t.baseM * t.baseK * aBytes + uint64_t(t.depthB1) * t.baseK * t.baseN * bBytes;
    acl_fa_sim::kernel::CountCube(core, macs, reads, cGmBytes, l1);
    for (const GmRows *op : {&a, &b, &c}) {
        acl_fa_sim::kernel::TraceCube(core, op->addr, uint64_t(op->rows), op->rowBytes, op->strideBytes, op == &c);
    }
}

void CheckLocalWorkspace(const acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, uint64_t bytes,
                         bool given, const char *api) {
    (void)core;
    const uint64_t needed = 2ull * static_cast<uint64_t>(std::max(t.transLength, 0));
    if (needed == 0) return;
    if (!given) {
        Violation("Matmul local workspace", api,
                  "ND data need " + Num(needed) + " B of UB for ND <-> NZ (2 x transLength " + Num(t.transLength) +
                      "): call SetLocalWorkspace first");
    }
    if (bytes < needed) {
        Violation("Matmul local workspace", api,
                  "SetLocalWorkspace gave " + Num(bytes) + " B; ND <-> NZ needs " + Num(needed) +
                      " B (2 x transLength " + Num(t.transLength) + ")");
    }
}

uint64_t TraceMatmulJob(acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, const MatmulJob &j,
                        uint32_t aBytes, uint32_t bBytes, uint32_t cBytes, bool aInGm, bool cInGm, bool sync,
                        const char *api) {
    using acl_fa_sim::kernel::GmRange;
    acl_fa_sim::kernel::MatmulWork w;
    w.m = j.m;
    w.n = j.n;
    w.k = j.k;
    w.baseM = t.baseM;
    w.baseN = t.baseN;
    w.baseK = t.baseK;
    w.aBytes = aBytes;
    w.bBytes = bBytes;
    // A from UB (coupled chips) is an on-core move: its bytes leave the GM traffic.
    const uint64_t loads = OperandLoadBytes(t, j.m, j.n, j.k, aBytes, bBytes);
    const uint64_t aLoads = aInGm ? 0 : loads - OperandLoadBytes(t, j.m, j.n, j.k, 0, bBytes);
    w.gmReadBytes = loads - aLoads;
    w.localReadBytes = aLoads;
    w.outBytes = uint64_t(j.m) * j.n * cBytes;
    w.outToGm = cInGm;
    // A: [m, k] rows (or [k, m] stored), B: [k, n] rows (or [n, k] stored), C: [m, n] rows.
    acl_fa_sim::kernel::MemRange ranges[3];
    if (aInGm) {
        ranges[0] = j.transA ? GmRange(j.a, uint64_t(j.m) * aBytes, false, j.k, j.lda * aBytes)
                             : GmRange(j.a, uint64_t(j.k) * aBytes, false, j.m, j.lda * aBytes);
    } else {
        ranges[0] = acl_fa_sim::kernel::LocalRange(false, static_cast<const uint8_t *>(j.a) - core.ub.base,
                                                   uint64_t(j.transA ? j.m : j.k) * aBytes, false);
        ranges[0].count = j.transA ? j.k : j.m;
        ranges[0].stride = j.lda * aBytes;
    }
    ranges[1] = j.transB ? GmRange(j.b, uint64_t(j.k) * bBytes, false, j.n, j.ldb * bBytes)
                         : GmRange(j.b, uint64_t(j.n) * bBytes, false, j.k, j.ldb * bBytes);
    if (cInGm) {
        ranges[2] = GmRange(j.c, uint64_t(j.n) * cBytes, true, j.m, j.ldc * cBytes);
    } else {
        ranges[2] = acl_fa_sim::kernel::LocalRange(false, static_cast<const uint8_t *>(j.c) - core.ub.base,
                                                   uint64_t(j.n) * cBytes, true);
        ranges[2].count = j.m;
        ranges[2].stride = j.ldc * cBytes;
    }
    return acl_fa_sim::kernel::TraceMatmul(core, w, sync, ranges, 3, api);
}

void CheckMatmulLaunch(const char *api, int objects) {
    auto &core = acl_fa_sim::kernel::Enter(api);
    if (objects > kMaxMatmulObjects) {
        Violation("Matmul objects", api, Num(objects) + " Matmul objects; at most 4 are supported");
    }
    if (!core.coupled && (core.kernelType == KERNEL_TYPE_AIV_ONLY || core.kernelType == KERNEL_TYPE_MIX_AIV_1_0)) {
        Violation("Matmul launch", api, "Matmul needs a cube core; the kernel runs on vector cores only");
    }
}

}  // namespace sim
}  // namespace AscendC
