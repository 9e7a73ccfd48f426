#pragma once
// What the forward ops' host sides (op_host/flash_attention/flash_attention.cpp for FlashAttention,
// op_host/flash_attention/flash_attention_v2.cpp for FlashAttentionV2, flash_attention_v3.cpp for
// FlashAttentionV3) share: the problem read from the shapes and the layout, the tiling written
// from the policy's plan (FlashAttentionTilingData, the matmul tilings, block dim, tiling key,
// workspace), and FlashAttentionV2's interface for the ops that extend it by trailing attrs.
#include <cstdint>
#include <string>

#include "flash_attention_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "block_cost.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "tiling_policy.h"
#include "tiling_sizes.h"
#include "toolchain/slog.h"

#define FA_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace fa_host {

constexpr uint32_t kBatchScheduleMode = 1;  // TilingContext::SetScheduleMode: all blocks resident at once

// Problem sizes read from the shapes and the layout.
struct Dims {
    uint32_t layout = 0;
    int64_t batch = 0, numHeads = 0, numKvHeads = 0, seqQ = 0, seqKv = 0, headDim = 0;
};

inline std::string ShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// Reads B, N, Nkv, Sq, Skv, D. BNSD: [B, N, S, D]; BSND: [B, S, N, D]; BSH: [B, S, N*D]
// with N from num_heads (and Nkv from num_kv_heads, default N); TND (only when allowTnd, the
// V2 op): [T, N, D] with B = 1 and Sq, Skv the token counts Tq, Tkv until the caller reads
// the sequences. num_heads / num_kv_heads, when non-zero, must agree with the shapes.
// Returns "" or what is wrong.
inline std::string ReadDims(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const char *layout,
                            int64_t numHeadsAttr, int64_t numKvHeadsAttr, bool allowTnd, Dims *d) {
    if (k != v) return "key " + ShapeText(k) + " and value " + ShapeText(v) + " must have the same shape";
    const std::string name = layout != nullptr ? layout : "";
    if (numHeadsAttr < 0 || numKvHeadsAttr < 0) return "num_heads and num_kv_heads must be >= 0";
    if (name == "TND" && allowTnd) {
        if (q.GetDimNum() != 3 || k.GetDimNum() != 3) {
            return "input_layout TND needs 3-D query and key, got " + ShapeText(q) + " and " + ShapeText(k);
        }
        d->layout = FA_LAYOUT_TND;
        d->batch = 1;
        d->seqQ = q.GetDim(0);
        d->numHeads = q.GetDim(1);
        d->headDim = q.GetDim(2);
        d->seqKv = k.GetDim(0);
        d->numKvHeads = k.GetDim(1);
        if (k.GetDim(2) != d->headDim) return "query and key head_dim differ: " + ShapeText(q) + " vs " + ShapeText(k);
        if ((numHeadsAttr != 0 && numHeadsAttr != d->numHeads) ||
            (numKvHeadsAttr != 0 && numKvHeadsAttr != d->numKvHeads)) {
            return "num_heads / num_kv_heads (" + std::to_string(numHeadsAttr) + ", " + std::to_string(numKvHeadsAttr) +
                   ") do not match query " + ShapeText(q) + " and key " + ShapeText(k);
        }
        if (d->numHeads < 1 || d->numKvHeads < 1 || d->seqQ < 1 || d->seqKv < 1 || d->headDim < 1) {
            return "every size must be >= 1: query " + ShapeText(q) + ", key " + ShapeText(k);
        }
        return "";
    }
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
        return std::string(allowTnd ? "input_layout must be BNSD, BSND, BSH or TND" : "input_layout must be BNSD, BSND or BSH") +
               ", got '" + name + "'";
    }
    if (k.GetDim(0) != d->batch) return "query and key batch differ: " + ShapeText(q) + " vs " + ShapeText(k);
    if (d->batch < 1 || d->numHeads < 1 || d->numKvHeads < 1 || d->seqQ < 1 || d->seqKv < 1 || d->headDim < 1) {
        return "every size must be >= 1: query " + ShapeText(q) + ", key " + ShapeText(k);
    }
    return "";
}

// Where a forward op keeps, in its OpDef attr order, the attrs every forward reads.
struct ForwardAttrIndex {
    size_t inputLayout, numHeads, numKvHeads, blockM, blockN;
};

// Dims from the q/k/v shapes and the attrs input_layout, num_heads, num_kv_heads (allowTnd: the
// V2 op). Returns "" or what is wrong.
inline std::string ReadDimsFromAttrs(const gert::RuntimeAttrs *attrs, const ForwardAttrIndex &index,
                                     const gert::Shape &q, const gert::Shape &k, const gert::Shape &v,
                                     bool allowTnd, Dims *d) {
    if (attrs == nullptr) return "no attrs";
    const char *layout = attrs->GetStr(index.inputLayout);
    const int64_t *numHeads = attrs->GetInt(index.numHeads);
    const int64_t *numKvHeads = attrs->GetInt(index.numKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return ReadDims(q, k, v, layout, *numHeads, *numKvHeads, allowTnd, d);
}

// The start of every forward InferShape: the dims from the query/key/value shapes (inputs 0, 1, 2)
// and the attrs, attention_out (output 0) shaped like query, and softmax_lse (output 1) in *lse
// for the caller to shape. GRAPH_FAILED, logged, when a shape is missing or the dims are wrong.
inline ge::graphStatus InferForwardShapes(gert::InferShapeContext *context, const ForwardAttrIndex &index,
                                          bool allowTnd, gert::Shape **lse, Dims *d) {
    const gert::Shape *q = context->GetInputShape(0);
    const gert::Shape *k = context->GetInputShape(1);
    const gert::Shape *v = context->GetInputShape(2);
    gert::Shape *out = context->GetOutputShape(0);
    *lse = context->GetOutputShape(1);
    if (q == nullptr || k == nullptr || v == nullptr || out == nullptr || *lse == nullptr) {
        FA_LOGE(context, "InferShape: missing input or output shape");
        return ge::GRAPH_FAILED;
    }
    const std::string error = ReadDimsFromAttrs(context->GetAttrs(), index, *q, *k, *v, allowTnd, d);
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *out = *q;  // attention_out: like query
    return ge::GRAPH_SUCCESS;
}

// The start of every forward TilingFunc: the dims of query/key/value (inputs 0, 1, 2) and the
// problem's sizes, dtype, layout and the user's block_m / block_n (0 = auto). The caller adds
// what its op has beyond that (causal or a band, sequences, mask, dropout). Returns "" or what is
// wrong; `attrs` is non-null when it returns "".
inline std::string ReadForwardProblem(gert::TilingContext *context, const ForwardAttrIndex &index, bool allowTnd,
                                      const gert::RuntimeAttrs **attrs, Dims *d, fa_policy::Problem *problem) {
    const gert::StorageShape *q = context->GetInputShape(0);
    const gert::StorageShape *k = context->GetInputShape(1);
    const gert::StorageShape *v = context->GetInputShape(2);
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(0);
    *attrs = context->GetAttrs();
    if (q == nullptr || k == nullptr || v == nullptr || qDesc == nullptr || *attrs == nullptr) {
        return "TilingFunc: missing input shape, desc or attrs";
    }
    std::string error = ReadDimsFromAttrs(*attrs, index, q->GetOriginShape(), k->GetOriginShape(),
                                          v->GetOriginShape(), allowTnd, d);
    if (!error.empty()) return error;
    const int64_t *blockM = (*attrs)->GetInt(index.blockM);
    const int64_t *blockN = (*attrs)->GetInt(index.blockN);
    if (blockM == nullptr || blockN == nullptr) return "attrs block_m / block_n missing";
    if (*blockM < 0 || *blockM > UINT32_MAX || *blockN < 0 || *blockN > UINT32_MAX) {
        return "block_m and block_n must be >= 0 (0 = auto)";
    }
    const ge::DataType dtype = qDesc->GetDataType();
    problem->batch = static_cast<uint64_t>(d->batch);
    problem->numHeads = static_cast<uint64_t>(d->numHeads);
    problem->numKvHeads = static_cast<uint64_t>(d->numKvHeads);
    problem->seqQ = static_cast<uint64_t>(d->seqQ);
    problem->seqKv = static_cast<uint64_t>(d->seqKv);
    problem->headDim = static_cast<uint64_t>(d->headDim);
    problem->dtypeBytes = dtype == ge::DT_FLOAT ? 4 : 2;  // float32; float16 / bfloat16
    problem->bf16 = dtype == ge::DT_BF16;
    problem->layout = d->layout;
    problem->userBlockM = static_cast<uint32_t>(*blockM);
    problem->userBlockN = static_cast<uint32_t>(*blockN);
    return "";
}

// InferShape of a forward op with the V1 outputs (FlashAttention, FlashAttentionInt8):
// attention_out like query, softmax_lse [B, N, Sq] for every layout (no TND).
inline ge::graphStatus InferForwardShapesV1(gert::InferShapeContext *context, const ForwardAttrIndex &index) {
    gert::Shape *lse = nullptr;
    Dims d;
    if (InferForwardShapes(context, index, false, &lse, &d) != ge::GRAPH_SUCCESS) {
        return ge::GRAPH_FAILED;
    }
    lse->SetDimNum(0);  // softmax_lse: [B, N, Sq] fp32, for every layout
    lse->AppendDim(d.batch).AppendDim(d.numHeads).AppendDim(d.seqQ);
    return ge::GRAPH_SUCCESS;
}

// ReadForwardProblem (no TND) with the V1 attrs scale_value and causal at scaleIndex / causalIndex:
// *scale and problem->causal set when it returns "".
inline std::string ReadForwardProblemV1(gert::TilingContext *context, const ForwardAttrIndex &index, size_t scaleIndex,
                                        size_t causalIndex, Dims *d, fa_policy::Problem *problem, float *scale) {
    const gert::RuntimeAttrs *attrs = nullptr;
    std::string error = ReadForwardProblem(context, index, false, &attrs, d, problem);
    if (!error.empty()) return error;
    const float *scaleAttr = attrs->GetFloat(scaleIndex);
    const bool *causal = attrs->GetBool(causalIndex);
    if (scaleAttr == nullptr || causal == nullptr) return "attrs scale_value / causal missing";
    *scale = *scaleAttr;
    problem->causal = *causal;
    return "";
}

// Keeps B resident in L1 for a MIX-path job whose tiling MatmulApiTiling filled within `share`
// bytes: the L1 steps and depths of fa_policy::PlanL1 for its base tiles (B's K tiles in one
// cached buffer, iterated ORDER_M), written over the tiling's as production tilings adjust
// TCubeTiling after GetTiling (docs/cann-facts.md, "Matmul L1 cache"). Left as filled when B
// does not fit beside an A tile. spanN: B's buffer may hold several N base blocks (stepN), so
// that A is loaded once per stepN of them (fa_policy::PlanL1). Returns the L1 bytes the tiling's
// buffers take.
inline uint64_t KeepBResident(uint32_t dtypeBytes, uint64_t share, TCubeTiling *t, bool spanN = false) {
    const double bytes = dtypeBytes;
    const uint64_t kTiles = (static_cast<uint64_t>(t->singleCoreK) + t->baseK - 1) / t->baseK;
    const uint64_t nBlocks = spanN ? (static_cast<uint64_t>(t->singleCoreN) + t->baseN - 1) / t->baseN : 1;
    const fa_policy::L1Plan plan = fa_policy::PlanL1(kTiles, t->baseM * t->baseK * bytes, t->baseK * t->baseN * bytes,
                                                     static_cast<double>(share), nBlocks);
    if (plan.residentB && t->stepM == 1 && t->stepN == 1) {
        t->stepKa = static_cast<int32_t>(plan.stepKa);
        t->depthA1 = static_cast<int32_t>(plan.depthA1);
        t->stepKb = static_cast<int32_t>(plan.stepKb);
        t->depthB1 = static_cast<int32_t>(plan.depthB1);
        t->stepN = static_cast<int32_t>(plan.stepN);
        t->iterateOrder = 0;  // ORDER_M: M blocks outer, each one's stepN N blocks inner (one A load)
        t->shareL1Size = static_cast<int32_t>(plan.bytes);
    }
    return static_cast<uint64_t>(t->depthA1) * t->baseM * t->baseK * dtypeBytes +
           static_cast<uint64_t>(t->depthB1) * t->baseK * t->baseN * dtypeBytes;
}

// The forward's tiling for `problem` (its dtype fields, B, N, Nkv, Sq, Skv, D, layout, band
// and sequences filled by the caller): runs the policy for the chip, then fills
// FlashAttentionTilingData (scale and the V1 causal attr as given), the matmul tilings, block
// dim, tiling key and workspace. GRAPH_FAILED (logged) when the policy or the matmul tiling refuses.
inline ge::graphStatus WriteForwardTiling(gert::TilingContext *context, fa_policy::Problem &problem, float scale,
                                          bool causalAttr) {
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    fa_policy::ChipLimits chip;
    chip.socName = SocText(platform.GetSocVersion());
    chip.socVersion = static_cast<uint32_t>(platform.GetSocVersion());
    ReadChipBuffers(platform, &chip);
    fa_policy::Plan plan;
    std::string error;
    if (!fa_policy::ComputePlan(problem, chip, &plan, &error)) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    const bool fp32 = problem.dtypeBytes == 4;
    const bool bf16 = problem.bf16;
    const fa_policy::Band band = fa_policy::EffectiveBand(problem);
    const bool varlen = problem.layout == FA_LAYOUT_TND;
    const uint64_t tokensQ = varlen ? problem.tokensQ : problem.batch * problem.seqQ;
    const uint64_t tokensKv = varlen ? problem.tokensKv : problem.batch * problem.seqKv;
    if (tokensQ > UINT32_MAX || tokensKv > UINT32_MAX) {
        FA_LOGE(context, "batch * seq_q = %llu query rows and batch * seq_kv = %llu key rows must each be < 2^32",
                static_cast<unsigned long long>(tokensQ), static_cast<unsigned long long>(tokensKv));
        return ge::GRAPH_FAILED;
    }

    FlashAttentionTilingData *td = context->GetTilingData<FlashAttentionTilingData>();
    if (td == nullptr) {
        FA_LOGE(context, "tiling buffer smaller than FlashAttentionTilingData (%zu B)", sizeof(FlashAttentionTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = FlashAttentionTilingData{};
    FillHeadSizes(problem, td);
    td->seqKv = static_cast<uint32_t>(problem.seqKv);
    td->layout = problem.layout;
    td->causal = causalAttr ? 1 : 0;
    td->scaleValue = scale;
    td->preTokens = band.pre;
    td->nextTokens = band.next;
    td->varlen = varlen ? 1 : 0;
    td->tokensQ = static_cast<uint32_t>(tokensQ);
    td->tokensKv = static_cast<uint32_t>(tokensKv);
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
    td->wsProbOffset = plan.wsProbOffset;  // == wsScoreOffset: P lives in S's rows
    td->wsPvOffset = plan.wsPvOffset;
    td->wsBytesPerCore = plan.wsBytesPerCore;
    td->soloRows = plan.soloRows;
    td->chunkRows = plan.chunkRows;
    td->mmUbBytes = static_cast<uint32_t>(plan.mmUbBytes);
    td->hasMask = problem.mask ? 1 : 0;
    td->maskB = static_cast<uint32_t>(problem.maskB);
    td->maskN = static_cast<uint32_t>(problem.maskN);
    td->maskQ = static_cast<uint32_t>(problem.maskQ);
    td->maskRows = plan.maskRows;
    td->wsMaskSummaryOffset = plan.wsMaskSummaryOffset;
    td->philoxLanes = plan.philoxLanes;
    td->hasDropoutMask = problem.dropoutMaskOut ? 1 : 0;
    td->invKeepProb = 1.0f;
    td->innerPrecise = problem.narrowScores ? 1 : 0;
    td->reservedTail = 0;
    td->hasAlibi = problem.alibi ? 1 : 0;
    td->hasSinks = problem.sinks ? 1 : 0;
    td->hasBias = problem.bias ? 1 : 0;
    td->biasB = static_cast<uint32_t>(problem.biasB);
    td->biasN = static_cast<uint32_t>(problem.biasN);
    td->biasQ = static_cast<uint32_t>(problem.biasQ);
    td->biasRows = problem.bias ? fa_policy::kBiasRows : 0;
    td->reservedMods = 0;

    const matmul_tiling::DataType mmType = OperandType(bf16, fp32);
    const int32_t m = static_cast<int32_t>(plan.blockM), n = static_cast<int32_t>(plan.blockN);
    const int32_t hd = static_cast<int32_t>(problem.headDim);
    // Per item, all its blockM rows: S = Q.K^T ([m, hd] x [n, hd]^T) and P.V ([m, n] x [n, hd]), C fp32.
    // MIX path: A and C in GM (the group's workspace; sub-block 0 issues both matmuls for the
    // pair); QK in half of L1, P.V in what QK's buffers leave, each keeping its B (K, V) resident
    // when it fits, QK's over as many N blocks as fit unless that costs P.V its resident V
    // (fa_policy::PlanStepL1 budgets the same). Coupled path: each matmul half of
    // L1, C in UB, A too for P.V, and the UB the kernel gives it.
    const int32_t ubBytes = plan.coupled ? static_cast<int32_t>(plan.mmUbBytes) : -1;
    CubeSpec qk{m, n, hd, false, true, false, plan.coupled, 1, ubBytes};
    qk.cInputType = problem.narrowScores;  // named, not positional: CubeSpec's optional fields
    const CubeSpec pv{m, hd, n, false, false, plan.coupled, plan.coupled, 1, ubBytes};
    // spanN: QK's B over several N blocks (the first try), or one (when that left P.V's V not resident).
    auto fillBoth = [&](bool spanN) {
        bool ok = FillCubeTiling(platform, mmType, qk, chip.l1Bytes / 2, &td->qkTiling);
        const uint64_t qkL1 = !ok ? 0 : plan.coupled ? chip.l1Bytes / 2
                                                     : KeepBResident(problem.dtypeBytes, chip.l1Bytes / 2, &td->qkTiling, spanN);
        const uint64_t pvShare = chip.l1Bytes - qkL1;
        ok = ok && FillCubeTiling(platform, mmType, pv, pvShare, &td->pvTiling);
        if (ok && !plan.coupled) KeepBResident(problem.dtypeBytes, pvShare, &td->pvTiling);
        return ok;
    };
    bool filled = fillBoth(true);
    const TCubeTiling &pvt = td->pvTiling;
    if (filled && td->qkTiling.stepN > 1 && pvt.depthB1 < pvt.stepN * ((pvt.singleCoreK + pvt.baseK - 1) / pvt.baseK)) {
        filled = fillBoth(false);
    }
    if (!filled) {
        FA_LOGE(context, "matmul tiling failed for block_m=%u, block_n=%u, head_dim=%d on %s", plan.blockM,
                plan.blockN, hd, chip.socName.c_str());
        return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(plan.usedCoreNum);  // MIX 1:2: one block = 1 AIC + 2 AIV; coupled: one AI Core
    if (problem.mask) {
        // The mask's block summary pre-pass ends with SyncAll: every block resident at once
        // (docs/cann-facts.md, SyncAll).
        if (context->SetScheduleMode(kBatchScheduleMode) != ge::GRAPH_SUCCESS) {
            FA_LOGE(context, "SetScheduleMode(%u) failed", kBatchScheduleMode);
            return ge::GRAPH_FAILED;
        }
    }
    context->SetTilingKey(plan.tilingKey);
    if (!SetMatmulWorkspace(context, platform, plan.userWorkspaceBytes)) {
        FA_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    return ge::GRAPH_SUCCESS;
}

// FlashAttentionV2's interface and functions (flash_attention_v2.cpp), for the ops that are V2
// plus attrs after V2's last (FlashAttentionV3: softcap): such an op's OpDef calls
// DefineFlashAttentionV2, adds its attrs, then RegisterFlashAttentionV2 with its TilingFunc,
// which validates its attrs, calls TileFlashAttentionV2 and sets its fields of the tiling data.
// V2's InferShape / InferDataType read no attr past block_n, so they serve such ops unchanged.
void DefineFlashAttentionV2(ops::OpDef &def);  // V2's inputs, outputs and attrs, in order
void RegisterFlashAttentionV2(ops::OpDef &def, ge::graphStatus (*tiling)(gert::TilingContext *));
ge::graphStatus TileFlashAttentionV2(gert::TilingContext *context);  // V2's TilingFunc
// V2's tiling with S in the input dtype when narrowScores (FlashAttentionV4 inner_precise 1).
// readMods (FlashAttentionV5): reads the op's own inputs into the problem once its sizes, band
// and sequences are known, before the policy runs; returns "" or what is wrong.
using ProblemReader = std::string (*)(gert::TilingContext *context, const Dims &d, fa_policy::Problem *problem);
ge::graphStatus TileFlashAttentionV2Precision(gert::TilingContext *context, bool narrowScores,
                                              ProblemReader readMods = nullptr);
// V3's tiling (V2's plus its attr softcap at index 11), with S as TileFlashAttentionV2Precision.
ge::graphStatus TileFlashAttentionV3(gert::TilingContext *context, bool narrowScores,
                                     ProblemReader readMods = nullptr);

}  // namespace fa_host
