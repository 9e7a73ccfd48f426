// ascendc_sim/matmul.h -- the Matmul high-level API (asc-devkit include/adv_api/matmul/
// matmul.h, matmul_config.h, matmul_intf.h; impl/adv_api/detail/kfc/kfc_register_obj.h).
//
// On the chip, in a MIX kernel the AIC runs REGIST_MATMUL_OBJ as a server and leaves the
// kernel; the AIVs' Matmul calls are requests to it. Here the matmul executes in the
// calling AIV's thread and its work (MACs of the 16-padded tiles, operand loads, result
// stores, L1 use) is counted to the group's AIC (block GetBlockIdx() / ratio).
// The TCubeTiling is checked against the chip's L1/L0A/L0B/L0C when the object is
// initialised, as the real buffers would not fit.
//
// Row strides of ND operands (SetOrgShape(orgM, orgN, orgKa, orgKb, orgKc)):
//   A [M, K]: orgKa;  A^T stored [K, M]: orgM;  B [K, N]: orgN;  B^T stored [N, K]: orgKb;
//   C [M, N]: orgKc when non-zero, else orgN.
// Gm operand traffic model: A is read once per N pass (ceil(N / (baseN * stepN))),
// B once per M pass (ceil(M / (baseM * stepM))); C written once.
//
// Coupled AI Cores (arch 2002 / 1001) run the matmul in the calling core itself; there A may
// come from UB (SetTensorA(LocalTensor): UB -> L1) and C may go to UB (L0C -> UB), and ND data
// pass through the UB workspace given with SetLocalWorkspace (2 x TCubeTiling::transLength).
// Their cube takes float16 (and int8) operands only. On arch 2201 the AIC has neither path to
// an AIV's UB, and SetLocalWorkspace does not exist.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ascendc_sim/tpipe.h"
#include "ascendc_sim/vec.h"
#include "kernel_tiling/kernel_tiling.h"

// CubeFormat, LayoutMode, MatmulConfig and the CFG_* constants live in the global namespace
// (asc-devkit matmul_config.h / tiling.h); MatmulType and Matmul in AscendC.
enum class CubeFormat {
    ND = 0,
    NZ,
    ZN,
    ZZ,
    NN,
    ND_ALIGN,
    SCALAR,
    VECTOR,
    ROW_MAJOR = ND,
    COLUMN_MAJOR = 8,
};

enum class LayoutMode { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

// The leading fields of the real MatmulConfig (the simulator runs every template the same way).
struct MatmulConfig {
    bool doNorm;
    bool doBasicBlock;
    bool doMultiDataLoad;
    uint32_t basicM;
    uint32_t basicN;
    uint32_t basicK;
    bool intrinsicsCheck;
    bool isNBatch;
    bool enVecND2NZ;
};
constexpr MatmulConfig CFG_NORM = {true, false, false, 0, 0, 0, false, false, false};
constexpr MatmulConfig CFG_MDL = {false, false, true, 0, 0, 0, false, false, false};

namespace AscendC {

template <TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false,
          LayoutMode LAYOUT = LayoutMode::NONE, bool IBSHARE = false, TPosition SRCPOS = TPosition::GM>
struct MatmulType {
    constexpr static TPosition pos = POSITION;
    constexpr static CubeFormat format = FORMAT;
    using T = TYPE;
    constexpr static bool isTrans = ISTRANS;
    constexpr static LayoutMode layout = LAYOUT;
    constexpr static bool ibShare = IBSHARE;
    constexpr static TPosition srcPos = SRCPOS;
};

template <void (*DataCopyOut)(const __gm__ void *gm, const LocalTensor<int8_t> &co1Local,
                              const void *dataCopyOutParams, const uint64_t tilingPtr,
                              const uint64_t dataPtr) = nullptr,
          void (*CopyA1)(const LocalTensor<int8_t> &aMatrix, const __gm__ void *gm, int row, int col, int useM,
                         int useK, const uint64_t tilingPtr, const uint64_t dataPtr) = nullptr,
          void (*CopyB1)(const LocalTensor<int8_t> &bMatrix, const __gm__ void *gm, int row, int col, int useK,
                         int useN, const uint64_t tilingPtr, const uint64_t dataPtr) = nullptr>
struct MatmulCallBackFunc {};

namespace sim {
// Checks a TCubeTiling against the current chip (violation on failure); returns the L1 bytes it uses.
uint64_t CheckCubeTiling(const TCubeTiling &t, uint32_t aBytes, uint32_t bBytes, const char *api);

// One matmul on the host: C = A * B (fp32 accumulate), optionally added to C.
struct MatmulJob {
    const void *a;
    int aTag;          // OperandTag of A (float 0, half 1, bfloat16 2, int8 4)
    int64_t lda;       // row stride of A as stored
    bool transA;       // stored [K, M]
    const void *b;
    int bTag;
    int64_t ldb;
    bool transB;       // stored [N, K]
    void *c;
    int cTag;
    int64_t ldc;
    int m, n, k;
    bool accumulate;   // C += A * B
    bool gmAtomic;     // accumulate into GM other cores may add to: the add is atomic (enAtomic)
    bool dequant;      // int8 A, B and a half C: C = half(float(A * B) * deqScale) (FixPipe DEQF16)
    float deqScale;    // DequantScale(SetQuantScalar's argument)
};
void RunMatmul(const MatmulJob &job);

// The scale SetQuantScalar's quantScalar carries (asc-devkit SetQuantScalar.md): the fp32 whose
// bits are the low 32 bits of quantScalar cut to their top 19 (sign, exponent, 10 mantissa bits:
// quantScalar = scale & 0xFFFFE000, the bits below are not kept).
float DequantScale(uint64_t quantScalar);

// The element tag of a Matmul operand or result: TypeTag's (float 0, half 1, bfloat16 2, int32 3)
// and int8_t 4, the cube's integer operand (asc-devkit Matmul使用说明.md: on Atlas A2/A3 and the
// Atlas inference series A and B may be int8_t with C int32_t; the products are summed exactly).
template <typename T> constexpr int OperandTag() {
    if constexpr (std::is_same_v<T, int8_t>) return 4;
    else return TypeTag<T>();
}

// An operand as stored in GM: `rows` rows of `cols` elements of T, `ld` elements apart.
struct GmRows {
    const void *addr;
    int64_t rows;
    uint64_t rowBytes;
    uint64_t strideBytes;
};
template <typename T>
GmRows MakeGmRows(const void *addr, int64_t rows, int64_t cols, int64_t ld) {
    return {addr, rows, uint64_t(cols) * sizeof(T), uint64_t(ld) * sizeof(T)};
}

// Counts the job on the group's AIC and appends the rows of its GM operands to the trace
// (c.addr == nullptr: C went to UB; a.addr == nullptr: A came from UB, no GM reads for A).
void CountMatmul(acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, int m, int n, int k, uint32_t aBytes,
                 uint32_t bBytes, uint64_t cGmBytes, const GmRows &a, const GmRows &b, const GmRows &c);

// The architecture rules of the Matmul API (see the header comment): violations name the path or dtype.
void CheckLocalWorkspace(const acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, uint64_t bytes,
                         bool given, const char *api);

// Records the job on the instruction trace (when on): a request to the cube that reads A (GM, or
// this core's UB when !aInGm) and B (GM) and writes C (GM, or this core's UB when !cInGm); `sync`
// adds the wait for it. Returns the job's key for WaitIterateAll.
uint64_t TraceMatmulJob(acl_fa_sim::kernel::CoreContext &core, const TCubeTiling &t, const MatmulJob &job,
                        uint32_t aBytes, uint32_t bBytes, uint32_t cBytes, bool aInGm, bool cInGm, bool sync,
                        const char *api);

template <typename T>
uint64_t GmSpan(int64_t rows, int64_t cols, int64_t ld) {
    return rows <= 0 || cols <= 0 ? 0 : uint64_t((rows - 1) * ld + cols) * sizeof(T);
}
}  // namespace sim

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto &MM_CFG = CFG_NORM,
          class MM_CB = MatmulCallBackFunc<nullptr, nullptr, nullptr>, typename = void>
class MatmulImpl {
public:
    using AType = A_TYPE;
    using BType = B_TYPE;
    using CType = C_TYPE;
    using BiasType = BIAS_TYPE;
    using SrcAT = typename A_TYPE::T;
    using SrcBT = typename B_TYPE::T;
    using DstT = typename C_TYPE::T;
    using BiasT = typename BIAS_TYPE::T;

    MatmulImpl() {}

    void Init(const TCubeTiling *__restrict cubeTiling, TPipe *tpipe = nullptr) {
        (void)tpipe;
        auto &core = acl_fa_sim::kernel::Enter("Matmul::Init");
        if (cubeTiling == nullptr) acl_fa_sim::kernel::Violation("Matmul tiling", "Matmul::Init", "tiling is NULL");
        tiling_ = *cubeTiling;
        // The cube's operand types on this arch (Mmad; arch_surface.h).
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::Mmad, acl_fa_sim::surface::DtypeOf<SrcAT>(),
                                     "Matmul::Init");
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::Mmad, acl_fa_sim::surface::DtypeOf<SrcBT>(),
                                     "Matmul::Init");
        const uint64_t l1 = sim::CheckCubeTiling(tiling_, sizeof(SrcAT), sizeof(SrcBT), "Matmul::Init");
        if (l1 > core.cubeStats->l1HighWater) core.cubeStats->l1HighWater = l1;
        orgM_ = tiling_.M;
        orgN_ = tiling_.N;
        orgKa_ = tiling_.Ka;
        orgKb_ = tiling_.Kb;
        orgKc_ = 0;
        singleM_ = tiling_.singleCoreM;
        singleN_ = tiling_.singleCoreN;
        singleK_ = tiling_.singleCoreK;
        inited_ = true;
    }
    void SetOrgShape(int orgM, int orgN, int orgK) { SetOrgShape(orgM, orgN, orgK, orgK, 0); }
    void SetOrgShape(int orgM, int orgN, int orgKa, int orgKb, int orgKc = 0) {
        Use("Matmul::SetOrgShape");
        orgM_ = orgM;
        orgN_ = orgN;
        orgKa_ = orgKa;
        orgKb_ = orgKb;
        orgKc_ = orgKc;
    }
    void SetSingleShape(int singleM, int singleN, int singleK) {
        Use("Matmul::SetSingleShape");
        singleM_ = singleM;
        singleN_ = singleN;
        singleK_ = singleK;
    }
    // Single-core shape of a tail block; -1 keeps the current value.
    void SetTail(int tailM = -1, int tailN = -1, int tailK = -1) {
        Use("Matmul::SetTail");
        if (tailM >= 0) singleM_ = tailM;
        if (tailN >= 0) singleN_ = tailN;
        if (tailK >= 0) singleK_ = tailK;
    }
    void SetTensorA(const GlobalTensor<SrcAT> &gm, bool isTransposeA = false) {
        UseOperand("Matmul::SetTensorA", isTransposeA, A_TYPE::isTrans, "A");
        a_ = gm;
        aInUb_ = false;
        transA_ = isTransposeA;
        hasA_ = true;
    }
    // A from UB (MatmulType position VECCALC / VECIN): copied UB -> L1 by the cube's core.
    void SetTensorA(const LocalTensor<SrcAT> &leftMatrix, bool isTransposeA = false) {
        auto &core = Use("Matmul::SetTensorA");
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::MatmulUbPath, acl_fa_sim::surface::kAll,
                                     "Matmul::SetTensorA");
        if (A_TYPE::pos == TPosition::GM) {
            acl_fa_sim::kernel::Violation("Matmul position", "Matmul::SetTensorA",
                                          "a LocalTensor A needs MatmulType<TPosition::VECCALC/VECIN, ...> for A");
        }
        CheckTranspose("Matmul::SetTensorA", isTransposeA, A_TYPE::isTrans, "A");
        aLocal_ = leftMatrix;
        aInUb_ = true;
        transA_ = isTransposeA;
        hasA_ = true;
    }
    // The UB space the Matmul API converts ND data through (coupled architectures only).
    void SetLocalWorkspace(const LocalTensor<uint8_t> &tmpBuffer) {
        sim::OnArchPath(acl_fa_sim::surface::Api::SetLocalWorkspace, "Matmul::SetLocalWorkspace");
        sim::CheckLocalT("Matmul::SetLocalWorkspace", "tmpBuffer", tmpBuffer, 0);
        localWorkspaceBytes_ = tmpBuffer.GetSize();
        hasLocalWorkspace_ = true;
    }
    void SetTensorB(const GlobalTensor<SrcBT> &gm, bool isTransposeB = false) {
        UseOperand("Matmul::SetTensorB", isTransposeB, B_TYPE::isTrans, "B");
        b_ = gm;
        transB_ = isTransposeB;
        hasB_ = true;
    }

    // C = A * B for the single shape, written (or with enAtomic, added) to gm.
    template <bool sync = true>
    void IterateAll(const GlobalTensor<DstT> &gm, uint8_t enAtomic = 0, bool enSequentialWrite = false,
                    bool waitIterateAll = false, bool fakeMsg = false) {
        (void)enSequentialWrite;
        (void)waitIterateAll;
        (void)fakeMsg;
        auto &core = Use("Matmul::IterateAll");
        const int64_t ldc = orgKc_ != 0 ? orgKc_ : orgN_;
        const uint64_t cSpan = sim::GmSpan<DstT>(singleM_, singleN_, ldc);
        acl_fa_sim::kernel::GmCheck(core, "Matmul::IterateAll", gm.SimData(), cSpan, gm.SimLo(), gm.SimHi());
        Compute(core, 0, 0, singleM_, singleN_, gm.SimData(), TypeTagC(), ldc, enAtomic != 0, cSpan, sync,
                "Matmul::IterateAll");
        if (!sync) pendingAsync_ = true;
    }
    // C into UB as [M, N'] with N' = N rounded up to a 32-byte row.
    template <bool sync = true>
    void IterateAll(const LocalTensor<DstT> &ubCmatrix, uint8_t enAtomic = 0) {
        auto &core = Use("Matmul::IterateAll");
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::MatmulUbPath, acl_fa_sim::surface::kAll,
                                     "Matmul::IterateAll");
        const int64_t ldc = AlignRow(singleN_);
        sim::CheckLocalT("Matmul::IterateAll", "ubCmatrix", ubCmatrix, uint64_t(singleM_) * ldc * sizeof(DstT));
        Compute(core, 0, 0, singleM_, singleN_, ubCmatrix.SimData(), TypeTagC(), ldc, enAtomic != 0, 0, sync,
                "Matmul::IterateAll");
        if (!sync) pendingAsync_ = true;
    }
    void WaitIterateAll() {
        auto &core = acl_fa_sim::kernel::Enter("Matmul::WaitIterateAll");
        if (!pendingAsync_) {
            acl_fa_sim::kernel::Violation("Matmul async", "Matmul::WaitIterateAll",
                                          "no IterateAll<false> is outstanding (the chip would wait forever)");
        }
        pendingAsync_ = false;
        acl_fa_sim::kernel::TraceMatmulWait(core, pendingJob_, "Matmul::WaitIterateAll");
    }

    // Computes the next baseM x baseN block of C (order from tiling.iterateOrder:
    // 0 ORDER_M moves along M first); false when all blocks were produced.
    template <bool sync = true>
    bool Iterate(bool enPartialSum = false) {
        (void)enPartialSum;
        Use("Matmul::Iterate");
        const int mBlocks = CeilDiv(singleM_, tiling_.baseM), nBlocks = CeilDiv(singleN_, tiling_.baseN);
        if (iterIndex_ >= mBlocks * nBlocks) {
            iterIndex_ = 0;
            haveBlock_ = false;
            return false;
        }
        if (tiling_.iterateOrder == 0) {
            blockM_ = iterIndex_ % mBlocks;
            blockN_ = iterIndex_ / mBlocks;
        } else {
            blockN_ = iterIndex_ % nBlocks;
            blockM_ = iterIndex_ / nBlocks;
        }
        ++iterIndex_;
        haveBlock_ = true;
        return true;
    }
    // The current block into UB as [bm, baseN'] (baseN rounded up to a 32-byte row).
    template <bool sync = true>
    void GetTensorC(const LocalTensor<DstT> &co2Local, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
        (void)enSequentialWrite;
        auto &core = Use("Matmul::GetTensorC");
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::MatmulUbPath, acl_fa_sim::surface::kAll,
                                     "Matmul::GetTensorC");
        NeedBlock();
        const int bm = BlockRows(), bn = BlockCols();
        const int64_t ldc = AlignRow(tiling_.baseN);
        sim::CheckLocalT("Matmul::GetTensorC", "co2Local", co2Local, uint64_t(bm) * ldc * sizeof(DstT));
        Compute(core, blockM_ * tiling_.baseM, blockN_ * tiling_.baseN, bm, bn, co2Local.SimData(), TypeTagC(), ldc,
                enAtomic != 0, 0, true, "Matmul::GetTensorC");
    }
    // The current block into the C matrix gm at its position.
    template <bool sync = true>
    void GetTensorC(const GlobalTensor<DstT> &gm, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
        (void)enSequentialWrite;
        auto &core = Use("Matmul::GetTensorC");
        NeedBlock();
        const int64_t ldc = orgKc_ != 0 ? orgKc_ : orgN_;
        const int bm = BlockRows(), bn = BlockCols();
        DstT *c = gm.SimData() + int64_t(blockM_) * tiling_.baseM * ldc + int64_t(blockN_) * tiling_.baseN;
        const uint64_t cSpan = sim::GmSpan<DstT>(bm, bn, ldc);
        acl_fa_sim::kernel::GmCheck(core, "Matmul::GetTensorC", c, cSpan, gm.SimLo(), gm.SimHi());
        Compute(core, blockM_ * tiling_.baseM, blockN_ * tiling_.baseN, bm, bn, c, TypeTagC(), ldc, enAtomic != 0,
                cSpan, true, "Matmul::GetTensorC");
    }
    void End() {
        Use("Matmul::End");
        hasA_ = hasB_ = false;
        iterIndex_ = 0;
        haveBlock_ = false;
    }
    void SetSubBlockIdx(uint8_t subBlockIdx) { (void)subBlockIdx; }
    // One dequantization scale for all of C (asc-devkit SetQuantScalar.md): with int8 A and B and a
    // half C, every int32 result leaves L0C as half(result * scale) (QuantMode_t DEQF16,
    // impl/adv_api/detail/matmul/stage/copy_cube_out/quant/quant_processor_fixpipe.h). Kept for
    // the following Iterate / IterateAll calls. Only that pairing is simulated; others are refused.
    void SetQuantScalar(const uint64_t quantScalar) {
        auto &core = Use("Matmul::SetQuantScalar");
        acl_fa_sim::surface::Require(core, acl_fa_sim::surface::Api::MatmulQuant, acl_fa_sim::surface::kAll,
                                     "Matmul::SetQuantScalar");
        if constexpr (!kDequant) {
            acl_fa_sim::kernel::Violation("Matmul quant", "Matmul::SetQuantScalar",
                                          "the simulator models the dequantization of int8 A/B to a half C only");
        }
        quantScalar_ = quantScalar;
        hasQuantScalar_ = true;
    }

private:
    // int8 operands with a half C: the Matmul API's dequantization scenario (quant_processor_utils.h
    // IsQuantSenario: L0C int32, C half), which needs a scale (SetQuantScalar).
    static constexpr bool kDequant = std::is_same_v<SrcAT, int8_t> && std::is_same_v<DstT, half>;
    static int CeilDiv(int a, int b) { return b <= 0 ? 0 : (a + b - 1) / b; }
    static int64_t AlignRow(int n) {
        const int per = 32 / static_cast<int>(sizeof(DstT));
        return int64_t((n + per - 1) / per) * per;
    }
    static constexpr int TypeTagC() { return sim::OperandTag<DstT>(); }
    int BlockRows() const { return std::min(tiling_.baseM, singleM_ - blockM_ * tiling_.baseM); }
    int BlockCols() const { return std::min(tiling_.baseN, singleN_ - blockN_ * tiling_.baseN); }
    void NeedBlock() const {
        if (!haveBlock_) {
            acl_fa_sim::kernel::Violation("Matmul order", "Matmul::GetTensorC", "no block: call Iterate() first");
        }
    }
    // A transpose that SetTensorA / SetTensorB asks for must be declared by the operand's MatmulType.
    static void CheckTranspose(const char *api, bool requested, bool declared, const char *operand) {
        if (requested && !declared) {
            acl_fa_sim::kernel::Violation("Matmul transpose", api,
                                          std::string("isTranspose") + operand +
                                              "=true needs MatmulType<..., isTrans=true> for " + operand);
        }
    }
    // The start of SetTensorA / SetTensorB from GM: the call, then its transpose check.
    void UseOperand(const char *api, bool transpose, bool declared, const char *operand) {
        Use(api);
        CheckTranspose(api, transpose, declared, operand);
    }
    acl_fa_sim::kernel::CoreContext &Use(const char *api) {
        auto &core = acl_fa_sim::kernel::Enter(api);
        if (!inited_) {
            acl_fa_sim::kernel::Violation("Matmul order", api,
                                          "the Matmul object has no tiling (REGIST_MATMUL_OBJ with a tiling, or Init)");
        }
        if (pendingAsync_) {
            acl_fa_sim::kernel::Violation("Matmul async", api,
                                          "an IterateAll<false> is outstanding: call WaitIterateAll() first");
        }
        return core;
    }
    // C[r0.., c0..] block of bm x bn from rows r0 of A and columns c0 of B (cGmSpan 0: C in UB);
    // `sync`: the caller waits for the result (else WaitIterateAll does).
    void Compute(acl_fa_sim::kernel::CoreContext &core, int r0, int c0, int bm, int bn, void *c, int cTag,
                 int64_t ldc, bool accumulate, uint64_t cGmSpan, bool sync, const char *api) {
        if (!hasA_ || !hasB_) {
            acl_fa_sim::kernel::Violation("Matmul order", "Matmul::IterateAll", "SetTensorA and SetTensorB first");
        }
        if (bm <= 0 || bn <= 0 || singleK_ <= 0) return;
        if (core.coupled) {
            sim::CheckLocalWorkspace(core, tiling_, localWorkspaceBytes_, hasLocalWorkspace_, "Matmul::IterateAll");
        }
        const int64_t lda = transA_ ? orgM_ : orgKa_;
        const int64_t ldb = transB_ ? orgKb_ : orgN_;
        const SrcAT *aBase = aInUb_ ? aLocal_.SimData() : a_.SimData();
        const SrcAT *a = aBase + (transA_ ? r0 : int64_t(r0) * lda);
        const SrcBT *b = b_.SimData() + (transB_ ? int64_t(c0) * ldb : c0);
        const uint64_t aSpan = transA_ ? sim::GmSpan<SrcAT>(singleK_, bm, lda) : sim::GmSpan<SrcAT>(bm, singleK_, lda);
        const uint64_t bSpan = transB_ ? sim::GmSpan<SrcBT>(bn, singleK_, ldb) : sim::GmSpan<SrcBT>(singleK_, bn, ldb);
        if (aInUb_) {
            sim::CheckLocalT("Matmul (A)", "A", aLocal_, uint64_t(a - aBase) * sizeof(SrcAT) + aSpan);
        } else {
            acl_fa_sim::kernel::GmCheck(core, "Matmul (A)", a, aSpan, a_.SimLo(), a_.SimHi());
        }
        acl_fa_sim::kernel::GmCheck(core, "Matmul (B)", b, bSpan, b_.SimLo(), b_.SimHi());
        sim::MatmulJob job{a, sim::OperandTag<SrcAT>(), lda, transA_, b, sim::OperandTag<SrcBT>(), ldb, transB_,
                           c, cTag, ldc, bm, bn, singleK_, accumulate, accumulate && cGmSpan != 0, false, 0.0f};
        if constexpr (kDequant) {
            if (!hasQuantScalar_) {
                acl_fa_sim::kernel::Violation("Matmul quant", api,
                                              "int8 A and B with a half C dequantize on the way out of L0C: "
                                              "call SetQuantScalar first");
            }
            job.dequant = true;
            job.deqScale = sim::DequantScale(quantScalar_);
        }
        sim::RunMatmul(job);
        const uint64_t cGmBytes = cGmSpan ? uint64_t(bm) * bn * sizeof(DstT) : 0;  // 0: C went to UB
        if (job.gmAtomic) __atomic_fetch_add(&core.cubeStats->atomicAddBytes, cGmBytes, __ATOMIC_RELAXED);
        // Rows as stored: A [bm, K] (A^T: [K, bm]), B [K, bn] (B^T: [bn, K]), C [bm, bn].
        const SrcAT *aGm = aInUb_ ? nullptr : a;
        const sim::GmRows aRows = transA_ ? sim::MakeGmRows<SrcAT>(aGm, singleK_, bm, lda)
                                          : sim::MakeGmRows<SrcAT>(aGm, bm, singleK_, lda);
        const sim::GmRows bRows = transB_ ? sim::MakeGmRows<SrcBT>(b, bn, singleK_, ldb)
                                          : sim::MakeGmRows<SrcBT>(b, singleK_, bn, ldb);
        const sim::GmRows cRows = sim::MakeGmRows<DstT>(cGmSpan ? c : nullptr, bm, bn, ldc);
        sim::CountMatmul(core, tiling_, bm, bn, singleK_, sizeof(SrcAT), sizeof(SrcBT), cGmBytes, aRows, bRows, cRows);
        if (acl_fa_sim::kernel::Tracing(core)) {
            pendingJob_ = sim::TraceMatmulJob(core, tiling_, job, sizeof(SrcAT), sizeof(SrcBT), sizeof(DstT),
                                              !aInUb_, cGmSpan != 0, sync, api);
        }
    }

    TCubeTiling tiling_{};
    bool inited_ = false;
    int orgM_ = 0, orgN_ = 0, orgKa_ = 0, orgKb_ = 0, orgKc_ = 0;
    int singleM_ = 0, singleN_ = 0, singleK_ = 0;
    GlobalTensor<SrcAT> a_;
    LocalTensor<SrcAT> aLocal_;  // A in UB (coupled)
    bool aInUb_ = false;
    GlobalTensor<SrcBT> b_;
    uint64_t localWorkspaceBytes_ = 0;  // SetLocalWorkspace (coupled)
    bool hasLocalWorkspace_ = false;
    bool transA_ = false, transB_ = false, hasA_ = false, hasB_ = false;
    bool pendingAsync_ = false;
    uint64_t pendingJob_ = 0;  // trace key of the last request (for WaitIterateAll)
    int iterIndex_ = 0, blockM_ = 0, blockN_ = 0;
    bool haveBlock_ = false;
    uint64_t quantScalar_ = 0;  // SetQuantScalar's argument
    bool hasQuantScalar_ = false;
};

template <class A_TYPE, class B_TYPE, class C_TYPE, class BIAS_TYPE = C_TYPE, const auto &MM_CFG = CFG_NORM,
          class MM_CB = MatmulCallBackFunc<nullptr, nullptr, nullptr>>
using Matmul = MatmulImpl<A_TYPE, B_TYPE, C_TYPE, BIAS_TYPE, MM_CFG, MM_CB>;

namespace sim {
constexpr int kMaxMatmulObjects = 4;

// Declares that Matmul runs on this launch's cores (needs a cube core: not AIV_ONLY).
void CheckMatmulLaunch(const char *api, int objects);

inline void InitObjs(TPipe *) {}
template <class M, class... Rest>
void InitObjs(TPipe *pipe, M &mm, const TCubeTiling *tiling, Rest &&...rest);
template <class M, class... Rest>
void InitObjs(TPipe *pipe, M &mm, Rest &&...rest) {
    InitObjs(pipe, rest...);  // no tiling given: the kernel calls Init later
}
template <class M, class... Rest>
void InitObjs(TPipe *pipe, M &mm, const TCubeTiling *tiling, Rest &&...rest) {
    mm.Init(tiling, pipe);
    InitObjs(pipe, rest...);
}
template <class M, class... Rest>
void InitObjs(TPipe *pipe, M &mm, TCubeTiling *tiling, Rest &&...rest) {
    mm.Init(tiling, pipe);
    InitObjs(pipe, rest...);
}

// Returns true on the AIC of a MIX kernel, which then leaves the kernel (it would serve
// the AIVs' requests on the chip).
template <class... Args>
bool RegistMatmulObj(TPipe *tpipe, GM_ADDR workspace, Args &&...args) {
    (void)workspace;
    auto &core = acl_fa_sim::kernel::Enter("REGIST_MATMUL_OBJ");
    CheckMatmulLaunch("REGIST_MATMUL_OBJ", (0 + ... + (std::is_pointer_v<std::decay_t<Args>> ? 0 : 1)));
    InitObjs(tpipe, args...);
    return core.isAic && !core.coupled;
}
}  // namespace sim

}  // namespace AscendC

#define REGIST_MATMUL_OBJ(tpipe, workspace, ...) \
    if (AscendC::sim::RegistMatmulObj((tpipe), (workspace), __VA_ARGS__)) return
#define REGIST_MATMUL_OBJ_STATIC REGIST_MATMUL_OBJ
