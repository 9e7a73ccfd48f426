// flash_attention_grad_host.cpp -- see flash_attention_grad_host.h.
#include "flash_attention_grad_host.h"
#include <vector>


#include "flash_attention_grad_tiling.h"
#include "flash_attention_tiling.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "tiling_sizes.h"
#include "toolchain/slog.h"
#include "op_registration.h"

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
    td->dqGroup = plan.dqGroup ? 1 : 0;
    td->wsDqGroupOffset = plan.wsDqGroupOffset;
    td->unitsDealt = plan.unitsDealt ? 1 : 0;
    td->dqGroupBlocks = plan.dqGroupBlocks;
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

std::string ReadGradV2Dims(const gert::RuntimeAttrs *attrs, const gert::Shape *const shapes[kGradV2RequiredInputs],
                           GradDims *d) {
    if (attrs == nullptr) return "no attrs";
    for (size_t i = 0; i < kGradV2RequiredInputs; ++i) {
        if (shapes[i] == nullptr) return "missing input shape";
    }
    const int64_t *numHeads = attrs->GetInt(kGradNumHeads);
    const int64_t *numKvHeads = attrs->GetInt(kGradNumKvHeads);
    if (numHeads == nullptr || numKvHeads == nullptr) return "attrs num_heads / num_kv_heads missing";
    return ReadGradDims(*shapes[kGradQuery], *shapes[kGradKey], *shapes[kGradValue], *shapes[kGradAttentionOut],
                                 *shapes[kGradDout], *shapes[kGradSoftmaxLse], attrs->GetStr(kGradInputLayout), *numHeads,
                                 *numKvHeads, true, d);
}

// The cumulative end offsets of `name` (actual_seq_qlen / kvlen): int64, one per sequence,
// non-decreasing from >= 0 and ending at `tokens`. Fills the lengths; "" or what is wrong.
static std::string ReadSequenceEnds(const gert::Tensor *t, const char *name, int64_t tokens, std::vector<uint64_t> *lens) {
    if (t == nullptr) return std::string("input_layout TND needs ") + name;
    if (t->GetDataType() != ge::DT_INT64) return std::string(name) + " must be int64";
    const gert::Shape &shape = t->GetOriginShape();
    const int64_t count = t->GetShapeSize();
    if (shape.GetDimNum() != 1 || count < 1) {
        return std::string(name) + " must be 1-D with one end offset per sequence, got " + GradShapeText(shape);
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

// The problem from the context: dims, band, varlen lengths, blocks. "" or what is wrong.
std::string ReadGradV2Problem(gert::TilingContext *context, GradDims *d, fa_policy::Problem *p, bool *deterministic,
                              float *scale, GradDropout *dropout) {
    const gert::Shape *shapes[kGradV2RequiredInputs];
    for (size_t i = 0; i < kGradV2RequiredInputs; ++i) {
        const gert::StorageShape *s = context->GetInputShape(i);
        shapes[i] = s != nullptr ? &s->GetOriginShape() : nullptr;
    }
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    std::string error = ReadGradV2Dims(attrs, shapes, d);
    if (!error.empty()) return error;
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kGradQuery);
    const float *scaleValue = attrs->GetFloat(kGradScaleValue);
    const int64_t *pre = attrs->GetInt(kGradPreTokens);
    const int64_t *next = attrs->GetInt(kGradNextTokens);
    const float *keepProb = attrs->GetFloat(kGradKeepProb);
    const bool *det = attrs->GetBool(kGradDeterministic);
    const int64_t *blockM = attrs->GetInt(kGradBlockM);
    const int64_t *blockN = attrs->GetInt(kGradBlockN);
    const int64_t *seed = attrs->GetInt(kGradSeed);
    const int64_t *offset = attrs->GetInt(kGradOffset);
    if (qDesc == nullptr || scaleValue == nullptr || pre == nullptr || next == nullptr || keepProb == nullptr ||
        det == nullptr || blockM == nullptr || blockN == nullptr || seed == nullptr || offset == nullptr) {
        return "query desc or attrs scale_value / pre_tokens / next_tokens / keep_prob / seed / offset / "
               "deterministic / block_m / block_n missing";
    }
    if (*blockM < 0 || *blockM > UINT32_MAX || *blockN < 0 || *blockN > UINT32_MAX) {
        return "block_m and block_n must be >= 0 (0 = auto)";
    }
    // The mask: rank 4 [maskB, maskN, maskQ, Skv] (the policy checks dims 0..2 against B, N, Sq).
    const gert::StorageShape *maskShape = context->GetOptionalInputShape(kGradAttenMask);
    if (maskShape != nullptr) {
        const gert::Shape &m = maskShape->GetOriginShape();
        if (m.GetDimNum() != 4 || (!d->varlen && m.GetDim(3) != d->seqKv)) {
            return "atten_mask must be rank 4 [1 or B, 1 or N, 1 or Sq, Skv] with Skv = " + std::to_string(d->seqKv) +
                   ", got " + GradShapeText(m);
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
    const gert::Tensor *qlen = context->GetOptionalInputTensor(kGradActualSeqQlen);
    const gert::Tensor *kvlen = context->GetOptionalInputTensor(kGradActualSeqKvlen);
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


void DescribeGradV2Inputs(ops::OpDef &def) {
    // Columns: float16 and bfloat16 inputs, each with a uint8 and a bool atten_mask (1 / true =
    // masked out, FlashAttentionScore's convention).
    const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16};
    const std::vector<ge::DataType> masks = {ge::DT_UINT8, ge::DT_UINT8, ge::DT_BOOL, ge::DT_BOOL};
    for (const char *input : {"query", "key", "value", "attention_out", "dout"}) {
        DescribeNd(def.Input(input), ops::REQUIRED, halfTypes);
    }
    DescribeNd(def.Input("softmax_lse"), ops::REQUIRED, std::vector<ge::DataType>(4, ge::DT_FLOAT));
    DescribeNd(def.Input("atten_mask"), ops::OPTIONAL, masks);
    for (const char *lengths : {"actual_seq_qlen", "actual_seq_kvlen"}) {
        DescribeNd(def.Input(lengths), ops::OPTIONAL, std::vector<ge::DataType>(4, ge::DT_INT64))
            .ValueDepend(ops::OPTIONAL);
    }
}

void DescribeGradOutputs(ops::OpDef &def) {
    const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT16, ge::DT_BF16};
    for (const char *output : {"dq", "dk", "dv"}) {
        DescribeNd(def.Output(output), ops::REQUIRED, halfTypes);
    }
}

void DescribeGradV2Attrs(ops::OpDef &def) {
    AddAttentionAttrs(def, true);
    def.Attr("deterministic").AttrType(ops::OPTIONAL).Bool(true);
    AddBlockAttrs(def);
}

}  // namespace fa_host
