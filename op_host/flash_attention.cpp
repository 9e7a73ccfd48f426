// flash_attention.cpp -- the FlashAttention operator's host side: OpDef registration (the
// interface of op/flash_attention.json), InferShape / InferDataType, and TilingFunc, a thin
// adapter over the tiling policy (tiling_policy.h): read shapes and attrs, query the chip,
// call the policy, fill FlashAttentionTilingData, set block dim, tiling key, workspace.
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "forward_tiling.h"

static_assert(fa_policy::kKeyBf16 == FA_KEY_BF16 && fa_policy::kKeyCausal == FA_KEY_CAUSAL &&
                  fa_policy::kKeyLayoutShift == FA_KEY_LAYOUT_SHIFT && fa_policy::kKeySqTail == FA_KEY_SQ_TAIL &&
                  fa_policy::kKeySkvTail == FA_KEY_SKV_TAIL && fa_policy::kKeyFp32 == FA_KEY_FP32 &&
                  fa_policy::kKeyCoupled == FA_KEY_COUPLED,
              "the policy's tiling-key bits must be the kernel's");
static_assert(fa_policy::kLayoutBnsd == FA_LAYOUT_BNSD && fa_policy::kLayoutBsnd == FA_LAYOUT_BSND &&
                  fa_policy::kLayoutBsh == FA_LAYOUT_BSH && fa_policy::kLayoutTnd == FA_LAYOUT_TND &&
                  fa_policy::kUnboundedTokens == FA_UNBOUNDED_TOKENS,
              "the policy's layout codes must be the kernel's");
static_assert(fa_policy::kMaxCores == FA_MAX_CORES, "core ranges must fit coreItemStart");

namespace {

using fa_host::Dims;

// Inputs, outputs and attrs in OpDef order.
enum InputIndex : size_t { kQuery = 0, kKey = 1, kValue = 2 };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse = 1 };
enum AttrIndex : size_t { kScaleValue = 0, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN };

// The attrs every stage reads; attrs a stage does not need are still validated here.
std::string ReadDimsFromAttrs(const gert::RuntimeAttrs *attrs, const gert::Shape &q, const gert::Shape &k,
                              const gert::Shape &v, Dims *d) {
    if (attrs == nullptr) return "no attrs";
    const char *layout = attrs->GetStr(kInputLayout);
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return fa_host::ReadDims(q, k, v, layout, *numHeads, *numKvHeads, false, d);
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *q = context->GetInputShape(kQuery);
    const gert::Shape *k = context->GetInputShape(kKey);
    const gert::Shape *v = context->GetInputShape(kValue);
    gert::Shape *out = context->GetOutputShape(kAttentionOut);
    gert::Shape *lse = context->GetOutputShape(kSoftmaxLse);
    if (q == nullptr || k == nullptr || v == nullptr || out == nullptr || lse == nullptr) {
        FA_LOGE(context, "InferShape: missing input or output shape");
        return ge::GRAPH_FAILED;
    }
    Dims d;
    const std::string error = ReadDimsFromAttrs(context->GetAttrs(), *q, *k, *v, &d);
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *out = *q;  // attention_out: like query
    lse->SetDimNum(0);  // softmax_lse: [B, N, Sq] fp32, for every layout
    lse->AppendDim(d.batch).AppendDim(d.numHeads).AppendDim(d.seqQ);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::StorageShape *q = context->GetInputShape(kQuery);
    const gert::StorageShape *k = context->GetInputShape(kKey);
    const gert::StorageShape *v = context->GetInputShape(kValue);
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kQuery);
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    if (q == nullptr || k == nullptr || v == nullptr || qDesc == nullptr || attrs == nullptr) {
        FA_LOGE(context, "TilingFunc: missing input shape, desc or attrs");
        return ge::GRAPH_FAILED;
    }
    Dims d;
    std::string error = ReadDimsFromAttrs(attrs, q->GetOriginShape(), k->GetOriginShape(), v->GetOriginShape(), &d);
    const float *scale = attrs->GetFloat(kScaleValue);
    const bool *causal = attrs->GetBool(kCausal);
    const int64_t *blockM = attrs->GetInt(kBlockM);
    const int64_t *blockN = attrs->GetInt(kBlockN);
    if (error.empty() && (scale == nullptr || causal == nullptr || blockM == nullptr || blockN == nullptr)) {
        error = "attrs scale_value / causal / block_m / block_n missing";
    }
    if (error.empty() && (*blockM < 0 || *blockM > UINT32_MAX || *blockN < 0 || *blockN > UINT32_MAX)) {
        error = "block_m and block_n must be >= 0 (0 = auto)";
    }
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    const ge::DataType dtype = qDesc->GetDataType();
    fa_policy::Problem problem;
    problem.batch = static_cast<uint64_t>(d.batch);
    problem.numHeads = static_cast<uint64_t>(d.numHeads);
    problem.numKvHeads = static_cast<uint64_t>(d.numKvHeads);
    problem.seqQ = static_cast<uint64_t>(d.seqQ);
    problem.seqKv = static_cast<uint64_t>(d.seqKv);
    problem.headDim = static_cast<uint64_t>(d.headDim);
    problem.dtypeBytes = dtype == ge::DT_FLOAT ? 4 : 2;  // float32; float16 / bfloat16
    problem.bf16 = dtype == ge::DT_BF16;
    problem.layout = d.layout;
    problem.causal = *causal;
    problem.userBlockM = static_cast<uint32_t>(*blockM);
    problem.userBlockN = static_cast<uint32_t>(*blockN);
    return fa_host::WriteForwardTiling(context, problem, *scale, *causal);
}

}  // namespace
namespace ops {
class FlashAttention : public OpDef {
 public:
    explicit FlashAttention(const char *name) : OpDef(name) {
        // float16, bfloat16 and float32 for query, key, value and attention_out; the tiling
        // refuses, naming the chip, a dtype the chip's AI Core cannot take (310P and 910A:
        // float16 only).
        const std::vector<ge::DataType> types = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
        const std::vector<ge::Format> nd = {ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND};
        this->Input("query").ParamType(REQUIRED).DataType(types).Format(nd).UnknownShapeFormat(nd);
        this->Input("key").ParamType(REQUIRED).DataType(types).Format(nd).UnknownShapeFormat(nd);
        this->Input("value").ParamType(REQUIRED).DataType(types).Format(nd).UnknownShapeFormat(nd);
        this->Output("attention_out").ParamType(REQUIRED).DataType(types).Format(nd).UnknownShapeFormat(nd);
        this->Output("softmax_lse")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format(nd)
            .UnknownShapeFormat(nd);
        this->Attr("scale_value").AttrType(OPTIONAL).Float(1.0);
        this->Attr("causal").AttrType(OPTIONAL).Bool(false);
        this->Attr("input_layout").AttrType(OPTIONAL).String("BNSD");
        this->Attr("num_heads").AttrType(OPTIONAL).Int(0);
        this->Attr("num_kv_heads").AttrType(OPTIONAL).Int(0);
        this->Attr("block_m").AttrType(OPTIONAL).Int(0);
        this->Attr("block_n").AttrType(OPTIONAL).Int(0);
        this->SetInferShape(InferShape).SetInferDataType(InferDataType);
        this->AICore()
            .SetTiling(TilingFunc)
            .AddConfig("ascend910b")
            .AddConfig("ascend910_93")
            .AddConfig("ascend310p")
            .AddConfig("ascend910");
    }
};
OP_ADD(FlashAttention);
}  // namespace ops
