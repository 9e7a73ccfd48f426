// flash_attention_v2.cpp -- the FlashAttentionV2 operator's host side: OpDef registration (the
// interface of op_host/flash_attention/flash_attention_v2.json), InferShape / InferDataType, and TilingFunc. The
// forward of FlashAttention (op_host/flash_attention/flash_attention.cpp) generalized: a band of visible keys
// (pre_tokens / next_tokens, FlashAttentionScore's attrs) and variable-length batches (layout
// TND with the cumulative ends actual_seq_qlen / actual_seq_kvlen, value-depend inputs so that
// the tiling balances the cores by each sequence's real work). Same policy, same tiling
// struct and the same kernel source as FlashAttention (forward_tiling.h). Its interface and
// functions are shared with the ops that extend it by trailing attrs (FlashAttentionV3: softcap;
// op_host/flash_attention/flash_attention_v3.cpp) through fa_host::DefineFlashAttentionV2,
// RegisterFlashAttentionV2 and TileFlashAttentionV2 (forward_tiling.h). Written against the
// real CANN host APIs only; errors go to the CANN log (module OP).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "forward_tiling.h"
#include "op_registration.h"

namespace {

using fa_host::Dims;

// Inputs, outputs and attrs in OpDef (IR) order.
enum InputIndex : size_t { kQuery = 0, kKey, kValue, kAttenMask, kActualSeqQlen, kActualSeqKvlen };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse, kDropoutMask };
enum AttrIndex : size_t {
    kScaleValue = 0, kPreTokens, kNextTokens, kInputLayout, kNumHeads, kNumKvHeads, kKeepProb, kSeed, kOffset,
    kBlockM, kBlockN
};

constexpr fa_host::ForwardAttrIndex kForwardAttrs{kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN};

// The lengths of a varlen batch from the cumulative ends (int64, no leading 0) of
// actual_seq_qlen and actual_seq_kvlen: one per sequence, non-decreasing, the last equal to
// the token count of query (Tq) and key (Tkv). Returns "" or what is wrong.
std::string ReadSequences(const gert::Tensor *qEnds, const gert::Tensor *kvEnds, int64_t tokensQ, int64_t tokensKv,
                          fa_policy::Problem *problem) {
    if (qEnds == nullptr || kvEnds == nullptr) {
        return "actualSeqQlenOptional and actualSeqKvlenOptional are required with inputLayout TND and refused with "
               "any other layout (inputLayout TND, given: " + std::string(qEnds != nullptr ? "actualSeqQlenOptional " : "") +
               (kvEnds != nullptr ? "actualSeqKvlenOptional" : "none") + ")";
    }
    const struct {
        const char *name;  // the aclnn argument (actual_seq_qlen / actual_seq_kvlen)
        const char *tokensName;
        const gert::Tensor *ends;
        int64_t tokens;
        std::vector<uint64_t> *lens;
    } lists[] = {{"actualSeqQlenOptional", "query's T", qEnds, tokensQ, &problem->seqLensQ},
                 {"actualSeqKvlenOptional", "key's T", kvEnds, tokensKv, &problem->seqLensKv}};
    for (const auto &list : lists) {
        const int64_t *ends = list.ends->GetData<int64_t>();
        const int64_t count = list.ends->GetShapeSize();
        if (ends == nullptr) return std::string(list.name) + " has no host data (it must be value-depend)";
        if (count < 1) return std::string(list.name) + " must hold at least one sequence end";
        int64_t previous = 0;
        for (int64_t s = 0; s < count; ++s) {
            if (ends[s] < previous) {
                return std::string(list.name) + " must be non-decreasing cumulative sequence ends (without the "
                       "leading 0): entry " +
                       std::to_string(s) + " is " + std::to_string(ends[s]) + " after " + std::to_string(previous);
            }
            list.lens->push_back(static_cast<uint64_t>(ends[s] - previous));
            previous = ends[s];
        }
        if (previous != list.tokens) {
            return std::string(list.name) + " must end at " + list.tokensName + " = " + std::to_string(list.tokens) +
                   ", its last entry is " + std::to_string(previous);
        }
    }
    if (problem->seqLensQ.size() != problem->seqLensKv.size()) {
        return "actualSeqQlenOptional has " + std::to_string(problem->seqLensQ.size()) +
               " sequences, actualSeqKvlenOptional " + std::to_string(problem->seqLensKv.size()) + "; they must agree";
    }
    problem->batch = problem->seqLensQ.size();
    problem->seqQ = *std::max_element(problem->seqLensQ.begin(), problem->seqLensQ.end());
    problem->seqKv = *std::max_element(problem->seqLensKv.begin(), problem->seqLensKv.end());
    problem->tokensQ = static_cast<uint64_t>(tokensQ);
    problem->tokensKv = static_cast<uint64_t>(tokensKv);
    if (problem->seqQ == 0 || problem->seqKv == 0) {
        return "a TND batch needs at least one query and one key (every sequence is empty)";
    }
    return "";
}

// The device mask's dims from atten_mask's shape: rank 4 [mb, mn, mq, Skv] with mb in {1, B},
// mn in {1, N}, mq in {1, Sq}; never expanded. A varlen batch (TND, read before this) has B
// sequences and the longest Sq, Skv: sequence s sees the mask's top-left [Sq(s), Skv(s)] corner,
// as its dropout_mask output is laid out (docs/attention_options.md "Masks with varlen").
// Returns "" or what is wrong.
std::string ReadMask(const gert::StorageShape *mask, const Dims &d, fa_policy::Problem *problem) {
    if (mask == nullptr) return "";
    const gert::Shape &m = mask->GetOriginShape();
    const bool varlen = d.layout == FA_LAYOUT_TND;
    const int64_t batch = varlen ? static_cast<int64_t>(problem->batch) : d.batch;
    const int64_t seqQ = varlen ? static_cast<int64_t>(problem->seqQ) : d.seqQ;
    const int64_t seqKv = varlen ? static_cast<int64_t>(problem->seqKv) : d.seqKv;
    const std::string want = "[1 or " + std::to_string(batch) + ", 1 or " + std::to_string(d.numHeads) +
                             ", 1 or " + std::to_string(seqQ) + ", " + std::to_string(seqKv) + "]";
    if (m.GetDimNum() != 4 || (m.GetDim(0) != 1 && m.GetDim(0) != batch) ||
        (m.GetDim(1) != 1 && m.GetDim(1) != d.numHeads) || (m.GetDim(2) != 1 && m.GetDim(2) != seqQ) ||
        m.GetDim(3) != seqKv) {
        return "atten_mask shape " + fa_host::ShapeText(m) + " must be " + want + " (1 = masked out)";
    }
    problem->mask = true;
    problem->maskB = static_cast<uint64_t>(m.GetDim(0));
    problem->maskN = static_cast<uint64_t>(m.GetDim(1));
    problem->maskQ = static_cast<uint64_t>(m.GetDim(2));
    return "";
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    gert::Shape *lse = nullptr;
    Dims d;
    if (fa_host::InferForwardShapes(context, kForwardAttrs, true, &lse, &d) != ge::GRAPH_SUCCESS) {
        return ge::GRAPH_FAILED;
    }
    if (d.layout != FA_LAYOUT_TND && (context->GetOptionalInputShape(kActualSeqQlen) != nullptr ||
                                      context->GetOptionalInputShape(kActualSeqKvlen) != nullptr)) {
        FA_LOGE(context, "actualSeqQlenOptional and actualSeqKvlenOptional are required with inputLayout TND and "
                "refused with any other layout (inputLayout %s)", context->GetAttrs()->GetStr(kInputLayout));
        return ge::GRAPH_FAILED;
    }
    lse->SetDimNum(0);
    if (d.layout == FA_LAYOUT_TND) {
        lse->AppendDim(d.numHeads).AppendDim(d.seqQ);  // softmax_lse: [N, Tq] fp32 (flash-attn varlen's layout)
    } else {
        lse->AppendDim(d.batch).AppendDim(d.numHeads).AppendDim(d.seqQ);  // [B, N, Sq] fp32
    }
    // dropout_mask (optional): [B, N, Sq, Skv]; TND: [sequences, N, longest Sq, longest Skv].
    gert::Shape *mask = context->GetOutputShape(kDropoutMask);
    if (mask != nullptr) {
        int64_t batch = d.batch, sq = d.seqQ, skv = d.seqKv;
        if (d.layout == FA_LAYOUT_TND) {
            fa_policy::Problem problem;
            const std::string seqError =
                ReadSequences(context->GetOptionalInputTensor(kActualSeqQlen),
                              context->GetOptionalInputTensor(kActualSeqKvlen), d.seqQ, d.seqKv, &problem);
            if (!seqError.empty()) {
                FA_LOGE(context, "%s", seqError.c_str());
                return ge::GRAPH_FAILED;
            }
            batch = static_cast<int64_t>(problem.batch);
            sq = static_cast<int64_t>(problem.seqQ);
            skv = static_cast<int64_t>(problem.seqKv);
        }
        mask->SetDimNum(0);
        mask->AppendDim(batch).AppendDim(d.numHeads).AppendDim(sq).AppendDim(skv);
    }
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    context->SetOutputDataType(kDropoutMask, ge::DT_UINT8);
    return ge::GRAPH_SUCCESS;
}

}  // namespace

namespace fa_host {

ge::graphStatus TileFlashAttentionV2(gert::TilingContext *context) {
    return TileFlashAttentionV2Precision(context, false);
}

ge::graphStatus TileFlashAttentionV2Precision(gert::TilingContext *context, bool narrowScores,
                                              ProblemReader readMods) {
    const gert::RuntimeAttrs *attrs = nullptr;
    Dims d;
    fa_policy::Problem problem;
    std::string error = fa_host::ReadForwardProblem(context, kForwardAttrs, true, &attrs, &d, &problem);
    const float *scale = error.empty() ? attrs->GetFloat(kScaleValue) : nullptr;
    const int64_t *preTokens = error.empty() ? attrs->GetInt(kPreTokens) : nullptr;
    const int64_t *nextTokens = error.empty() ? attrs->GetInt(kNextTokens) : nullptr;
    const float *keepProb = error.empty() ? attrs->GetFloat(kKeepProb) : nullptr;
    if (error.empty() && (scale == nullptr || preTokens == nullptr || nextTokens == nullptr || keepProb == nullptr)) {
        error = "attrs scale_value / pre_tokens / next_tokens / keep_prob missing";
    }
    if (error.empty() && !(*keepProb > 0.0f && *keepProb <= 1.0f)) {
        error = "keep_prob must be in (0, 1] (1 = no dropout), got " + std::to_string(*keepProb);
    }
    const gert::StorageShape *qEnds = context->GetOptionalInputShape(kActualSeqQlen);
    const gert::StorageShape *kvEnds = context->GetOptionalInputShape(kActualSeqKvlen);
    if (error.empty() && d.layout != FA_LAYOUT_TND && (qEnds != nullptr || kvEnds != nullptr)) {
        error = std::string("actualSeqQlenOptional and actualSeqKvlenOptional are required with inputLayout TND and "
                            "refused with any other layout (inputLayout ") + attrs->GetStr(kInputLayout) + ")";
    }
    if (error.empty() && d.layout == FA_LAYOUT_TND) {
        error = ReadSequences(context->GetOptionalInputTensor(kActualSeqQlen),
                              context->GetOptionalInputTensor(kActualSeqKvlen), d.seqQ, d.seqKv, &problem);
    }
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    problem.preTokens = *preTokens;
    problem.nextTokens = *nextTokens;
    error = ReadMask(context->GetOptionalInputShape(kAttenMask), d, &problem);
    if (error.empty() && readMods != nullptr) error = readMods(context, d, &problem);
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    problem.dropout = *keepProb < 1.0f;
    problem.dropoutMaskOut = context->GetOutputShape(kDropoutMask) != nullptr;
    problem.narrowScores = narrowScores;
    const ge::graphStatus status = fa_host::WriteForwardTiling(context, problem, *scale, false);
    if (status != ge::GRAPH_SUCCESS) return status;
    // The dropout key (docs/attention_options.md#dropout); seed and offset are uint64 in int64 attrs.
    FlashAttentionTilingData *td = context->GetTilingData<FlashAttentionTilingData>();
    const int64_t *seed = attrs->GetInt(kSeed);
    const int64_t *offset = attrs->GetInt(kOffset);
    td->keepThreshold = fa_policy::DropoutThreshold(*keepProb);
    td->invKeepProb = 1.0f / *keepProb;
    td->seed = seed != nullptr ? static_cast<uint64_t>(*seed) : 0;
    td->offset = offset != nullptr ? static_cast<uint64_t>(*offset) : 0;
    return ge::GRAPH_SUCCESS;
}

void DefineFlashAttentionV2(ops::OpDef &def) {
    using ops::OPTIONAL;
    using ops::REQUIRED;
    // Columns: float16, bfloat16, float32 inputs (as FlashAttention), each with a uint8 and a
    // bool atten_mask (1 / true = masked out, FlashAttentionScore's convention); the tiling
    // refuses, naming the chip, a dtype the chip's AI Core cannot take.
    const std::vector<ge::DataType> types = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT,
                                             ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT};
    const std::vector<ge::DataType> masks = {ge::DT_UINT8, ge::DT_UINT8, ge::DT_UINT8,
                                             ge::DT_BOOL,  ge::DT_BOOL,  ge::DT_BOOL};
    const std::vector<ge::DataType> int64s(6, ge::DT_INT64);
    const std::vector<ge::DataType> floats(6, ge::DT_FLOAT);
    const std::vector<ge::DataType> uint8s(6, ge::DT_UINT8);
    DescribeNd(def.Input("query"), REQUIRED, types);
    DescribeNd(def.Input("key"), REQUIRED, types);
    DescribeNd(def.Input("value"), REQUIRED, types);
    DescribeNd(def.Input("atten_mask"), OPTIONAL, masks);
    DescribeNd(def.Input("actual_seq_qlen"), OPTIONAL, int64s).ValueDepend(OPTIONAL);
    DescribeNd(def.Input("actual_seq_kvlen"), OPTIONAL, int64s).ValueDepend(OPTIONAL);
    DescribeNd(def.Output("attention_out"), REQUIRED, types);
    DescribeNd(def.Output("softmax_lse"), REQUIRED, floats);
    DescribeNd(def.Output("dropout_mask"), OPTIONAL, uint8s);
    AddAttentionAttrs(def, true);
    AddBlockAttrs(def);
}

void RegisterFlashAttentionV2(ops::OpDef &def, ge::graphStatus (*tiling)(gert::TilingContext *)) {
    RegisterHost(def, InferShape, InferDataType, tiling, Chips::kA2A3Coupled);
}

}  // namespace fa_host

namespace ops {
class FlashAttentionV2 : public OpDef {
 public:
    explicit FlashAttentionV2(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionV2(*this);
        fa_host::RegisterFlashAttentionV2(*this, fa_host::TileFlashAttentionV2);
    }
};
OP_ADD(FlashAttentionV2);
}  // namespace ops
