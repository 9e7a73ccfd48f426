// flash_attention_grad_v2.cpp -- the FlashAttentionGradV2 operator's host side: OpDef
// registration (the interface of op_host/flash_attention_grad/flash_attention_grad_v2.json), InferShape / InferDataType
// and TilingFunc. V2 is FlashAttentionGrad with the band (pre_tokens / next_tokens) in place of
// the causal flag, variable-length batches (layout TND with actual_seq_qlen / kvlen, read
// here as ValueDepend inputs so the policy balances the cores by each sequence's real work),
// an explicit attention mask (atten_mask, 1 = masked out) and dropout (keep_prob, seed, offset).
// It shares the dims, the plan and the tiling with V1 (flash_attention_grad_host.h) and runs the
// same kernel (op_kernel/flash_attention_grad/flash_attention_grad_kernel.h).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>
#include <vector>

#include "flash_attention_grad_host.h"
#include "flash_attention_grad_policy.h"
#include "register/op_def_registry.h"
#include "toolchain/slog.h"
#include "op_registration.h"

#define FAG2_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

// Inputs, outputs and attrs in OpDef order.
enum InputIndex : size_t {
    kQuery = 0, kKey, kValue, kAttentionOut, kDout, kSoftmaxLse, kAttenMask, kActualSeqQlen, kActualSeqKvlen
};
enum AttrIndex : size_t {
    kScaleValue = 0, kPreTokens, kNextTokens, kInputLayout, kNumHeads, kNumKvHeads, kKeepProb, kSeed, kOffset,
    kDeterministic, kBlockM, kBlockN
};
constexpr size_t kRequiredInputs = 6;

std::string ReadDimsFromContext(const gert::RuntimeAttrs *attrs, const gert::Shape *const shapes[kRequiredInputs],
                                fa_host::GradDims *d) {
    if (attrs == nullptr) return "no attrs";
    for (size_t i = 0; i < kRequiredInputs; ++i) {
        if (shapes[i] == nullptr) return "missing input shape";
    }
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return fa_host::ReadGradDims(*shapes[kQuery], *shapes[kKey], *shapes[kValue], *shapes[kAttentionOut],
                                 *shapes[kDout], *shapes[kSoftmaxLse], attrs->GetStr(kInputLayout), *numHeads,
                                 *numKvHeads, true, d);
}

// The cumulative end offsets of `name` (actual_seq_qlen / kvlen): int64, one per sequence,
// non-decreasing from >= 0 and ending at `tokens`. Fills the lengths; "" or what is wrong.
std::string ReadSequenceEnds(const gert::Tensor *t, const char *name, int64_t tokens, std::vector<uint64_t> *lens) {
    if (t == nullptr) return std::string("input_layout TND needs ") + name;
    if (t->GetDataType() != ge::DT_INT64) return std::string(name) + " must be int64";
    const gert::Shape &shape = t->GetOriginShape();
    const int64_t count = t->GetShapeSize();
    if (shape.GetDimNum() != 1 || count < 1) {
        return std::string(name) + " must be 1-D with one end offset per sequence, got " + fa_host::GradShapeText(shape);
    }
    const int64_t *ends = t->GetData<int64_t>();
    if (ends == nullptr) return std::string(name) + ": no host values (the input must be ValueDepend)";
    int64_t previous = 0;
    for (int64_t s = 0; s < count; ++s) {
        if (ends[s] < previous) {
            return std::string(name) + " must hold non-decreasing cumulative ends >= 0 (without the leading 0): entry " +
                   std::to_string(s) + " is " + std::to_string(ends[s]) + " after " + std::to_string(previous);
        }
        lens->push_back(static_cast<uint64_t>(ends[s] - previous));
        previous = ends[s];
    }
    if (previous != tokens) {
        return std::string(name) + " must end at the token count " + std::to_string(tokens) + ", got " +
               std::to_string(previous);
    }
    return "";
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *shapes[kRequiredInputs];
    for (size_t i = 0; i < kRequiredInputs; ++i) shapes[i] = context->GetInputShape(i);
    fa_host::GradDims d;
    return fa_host::InferGradShapes(context, ReadDimsFromContext(context->GetAttrs(), shapes, &d));
}

// The problem from the context: dims, band, varlen lengths, blocks. "" or what is wrong.
std::string ReadProblem(gert::TilingContext *context, fa_host::GradDims *d, fa_policy::Problem *p, bool *deterministic,
                        float *scale, fa_host::GradDropout *dropout) {
    const gert::Shape *shapes[kRequiredInputs];
    for (size_t i = 0; i < kRequiredInputs; ++i) {
        const gert::StorageShape *s = context->GetInputShape(i);
        shapes[i] = s != nullptr ? &s->GetOriginShape() : nullptr;
    }
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    std::string error = ReadDimsFromContext(attrs, shapes, d);
    if (!error.empty()) return error;
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kQuery);
    const float *scaleValue = attrs->GetFloat(kScaleValue);
    const int64_t *pre = attrs->GetInt(kPreTokens);
    const int64_t *next = attrs->GetInt(kNextTokens);
    const float *keepProb = attrs->GetFloat(kKeepProb);
    const bool *det = attrs->GetBool(kDeterministic);
    const int64_t *blockM = attrs->GetInt(kBlockM);
    const int64_t *blockN = attrs->GetInt(kBlockN);
    const int64_t *seed = attrs->GetInt(kSeed);
    const int64_t *offset = attrs->GetInt(kOffset);
    if (qDesc == nullptr || scaleValue == nullptr || pre == nullptr || next == nullptr || keepProb == nullptr ||
        det == nullptr || blockM == nullptr || blockN == nullptr || seed == nullptr || offset == nullptr) {
        return "query desc or attrs scale_value / pre_tokens / next_tokens / keep_prob / seed / offset / "
               "deterministic / block_m / block_n missing";
    }
    if (*blockM < 0 || *blockM > UINT32_MAX || *blockN < 0 || *blockN > UINT32_MAX) {
        return "block_m and block_n must be >= 0 (0 = auto)";
    }
    // The mask: rank 4 [maskB, maskN, maskQ, Skv] (the policy checks dims 0..2 against B, N, Sq).
    const gert::StorageShape *maskShape = context->GetOptionalInputShape(kAttenMask);
    if (maskShape != nullptr) {
        const gert::Shape &m = maskShape->GetOriginShape();
        if (m.GetDimNum() != 4 || (!d->varlen && m.GetDim(3) != d->seqKv)) {
            return "atten_mask must be rank 4 [1 or B, 1 or N, 1 or Sq, Skv] with Skv = " + std::to_string(d->seqKv) +
                   ", got " + fa_host::GradShapeText(m);
        }
        p->mask = true;
        p->maskB = static_cast<uint64_t>(m.GetDim(0));
        p->maskN = static_cast<uint64_t>(m.GetDim(1));
        p->maskQ = static_cast<uint64_t>(m.GetDim(2));
    }
    if (!(*keepProb > 0.0f && *keepProb <= 1.0f)) {
        return "keep_prob must be in (0, 1] (1 = no dropout), got " + std::to_string(*keepProb);
    }
    p->dropout = *keepProb < 1.0f;
    dropout->keepProb = *keepProb;
    dropout->seed = static_cast<uint64_t>(*seed);
    dropout->offset = static_cast<uint64_t>(*offset);
    p->numHeads = static_cast<uint64_t>(d->numHeads);
    p->numKvHeads = static_cast<uint64_t>(d->numKvHeads);
    p->headDim = static_cast<uint64_t>(d->headDim);
    p->dtypeBytes = 2;  // float16 / bfloat16, as the OpDef allows
    p->bf16 = qDesc->GetDataType() == ge::DT_BF16;
    p->layout = d->varlen ? fa_policy::kLayoutTnd : d->layout;
    p->preTokens = *pre;
    p->nextTokens = *next;
    p->userBlockM = static_cast<uint32_t>(*blockM);
    p->userBlockN = static_cast<uint32_t>(*blockN);
    const gert::Tensor *qlen = context->GetOptionalInputTensor(kActualSeqQlen);
    const gert::Tensor *kvlen = context->GetOptionalInputTensor(kActualSeqKvlen);
    if (!d->varlen) {
        if (qlen != nullptr || kvlen != nullptr) {
            return "actual_seq_qlen / actual_seq_kvlen go with input_layout TND only";
        }
        p->batch = static_cast<uint64_t>(d->batch);
        p->seqQ = static_cast<uint64_t>(d->seqQ);
        p->seqKv = static_cast<uint64_t>(d->seqKv);
    } else {
        error = ReadSequenceEnds(qlen, "actual_seq_qlen", d->tokensQ, &p->seqLensQ);
        if (error.empty()) error = ReadSequenceEnds(kvlen, "actual_seq_kvlen", d->tokensKv, &p->seqLensKv);
        if (!error.empty()) return error;
        if (p->seqLensQ.size() != p->seqLensKv.size()) {
            return "actual_seq_qlen (" + std::to_string(p->seqLensQ.size()) + " sequences) and actual_seq_kvlen (" +
                   std::to_string(p->seqLensKv.size()) + ") must describe the same sequences";
        }
        p->batch = p->seqLensQ.size();
        p->tokensQ = static_cast<uint64_t>(d->tokensQ);
        p->tokensKv = static_cast<uint64_t>(d->tokensKv);
        for (size_t s = 0; s < p->seqLensQ.size(); ++s) {
            p->seqQ = p->seqLensQ[s] > p->seqQ ? p->seqLensQ[s] : p->seqQ;
            p->seqKv = p->seqLensKv[s] > p->seqKv ? p->seqLensKv[s] : p->seqKv;
        }
        // A batch of empty sequences still plans one row and key (nothing is walked).
        p->seqQ = p->seqQ > 0 ? p->seqQ : 1;
        p->seqKv = p->seqKv > 0 ? p->seqKv : 1;
    }
    *deterministic = *det;
    *scale = *scaleValue;
    return "";
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    fa_host::GradDims d;
    fa_policy::Problem problem;
    bool deterministic = true;
    float scale = 1.0f;
    fa_host::GradDropout dropout;
    std::string error = ReadProblem(context, &d, &problem, &deterministic, &scale, &dropout);
    ge::graphStatus rc = ge::GRAPH_FAILED;
    if (error.empty()) rc = fa_host::TileGrad(context, d, problem, deterministic, scale, dropout, &error);
    if (rc != ge::GRAPH_SUCCESS) FAG2_LOGE(context, "%s", error.c_str());
    return rc;
}

}  // namespace

namespace ops {
class FlashAttentionGradV2 : public OpDef {
 public:
    explicit FlashAttentionGradV2(const char *name) : OpDef(name) {
        // Columns: float16 and bfloat16 inputs, each with a uint8 and a bool atten_mask (1 / true =
        // masked out, FlashAttentionScore's convention).
        const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16};
        const std::vector<ge::DataType> masks = {ge::DT_UINT8, ge::DT_UINT8, ge::DT_BOOL, ge::DT_BOOL};
        for (const char *input : {"query", "key", "value", "attention_out", "dout"}) {
            fa_host::DescribeNd(this->Input(input), REQUIRED, halfTypes);
        }
        fa_host::DescribeNd(this->Input("softmax_lse"), REQUIRED, std::vector<ge::DataType>(4, ge::DT_FLOAT));
        fa_host::DescribeNd(this->Input("atten_mask"), OPTIONAL, masks);
        for (const char *lengths : {"actual_seq_qlen", "actual_seq_kvlen"}) {
            fa_host::DescribeNd(this->Input(lengths), OPTIONAL, std::vector<ge::DataType>(4, ge::DT_INT64))
                .ValueDepend(OPTIONAL);
        }
        for (const char *output : {"dq", "dk", "dv"}) {
            fa_host::DescribeNd(this->Output(output), REQUIRED, halfTypes);
        }
        fa_host::AddAttentionAttrs(*this, true);
        this->Attr("deterministic").AttrType(OPTIONAL).Bool(true);
        fa_host::AddBlockAttrs(*this);
        fa_host::RegisterHost(*this, InferShape, fa_host::InferGradDataTypes, TilingFunc, fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionGradV2);
}  // namespace ops
