#pragma once
// The Matmul-API tiling every op's TilingFunc fills for its matmuls (forward, backward, decode):
// C [m, n] fp32 (or in the input dtype: CubeSpec::cInputType) = A [m, k] * B [k, n], in the input dtype.
#include <cstdint>

#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"

namespace fa_host {

struct CubeSpec {
    int32_t m, n, k;
    bool transA;       // A stored [k, m]
    bool transB;       // B stored [n, k]
    bool aInUb;        // A read from UB (VECCALC; coupled chips' P.V) instead of GM
    bool cInUb;        // C written to UB (VECCALC; coupled chips) instead of GM
    uint32_t l1Share;  // the matmul gets L1 / l1Share bytes: an AIC serves its AIVs' matmuls
    int32_t ubBytes;   // UB the kernel gives the matmul for ND <-> NZ (coupled chips); -1: none
    // Optional fields, set by name after the positional ones (never positionally: their order is
    // not part of the interface).
    int32_t baseN = -1;  // a fixed baseN (MatmulApiTiling::SetFixSplit); -1: the tiling chooses
    bool cInputType = false;  // C in the operands' dtype (FixPipe rounds the fp32 result) instead of float32
    bool cInt32 = false;      // C int32 (int8 operands: the cube's exact integer sum; FlashAttentionInt8)
    bool cHalf = false;       // C float16 (int8 operands dequantized by FixPipe, DequantType SCALAR:
                              // FlashAttentionInt8 on A2/A3)
};

// The op's one workspace: the Matmul API's system workspace and `userBytes` of the op's own.
// False when the context gives no workspace slot.
inline bool SetMatmulWorkspace(gert::TilingContext *context, const platform_ascendc::PlatformAscendC &platform,
                               uint64_t userBytes) {
    size_t *workspaces = context->GetWorkspaceSizes(1);
    if (workspaces == nullptr) return false;
    workspaces[0] = platform.GetLibApiWorkSpaceSize() + userBytes;
    return true;
}

// The Matmul API's type of the operands of an op in float16, bfloat16 or float32.
inline matmul_tiling::DataType OperandType(bool bf16, bool fp32 = false) {
    return fp32 ? matmul_tiling::DataType::DT_FLOAT
                : bf16 ? matmul_tiling::DataType::DT_BF16 : matmul_tiling::DataType::DT_FLOAT16;
}

inline bool FillCubeTiling(const platform_ascendc::PlatformAscendC &platform, matmul_tiling::DataType dt,
                           const CubeSpec &s, uint64_t l1Bytes, TCubeTiling *tiling) {
    using matmul_tiling::CubeFormat;
    using matmul_tiling::TPosition;
    matmul_tiling::MatmulApiTiling mm(platform);
    mm.SetAType(s.aInUb ? TPosition::VECCALC : TPosition::GM, CubeFormat::ND, dt, s.transA);
    mm.SetBType(TPosition::GM, CubeFormat::ND, dt, s.transB);
    mm.SetCType(s.cInUb ? TPosition::VECCALC : TPosition::GM, CubeFormat::ND,
                s.cHalf ? matmul_tiling::DataType::DT_FLOAT16
                : s.cInt32 ? matmul_tiling::DataType::DT_INT32
                           : s.cInputType ? dt : matmul_tiling::DataType::DT_FLOAT);
    mm.SetShape(s.m, s.n, s.k);
    mm.SetOrgShape(s.m, s.n, s.k);
    mm.SetBias(false);
    mm.SetBufferSpace(static_cast<int32_t>(l1Bytes / s.l1Share), -1, s.ubBytes);
    if (s.baseN > 0 && mm.SetFixSplit(-1, s.baseN, -1) != 0) return false;
    return mm.GetTiling(*tiling) != -1;
}

}  // namespace fa_host
