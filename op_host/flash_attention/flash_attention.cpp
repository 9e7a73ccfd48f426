// flash_attention.cpp -- the FlashAttention operator's host side: OpDef registration (the
// interface of op_host/flash_attention/flash_attention.json), InferShape / InferDataType, and TilingFunc, a thin
// adapter over the tiling policy (tiling_policy.h): read shapes and attrs, query the chip,
// call the policy, fill FlashAttentionTilingData, set block dim, tiling key, workspace.
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "forward_tiling.h"
#include "op_registration.h"

static_assert(fa_policy::kKeyBf16 == FA_KEY_BF16 && fa_policy::kKeyCausal == FA_KEY_CAUSAL &&
                  fa_policy::kKeyLayoutShift == FA_KEY_LAYOUT_SHIFT && fa_policy::kKeySqTail == FA_KEY_SQ_TAIL &&
                  fa_policy::kKeySkvTail == FA_KEY_SKV_TAIL && fa_policy::kKeyFp32 == FA_KEY_FP32 &&
                  fa_policy::kKeyCoupled == FA_KEY_COUPLED && fa_policy::kKeyNarrowScores == FA_KEY_NARROW_S,
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

constexpr fa_host::ForwardAttrIndex kForwardAttrs{kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN};

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    return fa_host::InferForwardShapesV1(context, kForwardAttrs);
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    Dims d;
    fa_policy::Problem problem;
    float scale = 0.0f;
    const std::string error =
        fa_host::ReadForwardProblemV1(context, kForwardAttrs, kScaleValue, kCausal, &d, &problem, &scale);
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    return fa_host::WriteForwardTiling(context, problem, scale, problem.causal);
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
        fa_host::DescribeNd(this->Input("query"), REQUIRED, types);
        fa_host::DescribeNd(this->Input("key"), REQUIRED, types);
        fa_host::DescribeNd(this->Input("value"), REQUIRED, types);
        fa_host::DescribeNd(this->Output("attention_out"), REQUIRED, types);
        fa_host::DescribeNd(this->Output("softmax_lse"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT});
        fa_host::AddAttentionAttrs(*this, false);
        fa_host::AddBlockAttrs(*this);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3Coupled);
    }
};
OP_ADD(FlashAttention);
}  // namespace ops
