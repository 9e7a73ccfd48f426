// tiling/matmul/matmul_tiling_base.h -- host-side Matmul API tiling (asc-devkit
// include/adv_api/matmul/matmul_tiling_base.h, subset; the plain-struct GetTiling path).
//
// What the simulator's MatmulApiTiling::GetTiling guarantees for the TCubeTiling it fills
// (the kernel-side Matmul checks the same against the chip):
//   baseM, baseN, baseK multiples of 16 (baseK a multiple of the 32-B K fractal);
//   L0A: baseM*baseK*sizeof(A)*dbL0A <= L0A, L0B: baseK*baseN*sizeof(B)*dbL0B <= L0B,
//   L0C: baseM*baseN*4*dbL0C <= the L0C space (SetBufferSpace, default the chip's);
//   L1:  shareL1Size = depthA1*baseM*baseK*sizeof(A) + depthB1*baseN*baseK*sizeof(B)
//        (+ baseN*4 with bias) <= the L1 space (SetBufferSpace, default the chip's);
//   depthA1 = stepM*stepKa*(1 or 2), depthB1 = stepN*stepKb*(1 or 2); shareL0CSize =
//   baseM*baseN*4; usedCoreNum 1; M/N/Ka/Kb the org shape, singleCore* the shape.
// It is not CANN's search (which also weighs bandwidth), but every tiling it returns fits.
#pragma once

#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"
#include "tiling/platform/platform_ascendc.h"

namespace matmul_tiling {
enum class DataType : int32_t {
    DT_FLOAT = 0,
    DT_FLOAT16 = 1,
    DT_INT8 = 2,
    DT_INT32 = 3,
    DT_UINT8 = 4,
    DT_INT16 = 6,
    DT_BF16 = 27,
};

enum class TPosition : int32_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM, TSCM, MAX };

enum class CubeFormat : int32_t { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR };

struct MatTilingType {
    TPosition pos = TPosition::GM;
    CubeFormat type = CubeFormat::ND;
    DataType dataType = DataType::DT_FLOAT;
    bool isTrans = false;
    bool isDB = false;
};

class MatmulApiTilingBase {
 public:
    MatmulApiTilingBase() = delete;
    explicit MatmulApiTilingBase(const platform_ascendc::PlatformAscendC &ascendcPlatform);
    virtual ~MatmulApiTilingBase();
    // Each setter returns 0, or -1 for an unsupported argument.
    int32_t SetAType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans = false);
    int32_t SetBType(TPosition pos, CubeFormat type, DataType dataType, bool isTrans = false);
    int32_t SetCType(TPosition pos, CubeFormat type, DataType dataType);
    int32_t SetBiasType(TPosition pos, CubeFormat type, DataType dataType);
    virtual int32_t SetShape(int32_t m, int32_t n, int32_t k);
    int32_t SetOrgShape(int32_t orgMIn, int32_t orgNIn, int32_t orgKIn);
    int32_t SetOrgShape(int32_t orgMIn, int32_t orgNIn, int32_t orgKaIn, int32_t orgKbIn);
    int32_t EnableBias(bool isBiasIn = false);
    int32_t SetBias(bool isBiasIn = false);
    // Bytes of L1 / L0C / UB / BT the matmul may use; -1 keeps the chip's full size.
    int32_t SetBufferSpace(int32_t l1Size = -1, int32_t l0CSize = -1, int32_t ubSize = -1, int32_t btSize = -1);
    // A fixed baseM / baseN in elements (-1: GetTiling chooses). CANN takes only -1 for baseKIn
    // (docs: "baseKIn ... can only be -1"), and so does this; GetTiling fails when a fixed tile
    // breaks the documented limits (baseM * baseN * 4 <= L0C, baseM <= singleM and baseN <=
    // singleN each rounded up to 16).
    int32_t SetFixSplit(int32_t baseMIn = -1, int32_t baseNIn = -1, int32_t baseKIn = -1);
    int32_t GetBaseM() const { return baseM; }
    int32_t GetBaseN() const { return baseN; }
    int32_t GetBaseK() const { return baseK; }
    // 0 and the tiling filled, or -1 (shape/types unset or nothing fits the buffers).
    virtual int64_t GetTiling(AscendC::tiling::TCubeTiling &tiling) = 0;

 protected:
    MatTilingType aType_;
    MatTilingType bType_;
    MatTilingType cType_;
    MatTilingType biasType_;
    bool isBias = false;
    bool typesSet_[3] = {false, false, false};  // A, B, C
    int32_t orgM = 0, orgN = 0, orgKa = 0, orgKb = 0;
    int32_t singleM = 0, singleN = 0, singleK = 0;
    int32_t baseM = 0, baseN = 0, baseK = 0;
    int32_t fixedBaseM_ = -1, fixedBaseN_ = -1;  // SetFixSplit
    // Chip capacities (bytes) and the space granted by SetBufferSpace.
    int64_t l1Size_ = 0, l0aSize_ = 0, l0bSize_ = 0, l0cSize_ = 0, ubSize_ = 0;
    platform_ascendc::SocVersion socVersion_ = platform_ascendc::SocVersion::ASCEND910B;
};
}  // namespace matmul_tiling
