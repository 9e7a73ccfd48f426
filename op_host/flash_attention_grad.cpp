// flash_attention_grad.cpp -- the FlashAttentionGrad operator's host side: OpDef registration
// (the interface of op/flash_attention_grad.json), InferShape / InferDataType, and TilingFunc,
// a thin adapter over the backward's tiling policy (flash_attention_grad_policy.h).
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "../op_kernel/flash_attention_grad_tiling.h"
#include "../op_kernel/flash_attention_tiling.h"
#include "flash_attention_grad_policy.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "toolchain/slog.h"

#define FAG_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

static_assert(fa_policy::kGradKeyBf16 == FAG_KEY_BF16 && fa_policy::kGradKeyCausal == FAG_KEY_CAUSAL &&
                  fa_policy::kGradKeyLayoutShift == FAG_KEY_LAYOUT_SHIFT &&
                  fa_policy::kGradKeyDeterministic == FAG_KEY_DETERMINISTIC,
              "the policy's tiling-key bits must be the kernel's");
static_assert(fa_policy::kGradMaxAiv == FAG_MAX_AIV, "unit ranges must fit unitStart");

namespace {

constexpr uint32_t kBatchScheduleMode = 1;  // TilingContext::SetScheduleMode: all blocks resident at once

// Inputs, outputs and attrs in OpDef order.
enum InputIndex : size_t { kQuery = 0, kKey, kValue, kAttentionOut, kDout, kSoftmaxLse };
enum OutputIndex : size_t { kDq = 0, kDk, kDv };
enum AttrIndex : size_t {
    kScaleValue = 0, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kDeterministic, kBlockM, kBlockN
};

struct Dims {
    uint32_t layout = 0;
    int64_t batch = 0, numHeads = 0, numKvHeads = 0, seqQ = 0, seqKv = 0, headDim = 0;
};

std::string ShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// B, N, Nkv, Sq, Skv, D from query and key in the layout (BSH: N from num_heads, Nkv from
// num_kv_heads or N); value, attention_out, dout and softmax_lse must match. "" or what is wrong.
std::string ReadDims(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const gert::Shape &out,
                     const gert::Shape &dout, const gert::Shape &lse, const char *layoutAttr, int64_t numHeadsAttr,
                     int64_t numKvHeadsAttr, Dims *d) {
    const std::string name = layoutAttr != nullptr ? layoutAttr : "";
    const size_t rank = name == "BSH" ? 3 : 4;
    if (name != "BNSD" && name != "BSND" && name != "BSH") return "input_layout must be BNSD, BSND or BSH, got '" + name + "'";
    if (q.GetDimNum() != rank || k.GetDimNum() != rank) {
        return "input_layout " + name + " needs rank-" + std::to_string(rank) + " query and key, got " + ShapeText(q) +
               " and " + ShapeText(k);
    }
    if (k != v) return "key " + ShapeText(k) + " and value " + ShapeText(v) + " must have the same shape";
    if (out != q || dout != q) {
        return "attention_out " + ShapeText(out) + " and dout " + ShapeText(dout) + " must have the shape of query " +
               ShapeText(q);
    }
    if (numHeadsAttr < 0 || numKvHeadsAttr < 0) return "num_heads and num_kv_heads must be >= 0";
    d->batch = q.GetDim(0);
    if (name == "BSH") {
        if (numHeadsAttr <= 0) return "input_layout BSH needs num_heads > 0";
        if (q.GetDim(2) % numHeadsAttr != 0) return "query hidden size is not a multiple of num_heads";
        d->layout = FA_LAYOUT_BSH;
        d->numHeads = numHeadsAttr;
        d->numKvHeads = numKvHeadsAttr != 0 ? numKvHeadsAttr : numHeadsAttr;
        d->headDim = q.GetDim(2) / numHeadsAttr;
        d->seqQ = q.GetDim(1);
        d->seqKv = k.GetDim(1);
        if (k.GetDim(2) != d->numKvHeads * d->headDim) return "key hidden size != num_kv_heads * head_dim";
    } else {
        const bool bnsd = name == "BNSD";
        d->layout = bnsd ? FA_LAYOUT_BNSD : FA_LAYOUT_BSND;
        d->numHeads = q.GetDim(bnsd ? 1 : 2);
        d->seqQ = q.GetDim(bnsd ? 2 : 1);
        d->headDim = q.GetDim(3);
        d->numKvHeads = k.GetDim(bnsd ? 1 : 2);
        d->seqKv = k.GetDim(bnsd ? 2 : 1);
        if (k.GetDim(3) != d->headDim) return "query and key head_dim differ: " + ShapeText(q) + " vs " + ShapeText(k);
        if ((numHeadsAttr != 0 && numHeadsAttr != d->numHeads) || (numKvHeadsAttr != 0 && numKvHeadsAttr != d->numKvHeads)) {
            return "num_heads / num_kv_heads disagree with query " + ShapeText(q) + " and key " + ShapeText(k);
        }
    }
    if (k.GetDim(0) != d->batch) return "query and key batch differ: " + ShapeText(q) + " vs " + ShapeText(k);
    if (d->batch < 1 || d->numHeads < 1 || d->numKvHeads < 1 || d->seqQ < 1 || d->seqKv < 1 || d->headDim < 1) {
        return "every size must be >= 1: query " + ShapeText(q) + ", key " + ShapeText(k);
    }
    if (lse.GetDimNum() != 3 || lse.GetDim(0) != d->batch || lse.GetDim(1) != d->numHeads || lse.GetDim(2) != d->seqQ) {
        return "softmax_lse " + ShapeText(lse) + " must be [B, N, Sq] = [" + std::to_string(d->batch) + ", " +
               std::to_string(d->numHeads) + ", " + std::to_string(d->seqQ) + "]";
    }
    return "";
}

std::string ReadDimsFromContext(const gert::RuntimeAttrs *attrs, const gert::Shape *const shapes[6], Dims *d) {
    if (attrs == nullptr) return "no attrs";
    for (int i = 0; i < 6; ++i) {
        if (shapes[i] == nullptr) return "missing input shape";
    }
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return ReadDims(*shapes[kQuery], *shapes[kKey], *shapes[kValue], *shapes[kAttentionOut], *shapes[kDout],
                    *shapes[kSoftmaxLse], attrs->GetStr(kInputLayout), *numHeads, *numKvHeads, d);
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *shapes[6];
    for (size_t i = 0; i < 6; ++i) shapes[i] = context->GetInputShape(i);
    Dims d;
    const std::string error = ReadDimsFromContext(context->GetAttrs(), shapes, &d);
    gert::Shape *dq = context->GetOutputShape(kDq);
    gert::Shape *dk = context->GetOutputShape(kDk);
    gert::Shape *dv = context->GetOutputShape(kDv);
    if (!error.empty() || dq == nullptr || dk == nullptr || dv == nullptr) {
        FAG_LOGE(context, "InferShape: %s", error.empty() ? "missing output shape" : error.c_str());
        return ge::GRAPH_FAILED;
    }
    *dq = *shapes[kQuery];  // gradients have the shapes of what they differentiate
    *dk = *shapes[kKey];
    *dv = *shapes[kValue];
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kDq, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kDk, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kDv, context->GetInputDataType(kQuery));
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::Shape *shapes[6];
    for (size_t i = 0; i < 6; ++i) {
        const gert::StorageShape *s = context->GetInputShape(i);
        shapes[i] = s != nullptr ? &s->GetOriginShape() : nullptr;
    }
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kQuery);
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    Dims d;
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
    const bool bf16 = qDesc->GetDataType() == ge::DT_BF16;

    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    fa_policy::ChipLimits chip;
    chip.socName = fa_host::SocText(platform.GetSocVersion());
    fa_host::ReadChipBuffers(platform, &chip);

    fa_policy::Problem problem;
    problem.batch = static_cast<uint64_t>(d.batch);
    problem.numHeads = static_cast<uint64_t>(d.numHeads);
    problem.numKvHeads = static_cast<uint64_t>(d.numKvHeads);
    problem.seqQ = static_cast<uint64_t>(d.seqQ);
    problem.seqKv = static_cast<uint64_t>(d.seqKv);
    problem.headDim = static_cast<uint64_t>(d.headDim);
    problem.dtypeBytes = 2;  // float16 / bfloat16, as the OpDef allows
    problem.bf16 = bf16;
    problem.layout = d.layout;
    problem.causal = *causal;
    problem.userBlockM = static_cast<uint32_t>(*blockM);
    problem.userBlockN = static_cast<uint32_t>(*blockN);
    fa_policy::GradPlan plan;
    if (!fa_policy::ComputeGradPlan(problem, *deterministic, chip, &plan, &error)) {
        FAG_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }

    FlashAttentionGradTilingData *td = context->GetTilingData<FlashAttentionGradTilingData>();
    if (td == nullptr) {
        FAG_LOGE(context, "tiling buffer smaller than FlashAttentionGradTilingData (%zu B)",
                 sizeof(FlashAttentionGradTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = FlashAttentionGradTilingData{};
    td->batch = static_cast<uint32_t>(d.batch);
    td->numHeads = static_cast<uint32_t>(d.numHeads);
    td->numKvHeads = static_cast<uint32_t>(d.numKvHeads);
    td->groupSize = static_cast<uint32_t>(d.numHeads / d.numKvHeads);
    td->seqQ = static_cast<uint32_t>(d.seqQ);
    td->seqKv = static_cast<uint32_t>(d.seqKv);
    td->headDim = static_cast<uint32_t>(d.headDim);
    td->layout = d.layout;
    td->causal = *causal ? 1 : 0;
    td->deterministic = *deterministic ? 1 : 0;
    td->scaleValue = *scale;
    td->blockM = plan.blockM;
    td->blockN = plan.blockN;
    td->numQBlocks = plan.numQBlocks;
    td->numKvBlocks = plan.numKvBlocks;
    td->rowChunk = plan.rowChunk;
    td->aivNum = plan.aivNum;
    td->totalUnits = static_cast<uint32_t>(plan.totalUnits);
    for (size_t i = 0; i < plan.unitStart.size(); ++i) td->unitStart[i] = plan.unitStart[i];
    td->numSlots = plan.numSlots;
    td->wsDeltaOffset = plan.wsDeltaOffset;
    td->wsDqOffset = plan.wsDqOffset;
    td->wsScratchOffset = plan.wsScratchOffset;
    td->wsScratchBytes = plan.wsScratchBytes;
    td->wsScoreOffset = plan.wsScoreOffset;
    td->wsGradOffset = plan.wsGradOffset;
    td->wsProbOffset = plan.wsProbOffset;
    td->wsDsOffset = plan.wsDsOffset;
    td->wsDkOffset = plan.wsDkOffset;
    td->wsDvOffset = plan.wsDvOffset;
    td->wsDqPartOffset = plan.wsDqPartOffset;

    const matmul_tiling::DataType mmType = bf16 ? matmul_tiling::DataType::DT_BF16 : matmul_tiling::DataType::DT_FLOAT16;
    const int32_t m = static_cast<int32_t>(plan.blockM), n = static_cast<int32_t>(plan.blockN);
    const int32_t hd = static_cast<int32_t>(d.headDim);
    // Per AIV step, A and C in GM, each a sixth of L1 (an AIC serves 2 AIVs x 3 matmuls): scores
    // ([m, hd] x [n, hd]^T), dK/dV (A stored [m, n]: [n, m]^T x [m, hd]) and dQ ([m, n] x [n, hd]).
    const fa_host::CubeSpec score{m, n, hd, false, true, false, false, 6, -1};
    const fa_host::CubeSpec kvGrad{n, hd, m, true, false, false, false, 6, -1};
    const fa_host::CubeSpec dq{m, hd, n, false, false, false, false, 6, -1};
    if (!fa_host::FillCubeTiling(platform, mmType, score, chip.l1Bytes, &td->scoreTiling) ||
        !fa_host::FillCubeTiling(platform, mmType, kvGrad, chip.l1Bytes, &td->kvGradTiling) ||
        !fa_host::FillCubeTiling(platform, mmType, dq, chip.l1Bytes, &td->dqTiling)) {
        FAG_LOGE(context, "matmul tiling failed for block_m=%u, block_n=%u, head_dim=%d on %s", plan.blockM,
                 plan.blockN, hd, chip.socName.c_str());
        return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(plan.blockDim);  // MIX 1:2: one block = 1 AIC + 2 AIV
    // Batch mode: every block resident at once, as the kernel's SyncAll barriers need (asc-devkit
    // SyncAll.md: without it, concurrent ops that sync across cores can deadlock).
    if (context->SetScheduleMode(kBatchScheduleMode) != ge::GRAPH_SUCCESS) {
        FAG_LOGE(context, "SetScheduleMode(%u) failed", kBatchScheduleMode);
        return ge::GRAPH_FAILED;
    }
    context->SetTilingKey(plan.tilingKey);
    size_t *workspaces = context->GetWorkspaceSizes(1);
    if (workspaces == nullptr) {
        FAG_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    workspaces[0] = platform.GetLibApiWorkSpaceSize() + plan.userWorkspaceBytes;
    return ge::GRAPH_SUCCESS;
}

}  // namespace

namespace ops {
class FlashAttentionGrad : public OpDef {
 public:
    explicit FlashAttentionGrad(const char *name) : OpDef(name) {
        const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16};
        const std::vector<ge::Format> nd = {ge::FORMAT_ND, ge::FORMAT_ND};
        for (const char *input : {"query", "key", "value", "attention_out", "dout"}) {
            this->Input(input).ParamType(REQUIRED).DataType(halfTypes).Format(nd).UnknownShapeFormat(nd);
        }
        this->Input("softmax_lse").ParamType(REQUIRED).DataType({ge::DT_FLOAT, ge::DT_FLOAT}).Format(nd).UnknownShapeFormat(nd);
        for (const char *output : {"dq", "dk", "dv"}) {
            this->Output(output).ParamType(REQUIRED).DataType(halfTypes).Format(nd).UnknownShapeFormat(nd);
        }
        this->Attr("scale_value").AttrType(OPTIONAL).Float(1.0);
        this->Attr("causal").AttrType(OPTIONAL).Bool(false);
        this->Attr("input_layout").AttrType(OPTIONAL).String("BNSD");
        this->Attr("num_heads").AttrType(OPTIONAL).Int(0);
        this->Attr("num_kv_heads").AttrType(OPTIONAL).Int(0);
        this->Attr("deterministic").AttrType(OPTIONAL).Bool(true);
        this->Attr("block_m").AttrType(OPTIONAL).Int(0);
        this->Attr("block_n").AttrType(OPTIONAL).Int(0);
        this->SetInferShape(InferShape).SetInferDataType(InferDataType);
        this->AICore().SetTiling(TilingFunc).AddConfig("ascend910b").AddConfig("ascend910_93");
    }
};
OP_ADD(FlashAttentionGrad);
}  // namespace ops
