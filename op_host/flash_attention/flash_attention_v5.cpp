// flash_attention_v5.cpp -- the FlashAttentionV5 operator's host side: FlashAttentionV4
// (flash_attention_v4.cpp) plus three optional inputs after V4's last (the interface of
// op_host/flash_attention/flash_attention_v5.json), the score modifiers of flash-attn 2.x, gpt-oss
// and torch SDPA (docs/attention_options.md "Score modifiers", "Score modifiers in the forward
// (FlashAttentionV5)"):
//   alibi_slopes  float32 [B, N] (varlen: one row per sequence): S -= slope[b, h] * |i + diag - j|
//   sinks         float32 [N]: exp(sink[h]) joins every row's softmax denominator (and the LSE)
//   atten_bias    the input dtype, rank 4 [1 or B, 1 or N, 1 or Sq, Skv]: added to the scores (a float
//                 mask; -inf hides a key). A separate input rather than more dtypes of atten_mask:
//                 the bool mask keeps its block skipping and both may be given, as
//                 FlashAttentionScore keeps its additive pse beside its atten_mask.
// V4's attrs, InferShape, InferDataType and tiling serve unchanged; this file reads the three
// inputs into the policy's problem (their UB is budgeted, the coupled chips refuse them naming the
// chip) and selects V4's tiling. Written against the real CANN host APIs only; errors go to the
// CANN log.
#include <cstdint>
#include <string>
#include <vector>

#include "forward_tiling.h"
#include "op_registration.h"

namespace {

// V5's inputs after V4's six (query ... actual_seq_kvlen); attrs are V4's.
enum InputIndex : size_t { kAlibiSlopes = 6, kSinks = 7, kAttenBias = 8 };
enum AttrIndex : size_t { kInnerPrecise = 12 };

// The score modifiers' shapes against the problem's B, N, Sq, Skv (varlen: B sequences, the
// longest Sq); returns "" or what is wrong.
std::string ReadScoreMods(gert::TilingContext *context, const fa_host::Dims &d, fa_policy::Problem *problem) {
    const gert::StorageShape *slopes = context->GetOptionalInputShape(kAlibiSlopes);
    const gert::StorageShape *sinks = context->GetOptionalInputShape(kSinks);
    const gert::StorageShape *bias = context->GetOptionalInputShape(kAttenBias);
    const int64_t batch = static_cast<int64_t>(problem->batch), heads = d.numHeads;
    if (slopes != nullptr) {
        const gert::Shape &s = slopes->GetOriginShape();
        if (s.GetDimNum() != 2 || s.GetDim(0) != batch || s.GetDim(1) != heads) {
            return "alibiSlopesOptional shape " + fa_host::ShapeText(s) + " must be [batch, num_heads] = [" +
                   std::to_string(batch) + ", " + std::to_string(heads) + "] (float32)";
        }
        problem->alibi = true;
    }
    if (sinks != nullptr) {
        const gert::Shape &s = sinks->GetOriginShape();
        if (s.GetDimNum() != 1 || s.GetDim(0) != heads) {
            return "sinksOptional shape " + fa_host::ShapeText(s) + " must be [num_heads] = [" + std::to_string(heads) +
                   "] (float32)";
        }
        problem->sinks = true;
    }
    if (bias != nullptr) {
        const gert::Shape &m = bias->GetOriginShape();
        const gert::CompileTimeTensorDesc *biasDesc = context->GetOptionalInputDesc(kAttenBias);
        const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(0);
        if (biasDesc != nullptr && qDesc != nullptr && biasDesc->GetDataType() != qDesc->GetDataType()) {
            return "attenBiasOptional must have query's dtype";
        }
        // A varlen batch (TND): B sequences, the longest Sq and Skv, sequence s reading the top-left
        // [Sq(s), Skv(s)] corner (as atten_mask, flash_attention_v2.cpp ReadMask).
        const bool varlen = d.layout == FA_LAYOUT_TND;
        const int64_t seqQ = varlen ? static_cast<int64_t>(problem->seqQ) : d.seqQ;
        const int64_t seqKv = varlen ? static_cast<int64_t>(problem->seqKv) : d.seqKv;
        if (m.GetDimNum() != 4 || (m.GetDim(0) != 1 && m.GetDim(0) != batch) ||
            (m.GetDim(1) != 1 && m.GetDim(1) != d.numHeads) || (m.GetDim(2) != 1 && m.GetDim(2) != seqQ) ||
            m.GetDim(3) != seqKv) {
            return "attenBiasOptional shape " + fa_host::ShapeText(m) + " must be [1 or " + std::to_string(batch) +
                   ", 1 or " + std::to_string(d.numHeads) + ", 1 or " + std::to_string(seqQ) + ", " +
                   std::to_string(seqKv) + "]";
        }
        problem->bias = true;
        problem->biasB = static_cast<uint64_t>(m.GetDim(0));
        problem->biasN = static_cast<uint64_t>(m.GetDim(1));
        problem->biasQ = static_cast<uint64_t>(m.GetDim(2));
    }
    return "";
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const int64_t *innerPrecise = attrs != nullptr ? attrs->GetInt(kInnerPrecise) : nullptr;
    if (innerPrecise == nullptr || (*innerPrecise != 0 && *innerPrecise != 1)) {
        FA_LOGE(context, "inner_precise must be 0 (high precision) or 1 (high performance)");
        return ge::GRAPH_FAILED;
    }
    return fa_host::TileFlashAttentionV3(context, *innerPrecise == 1, ReadScoreMods);
}

}  // namespace

namespace ops {
class FlashAttentionV5 : public OpDef {
 public:
    explicit FlashAttentionV5(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionV2(*this);
        // After V2's inputs (OpDef keeps inputs, outputs and attrs in separate lists, each in
        // declaration order): float32 slopes and sinks, atten_bias in the query's dtype.
        const std::vector<ge::DataType> floats(6, ge::DT_FLOAT);
        const std::vector<ge::DataType> types = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT,
                                                 ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
        fa_host::DescribeNd(this->Input("alibi_slopes"), OPTIONAL, floats);
        fa_host::DescribeNd(this->Input("sinks"), OPTIONAL, floats);
        fa_host::DescribeNd(this->Input("atten_bias"), OPTIONAL, types);
        this->Attr("softcap").AttrType(OPTIONAL).Float(0.0);
        this->Attr("inner_precise").AttrType(OPTIONAL).Int(0);
        fa_host::RegisterFlashAttentionV2(*this, TilingFunc);
    }
};
OP_ADD(FlashAttentionV5);
}  // namespace ops
