// attention_lse_merge_host.h -- host-side pieces shared by the AttentionLseMerge and
// AttentionLseMergeInt16 operators (op_host/attention_lse_merge/attention_lse_merge.cpp, attention_lse_merge_int16.cpp):
// shape checks, dtype names, and the tiling of rows over the vector cores in 8-row blocks with
// tile rows from the queried UB size (op_kernel/attention_lse_merge/attention_lse_merge_tiling.h has the UB map).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#pragma once

#include <cstdint>
#include <string>

#include "attention_lse_merge_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "toolchain/slog.h"

#define ALM_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace lse_merge_host {

constexpr int64_t kHeadDimMultiple = 16;  // every dtype's row a whole number of 32-B blocks

inline std::string ShapeText(const gert::Shape &s)
{
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// out_a, out_b [..., D] alike; lse_a, lse_b their leading dims. Returns "" or what is wrong;
// sets *rows (product of the LSE dims) and *headDim.
inline std::string ReadShapes(const gert::Shape &outA, const gert::Shape &lseA, const gert::Shape &outB,
                              const gert::Shape &lseB, uint64_t *rows, int64_t *headDim)
{
    const size_t rank = outA.GetDimNum();
    if (rank < 2) return "out_a must be [..., D] with at least 2 dims, got " + ShapeText(outA);
    if (outB != outA) return "out_b " + ShapeText(outB) + " must have the shape of out_a " + ShapeText(outA);
    gert::Shape lead;
    for (size_t i = 0; i + 1 < rank; ++i) lead.AppendDim(outA.GetDim(i));
    if (lseA != lead) return "lse_a " + ShapeText(lseA) + " must be out_a's leading dims " + ShapeText(lead);
    if (lseB != lead) return "lse_b " + ShapeText(lseB) + " must be out_a's leading dims " + ShapeText(lead);
    *headDim = outA.GetDim(rank - 1);
    if (*headDim <= 0 || *headDim % kHeadDimMultiple != 0) {
        return "head_dim (last dim of out_a " + ShapeText(outA) + ") must be a positive multiple of 16";
    }
    *rows = 1;
    for (size_t i = 0; i < lead.GetDimNum(); ++i) {
        if (lead.GetDim(i) <= 0) return "out_a " + ShapeText(outA) + " has an empty dimension";
        *rows *= static_cast<uint64_t>(lead.GetDim(i));
    }
    return "";
}

inline uint32_t DtypeBytes(ge::DataType dtype) { return dtype == ge::DT_FLOAT ? 4 : 2; }

inline const char *DtypeText(ge::DataType dtype)
{
    switch (dtype) {
        case ge::DT_FLOAT: return "float32";
        case ge::DT_FLOAT16: return "float16";
        case ge::DT_BF16: return "bfloat16";
        case ge::DT_INT16: return "int16";
        default: return "an unsupported dtype";
    }
}

// The tiling key's out_b code (ALM_KEY_B_*), or "" / what is wrong.
inline std::string PartialCode(ge::DataType b, uint64_t *code)
{
    switch (b) {
        case ge::DT_FLOAT16: *code = ALM_KEY_B_FP16; return "";
        case ge::DT_BF16: *code = ALM_KEY_B_BF16; return "";
        case ge::DT_FLOAT: *code = ALM_KEY_B_FP32; return "";
        default: return std::string("out_b must be float16, bfloat16 or float32, got ") + DtypeText(b);
    }
}

// UB bytes of one tile row (attention_lse_merge_tiling.h): double-buffered in/out rows of D
// values, fp32 work rows, double-buffered per-row float32 values in (LSEs, bounds) and out,
// per-row statistics, a Brcb block and a fold of 64 floats when the kernel reduces rows.
struct UbRow {
    uint64_t aBytes, bBytes, outBytes;  // element sizes of out_a, out_b, attention_out
    uint64_t workRows;                  // fp32 work rows of D values
    uint64_t rowValuesIn, rowValuesOut, stats;
    bool fold;
    uint64_t Bytes(uint64_t d) const
    {
        return d * (2 * (aBytes + bBytes + outBytes) + 4 * workRows) + 2 * 4 * (rowValuesIn + rowValuesOut) +
               4 * stats + ALM_ROW_BLOCK * 4 + (fold ? 64 * 4 : 0);
    }
};

// Splits `rows` over the vector cores (separated chips) or AI Cores (coupled) in 8-row blocks
// and fills the tiling data, block dim, key and (no) workspace.
inline ge::graphStatus WriteTiling(gert::TilingContext *context, uint64_t rows, int64_t headDim, uint64_t key,
                                   const UbRow &ub)
{
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    const uint32_t cores = platform.GetCoreNum();
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    const uint64_t d = static_cast<uint64_t>(headDim);
    const uint64_t blocks = (rows + ALM_ROW_BLOCK - 1) / ALM_ROW_BLOCK;
    const uint64_t used = blocks < cores ? blocks : cores;
    const uint64_t perRow = ub.Bytes(d);
    uint64_t tile = ubBytes / perRow / ALM_ROW_BLOCK * ALM_ROW_BLOCK;
    if (tile < ALM_ROW_BLOCK) {
        ALM_LOGE(context, "head_dim %lld is too large: %u rows take %llu bytes of UB, the core has %llu",
                 static_cast<long long>(headDim), ALM_ROW_BLOCK,
                 static_cast<unsigned long long>(perRow * ALM_ROW_BLOCK), static_cast<unsigned long long>(ubBytes));
        return ge::GRAPH_FAILED;
    }
    const uint64_t coreRows = (blocks + used - 1) / used * ALM_ROW_BLOCK;  // the largest share
    tile = tile < ALM_MAX_TILE_ROWS ? tile : ALM_MAX_TILE_ROWS;
    tile = tile < coreRows ? tile : coreRows;

    AttentionLseMergeTilingData *td = context->GetTilingData<AttentionLseMergeTilingData>();
    if (td == nullptr) {
        ALM_LOGE(context, "tiling buffer smaller than AttentionLseMergeTilingData (%zu B)",
                 sizeof(AttentionLseMergeTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = AttentionLseMergeTilingData{};
    td->rows = rows;
    td->headDim = static_cast<uint32_t>(d);
    td->usedCoreNum = static_cast<uint32_t>(used);
    td->tileRows = static_cast<uint32_t>(tile);
    context->SetBlockDim(static_cast<uint32_t>(used));
    context->SetTilingKey(key);
    size_t *workspaces = context->GetWorkspaceSizes(1);
    if (workspaces == nullptr) {
        ALM_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    workspaces[0] = 0;  // no GM workspace, no library API that needs the system's
    return ge::GRAPH_SUCCESS;
}

}  // namespace lse_merge_host
