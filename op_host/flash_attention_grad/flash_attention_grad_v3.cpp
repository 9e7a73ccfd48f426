// flash_attention_grad_v3.cpp -- the FlashAttentionGradV3 operator's host side: OpDef
// registration (the interface of op_host/flash_attention_grad/flash_attention_grad_v3.json), InferShape / InferDataType
// and TilingFunc. V3 is FlashAttentionGradV2 plus the score modifiers of
// docs/attention_options.md "Score modifiers": the optional inputs alibi_slopes (float32 [B, N])
// and sinks (float32 [N]), the attr softcap (> 0 caps the scaled scores; 0 = off) and the optional
// output dsinks (float32 [N], the sinks' gradient). V2's inputs, outputs and attrs keep their
// places (flash_attention_grad_host.h); V3's come after each group. It runs the same kernel
// (op_kernel/flash_attention_grad/flash_attention_grad_kernel.h), the modifiers switched on in
// the tiling data.
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "flash_attention_grad_host.h"
#include "flash_attention_grad_policy.h"
#include "flash_attention_grad_tiling.h"
#include "register/op_def_registry.h"
#include "toolchain/slog.h"
#include "op_registration.h"

#define FAG3_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

// V3's inputs, outputs and attrs after V2's (flash_attention_grad_host.h).
constexpr size_t kAlibiSlopes = fa_host::kGradActualSeqKvlen + 1;
constexpr size_t kSinks = kAlibiSlopes + 1;
constexpr size_t kDsinks = 3;  // outputs: dq, dk, dv, dsinks
constexpr size_t kSoftcap = fa_host::kGradBlockN + 1;

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *shapes[fa_host::kGradV2RequiredInputs];
    for (size_t i = 0; i < fa_host::kGradV2RequiredInputs; ++i) shapes[i] = context->GetInputShape(i);
    fa_host::GradDims d;
    const ge::graphStatus rc =
        fa_host::InferGradShapes(context, fa_host::ReadGradV2Dims(context->GetAttrs(), shapes, &d));
    gert::Shape *dsinks = context->GetOutputShape(kDsinks);
    if (rc == ge::GRAPH_SUCCESS && dsinks != nullptr) {
        dsinks->SetDimNum(1);
        dsinks->SetDim(0, d.numHeads);  // one gradient per query head, as sinks
    }
    return rc;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    const ge::graphStatus rc = fa_host::InferGradDataTypes(context);
    context->SetOutputDataType(kDsinks, ge::DT_FLOAT);
    return rc;
}

// alibi_slopes [B, N] and sinks [N] (float32, the dtype the OpDef allows), softcap >= 0 and
// finite, dsinks only with sinks. "" or what is wrong.
std::string ReadScoreMods(gert::TilingContext *context, const fa_host::GradDims &d, const fa_policy::Problem &p,
                          float *softcap, bool *alibi, bool *sinks, bool *dsinks) {
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const float *cap = attrs != nullptr ? attrs->GetFloat(kSoftcap) : nullptr;
    if (cap == nullptr) return "attr softcap missing";
    if (!(*cap >= 0.0f) || std::isinf(*cap)) {
        return "softcap must be a finite number >= 0 (0 = off), got " + std::to_string(*cap);
    }
    *softcap = *cap;
    const gert::StorageShape *slopes = context->GetOptionalInputShape(kAlibiSlopes);
    *alibi = slopes != nullptr;
    if (*alibi) {
        const gert::Shape &s = slopes->GetOriginShape();
        if (s.GetDimNum() != 2 || s.GetDim(0) != static_cast<int64_t>(p.batch) || s.GetDim(1) != d.numHeads) {
            return "alibi_slopes must be [B, N] = [" + std::to_string(p.batch) + ", " + std::to_string(d.numHeads) +
                   "] (B: sequences with input_layout TND), got " + fa_host::GradShapeText(s);
        }
    }
    const gert::StorageShape *logits = context->GetOptionalInputShape(kSinks);
    *sinks = logits != nullptr;
    if (*sinks) {
        const gert::Shape &s = logits->GetOriginShape();
        if (s.GetDimNum() != 1 || s.GetDim(0) != d.numHeads) {
            return "sinks must be [N] = [" + std::to_string(d.numHeads) + "], got " + fa_host::GradShapeText(s);
        }
    }
    *dsinks = context->GetOutputShape(kDsinks) != nullptr;
    if (*dsinks && !*sinks) return "the output dsinks needs the input sinks";
    return "";
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    fa_host::GradDims d;
    fa_policy::Problem problem;
    bool deterministic = true;
    float scale = 1.0f;
    fa_host::GradDropout dropout;
    float softcap = 0.0f;
    bool alibi = false, sinks = false, dsinks = false;
    std::string error = fa_host::ReadGradV2Problem(context, &d, &problem, &deterministic, &scale, &dropout);
    if (error.empty()) error = ReadScoreMods(context, d, problem, &softcap, &alibi, &sinks, &dsinks);
    ge::graphStatus rc = ge::GRAPH_FAILED;
    if (error.empty()) {
        problem.alibi = alibi;  // the policy budgets the kernel's ALiBi index buffer
        rc = fa_host::TileGrad(context, d, problem, deterministic, scale, dropout, &error);
    }
    if (rc == ge::GRAPH_SUCCESS) {
        FlashAttentionGradTilingData *td = context->GetTilingData<FlashAttentionGradTilingData>();
        td->softcap = softcap;
        td->hasAlibi = alibi ? 1 : 0;
        td->dsinksOut = dsinks ? 1 : 0;
    }
    if (rc != ge::GRAPH_SUCCESS) FAG3_LOGE(context, "%s", error.c_str());
    return rc;
}

}  // namespace

namespace ops {
class FlashAttentionGradV3 : public OpDef {
 public:
    explicit FlashAttentionGradV3(const char *name) : OpDef(name) {
        const std::vector<ge::DataType> floats(4, ge::DT_FLOAT);
        fa_host::DescribeGradV2Inputs(*this);
        fa_host::DescribeNd(this->Input("alibi_slopes"), OPTIONAL, floats);
        fa_host::DescribeNd(this->Input("sinks"), OPTIONAL, floats);
        fa_host::DescribeGradOutputs(*this);
        fa_host::DescribeNd(this->Output("dsinks"), OPTIONAL, floats);
        fa_host::DescribeGradV2Attrs(*this);
        this->Attr("softcap").AttrType(OPTIONAL).Float(0.0);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionGradV3);
}  // namespace ops
