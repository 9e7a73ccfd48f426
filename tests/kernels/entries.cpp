// entries.cpp -- C entry points of the test-kernel library: build the tiling, launch the
// kernel through acl_fa_sim::LaunchKernel (as the simulator's op-API layer does).
#include <cstdio>
#include <cstring>
#include <string>

#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"
#include "test_kernels.h"

extern "C" void vec_scale_add(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling);
extern "C" void mm_softmax(GM_ADDR a, GM_ADDR b, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling);
extern "C" void matmul_only(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace, GM_ADDR tiling);
extern "C" void matmul_dequant(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace, GM_ADDR tiling);
extern "C" void probe(GM_ADDR in, GM_ADDR out, GM_ADDR tiling);
extern "C" void gemm_aic(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR workspace, GM_ADDR tiling);
extern "C" void philox_tile(GM_ADDR p, GM_ADDR pOut, GM_ADDR words, GM_ADDR bytes, GM_ADDR tiling);
extern "C" void mask_tile(GM_ADDR mask, GM_ADDR scores, GM_ADDR out, GM_ADDR summary, GM_ADDR tiling);
extern "C" void cross_core(GM_ADDR x, GM_ADDR b, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling);
extern "C" void core_flags(GM_ADDR x, GM_ADDR work, GM_ADDR out, GM_ADDR tiling);
extern "C" void fifo_attention(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR out, GM_ADDR lse, GM_ADDR workspace,
                               GM_ADDR tiling);

namespace {
// Launches `body` as kernel `name` and returns the launch's aclError, its message in err.
template <typename Body>
int Launch(const char *name, uint32_t blockDim, uint32_t kernelType, const Body &body, char *err, size_t errLen) {
    std::string msg;
    const aclError rc = acl_fa_sim::LaunchKernel(name, blockDim, kernelType, body, &msg);
    if (err != nullptr && errLen > 0) std::snprintf(err, errLen, "%s", msg.c_str());
    return rc;
}
GM_ADDR Gm(void *p) { return static_cast<GM_ADDR>(p); }
// The test kernels' tiling: problem sizes and a TCubeTiling for one AIV's rows.
MmSoftmaxTiling MakeMmTiling(uint32_t m, uint32_t n, uint32_t k, uint32_t rowsPerAiv, const int32_t *cube);
}  // namespace

extern "C" int aclfaSimTestVecScaleAdd(void *x, void *y, void *z, uint32_t tile, uint32_t tilesPerCore, float scale,
                                       uint32_t blockDim, char *err, size_t errLen) {
    VecScaleAddTiling t{tile, tilesPerCore, scale};
    return Launch("vec_scale_add", blockDim, KERNEL_TYPE_AIV_ONLY,
                  [&] { vec_scale_add(Gm(x), Gm(y), Gm(z), reinterpret_cast<GM_ADDR>(&t)); }, err, errLen);
}

extern "C" int aclfaSimTestMmSoftmax(void *a, void *b, void *out, void *workspace, uint32_t m, uint32_t n, uint32_t k,
                                     uint32_t rowsPerAiv, uint32_t blockDim, const int32_t *cube, char *err,
                                     size_t errLen) {
    MmSoftmaxTiling t = MakeMmTiling(m, n, k, rowsPerAiv, cube);
    return Launch("mm_softmax", blockDim, KERNEL_TYPE_MIX_AIC_1_2,
                  [&] { mm_softmax(Gm(a), Gm(b), Gm(out), Gm(workspace), reinterpret_cast<GM_ADDR>(&t)); },
                  err, errLen);
}

extern "C" int aclfaSimTestMatmul(void *a, void *b, void *c, void *workspace, uint32_t m, uint32_t n, uint32_t k,
                                  uint32_t rowsPerAiv, uint32_t blockDim, const int32_t *cube, char *err,
                                  size_t errLen) {
    MmSoftmaxTiling t = MakeMmTiling(m, n, k, rowsPerAiv, cube);
    return Launch("matmul_only", blockDim, KERNEL_TYPE_MIX_AIC_1_2,
                  [&] { matmul_only(Gm(a), Gm(b), Gm(c), Gm(workspace), reinterpret_cast<GM_ADDR>(&t)); }, err, errLen);
}

extern "C" int aclfaSimTestMatmulDequant(void *a, void *b, void *c, void *workspace, uint32_t m, uint32_t n,
                                         uint32_t k, uint64_t quantScalar, const int32_t *cube, char *err,
                                         size_t errLen) {
    MmDequantTiling t{};
    t.mm = MakeMmTiling(m, n, k, m, cube);
    t.quantScalar = quantScalar;
    return Launch("matmul_dequant", 1, KERNEL_TYPE_MIX_AIC_1_2,
                  [&] { matmul_dequant(Gm(a), Gm(b), Gm(c), Gm(workspace), reinterpret_cast<GM_ADDR>(&t)); }, err,
                  errLen);
}

namespace {
MmSoftmaxTiling MakeMmTiling(uint32_t m, uint32_t n, uint32_t k, uint32_t rowsPerAiv, const int32_t *cube) {
    MmSoftmaxTiling t{};
    t.m = m;
    t.n = n;
    t.k = k;
    t.rowsPerAiv = rowsPerAiv;
    TCubeTiling &c = t.cube;
    c.usedCoreNum = 1;
    c.M = static_cast<int32_t>(rowsPerAiv);
    c.N = static_cast<int32_t>(n);
    c.Ka = c.Kb = static_cast<int32_t>(k);
    c.singleCoreM = static_cast<int32_t>(rowsPerAiv);
    c.singleCoreN = static_cast<int32_t>(n);
    c.singleCoreK = static_cast<int32_t>(k);
    c.baseM = cube[0];
    c.baseN = cube[1];
    c.baseK = cube[2];
    c.stepM = cube[3];
    c.stepN = cube[4];
    c.stepKa = cube[5];
    c.stepKb = cube[6];
    c.depthA1 = cube[7];
    c.depthB1 = cube[8];
    c.dbL0A = cube[9];
    c.dbL0B = cube[10];
    c.dbL0C = cube[11];
    return t;
}
}  // namespace

extern "C" int aclfaSimTestGemm(void *a, void *b, void *c, uint32_t m, uint32_t n, uint32_t k, uint32_t gridN,
                                uint32_t tileM, uint32_t tileN, uint32_t blockDim, const int32_t *cube, char *err,
                                size_t errLen) {
    GemmTiling t{};
    t.m = m;
    t.n = n;
    t.k = k;
    t.gridN = gridN;
    t.tileM = tileM;
    t.tileN = tileN;
    t.cube = MakeMmTiling(m, n, k, tileM, cube).cube;
    t.cube.N = t.cube.singleCoreN = static_cast<int32_t>(tileN);
    return Launch("gemm_aic", blockDim, KERNEL_TYPE_AIC_ONLY,
                  [&] { gemm_aic(Gm(a), Gm(b), Gm(c), nullptr, reinterpret_cast<GM_ADDR>(&t)); }, err, errLen);
}

extern "C" int aclfaSimTestFifoAttention(void *q, void *k, void *v, void *out, void *lse, void *workspace, uint32_t sq,
                                         uint32_t skv, uint32_t headDim, uint32_t tileN, uint32_t preload,
                                         uint32_t kvSplit, uint32_t chunkRows, float scale, uint32_t blockDim,
                                         const int32_t *qkCube, const int32_t *pvCube, char *err, size_t errLen) {
    FifoAttentionTiling t{sq, skv, headDim, tileN, preload, kvSplit, chunkRows, scale, {}, {}};
    // One query block's jobs: QK [128, tileN] x K headDim, P.V [128, headDim] x K tileN.
    t.qkCube = MakeMmTiling(128, tileN, headDim, 128, qkCube).cube;
    t.pvCube = MakeMmTiling(128, headDim, tileN, 128, pvCube).cube;
    return Launch("fifo_attention", blockDim, KERNEL_TYPE_MIX_AIC_1_2, [&] {
        fifo_attention(Gm(q), Gm(k), Gm(v), Gm(out), Gm(lse), Gm(workspace), reinterpret_cast<GM_ADDR>(&t));
    }, err, errLen);
}

extern "C" int aclfaSimTestProbe(int32_t op, void *in, void *out, uint32_t n, float param, uint32_t kernelType,
                                 char *err, size_t errLen) {
    ProbeTiling t{op, n, param};
    return Launch("probe", 1, kernelType, [&] { probe(Gm(in), Gm(out), reinterpret_cast<GM_ADDR>(&t)); }, err, errLen);
}

extern "C" int aclfaSimTestCrossCore(int32_t op, void *x, void *b, void *out, void *workspace, uint32_t n,
                                     uint64_t spin, uint32_t m, uint32_t mmN, uint32_t k, uint32_t blockDim,
                                     char *err, size_t errLen) {
    CrossCoreTiling t{};
    t.op = op;
    t.n = n;
    t.spin = spin;
    t.m = m;
    t.mmN = mmN;
    t.k = k;
    // One 16 x 16 x 16 base block per step: fits every chip's L0 and L1.
    TCubeTiling &c = t.cube;
    c.usedCoreNum = 1;
    c.M = c.singleCoreM = static_cast<int32_t>(m);
    c.N = c.singleCoreN = static_cast<int32_t>(mmN);
    c.Ka = c.Kb = c.singleCoreK = static_cast<int32_t>(k);
    c.baseM = c.baseN = c.baseK = 16;
    c.stepM = c.stepN = c.stepKa = c.stepKb = 1;
    c.depthA1 = c.depthB1 = 1;
    c.dbL0A = c.dbL0B = c.dbL0C = 1;
    return Launch("cross_core", blockDim, KERNEL_TYPE_MIX_AIC_1_2,
                  [&] { cross_core(Gm(x), Gm(b), Gm(out), Gm(workspace), reinterpret_cast<GM_ADDR>(&t)); },
                  err, errLen);
}

extern "C" int aclfaSimTestCoreFlags(int32_t op, void *x, void *work, void *out, uint32_t n, uint64_t spin,
                                     uint32_t skip, uint32_t blockDim, char *err, size_t errLen) {
    CoreFlagsTiling t{};
    t.op = op;
    t.n = n;
    t.spin = spin;
    t.skip = skip;
    return Launch("core_flags", blockDim, KERNEL_TYPE_MIX_AIC_1_2,
                  [&] { core_flags(Gm(x), Gm(work), Gm(out), reinterpret_cast<GM_ADDR>(&t)); }, err, errLen);
}

namespace {
// An AIV-only kernel over four buffers whose tiling struct is given as its kWords 32-bit fields in order.
template <typename Tiling, size_t kWords>
int LaunchAivWithWords(const char *name, void (*kernel)(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR),
                       void *const (&buffers)[4], const uint32_t *words, uint32_t blockDim, char *err, size_t errLen) {
    static_assert(sizeof(Tiling) == kWords * sizeof(uint32_t), "the tiling struct must be kWords 32-bit fields");
    Tiling tiling{};
    std::memcpy(&tiling, words, sizeof(tiling));
    return Launch(name, blockDim, KERNEL_TYPE_AIV_ONLY, [&] {
        kernel(Gm(buffers[0]), Gm(buffers[1]), Gm(buffers[2]), Gm(buffers[3]), reinterpret_cast<GM_ADDR>(&tiling));
    }, err, errLen);
}
}  // namespace

extern "C" int aclfaSimTestPhiloxTile(void *p, void *pOut, void *words, void *bytes, const uint32_t *t,
                                      uint32_t blockDim, char *err, size_t errLen) {
    return LaunchAivWithWords<PhiloxTileTiling, 12>("philox_tile", philox_tile, {p, pOut, words, bytes}, t, blockDim,
                                                    err, errLen);
}

extern "C" int aclfaSimTestMaskTile(void *mask, void *scores, void *out, void *summary, const uint32_t *t,
                                    uint32_t blockDim, char *err, size_t errLen) {
    return LaunchAivWithWords<MaskTileTiling, 10>("mask_tile", mask_tile, {mask, scores, out, summary}, t, blockDim,
                                                  err, errLen);
}
