// flash_attention_grad.cpp -- the FlashAttentionGrad operator's host side: OpDef registration
// (the interface of op_host/flash_attention_grad/flash_attention_grad.json), InferShape / InferDataType, and TilingFunc,
// a thin adapter over the backward's tiling policy (flash_attention_grad_policy.h) through what
// it shares with FlashAttentionGradV2 (flash_attention_grad_host.h).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "flash_attention_grad_host.h"
#include "flash_attention_grad_policy.h"
#include "register/op_def_registry.h"
#include "toolchain/slog.h"
#include "op_registration.h"

#define FAG_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

// Inputs, outputs and attrs in OpDef order.
enum InputIndex : size_t { kQuery = 0, kKey, kValue, kAttentionOut, kDout, kSoftmaxLse };
enum AttrIndex : size_t {
    kScaleValue = 0, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kDeterministic, kBlockM, kBlockN
};

std::string ReadDimsFromContext(const gert::RuntimeAttrs *attrs, const gert::Shape *const shapes[6],
                                fa_host::GradDims *d) {
    if (attrs == nullptr) return "no attrs";
    for (int i = 0; i < 6; ++i) {
        if (shapes[i] == nullptr) return "missing input shape";
    }
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return fa_host::ReadGradDims(*shapes[kQuery], *shapes[kKey], *shapes[kValue], *shapes[kAttentionOut],
                                 *shapes[kDout], *shapes[kSoftmaxLse], attrs->GetStr(kInputLayout), *numHeads,
                                 *numKvHeads, false, d);
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *shapes[6];
    for (size_t i = 0; i < 6; ++i) shapes[i] = context->GetInputShape(i);
    fa_host::GradDims d;
    return fa_host::InferGradShapes(context, ReadDimsFromContext(context->GetAttrs(), shapes, &d));
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::Shape *shapes[6];
    for (size_t i = 0; i < 6; ++i) {
        const gert::StorageShape *s = context->GetInputShape(i);
        shapes[i] = s != nullptr ? &s->GetOriginShape() : nullptr;
    }
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kQuery);
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    fa_host::GradDims d;
    std::string error = ReadDimsFromContext(attrs, shapes, &d);
    const float *scale = attrs != nullptr ? attrs->GetFloat(kScaleValue) : nullptr;
    const bool *causal = attrs != nullptr ? attrs->GetBool(kCausal) : nullptr;
    const bool *deterministic = attrs != nullptr ? attrs->GetBool(kDeterministic) : nullptr;
    const int64_t *blockM = attrs != nullptr ? attrs->GetInt(kBlockM) : nullptr;
    const int64_t *blockN = attrs != nullptr ? attrs->GetInt(kBlockN) : nullptr;
    if (error.empty() && (qDesc == nullptr || scale == nullptr || causal == nullptr || deterministic == nullptr ||
                          blockM == nullptr || blockN == nullptr)) {
        error = "query desc or attrs scale_value / causal / deterministic / block_m / block_n missing";
    }
    if (error.empty() && (*blockM < 0 || *blockM > UINT32_MAX || *blockN < 0 || *blockN > UINT32_MAX)) {
        error = "block_m and block_n must be >= 0 (0 = auto)";
    }
    if (!error.empty()) {
        FAG_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    fa_policy::Problem problem;
    problem.batch = static_cast<uint64_t>(d.batch);
    problem.numHeads = static_cast<uint64_t>(d.numHeads);
    problem.numKvHeads = static_cast<uint64_t>(d.numKvHeads);
    problem.seqQ = static_cast<uint64_t>(d.seqQ);
    problem.seqKv = static_cast<uint64_t>(d.seqKv);
    problem.headDim = static_cast<uint64_t>(d.headDim);
    problem.dtypeBytes = 2;  // float16 / bfloat16, as the OpDef allows
    problem.bf16 = qDesc->GetDataType() == ge::DT_BF16;
    problem.layout = d.layout;
    problem.causal = *causal;
    problem.userBlockM = static_cast<uint32_t>(*blockM);
    problem.userBlockN = static_cast<uint32_t>(*blockN);
    const ge::graphStatus rc = fa_host::TileGrad(context, d, problem, *deterministic, *scale, fa_host::GradDropout{}, &error);
    if (rc != ge::GRAPH_SUCCESS) FAG_LOGE(context, "%s", error.c_str());
    return rc;
}

}  // namespace

namespace ops {
class FlashAttentionGrad : public OpDef {
 public:
    explicit FlashAttentionGrad(const char *name) : OpDef(name) {
        const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16};
        for (const char *input : {"query", "key", "value", "attention_out", "dout"}) {
            fa_host::DescribeNd(this->Input(input), REQUIRED, halfTypes);
        }
        fa_host::DescribeNd(this->Input("softmax_lse"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        for (const char *output : {"dq", "dk", "dv"}) {
            fa_host::DescribeNd(this->Output(output), REQUIRED, halfTypes);
        }
        fa_host::AddAttentionAttrs(*this, false);
        this->Attr("deterministic").AttrType(OPTIONAL).Bool(true);
        fa_host::AddBlockAttrs(*this);
        fa_host::RegisterHost(*this, InferShape, fa_host::InferGradDataTypes, TilingFunc, fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionGrad);
}  // namespace ops
