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

#include "flash_attention_grad_host.h"
#include "flash_attention_grad_policy.h"
#include "register/op_def_registry.h"
#include "toolchain/slog.h"
#include "op_registration.h"

#define FAG2_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *shapes[fa_host::kGradV2RequiredInputs];
    for (size_t i = 0; i < fa_host::kGradV2RequiredInputs; ++i) shapes[i] = context->GetInputShape(i);
    fa_host::GradDims d;
    return fa_host::InferGradShapes(context, fa_host::ReadGradV2Dims(context->GetAttrs(), shapes, &d));
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    fa_host::GradDims d;
    fa_policy::Problem problem;
    bool deterministic = true;
    float scale = 1.0f;
    fa_host::GradDropout dropout;
    std::string error = fa_host::ReadGradV2Problem(context, &d, &problem, &deterministic, &scale, &dropout);
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
        fa_host::DescribeGradV2Inputs(*this);
        fa_host::DescribeGradOutputs(*this);
        fa_host::DescribeGradV2Attrs(*this);
        fa_host::RegisterHost(*this, InferShape, fa_host::InferGradDataTypes, TilingFunc, fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionGradV2);
}  // namespace ops
