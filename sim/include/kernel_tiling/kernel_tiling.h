// kernel_tiling/kernel_tiling.h -- kernel-side tiling structs of the Ascend C API libraries.
//
// CANN generates this header from the adv_api *_tilingdata.h descriptions: every
// BEGIN_TILING_DATA_DEF(X) becomes a plain struct in namespace AscendC::tiling, packed
// with `#pragma pack(push, 8)`, every field `T name = 0;`, and the legacy structs are
// exported to the global namespace with a using-declaration. acl-fa uses only
// TCubeTiling (the Matmul API's tiling); its field list, order and types follow
// asc-devkit include/adv_api/matmul/matmul_tilingdata.h. The host fills the same layout
// through matmul_tiling::MatmulApiTiling::GetTiling(TCubeTiling &).
#pragma once

#include <cstdint>

namespace AscendC {
namespace tiling {

#pragma pack(push, 8)
struct TCubeTiling {
    int32_t usedCoreNum = 0;      // cores the matmul runs on
    int32_t M = 0;                // original (whole-matrix) shape: A is M x Ka, B is Kb x N
    int32_t N = 0;
    int32_t Ka = 0;
    int32_t Kb = 0;
    int32_t singleCoreM = 0;      // the shape one core computes
    int32_t singleCoreN = 0;
    int32_t singleCoreK = 0;
    int32_t baseM = 0;            // L0 tile: A2 is baseM x baseK, B2 baseK x baseN, CO1 baseM x baseN
    int32_t baseN = 0;
    int32_t baseK = 0;
    int32_t depthA1 = 0;          // A base tiles resident in L1 (stepM * stepKa * buffering)
    int32_t depthB1 = 0;          // B base tiles resident in L1 (stepN * stepKb * buffering)
    int32_t stepM = 0;            // base tiles along M / N loaded into L1 at once
    int32_t stepN = 0;
    int32_t isBias = 0;
    int32_t transLength = 0;      // UB bytes for format transforms (0: none needed)
    int32_t iterateOrder = 0;     // 0: ORDER_M (along M first, then N); 1: ORDER_N
    int32_t shareMode = 0;
    int32_t shareL1Size = 0;      // bytes of L1 the tiling uses
    int32_t shareL0CSize = 0;     // bytes of L0C the tiling uses
    int32_t shareUbSize = 0;      // bytes of UB the tiling uses
    int32_t batchM = 0;
    int32_t batchN = 0;
    int32_t singleBatchM = 0;
    int32_t singleBatchN = 0;
    int32_t stepKa = 0;           // base-K tiles of A / B loaded into L1 at once
    int32_t stepKb = 0;
    int32_t depthAL1CacheUB = 0;
    int32_t depthBL1CacheUB = 0;
    int32_t dbL0A = 0;            // 1 or 2: single or double buffer in L0A / L0B / L0C
    int32_t dbL0B = 0;
    int32_t dbL0C = 0;
    int32_t ALayoutInfoB = 0;
    int32_t ALayoutInfoS = 0;
    int32_t ALayoutInfoN = 0;
    int32_t ALayoutInfoG = 0;
    int32_t ALayoutInfoD = 0;
    int32_t BLayoutInfoB = 0;
    int32_t BLayoutInfoS = 0;
    int32_t BLayoutInfoN = 0;
    int32_t BLayoutInfoG = 0;
    int32_t BLayoutInfoD = 0;
    int32_t CLayoutInfoB = 0;
    int32_t CLayoutInfoS1 = 0;
    int32_t CLayoutInfoN = 0;
    int32_t CLayoutInfoG = 0;
    int32_t CLayoutInfoS2 = 0;
    int32_t BatchNum = 0;
    int32_t mxTypePara = 0;
};

// The HCCL client's tilings (asc-devkit include/adv_api/hccl/hccl_tilingdata.h: Mc2InitTiling
// 64 B, Mc2CcTiling 512 B of `reserved`, whose inside only the HCCL library reads; the
// simulator's layout of it is in lib/hccl/hccl_tiling.h). Exported globally like TCubeTiling
// (asc-devkit impl/adv_api/cmake/scripts/gen_kernel_tiling_data_def.py, _LEGACY_TILING_STRUCTS).
struct Mc2InitTiling {
    uint8_t reserved[64] = {};
};
struct Mc2CcTiling {
    uint8_t reserved[512] = {};
};
#pragma pack(pop)

}  // namespace tiling
}  // namespace AscendC

using AscendC::tiling::TCubeTiling;
using AscendC::tiling::Mc2InitTiling;
using AscendC::tiling::Mc2CcTiling;
