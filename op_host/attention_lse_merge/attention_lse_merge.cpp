// attention_lse_merge.cpp -- the AttentionLseMerge operator's host side: OpDef registration (the
// interface of op_host/attention_lse_merge/attention_lse_merge.json), InferShape / InferDataType and TilingFunc: rows
// split over the vector cores in 8-row blocks, tile rows from the queried UB size
// (op_kernel/attention_lse_merge/attention_lse_merge_tiling.h has the UB map this budgets).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "attention_lse_merge_host.h"
#include "op_registration.h"

namespace {

using namespace lse_merge_host;

enum InputIndex : size_t { kOutA = 0, kLseA, kOutB, kLseB };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse };

// The tiling key for dtypes (a, b, out), or "" / what is wrong: b float16 | bfloat16 | float32;
// a and out each float32 or b's dtype.
std::string TilingKeyOf(ge::DataType a, ge::DataType b, ge::DataType out, uint64_t *key) {
    uint64_t bCode = 0;
    const std::string error = PartialCode(b, &bCode);
    if (!error.empty()) return error;
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

    const uint64_t sa = DtypeBytes(a), sb = DtypeBytes(b), so = DtypeBytes(o);
    // fp32 work rows of the non-fp32 inputs; LSE a and b in, the LSE out; m, w_a, w_b, s.
    const UbRow ub{sa, sb, so, (sa == 4 ? 0u : 1u) + (sb == 4 ? 0u : 1u), 2, 1, 4, false};
    return WriteTiling(context, rows, headDim, key, ub);
}

}  // namespace

namespace ops {
class AttentionLseMerge : public OpDef {
 public:
    explicit AttentionLseMerge(const char *name) : OpDef(name) {
        // Columns of allowed dtype combinations (op_host/attention_lse_merge/attention_lse_merge.json): out_b T in float16,
        // bfloat16, float32; out_a and attention_out each float32 or T. The tiling refuses
        // bfloat16 on 310P and 910A, naming the chip.
        const ge::DataType f32 = ge::DT_FLOAT, f16 = ge::DT_FLOAT16, bf16 = ge::DT_BF16;
        const std::vector<ge::DataType> outA = {f32, f32, f16, f16, f32, f32, bf16, bf16, f32};
        const std::vector<ge::DataType> outB = {f16, f16, f16, f16, bf16, bf16, bf16, bf16, f32};
        const std::vector<ge::DataType> out = {f32, f16, f32, f16, f32, bf16, f32, bf16, f32};
        const std::vector<ge::DataType> lse(9, f32);
        fa_host::DescribeNd(this->Input("out_a"), REQUIRED, outA);
        fa_host::DescribeNd(this->Input("lse_a"), REQUIRED, lse);
        fa_host::DescribeNd(this->Input("out_b"), REQUIRED, outB);
        fa_host::DescribeNd(this->Input("lse_b"), REQUIRED, lse);
        fa_host::DescribeNd(this->Output("attention_out"), REQUIRED, out);
        fa_host::DescribeNd(this->Output("softmax_lse"), REQUIRED, lse);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3Coupled);
    }
};
OP_ADD(AttentionLseMerge);
}  // namespace ops
