// attention_lse_merge.cpp -- the AttentionLseMerge operator's host side: OpDef registration (the
// interface of op/attention_lse_merge.json), InferShape / InferDataType and TilingFunc: rows
// split over the vector cores in 8-row blocks, tile rows from the queried UB size
// (op_kernel/attention_lse_merge_tiling.h has the UB map this budgets).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "../op_kernel/attention_lse_merge_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "toolchain/slog.h"

#define ALM_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

enum InputIndex : size_t { kOutA = 0, kLseA, kOutB, kLseB };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse };

constexpr int64_t kHeadDimMultiple = 16;  // every dtype's row a whole number of 32-B blocks

std::string ShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// out_a, out_b [..., D] alike; lse_a, lse_b their leading dims. Returns "" or what is wrong;
// sets *rows (product of the LSE dims) and *headDim.
std::string ReadShapes(const gert::Shape &outA, const gert::Shape &lseA, const gert::Shape &outB,
                       const gert::Shape &lseB, uint64_t *rows, int64_t *headDim) {
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

uint32_t DtypeBytes(ge::DataType dtype) { return dtype == ge::DT_FLOAT ? 4 : 2; }

const char *DtypeText(ge::DataType dtype) {
    switch (dtype) {
        case ge::DT_FLOAT: return "float32";
        case ge::DT_FLOAT16: return "float16";
        case ge::DT_BF16: return "bfloat16";
        default: return "an unsupported dtype";
    }
}

// The tiling key for dtypes (a, b, out), or "" / what is wrong: b float16 | bfloat16 | float32;
// a and out each float32 or b's dtype.
std::string TilingKeyOf(ge::DataType a, ge::DataType b, ge::DataType out, uint64_t *key) {
    uint64_t bCode = 0;
    switch (b) {
        case ge::DT_FLOAT16: bCode = ALM_KEY_B_FP16; break;
        case ge::DT_BF16: bCode = ALM_KEY_B_BF16; break;
        case ge::DT_FLOAT: bCode = ALM_KEY_B_FP32; break;
        default: return std::string("out_b must be float16, bfloat16 or float32, got ") + DtypeText(b);
    }
    if (a != b && a != ge::DT_FLOAT) {
        return std::string("out_a must be float32 or out_b's dtype (") + DtypeText(b) + "), got " + DtypeText(a);
    }
    if (out != b && out != ge::DT_FLOAT) {
        return std::string("attention_out must be float32 or out_b's dtype (") + DtypeText(b) + "), got " +
               DtypeText(out);
    }
    *key = (bCode << ALM_KEY_B_SHIFT) | (a == ge::DT_FLOAT ? ALM_KEY_A_FP32 : 0) |
           (out == ge::DT_FLOAT ? ALM_KEY_OUT_FP32 : 0);
    return "";
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *outA = context->GetInputShape(kOutA);
    const gert::Shape *lseA = context->GetInputShape(kLseA);
    const gert::Shape *outB = context->GetInputShape(kOutB);
    const gert::Shape *lseB = context->GetInputShape(kLseB);
    gert::Shape *out = context->GetOutputShape(kAttentionOut);
    gert::Shape *lse = context->GetOutputShape(kSoftmaxLse);
    if (outA == nullptr || lseA == nullptr || outB == nullptr || lseB == nullptr || out == nullptr || lse == nullptr) {
        ALM_LOGE(context, "InferShape: missing input or output shape");
        return ge::GRAPH_FAILED;
    }
    uint64_t rows = 0;
    int64_t headDim = 0;
    const std::string error = ReadShapes(*outA, *lseA, *outB, *lseB, &rows, &headDim);
    if (!error.empty()) {
        ALM_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *out = *outA;
    *lse = *lseA;
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    // attention_out: the partial's dtype; a caller keeping a float32 running result passes a
    // float32 attention_out (one of the OpDef's combinations).
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kOutB));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::StorageShape *outA = context->GetInputShape(kOutA);
    const gert::StorageShape *lseA = context->GetInputShape(kLseA);
    const gert::StorageShape *outB = context->GetInputShape(kOutB);
    const gert::StorageShape *lseB = context->GetInputShape(kLseB);
    const gert::CompileTimeTensorDesc *aDesc = context->GetInputDesc(kOutA);
    const gert::CompileTimeTensorDesc *bDesc = context->GetInputDesc(kOutB);
    const gert::CompileTimeTensorDesc *outDesc = context->GetOutputDesc(kAttentionOut);
    if (outA == nullptr || lseA == nullptr || outB == nullptr || lseB == nullptr || aDesc == nullptr ||
        bDesc == nullptr || outDesc == nullptr) {
        ALM_LOGE(context, "TilingFunc: missing input shape or desc");
        return ge::GRAPH_FAILED;
    }
    uint64_t rows = 0;
    int64_t headDim = 0;
    uint64_t key = 0;
    std::string error = ReadShapes(outA->GetOriginShape(), lseA->GetOriginShape(), outB->GetOriginShape(),
                                   lseB->GetOriginShape(), &rows, &headDim);
    const ge::DataType a = aDesc->GetDataType(), b = bDesc->GetDataType(), o = outDesc->GetDataType();
    if (error.empty()) error = TilingKeyOf(a, b, o, &key);
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    const platform_ascendc::SocVersion soc = platform.GetSocVersion();
    const bool coupled = soc == platform_ascendc::SocVersion::ASCEND310P || soc == platform_ascendc::SocVersion::ASCEND910;
    if (error.empty() && coupled && b == ge::DT_BF16) {
        error = std::string("bfloat16 needs Atlas A2/A3: the vector unit of ") +
                (soc == platform_ascendc::SocVersion::ASCEND310P ? "Ascend310P" : "Ascend910") + " has no bfloat16";
    }
    if (!error.empty()) {
        ALM_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }

    // Vector cores (separated chips) or AI Cores (coupled): the cores a vector kernel runs on.
    const uint32_t cores = platform.GetCoreNum();
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    const uint64_t d = static_cast<uint64_t>(headDim);
    const uint64_t blocks = (rows + ALM_ROW_BLOCK - 1) / ALM_ROW_BLOCK;
    const uint64_t used = blocks < cores ? blocks : cores;
    // UB bytes per tile row (attention_lse_merge_tiling.h): double-buffered in/out rows, fp32
    // work rows of the non-fp32 inputs, LSE in/out, four statistics and a Brcb block.
    const uint64_t sa = DtypeBytes(a), sb = DtypeBytes(b), so = DtypeBytes(o);
    const uint64_t perRow = d * (2 * (sa + sb + so) + (sa == 4 ? 0 : 4) + (sb == 4 ? 0 : 4)) + 2 * 2 * 4 + 2 * 4 +
                            4 * 4 + ALM_ROW_BLOCK * 4;
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

}  // namespace

namespace ops {
class AttentionLseMerge : public OpDef {
 public:
    explicit AttentionLseMerge(const char *name) : OpDef(name) {
        // Columns of allowed dtype combinations (op/attention_lse_merge.json): out_b T in float16,
        // bfloat16, float32; out_a and attention_out each float32 or T. The tiling refuses
        // bfloat16 on 310P and 910A, naming the chip.
        const ge::DataType f32 = ge::DT_FLOAT, f16 = ge::DT_FLOAT16, bf16 = ge::DT_BF16;
        const std::vector<ge::DataType> outA = {f32, f32, f16, f16, f32, f32, bf16, bf16, f32};
        const std::vector<ge::DataType> outB = {f16, f16, f16, f16, bf16, bf16, bf16, bf16, f32};
        const std::vector<ge::DataType> out = {f32, f16, f32, f16, f32, bf16, f32, bf16, f32};
        const std::vector<ge::DataType> lse(9, f32);
        const std::vector<ge::Format> nd(9, ge::FORMAT_ND);
        this->Input("out_a").ParamType(REQUIRED).DataType(outA).Format(nd).UnknownShapeFormat(nd);
        this->Input("lse_a").ParamType(REQUIRED).DataType(lse).Format(nd).UnknownShapeFormat(nd);
        this->Input("out_b").ParamType(REQUIRED).DataType(outB).Format(nd).UnknownShapeFormat(nd);
        this->Input("lse_b").ParamType(REQUIRED).DataType(lse).Format(nd).UnknownShapeFormat(nd);
        this->Output("attention_out").ParamType(REQUIRED).DataType(out).Format(nd).UnknownShapeFormat(nd);
        this->Output("softmax_lse").ParamType(REQUIRED).DataType(lse).Format(nd).UnknownShapeFormat(nd);
        this->SetInferShape(InferShape).SetInferDataType(InferDataType);
        this->AICore()
            .SetTiling(TilingFunc)
            .AddConfig("ascend910b")
            .AddConfig("ascend910_93")
            .AddConfig("ascend310p")
            .AddConfig("ascend910");
    }
};
OP_ADD(AttentionLseMerge);
}  // namespace ops
