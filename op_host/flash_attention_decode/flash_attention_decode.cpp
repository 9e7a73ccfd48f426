// flash_attention_decode.cpp -- the FlashAttentionDecode operator's host side: OpDef
// registration (the interface of op_host/flash_attention_decode/flash_attention_decode.json), InferShape / InferDataType,
// and TilingFunc, a thin adapter over the decode tiling policy (decode_tiling_policy.h): read
// shapes and attrs, query the chip, call the policy, fill FlashAttentionDecodeTilingData, set
// block dim, tiling key, schedule mode (batch mode when the kernel calls SyncAll) and workspace.
#include <cstdint>
#include <string>

#include "flash_attention_decode_host.h"
#include "flash_attention_decode_tiling.h"
#include "decode_tiling_policy.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"
#include "chip_limits.h"
#include "cube_tiling.h"
#include "toolchain/slog.h"
#include "op_registration.h"
#include "tiling_sizes.h"

#define FAD_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

static_assert(fa_policy::kDecodeKeyBf16 == FAD_KEY_BF16 && fa_policy::kDecodeKeySplit == FAD_KEY_SPLIT &&
                  fa_policy::kDecodeKeyInt8 == FAD_KEY_INT8,
              "the decode policy's tiling-key bits must be the kernel's");

namespace {

enum InputIndex : size_t { kQuery = 0, kKey, kValue, kBlockTable, kActualSeqLengthsKv };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse };
enum AttrIndex : size_t { kScaleValue = 0, kBlockSize, kPreTokens, kNextTokens, kNumSplits };

constexpr uint32_t kBatchScheduleMode = 1;  // every block resident at once: SyncAll needs it

std::string ShapeText(const gert::Shape &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.GetDimNum(); ++i) out += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return out + "]";
}

// Reads the problem from query [B, Sq, N, D], key/value [numBlocks, blockSize, Nkv, D],
// block_table [B, maxBlocksPerSeq], actual_seq_lengths_kv [B]. Returns "" or what is wrong.
std::string ReadProblem(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const gert::Shape &table,
                        const gert::Shape &lens, int64_t blockSizeAttr, fa_policy::DecodeProblem *p) {
    if (q.GetDimNum() != 4) return "query must be [B, Sq, N, D], got " + ShapeText(q);
    if (k.GetDimNum() != 4) return "key must be [num_blocks, block_size, Nkv, D], got " + ShapeText(k);
    if (k != v) return "key " + ShapeText(k) + " and value " + ShapeText(v) + " must have the same shape";
    if (table.GetDimNum() != 2) return "block_table must be [B, max_blocks_per_seq], got " + ShapeText(table);
    if (lens.GetDimNum() != 1) return "actual_seq_lengths_kv must be [B], got " + ShapeText(lens);
    p->batch = static_cast<uint64_t>(q.GetDim(0));
    p->seqQ = static_cast<uint64_t>(q.GetDim(1));
    p->numHeads = static_cast<uint64_t>(q.GetDim(2));
    p->headDim = static_cast<uint64_t>(q.GetDim(3));
    p->numBlocks = static_cast<uint64_t>(k.GetDim(0));
    p->blockSize = static_cast<uint64_t>(k.GetDim(1));
    p->numKvHeads = static_cast<uint64_t>(k.GetDim(2));
    p->maxBlocksPerSeq = static_cast<uint64_t>(table.GetDim(1));
    if (k.GetDim(3) != q.GetDim(3)) return "query and key head_dim differ: " + ShapeText(q) + " vs " + ShapeText(k);
    if (table.GetDim(0) != q.GetDim(0) || lens.GetDim(0) != q.GetDim(0)) {
        return "block_table " + ShapeText(table) + " and actual_seq_lengths_kv " + ShapeText(lens) +
               " must have the batch of query " + ShapeText(q);
    }
    if (blockSizeAttr != 0 && blockSizeAttr != k.GetDim(1)) {
        return "block_size=" + std::to_string(blockSizeAttr) + " but key " + ShapeText(k) + " has blocks of " +
               std::to_string(k.GetDim(1));
    }
    return "";
}

std::string ReadFromContext(const gert::RuntimeAttrs *attrs, const gert::Shape &q, const gert::Shape &k,
                            const gert::Shape &v, const gert::Shape &table, const gert::Shape &lens,
                            fa_policy::DecodeProblem *p) {
    if (attrs == nullptr) return "no attrs";
    const int64_t *blockSize = attrs->GetInt(kBlockSize);
    const int64_t *numSplits = attrs->GetInt(kNumSplits);
    if (blockSize == nullptr || numSplits == nullptr) return "attrs block_size / num_splits missing";
    p->numSplits = *numSplits;
    return ReadProblem(q, k, v, table, lens, *blockSize, p);
}

}  // namespace

namespace fa_host {

ge::graphStatus InferDecodeShape(gert::InferShapeContext *context) {
    const gert::Shape *q = context->GetInputShape(kQuery);
    const gert::Shape *k = context->GetInputShape(kKey);
    const gert::Shape *v = context->GetInputShape(kValue);
    const gert::Shape *table = context->GetInputShape(kBlockTable);
    const gert::Shape *lens = context->GetInputShape(kActualSeqLengthsKv);
    gert::Shape *out = context->GetOutputShape(kAttentionOut);
    gert::Shape *lse = context->GetOutputShape(kSoftmaxLse);
    if (q == nullptr || k == nullptr || v == nullptr || table == nullptr || lens == nullptr || out == nullptr ||
        lse == nullptr) {
        FAD_LOGE(context, "InferShape: missing input or output shape");
        return ge::GRAPH_FAILED;
    }
    fa_policy::DecodeProblem p;
    const std::string error = ReadFromContext(context->GetAttrs(), *q, *k, *v, *table, *lens, &p);
    if (!error.empty()) {
        FAD_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *out = *q;  // attention_out: like query
    lse->SetDimNum(0);  // softmax_lse: [B, N, Sq] fp32
    lse->AppendDim(q->GetDim(0)).AppendDim(q->GetDim(2)).AppendDim(q->GetDim(1));
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDecodeDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

static int32_t ClampToInt32(int64_t v) {
    return v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : static_cast<int32_t>(v));
}

ge::graphStatus TileFlashAttentionDecode(gert::TilingContext *context, const DecodeV2Inputs &mods) {
    const gert::StorageShape *q = context->GetInputShape(kQuery);
    const gert::StorageShape *k = context->GetInputShape(kKey);
    const gert::StorageShape *v = context->GetInputShape(kValue);
    const gert::StorageShape *table = context->GetInputShape(kBlockTable);
    const gert::StorageShape *lens = context->GetInputShape(kActualSeqLengthsKv);
    const gert::CompileTimeTensorDesc *qDesc = context->GetInputDesc(kQuery);
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    if (q == nullptr || k == nullptr || v == nullptr || table == nullptr || lens == nullptr || qDesc == nullptr ||
        attrs == nullptr) {
        FAD_LOGE(context, "TilingFunc: missing input shape, desc or attrs");
        return ge::GRAPH_FAILED;
    }
    fa_policy::DecodeProblem p;
    std::string error = ReadFromContext(attrs, q->GetOriginShape(), k->GetOriginShape(), v->GetOriginShape(),
                                        table->GetOriginShape(), lens->GetOriginShape(), &p);
    const float *scale = attrs->GetFloat(kScaleValue);
    const int64_t *preTokens = attrs->GetInt(kPreTokens);
    const int64_t *nextTokens = attrs->GetInt(kNextTokens);
    if (error.empty() && (scale == nullptr || preTokens == nullptr || nextTokens == nullptr)) {
        error = "attrs scale_value / pre_tokens / next_tokens missing";
    }
    if (!error.empty()) {
        FAD_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    p.dtypeBytes = 2;  // float16 / bfloat16, as the OpDef allows
    p.bf16 = qDesc->GetDataType() == ge::DT_BF16;
    p.scoreMods = mods.alibi || mods.sinks;
    p.kvInt8 = mods.kvInt8;

    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    fa_policy::ChipLimits chip;
    chip.socName = "this SoC";
    fa_host::ReadChipBuffers(platform, &chip);
    fa_policy::DecodePlan plan;
    if (!fa_policy::ComputeDecodePlan(p, chip, &plan, &error)) {
        FAD_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }

    FlashAttentionDecodeTilingData *td = context->GetTilingData<FlashAttentionDecodeTilingData>();
    if (td == nullptr) {
        FAD_LOGE(context, "tiling buffer smaller than FlashAttentionDecodeTilingData (%zu B)",
                 sizeof(FlashAttentionDecodeTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = FlashAttentionDecodeTilingData{};
    fa_host::FillHeadSizes(p, td);
    td->numBlocks = static_cast<uint32_t>(p.numBlocks);
    td->blockSize = static_cast<uint32_t>(p.blockSize);
    td->maxBlocksPerSeq = static_cast<uint32_t>(p.maxBlocksPerSeq);
    td->preTokens = ClampToInt32(*preTokens);
    td->nextTokens = ClampToInt32(*nextTokens);
    td->scaleValue = *scale;
    td->rows = plan.rows;
    td->rowGroupHeads = plan.rowGroupHeads;
    td->rowGroupTokens = plan.rowGroupTokens;
    td->rowGroups = plan.rowGroups;
    td->softcap = mods.softcap;
    td->hasAlibi = mods.alibi ? 1 : 0;
    td->hasSinks = mods.sinks ? 1 : 0;
    td->hasLeftpad = mods.leftpad ? 1 : 0;
    td->kvInt8 = mods.kvInt8 ? 1 : 0;
    td->dequantRows = plan.dequantRows;
    td->wsKDeqOffset = plan.wsKDeqOffset;
    td->wsVDeqOffset = plan.wsVDeqOffset;
    td->blockN = plan.blockN;
    td->chunksPerBlock = plan.chunksPerBlock;
    td->splitKv = plan.splitKv;
    td->usedCoreNum = plan.usedCoreNum;
    td->numParts = plan.numParts;
    td->splitsPerGroup = plan.splitsPerGroup;
    td->maxSlots = plan.maxSlots;
    td->lseStride = plan.lseStride;
    td->wsQOffset = plan.wsQOffset;
    td->wsScoreOffset = plan.wsScoreOffset;
    td->wsProbOffset = plan.wsProbOffset;
    td->wsPvOffset = plan.wsPvOffset;
    td->wsBytesPerAiv = plan.wsBytesPerAiv;
    td->wsPartialOOffset = plan.wsPartialOOffset;
    td->wsPartialLseOffset = plan.wsPartialLseOffset;

    const matmul_tiling::DataType mmType = fa_host::OperandType(p.bf16);
    const int32_t m = static_cast<int32_t>(plan.rows), n = static_cast<int32_t>(plan.blockN);
    const int32_t hd = static_cast<int32_t>(p.headDim);
    // Per AIV piece: S = Q.K^T and P.V with A and C in GM; each a quarter of L1 (an AIC serves
    // 2 AIVs x 2 matmuls).
    fa_host::CubeSpec qk{m, n, hd, false, true, false, false, 4, -1};
    fa_host::CubeSpec pv{m, hd, n, false, false, false, false, 4, -1};
    qk.baseN = static_cast<int32_t>(plan.qkBaseN);  // named, not positional: CubeSpec's optional fields
    pv.baseN = static_cast<int32_t>(plan.pvBaseN);
    if (!fa_host::FillCubeTiling(platform, mmType, qk, chip.l1Bytes, &td->qkTiling) ||
        !fa_host::FillCubeTiling(platform, mmType, pv, chip.l1Bytes, &td->pvTiling)) {
        FAD_LOGE(context, "matmul tiling failed for %d rows, %d-key chunks, head_dim %d", m, n, hd);
        return ge::GRAPH_FAILED;
    }

    context->SetBlockDim(plan.usedCoreNum);  // MIX 1:2: one block = 1 AIC + 2 AIV
    context->SetTilingKey(plan.tilingKey);
    if (plan.splitKv != 0) {
        context->SetScheduleMode(kBatchScheduleMode);
    }
    if (!fa_host::SetMatmulWorkspace(context, platform, plan.userWorkspaceBytes)) {
        FAD_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    return ge::GRAPH_SUCCESS;
}

void DefineFlashAttentionDecode(ops::OpDef &def) {
    DefineFlashAttentionDecode(def, {ge::DT_FLOAT16, ge::DT_BF16});
}

void DefineFlashAttentionDecode(ops::OpDef &def, const std::vector<ge::DataType> &cacheTypes) {
    const std::vector<ge::DataType> halfTypes = {ge::DT_FLOAT16, ge::DT_BF16};
    const std::vector<ge::DataType> int32Types = {ge::DT_INT32, ge::DT_INT32};
    DescribeNd(def.Input("query"), ops::REQUIRED, halfTypes);
    DescribeNd(def.Input("key"), ops::REQUIRED, cacheTypes);
    DescribeNd(def.Input("value"), ops::REQUIRED, cacheTypes);
    DescribeNd(def.Input("block_table"), ops::REQUIRED, int32Types);
    DescribeNd(def.Input("actual_seq_lengths_kv"), ops::REQUIRED, int32Types);
    DescribeNd(def.Output("attention_out"), ops::REQUIRED, halfTypes);
    DescribeNd(def.Output("softmax_lse"), ops::REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
    def.Attr("scale_value").AttrType(ops::OPTIONAL).Float(1.0);
    def.Attr("block_size").AttrType(ops::OPTIONAL).Int(0);
    def.Attr("pre_tokens").AttrType(ops::OPTIONAL).Int(2147483647);
    def.Attr("next_tokens").AttrType(ops::OPTIONAL).Int(2147483647);
    def.Attr("num_splits").AttrType(ops::OPTIONAL).Int(0);
}

}  // namespace fa_host

namespace {

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    return fa_host::TileFlashAttentionDecode(context, fa_host::DecodeV2Inputs{});
}

}  // namespace

namespace ops {
class FlashAttentionDecode : public OpDef {
 public:
    explicit FlashAttentionDecode(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionDecode(*this);
        fa_host::RegisterHost(*this, fa_host::InferDecodeShape, fa_host::InferDecodeDataType, TilingFunc,
                              fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionDecode);
}  // namespace ops
