// flash_attention.cpp -- the FlashAttention operator's host side: OpDef registration (the
// interface of op/flash_attention.json), InferShape / InferDataType, and TilingFunc, a thin
// adapter over the tiling policy (tiling_policy.h): read shapes and attrs, query the chip,
// call the policy, fill FlashAttentionTilingData, set block dim, tiling key, workspace.
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cstdint>
#include <string>

#include "../op_kernel/flash_attention_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "tiling_policy.h"
#include "toolchain/slog.h"

#define FA_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

static_assert(fa_policy::kKeyBf16 == FA_KEY_BF16 && fa_policy::kKeyCausal == FA_KEY_CAUSAL &&
                  fa_policy::kKeyLayoutShift == FA_KEY_LAYOUT_SHIFT && fa_policy::kKeySqTail == FA_KEY_SQ_TAIL &&
                  fa_policy::kKeySkvTail == FA_KEY_SKV_TAIL && fa_policy::kKeyFp32 == FA_KEY_FP32 &&
                  fa_policy::kKeyCoupled == FA_KEY_COUPLED,
              "the policy's tiling-key bits must be the kernel's");
static_assert(fa_policy::kLayoutBnsd == FA_LAYOUT_BNSD && fa_policy::kLayoutBsnd == FA_LAYOUT_BSND &&
                  fa_policy::kLayoutBsh == FA_LAYOUT_BSH,
              "the policy's layout codes must be the kernel's");
static_assert(fa_policy::kMaxCores == FA_MAX_CORES, "core ranges must fit coreItemStart");

namespace {

// Inputs, outputs and attrs in OpDef order.
enum InputIndex : size_t { kQuery = 0, kKey = 1, kValue = 2 };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse = 1 };
enum AttrIndex : size_t { kScaleValue = 0, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN };

// Problem sizes read from the shapes and the layout.
struct Dims {
    uint32_t layout = 0;
    int64_t batch = 0, numHeads = 0, numKvHeads = 0, seqQ = 0, seqKv = 0, headDim = 0;
};

std::string ShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// Reads B, N, Nkv, Sq, Skv, D. BNSD: [B, N, S, D]; BSND: [B, S, N, D]; BSH: [B, S, N*D]
// with N from num_heads (and Nkv from num_kv_heads, default N). num_heads / num_kv_heads,
// when non-zero, must agree with 4-D shapes. Returns "" or what is wrong.
std::string ReadDims(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const char *layout,
                     int64_t numHeadsAttr, int64_t numKvHeadsAttr, Dims *d) {
    if (k != v) return "key " + ShapeText(k) + " and value " + ShapeText(v) + " must have the same shape";
    const std::string name = layout != nullptr ? layout : "";
    if (numHeadsAttr < 0 || numKvHeadsAttr < 0) return "num_heads and num_kv_heads must be >= 0";
    if (name == "BNSD" || name == "BSND") {
        if (q.GetDimNum() != 4 || k.GetDimNum() != 4) {
            return "input_layout " + name + " needs 4-D query and key, got " + ShapeText(q) + " and " + ShapeText(k);
        }
        const bool bnsd = name == "BNSD";
        d->layout = bnsd ? FA_LAYOUT_BNSD : FA_LAYOUT_BSND;
        d->batch = q.GetDim(0);
        d->numHeads = q.GetDim(bnsd ? 1 : 2);
        d->seqQ = q.GetDim(bnsd ? 2 : 1);
        d->headDim = q.GetDim(3);
        d->numKvHeads = k.GetDim(bnsd ? 1 : 2);
        d->seqKv = k.GetDim(bnsd ? 2 : 1);
        if (k.GetDim(3) != d->headDim) return "query and key head_dim differ: " + ShapeText(q) + " vs " + ShapeText(k);
        if (numHeadsAttr != 0 && numHeadsAttr != d->numHeads) {
            return "num_heads=" + std::to_string(numHeadsAttr) + " but query " + ShapeText(q) + " has " +
                   std::to_string(d->numHeads) + " heads";
        }
        if (numKvHeadsAttr != 0 && numKvHeadsAttr != d->numKvHeads) {
            return "num_kv_heads=" + std::to_string(numKvHeadsAttr) + " but key " + ShapeText(k) + " has " +
                   std::to_string(d->numKvHeads) + " heads";
        }
    } else if (name == "BSH") {
        if (q.GetDimNum() != 3 || k.GetDimNum() != 3) {
            return "input_layout BSH needs 3-D query and key, got " + ShapeText(q) + " and " + ShapeText(k);
        }
        if (numHeadsAttr <= 0) return "input_layout BSH needs num_heads > 0";
        d->layout = FA_LAYOUT_BSH;
        d->batch = q.GetDim(0);
        d->seqQ = q.GetDim(1);
        d->numHeads = numHeadsAttr;
        d->numKvHeads = numKvHeadsAttr != 0 ? numKvHeadsAttr : numHeadsAttr;
        if (q.GetDim(2) % d->numHeads != 0) {
            return "query hidden size " + std::to_string(q.GetDim(2)) + " is not a multiple of num_heads=" +
                   std::to_string(d->numHeads);
        }
        d->headDim = q.GetDim(2) / d->numHeads;
        d->seqKv = k.GetDim(1);
        if (k.GetDim(2) != d->numKvHeads * d->headDim) {
            return "key hidden size " + std::to_string(k.GetDim(2)) + " != num_kv_heads * head_dim = " +
                   std::to_string(d->numKvHeads) + " * " + std::to_string(d->headDim);
        }
    } else {
        return "input_layout must be BNSD, BSND or BSH, got '" + name + "'";
    }
    if (k.GetDim(0) != d->batch) return "query and key batch differ: " + ShapeText(q) + " vs " + ShapeText(k);
    if (d->batch < 1 || d->numHeads < 1 || d->numKvHeads < 1 || d->seqQ < 1 || d->seqKv < 1 || d->headDim < 1) {
        return "every size must be >= 1: query " + ShapeText(q) + ", key " + ShapeText(k);
    }
    return "";
}

// The attrs every stage reads; attrs a stage does not need are still validated here.
std::string ReadDimsFromAttrs(const gert::RuntimeAttrs *attrs, const gert::Shape &q, const gert::Shape &k,
                              const gert::Shape &v, Dims *d) {
    if (attrs == nullptr) return "no attrs";
    const char *layout = attrs->GetStr(kInputLayout);
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return ReadDims(q, k, v, layout, *numHeads, *numKvHeads, d);
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
    const bool bf16 = dtype == ge::DT_BF16;
    const bool fp32 = dtype == ge::DT_FLOAT;

    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    fa_policy::ChipLimits chip;
    chip.socName = fa_host::SocText(platform.GetSocVersion());
    chip.socVersion = static_cast<uint32_t>(platform.GetSocVersion());
    fa_host::ReadChipBuffers(platform, &chip);

    fa_policy::Problem problem;
    problem.batch = static_cast<uint64_t>(d.batch);
    problem.numHeads = static_cast<uint64_t>(d.numHeads);
    problem.numKvHeads = static_cast<uint64_t>(d.numKvHeads);
    problem.seqQ = static_cast<uint64_t>(d.seqQ);
    problem.seqKv = static_cast<uint64_t>(d.seqKv);
    problem.headDim = static_cast<uint64_t>(d.headDim);
    problem.dtypeBytes = fp32 ? 4 : 2;  // float32; float16 / bfloat16
    problem.bf16 = bf16;
    problem.layout = d.layout;
    problem.causal = *causal;
    problem.userBlockM = static_cast<uint32_t>(*blockM);
    problem.userBlockN = static_cast<uint32_t>(*blockN);
    fa_policy::Plan plan;
    if (!fa_policy::ComputePlan(problem, chip, &plan, &error)) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }

    FlashAttentionTilingData *td = context->GetTilingData<FlashAttentionTilingData>();
    if (td == nullptr) {
        FA_LOGE(context, "tiling buffer smaller than FlashAttentionTilingData (%zu B)", sizeof(FlashAttentionTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = FlashAttentionTilingData{};
    td->batch = static_cast<uint32_t>(d.batch);
    td->numHeads = static_cast<uint32_t>(d.numHeads);
    td->numKvHeads = static_cast<uint32_t>(d.numKvHeads);
    td->groupSize = static_cast<uint32_t>(d.numHeads / d.numKvHeads);
    td->seqQ = static_cast<uint32_t>(d.seqQ);
    td->seqKv = static_cast<uint32_t>(d.seqKv);
    td->headDim = static_cast<uint32_t>(d.headDim);
    td->layout = d.layout;
    td->causal = *causal ? 1 : 0;
    td->scaleValue = *scale;
    td->blockM = plan.blockM;
    td->blockN = plan.blockN;
    td->subBlockM = plan.subBlockM;
    td->numQBlocks = plan.numQBlocks;
    td->numKvBlocks = plan.numKvBlocks;
    td->qZigzag = plan.qZigzag;
    td->usedCoreNum = plan.usedCoreNum;
    td->totalItems = static_cast<uint32_t>(plan.totalItems);
    for (size_t i = 0; i < plan.coreItemStart.size(); ++i) td->coreItemStart[i] = plan.coreItemStart[i];
    td->wsScoreOffset = plan.wsScoreOffset;
    td->wsProbOffset = plan.wsProbOffset;
    td->wsPvOffset = plan.wsPvOffset;
    td->wsBytesPerAiv = plan.wsBytesPerAiv;
    td->mmUbBytes = static_cast<uint32_t>(plan.mmUbBytes);

    const matmul_tiling::DataType mmType = fp32   ? matmul_tiling::DataType::DT_FLOAT
                                           : bf16 ? matmul_tiling::DataType::DT_BF16
                                                  : matmul_tiling::DataType::DT_FLOAT16;
    const int32_t m = static_cast<int32_t>(plan.subBlockM), n = static_cast<int32_t>(plan.blockN);
    const int32_t hd = static_cast<int32_t>(d.headDim);
    // Per vector unit's item: S = Q.K^T ([m, hd] x [n, hd]^T) and P.V ([m, n] x [n, hd]), C fp32. MIX path:
    // A and C in GM (the workspace), each matmul a quarter of L1 (an AIC serves 2 AIVs x 2 matmuls).
    // Coupled path: C in UB, A too for P.V, each matmul half of L1 and the UB the kernel gives it.
    const uint32_t l1Share = plan.coupled ? 2 : 4;
    const int32_t ubBytes = plan.coupled ? static_cast<int32_t>(plan.mmUbBytes) : -1;
    const fa_host::CubeSpec qk{m, n, hd, false, true, false, plan.coupled, l1Share, ubBytes};
    const fa_host::CubeSpec pv{m, hd, n, false, false, plan.coupled, plan.coupled, l1Share, ubBytes};
    if (!fa_host::FillCubeTiling(platform, mmType, qk, chip.l1Bytes, &td->qkTiling) ||
        !fa_host::FillCubeTiling(platform, mmType, pv, chip.l1Bytes, &td->pvTiling)) {
        FA_LOGE(context, "matmul tiling failed for block_m=%u, block_n=%u, head_dim=%d on %s", plan.blockM,
                plan.blockN, hd, chip.socName.c_str());
        return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(plan.usedCoreNum);  // MIX 1:2: one block = 1 AIC + 2 AIV; coupled: one AI Core
    context->SetTilingKey(plan.tilingKey);
    size_t *workspaces = context->GetWorkspaceSizes(1);
    if (workspaces == nullptr) {
        FA_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    workspaces[0] = platform.GetLibApiWorkSpaceSize() + plan.userWorkspaceBytes;
    return ge::GRAPH_SUCCESS;
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
