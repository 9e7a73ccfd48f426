// matmul_tiling.cpp -- MatmulApiTiling: a single-core TCubeTiling that fits the chip
// (guarantees listed in tiling/matmul/matmul_tiling_base.h).
//
// Choice: the L0C tile baseM x baseN is as large as the shape allows up to 128 x 256 and
// what L0C holds (double-buffered when two fit); baseK is the largest multiple of the K
// fractal that lets A and B tiles double-buffer in L0A/L0B. In L1, all of K is kept
// resident (stepKa = stepKb = K tiles) when it fits, double-buffered when that fits too;
// otherwise the K steps halve until they fit.
#include "tiling/matmul/matmul_tiling.h"

#include <algorithm>

namespace matmul_tiling {
namespace {
constexpr int64_t kFractal = 16;      // cube fractal edge (M, N)
constexpr int64_t kFractalBytes = 32;  // K fractal: 32 bytes of the input type
constexpr int64_t kFp32 = 4;          // L0C accumulates in fp32
constexpr int64_t kMaxBaseM = 128;
constexpr int64_t kMaxBaseN = 256;

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of one element; 0 for types the cube path here does not take.
int64_t TypeBytes(DataType t) {
    switch (t) {
        case DataType::DT_FLOAT16:
        case DataType::DT_BF16: return 2;
        case DataType::DT_FLOAT:
        case DataType::DT_INT32: return 4;
        case DataType::DT_INT8:
        case DataType::DT_UINT8: return 1;
        default: return 0;
    }
}
}  // namespace

MatmulApiTilingBase::MatmulApiTilingBase(const platform_ascendc::PlatformAscendC &ascendcPlatform) {
    uint64_t size = 0;
    ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::L1, size);
    l1Size_ = static_cast<int64_t>(size);
    ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_A, size);
    l0aSize_ = static_cast<int64_t>(size);
    ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_B, size);
    l0bSize_ = static_cast<int64_t>(size);
    ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::L0_C, size);
    l0cSize_ = static_cast<int64_t>(size);
    ascendcPlatform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, size);
    ubSize_ = static_cast<int64_t>(size);
    socVersion_ = ascendcPlatform.GetSocVersion();
}

MatmulApiTilingBase::~MatmulApiTilingBase() = default;

int32_t MatmulApiTilingBase::SetAType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans) {
    if (TypeBytes(dataType) == 0) return -1;
    aType_ = {pos, type, dataType, isTrans, false};
    typesSet_[0] = true;
    return 0;
}

int32_t MatmulApiTilingBase::SetBType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans) {
    if (TypeBytes(dataType) == 0) return -1;
    bType_ = {pos, type, dataType, isTrans, false};
    typesSet_[1] = true;
    return 0;
}

int32_t MatmulApiTilingBase::SetCType(TPosition pos, CubeFormat type, DataType dataType) {
    if (TypeBytes(dataType) == 0) return -1;
    cType_ = {pos, type, dataType, false, false};
    typesSet_[2] = true;
    return 0;
}

int32_t MatmulApiTilingBase::SetBiasType(TPosition pos, CubeFormat type, DataType dataType) {
    if (TypeBytes(dataType) == 0) return -1;
    biasType_ = {pos, type, dataType, false, false};
    return 0;
}

int32_t MatmulApiTilingBase::SetShape(int32_t m, int32_t n, int32_t k) {
    if (m <= 0 || n <= 0 || k <= 0) return -1;
    singleM = m;
    singleN = n;
    singleK = k;
    if (orgM == 0) SetOrgShape(m, n, k);
    return 0;
}

int32_t MatmulApiTilingBase::SetOrgShape(int32_t orgMIn, int32_t orgNIn, int32_t orgKIn) {
    return SetOrgShape(orgMIn, orgNIn, orgKIn, orgKIn);
}

int32_t MatmulApiTilingBase::SetOrgShape(int32_t orgMIn, int32_t orgNIn, int32_t orgKaIn, int32_t orgKbIn) {
    if (orgMIn <= 0 || orgNIn <= 0 || orgKaIn <= 0 || orgKbIn <= 0) return -1;
    orgM = orgMIn;
    orgN = orgNIn;
    orgKa = orgKaIn;
    orgKb = orgKbIn;
    return 0;
}

int32_t MatmulApiTilingBase::EnableBias(bool isBiasIn) {
    isBias = isBiasIn;
    return 0;
}

int32_t MatmulApiTilingBase::SetBias(bool isBiasIn) { return EnableBias(isBiasIn); }

int32_t MatmulApiTilingBase::SetBufferSpace(int32_t l1Size, int32_t l0CSize, int32_t ubSize, int32_t) {
    // A granted space larger than the chip's is capped to the chip (it cannot be used).
    if (l1Size > 0) l1Size_ = std::min<int64_t>(l1Size_, l1Size);
    if (l0CSize > 0) l0cSize_ = std::min<int64_t>(l0cSize_, l0CSize);
    if (ubSize > 0) ubSize_ = std::min<int64_t>(ubSize_, ubSize);
    return 0;
}

int32_t MatmulApiTilingBase::SetFixSplit(int32_t baseMIn, int32_t baseNIn, int32_t baseKIn) {
    if (baseKIn != -1) return -1;
    for (int32_t v : {baseMIn, baseNIn}) {
        if (v != -1 && (v <= 0 || v % kFractal != 0)) return -1;
    }
    fixedBaseM_ = baseMIn;
    fixedBaseN_ = baseNIn;
    return 0;
}

int64_t MatmulApiTiling::GetTiling(AscendC::tiling::TCubeTiling &tiling) {
    if (!typesSet_[0] || !typesSet_[1] || !typesSet_[2] || singleM <= 0) return -1;
    const int64_t sa = TypeBytes(aType_.dataType), sb = TypeBytes(bType_.dataType);
    const int64_t k0 = kFractalBytes / std::min(sa, sb);  // K fractal in elements
    const int64_t mAl = AlignUp(singleM, kFractal), nAl = AlignUp(singleN, kFractal), kAl = AlignUp(singleK, k0);

    // L0C tile.
    int64_t bm = std::min(mAl, kMaxBaseM), bn = std::min(nAl, kMaxBaseN);
    while (bm * bn * kFp32 > l0cSize_ && (bm > kFractal || bn > kFractal)) {
        if (bn >= bm) {
            bn -= kFractal;
        } else {
            bm -= kFractal;
        }
    }
    if (fixedBaseM_ > 0 || fixedBaseN_ > 0) {  // SetFixSplit: the caller's tile, if it fits
        if (fixedBaseM_ > 0) bm = fixedBaseM_;
        if (fixedBaseN_ > 0) bn = fixedBaseN_;
        if (bm > mAl || bn > nAl) return -1;
    }
    if (bm * bn * kFp32 > l0cSize_) return -1;
    const int64_t dbL0C = bm * bn * kFp32 * 2 <= l0cSize_ ? 2 : 1;

    // L0A/L0B tile depth: largest baseK (multiple of k0, at most kAl) double-buffered in both.
    int64_t bk = kAl;
    while (bk > k0 && (bm * bk * sa * 2 > l0aSize_ || bk * bn * sb * 2 > l0bSize_)) bk -= k0;
    const bool l0Db = bm * bk * sa * 2 <= l0aSize_ && bk * bn * sb * 2 <= l0bSize_;
    if (!l0Db && (bm * bk * sa > l0aSize_ || bk * bn * sb > l0bSize_)) return -1;

    // L1: K steps resident per load, double-buffered if it fits.
    const int64_t aTile = bm * bk * sa, bTile = bn * bk * sb;
    const int64_t biasBytes = isBias ? bn * kFp32 : 0;
    int64_t stepK = CeilDiv(kAl, bk);
    int64_t l1Db = 2;
    auto l1Used = [&](int64_t steps, int64_t db) { return steps * db * (aTile + bTile) + biasBytes; };
    while (l1Used(stepK, l1Db) > l1Size_) {
        if (l1Db == 2 && l1Used(stepK, 1) <= l1Size_) {
            l1Db = 1;
        } else if (stepK > 1) {
            stepK = (stepK + 1) / 2;
            l1Db = 2;
        } else if (l1Db == 2) {
            l1Db = 1;
        } else {
            return -1;
        }
    }

    // ND <-> NZ through UB on ASCEND910 / ASCEND310P (no ND path in the cube's copies there):
    // the largest ND tile converted; the kernel gives 2 x transLength of UB with
    // SetLocalWorkspace (asc-devkit matmul_tiling_algorithm.cpp GetTransLength, without its
    // bank-conflict padding).
    int64_t transLength = 0;
    if (socVersion_ == platform_ascendc::SocVersion::ASCEND910 ||
        socVersion_ == platform_ascendc::SocVersion::ASCEND310P) {
        if (aType_.type == CubeFormat::ND) transLength = std::max(transLength, bm * bk * sa);
        if (bType_.type == CubeFormat::ND) transLength = std::max(transLength, bn * bk * sb);
        if (cType_.type == CubeFormat::ND || cType_.pos == TPosition::GM) {
            transLength = std::max(transLength, bm * bn * TypeBytes(cType_.dataType));
        }
        if (2 * transLength > ubSize_) return -1;
    }

    tiling = AscendC::tiling::TCubeTiling{};
    tiling.usedCoreNum = 1;
    tiling.M = orgM;
    tiling.N = orgN;
    tiling.Ka = orgKa;
    tiling.Kb = orgKb;
    tiling.singleCoreM = singleM;
    tiling.singleCoreN = singleN;
    tiling.singleCoreK = singleK;
    tiling.baseM = static_cast<int32_t>(bm);
    tiling.baseN = static_cast<int32_t>(bn);
    tiling.baseK = static_cast<int32_t>(bk);
    tiling.stepM = 1;
    tiling.stepN = 1;
    tiling.stepKa = static_cast<int32_t>(stepK);
    tiling.stepKb = static_cast<int32_t>(stepK);
    tiling.depthA1 = static_cast<int32_t>(stepK * l1Db);
    tiling.depthB1 = static_cast<int32_t>(stepK * l1Db);
    tiling.isBias = isBias ? 1 : 0;
    tiling.iterateOrder = 0;
    tiling.shareMode = 0;
    tiling.shareL1Size = static_cast<int32_t>(l1Used(stepK, l1Db));
    tiling.shareL0CSize = static_cast<int32_t>(bm * bn * kFp32);
    tiling.shareUbSize = 0;
    tiling.transLength = static_cast<int32_t>(transLength);
    tiling.dbL0A = l0Db ? 2 : 1;
    tiling.dbL0B = l0Db ? 2 : 1;
    tiling.dbL0C = static_cast<int32_t>(dbL0C);
    baseM = tiling.baseM;
    baseN = tiling.baseN;
    baseK = tiling.baseK;
    return 0;
}

}  // namespace matmul_tiling
