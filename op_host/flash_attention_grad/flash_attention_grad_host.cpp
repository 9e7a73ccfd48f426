// flash_attention_grad_host.cpp -- see flash_attention_grad_host.h.
#include "flash_attention_grad_host.h"

#include "flash_attention_grad_tiling.h"
#include "flash_attention_tiling.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "tiling_sizes.h"
#include "toolchain/slog.h"

static_assert(fa_policy::kGradKeyBf16 == FAG_KEY_BF16 && fa_policy::kGradKeyCausal == FAG_KEY_CAUSAL &&
                  fa_policy::kGradKeyLayoutShift == FAG_KEY_LAYOUT_SHIFT &&
                  fa_policy::kGradKeyDeterministic == FAG_KEY_DETERMINISTIC,
              "the policy's tiling-key bits must be the kernel's");
static_assert(fa_policy::kGradMaxAiv == FAG_MAX_AIV, "unit ranges must fit unitStart");

namespace fa_host {
namespace {
constexpr uint32_t kBatchScheduleMode = 1;  // TilingContext::SetScheduleMode: all blocks resident at once
}  // namespace

std::string GradShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

std::string ReadGradDims(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const gert::Shape &out,
                         const gert::Shape &dout, const gert::Shape &lse, const char *layoutAttr, int64_t numHeadsAttr,
                         int64_t numKvHeadsAttr, bool allowTnd, GradDims *d) {
    const std::string name = layoutAttr != nullptr ? layoutAttr : "";
    const bool tnd = allowTnd && name == "TND";
    const size_t rank = name == "BSH" || tnd ? 3 : 4;
    if (name != "BNSD" && name != "BSND" && name != "BSH" && !tnd) {
        return "input_layout must be BNSD, BSND, BSH" + std::string(allowTnd ? " or TND" : "") + ", got '" + name + "'";
    }
    if (q.GetDimNum() != rank || k.GetDimNum() != rank) {
        return "input_layout " + name + " needs rank-" + std::to_string(rank) + " query and key, got " +
               GradShapeText(q) + " and " + GradShapeText(k);
    }
    if (k != v) return "key " + GradShapeText(k) + " and value " + GradShapeText(v) + " must have the same shape";
    if (out != q || dout != q) {
        return "attention_out " + GradShapeText(out) + " and dout " + GradShapeText(dout) +
               " must have the shape of query " + GradShapeText(q);
    }
    if (numHeadsAttr < 0 || numKvHeadsAttr < 0) return "num_heads and num_kv_heads must be >= 0";
    if (tnd) {
        d->layout = FA_LAYOUT_BSND;
        d->varlen = true;
        d->tokensQ = q.GetDim(0);
        d->tokensKv = k.GetDim(0);
        d->numHeads = q.GetDim(1);
        d->numKvHeads = k.GetDim(1);
        d->headDim = q.GetDim(2);
        if (k.GetDim(2) != d->headDim) {
            return "query and key head_dim differ: " + GradShapeText(q) + " vs " + GradShapeText(k);
        }
        if ((numHeadsAttr != 0 && numHeadsAttr != d->numHeads) ||
            (numKvHeadsAttr != 0 && numKvHeadsAttr != d->numKvHeads)) {
            return "num_heads / num_kv_heads disagree with query " + GradShapeText(q) + " and key " + GradShapeText(k);
        }
        if (d->tokensQ < 1 || d->tokensKv < 1 || d->numHeads < 1 || d->numKvHeads < 1 || d->headDim < 1) {
            return "every size must be >= 1: query " + GradShapeText(q) + ", key " + GradShapeText(k);
        }
        if (lse.GetDimNum() != 2 || lse.GetDim(0) != d->numHeads || lse.GetDim(1) != d->tokensQ) {
            return "softmax_lse " + GradShapeText(lse) + " must be [N, Tq] = [" + std::to_string(d->numHeads) + ", " +
                   std::to_string(d->tokensQ) + "] for input_layout TND";
        }
        return "";
    }
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
        if (k.GetDim(3) != d->headDim) {
            return "query and key head_dim differ: " + GradShapeText(q) + " vs " + GradShapeText(k);
        }
        if ((numHeadsAttr != 0 && numHeadsAttr != d->numHeads) ||
            (numKvHeadsAttr != 0 && numKvHeadsAttr != d->numKvHeads)) {
            return "num_heads / num_kv_heads disagree with query " + GradShapeText(q) + " and key " + GradShapeText(k);
        }
    }
    if (k.GetDim(0) != d->batch) return "query and key batch differ: " + GradShapeText(q) + " vs " + GradShapeText(k);
    if (d->batch < 1 || d->numHeads < 1 || d->numKvHeads < 1 || d->seqQ < 1 || d->seqKv < 1 || d->headDim < 1) {
        return "every size must be >= 1: query " + GradShapeText(q) + ", key " + GradShapeText(k);
    }
    if (lse.GetDimNum() != 3 || lse.GetDim(0) != d->batch || lse.GetDim(1) != d->numHeads || lse.GetDim(2) != d->seqQ) {
        return "softmax_lse " + GradShapeText(lse) + " must be [B, N, Sq] = [" + std::to_string(d->batch) + ", " +
               std::to_string(d->numHeads) + ", " + std::to_string(d->seqQ) + "]";
    }
    return "";
}

ge::graphStatus InferGradShapes(gert::InferShapeContext *context, const std::string &error) {
    gert::Shape *grads[3];
    for (size_t i = 0; i < 3; ++i) grads[i] = context->GetOutputShape(i);
    if (!error.empty() || grads[0] == nullptr || grads[1] == nullptr || grads[2] == nullptr) {
        dlog_error(OP, "[%s] InferShape: %s", context->GetNodeName(),
                   error.empty() ? "missing output shape" : error.c_str());
        return ge::GRAPH_FAILED;
    }
    for (size_t i = 0; i < 3; ++i) *grads[i] = *context->GetInputShape(i);  // a gradient is shaped as its input
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferGradDataTypes(gert::InferDataTypeContext *context) {
    for (size_t i = 0; i < 3; ++i) context->SetOutputDataType(i, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TileGrad(gert::TilingContext *context, const GradDims &d, fa_policy::Problem problem,
                         bool deterministic, float scale, const GradDropout &dropout, std::string *error) {
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    fa_policy::ChipLimits chip;
    chip.socName = SocText(platform.GetSocVersion());
    ReadChipBuffers(platform, &chip);

    fa_policy::GradPlan plan;
    if (!fa_policy::ComputeGradPlan(problem, deterministic, chip, &plan, error)) return ge::GRAPH_FAILED;

    FlashAttentionGradTilingData *td = context->GetTilingData<FlashAttentionGradTilingData>();
    if (td == nullptr) {
        *error = "tiling buffer smaller than FlashAttentionGradTilingData (" +
                 std::to_string(sizeof(FlashAttentionGradTilingData)) + " B)";
        return ge::GRAPH_FAILED;
    }
    int64_t pre = 0, next = 0;
    fa_policy::GradBand(problem, &pre, &next);
    *td = FlashAttentionGradTilingData{};
    fa_host::FillHeadSizes(problem, td);
    td->seqKv = static_cast<uint32_t>(problem.seqKv);
    td->layout = d.layout;
    td->varlen = d.varlen ? 1 : 0;
    td->deterministic = deterministic ? 1 : 0;
    td->totalQ = static_cast<uint64_t>(d.tokensQ);
    td->totalKv = static_cast<uint64_t>(d.tokensKv);
    td->preTokens = pre;
    td->nextTokens = next;
    td->scaleValue = scale;
    td->blockM = plan.blockM;
    td->blockN = plan.blockN;
    td->numQBlocks = plan.numQBlocks;
    td->numKvBlocks = plan.numKvBlocks;
    td->rowChunk = plan.rowChunk;
    td->panelRows = plan.panelRows;
    td->aivNum = plan.aivNum;
    td->totalUnits = static_cast<uint32_t>(plan.totalUnits);
    for (size_t i = 0; i < plan.unitStart.size(); ++i) td->unitStart[i] = plan.unitStart[i];
    td->wsDeltaOffset = plan.wsDeltaOffset;
    td->wsNormOffset = plan.wsNormOffset;
    td->wsMaxOffset = plan.wsMaxOffset;
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
    td->hasMask = problem.mask ? 1 : 0;
    td->maskB = static_cast<uint32_t>(problem.maskB);
    td->maskN = static_cast<uint32_t>(problem.maskN);
    td->maskQ = static_cast<uint32_t>(problem.maskQ);
    td->maskRows = plan.maskRows;
    td->wsMaskSummaryOffset = plan.wsMaskSummaryOffset;
    td->dropout = problem.dropout ? 1 : 0;
    td->keepThreshold = fa_policy::DropoutThreshold(dropout.keepProb);
    td->invKeepProb = 1.0f / dropout.keepProb;
    td->philoxLanes = plan.philoxLanes;
    td->seed = dropout.seed;
    td->offset = dropout.offset;

    const matmul_tiling::DataType mmType = fa_host::OperandType(problem.bf16);
    const int32_t m = static_cast<int32_t>(plan.panelRows), n = static_cast<int32_t>(plan.blockN);
    const int32_t hd = static_cast<int32_t>(problem.headDim);
    // Per AIV panel of m = panelRows rows, A and C in GM, each Matmul object an eighth of L1 (an
    // AIC serves 2 AIVs x 4 objects): S and dP ([m, hd] x [n, hd]^T), dV and dK (A stored [m, n]:
    // [n, m]^T x [m, hd]) and dQ ([m, n] x [n, hd]).
    const CubeSpec score{m, n, hd, false, true, false, false, 8, -1};
    const CubeSpec kvGrad{n, hd, m, true, false, false, false, 8, -1};
    const CubeSpec dq{m, hd, n, false, false, false, false, 8, -1};
    if (!FillCubeTiling(platform, mmType, score, chip.l1Bytes, &td->scoreTiling) ||
        !FillCubeTiling(platform, mmType, kvGrad, chip.l1Bytes, &td->kvGradTiling) ||
        !FillCubeTiling(platform, mmType, dq, chip.l1Bytes, &td->dqTiling)) {
        *error = "matmul tiling failed for block_m=" + std::to_string(plan.blockM) +
                 ", block_n=" + std::to_string(plan.blockN) + ", head_dim=" + std::to_string(hd) + " on " +
                 chip.socName;
        return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(plan.blockDim);  // MIX 1:2: one block = 1 AIC + 2 AIV
    // Batch mode: every block resident at once, as the kernel's SyncAll barriers need (asc-devkit
    // SyncAll.md: without it, concurrent ops that sync across cores can deadlock).
    if (context->SetScheduleMode(kBatchScheduleMode) != ge::GRAPH_SUCCESS) {
        *error = "SetScheduleMode(" + std::to_string(kBatchScheduleMode) + ") failed";
        return ge::GRAPH_FAILED;
    }
    context->SetTilingKey(plan.tilingKey);
    if (!fa_host::SetMatmulWorkspace(context, platform, plan.userWorkspaceBytes)) {
        *error = "no workspace slot";
        return ge::GRAPH_FAILED;
    }
    return ge::GRAPH_SUCCESS;
}

}  // namespace fa_host
