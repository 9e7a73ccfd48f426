// attention_lse_merge_int16.cpp -- the AttentionLseMergeInt16 operator's host side: OpDef
// registration (op_host/attention_lse_merge/attention_lse_merge_int16.json), InferShape / InferDataType and TilingFunc.
// The merge of AttentionLseMerge with the running result out_a in int16 fixed point: units of a
// per-row bound bound_a / 32767 (docs/lse_merge.md, "The int16 running result"). Registered for
// Atlas A2/A3 only: the vector Cast between float and int16_t exists there and not on 310P or
// 910A (asc-devkit docs/zh/api/SIMD-API/基础API/Memory矢量计算/类型转换/Cast.md, per-chip tables).
#include <cstdint>
#include <string>

#include "attention_lse_merge_host.h"
#include "op_registration.h"

namespace {

using namespace lse_merge_host;

enum InputIndex : size_t { kOutA = 0, kBoundA, kLseA, kOutB, kLseB };
enum OutputIndex : size_t { kAttentionOut = 0, kBoundOut, kSoftmaxLse };

// Shapes: those of AttentionLseMerge, and bound_a like lse_a.
std::string ReadAllShapes(const gert::Shape &outA, const gert::Shape &boundA, const gert::Shape &lseA,
                          const gert::Shape &outB, const gert::Shape &lseB, uint64_t *rows, int64_t *headDim)
{
    std::string error = ReadShapes(outA, lseA, outB, lseB, rows, headDim);
    if (error.empty() && boundA != lseA) {
        error = "bound_a " + ShapeText(boundA) + " must have the shape of lse_a " + ShapeText(lseA);
    }
    return error;
}

// The tiling key for dtypes (a, b, out), or "" / what is wrong: a int16; b float16 | bfloat16 |
// float32; out int16 (a running merge) or b's dtype (the final conversion).
std::string TilingKeyOf(ge::DataType a, ge::DataType b, ge::DataType out, uint64_t *key)
{
    uint64_t bCode = 0;
    const std::string error = PartialCode(b, &bCode);
    if (!error.empty()) return error;
    if (a != ge::DT_INT16) return std::string("out_a must be int16, got ") + DtypeText(a);
    if (out != ge::DT_INT16 && out != b) {
        return std::string("attention_out must be int16 or out_b's dtype (") + DtypeText(b) + "), got " +
               DtypeText(out);
    }
    *key = (bCode << ALM_KEY_B_SHIFT) | ALM_KEY_A_FIXED16 |
           (out == ge::DT_INT16 ? ALM_KEY_OUT_FIXED16 : (out == ge::DT_FLOAT ? ALM_KEY_OUT_FP32 : 0));
    return "";
}

ge::graphStatus InferShape(gert::InferShapeContext *context)
{
    const gert::Shape *in[5] = {context->GetInputShape(kOutA), context->GetInputShape(kBoundA),
                                context->GetInputShape(kLseA), context->GetInputShape(kOutB),
                                context->GetInputShape(kLseB)};
    gert::Shape *out = context->GetOutputShape(kAttentionOut);
    gert::Shape *bound = context->GetOutputShape(kBoundOut);
    gert::Shape *lse = context->GetOutputShape(kSoftmaxLse);
    for (const gert::Shape *s : in) {
        if (s == nullptr) {
            ALM_LOGE(context, "InferShape: missing input shape");
            return ge::GRAPH_FAILED;
        }
    }
    if (out == nullptr || bound == nullptr || lse == nullptr) {
        ALM_LOGE(context, "InferShape: missing output shape");
        return ge::GRAPH_FAILED;
    }
    uint64_t rows = 0;
    int64_t headDim = 0;
    const std::string error = ReadAllShapes(*in[0], *in[1], *in[2], *in[3], *in[4], &rows, &headDim);
    if (!error.empty()) {
        ALM_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *out = *in[kOutA];
    *bound = *in[kLseA];
    *lse = *in[kLseA];
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context)
{
    // attention_out: the running form (int16); the last merge of a row passes an attention_out of
    // out_b's dtype (one of the OpDef's combinations) and gets the result itself.
    context->SetOutputDataType(kAttentionOut, ge::DT_INT16);
    context->SetOutputDataType(kBoundOut, ge::DT_FLOAT);
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context)
{
    const gert::StorageShape *in[5] = {context->GetInputShape(kOutA), context->GetInputShape(kBoundA),
                                       context->GetInputShape(kLseA), context->GetInputShape(kOutB),
                                       context->GetInputShape(kLseB)};
    const gert::CompileTimeTensorDesc *aDesc = context->GetInputDesc(kOutA);
    const gert::CompileTimeTensorDesc *bDesc = context->GetInputDesc(kOutB);
    const gert::CompileTimeTensorDesc *outDesc = context->GetOutputDesc(kAttentionOut);
    for (const gert::StorageShape *s : in) {
        if (s == nullptr) {
            ALM_LOGE(context, "TilingFunc: missing input shape");
            return ge::GRAPH_FAILED;
        }
    }
    if (aDesc == nullptr || bDesc == nullptr || outDesc == nullptr) {
        ALM_LOGE(context, "TilingFunc: missing input or output desc");
        return ge::GRAPH_FAILED;
    }
    uint64_t rows = 0;
    int64_t headDim = 0;
    uint64_t key = 0;
    std::string error = ReadAllShapes(in[0]->GetOriginShape(), in[1]->GetOriginShape(), in[2]->GetOriginShape(),
                                      in[3]->GetOriginShape(), in[4]->GetOriginShape(), &rows, &headDim);
    const ge::DataType a = aDesc->GetDataType(), b = bDesc->GetDataType(), o = outDesc->GetDataType();
    if (error.empty()) error = TilingKeyOf(a, b, o, &key);
    if (!error.empty()) {
        ALM_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    const uint64_t sb = DtypeBytes(b);
    // workA (|out_b|, then out_a in fp32) and out_b's fp32 row unless out_b is fp32; bound_a and
    // the LSEs in, bound and LSE out; six statistics and the row-max fold.
    const UbRow ub{2, sb, o == ge::DT_INT16 ? 2u : DtypeBytes(o), 1 + (sb == 4 ? 0u : 1u), 3, 2, 6, true};
    return WriteTiling(context, rows, headDim, key, ub);
}

}  // namespace

namespace ops {
class AttentionLseMergeInt16 : public OpDef {
 public:
    explicit AttentionLseMergeInt16(const char *name) : OpDef(name)
    {
        // Columns (op_host/attention_lse_merge/attention_lse_merge_int16.json): out_b T in float16, bfloat16, float32;
        // attention_out int16 or T.
        const ge::DataType f32 = ge::DT_FLOAT, f16 = ge::DT_FLOAT16, bf16 = ge::DT_BF16, i16 = ge::DT_INT16;
        const std::vector<ge::DataType> outA(6, i16);
        const std::vector<ge::DataType> outB = {f16, f16, bf16, bf16, f32, f32};
        const std::vector<ge::DataType> out = {i16, f16, i16, bf16, i16, f32};
        const std::vector<ge::DataType> rowF32(6, f32);
        fa_host::DescribeNd(this->Input("out_a"), REQUIRED, outA);
        fa_host::DescribeNd(this->Input("bound_a"), REQUIRED, rowF32);
        fa_host::DescribeNd(this->Input("lse_a"), REQUIRED, rowF32);
        fa_host::DescribeNd(this->Input("out_b"), REQUIRED, outB);
        fa_host::DescribeNd(this->Input("lse_b"), REQUIRED, rowF32);
        fa_host::DescribeNd(this->Output("attention_out"), REQUIRED, out);
        fa_host::DescribeNd(this->Output("bound_out"), REQUIRED, rowF32);
        fa_host::DescribeNd(this->Output("softmax_lse"), REQUIRED, rowF32);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3);
    }
};
OP_ADD(AttentionLseMergeInt16);
}  // namespace ops
