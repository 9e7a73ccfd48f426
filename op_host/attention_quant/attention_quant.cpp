// attention_quant.cpp -- the AttentionQuant operator's host side: OpDef registration (the interface
// of op_host/attention_quant/attention_quant.json), InferShape / InferDataType and TilingFunc.
// AttentionQuant turns a query or key tensor (float16 / bfloat16, BNSD, BSND or BSH) into int8 with
// one fp32 scale per block_size rows of each (batch, head) -- the per-block scheme FlashAttentionInt8
// reads (docs/int8.md) -- after subtracting each head's per-channel mean over the sequence when
// `smooth` (for K). Outputs: y int8 shaped like x, scale fp32 [B, N, ceil(S / block_size)].
// Atlas A2/A3 and 310P (its AI Cores' vector units; 910A refused: no float32 ReduceMax), a
// vector-only kernel (op_kernel/attention_quant/attention_quant_kernel.h, whose UB map the budget
// below follows). Real CANN host APIs only; errors go to the CANN log.
#include <cstdint>
#include <string>

#include "attention_quant_tiling.h"
#include "flash_attention_tiling.h"
#include "forward_tiling.h"
#include "op_registration.h"

namespace {

enum AttrIndex : size_t { kBlockSize = 0, kSmooth, kInputLayout, kNumHeads };

struct QuantDims {
    uint32_t layout = 0;
    int64_t batch = 0, numHeads = 0, seq = 0, headDim = 0;
};

// B, N, S, D of x from its layout (BSH: N from num_heads). "" or what is wrong.
std::string ReadQuantDims(const gert::Shape &x, const char *layout, int64_t numHeadsAttr, QuantDims *d) {
    const std::string name = layout != nullptr ? layout : "";
    const bool threeD = name == "BSH";
    if (name != "BNSD" && name != "BSND" && !threeD) return "input_layout must be BNSD, BSND or BSH, got '" + name + "'";
    if (x.GetDimNum() != (threeD ? 3u : 4u)) {
        return "input_layout " + name + " needs a " + (threeD ? "3" : "4") + "-D x, got " + fa_host::ShapeText(x);
    }
    d->batch = x.GetDim(0);
    if (name == "BNSD") {
        d->layout = FA_LAYOUT_BNSD;
        d->numHeads = x.GetDim(1);
        d->seq = x.GetDim(2);
        d->headDim = x.GetDim(3);
    } else if (name == "BSND") {
        d->layout = FA_LAYOUT_BSND;
        d->seq = x.GetDim(1);
        d->numHeads = x.GetDim(2);
        d->headDim = x.GetDim(3);
    } else {
        if (numHeadsAttr <= 0 || x.GetDim(2) % numHeadsAttr != 0) {
            return "input_layout BSH needs num_heads > 0 dividing the hidden size " + std::to_string(x.GetDim(2));
        }
        d->layout = FA_LAYOUT_BSH;
        d->seq = x.GetDim(1);
        d->numHeads = numHeadsAttr;
        d->headDim = x.GetDim(2) / numHeadsAttr;
    }
    if (d->batch < 1 || d->numHeads < 1 || d->seq < 1 || d->headDim < 1) {
        return "every size of x must be >= 1, got " + fa_host::ShapeText(x);
    }
    if (d->headDim % 16 != 0 || d->headDim > 256) {
        return "head_dim must be a multiple of 16 up to 256, got " + std::to_string(d->headDim);
    }
    if (d->layout != FA_LAYOUT_BNSD && d->headDim % 32 != 0) {
        // Each int8 row leaves UB as its own block, and a block starts at a 32-B boundary of UB.
        return "input_layout " + name + " needs head_dim a multiple of 32 (int8 rows of whole 32-B blocks), got " +
               std::to_string(d->headDim);
    }
    return "";
}

std::string ReadAttrs(const gert::RuntimeAttrs *attrs, const gert::Shape &x, QuantDims *d, int64_t *blockSize,
                      bool *smooth) {
    if (attrs == nullptr) return "no attrs";
    const int64_t *bs = attrs->GetInt(kBlockSize);
    const bool *sm = attrs->GetBool(kSmooth);
    const int64_t *numHeads = attrs->GetInt(kNumHeads);
    if (bs == nullptr || sm == nullptr || numHeads == nullptr) return "attrs block_size / smooth / num_heads missing";
    if (*bs < 1 || *bs > 4095) return "block_size must be in [1, 4095], got " + std::to_string(*bs);
    *blockSize = *bs;
    *smooth = *sm;
    return ReadQuantDims(x, attrs->GetStr(kInputLayout), *numHeads, d);
}

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    const gert::Shape *x = context->GetInputShape(0);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *scale = context->GetOutputShape(1);
    if (x == nullptr || y == nullptr || scale == nullptr) {
        FA_LOGE(context, "InferShape: missing input or output shape");
        return ge::GRAPH_FAILED;
    }
    QuantDims d;
    int64_t blockSize = 0;
    bool smooth = false;
    const std::string error = ReadAttrs(context->GetAttrs(), *x, &d, &blockSize, &smooth);
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    *y = *x;
    scale->SetDimNum(0);
    scale->AppendDim(d.batch).AppendDim(d.numHeads).AppendDim((d.seq + blockSize - 1) / blockSize);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(0, ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::StorageShape *x = context->GetInputShape(0);
    const gert::CompileTimeTensorDesc *xDesc = context->GetInputDesc(0);
    if (x == nullptr || xDesc == nullptr) {
        FA_LOGE(context, "TilingFunc: missing input shape or desc");
        return ge::GRAPH_FAILED;
    }
    QuantDims d;
    int64_t blockSize = 0;
    bool smooth = false;
    std::string error = ReadAttrs(context->GetAttrs(), x->GetOriginShape(), &d, &blockSize, &smooth);
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    // UB (attention_quant_kernel.h Init): a chunk of [c, D] as T (2 B), fp32 x' and |x'| (4 B each) and
    // int8 y (1 B), plus the [D] fp32 mean and two 32-B slots (and, folding, the blocks' bounds). c: the whole block when it fits, else
    // the most rows (a multiple of 8) that do.
    const uint64_t perRow = static_cast<uint64_t>(d.headDim) * (2 + 4 + 4 + 1);
    const uint64_t fixed = static_cast<uint64_t>(d.headDim) * 4 + 64;
    auto chunkFor = [&](uint64_t fixedBytes) {
        const uint64_t c = ubBytes > fixedBytes ? (ubBytes - fixedBytes) / perRow : 0;
        return c >= static_cast<uint64_t>(blockSize) ? static_cast<uint64_t>(blockSize) : c / 8 * 8;
    };
    uint64_t chunkRows = chunkFor(fixed);
    // Smoothing with blocks wider than a chunk: the mean pass keeps each block's per-channel max x and
    // max -x ([numBlocks, 2, D] fp32) when they fit beside 8 rows, so a block is read twice in all (mean
    // and bounds, then quantize) instead of three times (attention_quant_kernel.h MeanAndBounds).
    const uint64_t numBlocks = static_cast<uint64_t>((d.seq + blockSize - 1) / blockSize);
    const uint64_t boundBytes = numBlocks * 2 * static_cast<uint64_t>(d.headDim) * 4;
    bool foldPeaks = false;
    if (smooth && chunkRows < static_cast<uint64_t>(blockSize) && chunkFor(fixed + boundBytes) >= 8) {
        foldPeaks = true;
        chunkRows = chunkFor(fixed + boundBytes);
    }
    if (error.empty() && chunkRows == 0) {
        error = "head_dim=" + std::to_string(d.headDim) + " needs " + std::to_string(8 * perRow + fixed) +
                " B of UB for 8 rows (11 B per element); the chip has " + std::to_string(ubBytes);
    }
    // The coupled-core chips: 310P runs the kernel on its AI Cores' vector units; 910A's vector unit
    // has no float32 ReduceMax (dav-c100's vcmax takes half only: asc-devkit ReduceMax.md, the
    // training-series table), which the block's max |x'| needs. Neither has DataCopyPad nor bfloat16:
    // the int8 rows leave in whole 32-B blocks (D % 32 == 0).
    const fa_policy::ArchFeatures arch = fa_policy::FeaturesOfSoc(static_cast<uint32_t>(platform.GetSocVersion()));
    const std::string soc = fa_host::SocText(platform.GetSocVersion());
    if (error.empty() && arch.coupled && platform.GetSocVersion() == platform_ascendc::SocVersion::ASCEND910) {
        error = "AttentionQuant is not supported on " + soc +
                ": its vector unit has no float32 ReduceMax (dav-c100 reduces half only), which the block's "
                "max |x| needs; quantize on the host or use Atlas A2/A3 or Ascend310P";
    }
    if (error.empty() && arch.coupled && xDesc->GetDataType() == ge::DT_BF16) {
        error = "x must be float16 on " + soc + " (no bfloat16 on its vector unit), got bfloat16";
    }
    if (error.empty() && arch.coupled && d.headDim % 32 != 0) {
        error = "head_dim must be a multiple of 32 on " + soc +
                " (no DataCopyPad: int8 rows leave UB in whole 32-B blocks), got " + std::to_string(d.headDim);
    }
    const int64_t gapBytes = (d.layout == FA_LAYOUT_BNSD ? 0 : (d.numHeads - 1) * d.headDim) * 2;
    if (error.empty() && gapBytes / 32 > 65535) error = "num_heads * head_dim too large for one strided copy";
    // 310P's int8 rows: (numHeads - 1) * D bytes apart, a block stride of DataCopyParams (uint16_t).
    if (error.empty() && arch.coupled && gapBytes / 2 / 32 > 65535) {
        error = "num_heads * head_dim too large for one strided copy";
    }
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    AttentionQuantTilingData *td = context->GetTilingData<AttentionQuantTilingData>();
    if (td == nullptr) {
        FA_LOGE(context, "tiling buffer smaller than AttentionQuantTilingData (%zu B)", sizeof(AttentionQuantTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = AttentionQuantTilingData{};
    td->batch = static_cast<uint32_t>(d.batch);
    td->numHeads = static_cast<uint32_t>(d.numHeads);
    td->seq = static_cast<uint32_t>(d.seq);
    td->headDim = static_cast<uint32_t>(d.headDim);
    td->layout = d.layout;
    td->blockSize = static_cast<uint32_t>(blockSize);
    td->numBlocks = static_cast<uint32_t>((d.seq + blockSize - 1) / blockSize);
    td->smooth = smooth ? 1 : 0;
    td->chunkRows = static_cast<uint32_t>(chunkRows);
    td->foldPeaks = foldPeaks ? 1 : 0;
    // A unit is a block, or a whole head when smoothing (its mean needs every row of the head).
    td->unitsPerHead = smooth ? 1 : td->numBlocks;
    const uint64_t units = static_cast<uint64_t>(d.batch) * d.numHeads * td->unitsPerHead;
    // Vector cores on A2/A3, AI Cores on 310P (GetCoreNumAiv answers the AI Cores on coupled chips).
    const uint64_t cores = platform.GetCoreNumAiv() > 0 ? platform.GetCoreNumAiv() : 1;
    const uint64_t per = (units + cores - 1) / cores;
    td->unitsPerCore = static_cast<uint32_t>(per);
    td->usedCoreNum = static_cast<uint32_t>((units + per - 1) / per);
    context->SetBlockDim(td->usedCoreNum);  // one block per vector core (AIV-only; 310P: per AI Core)
    context->SetTilingKey(xDesc->GetDataType() == ge::DT_BF16 ? 1 : 0);
    size_t *workspaces = context->GetWorkspaceSizes(1);
    if (workspaces == nullptr) {
        FA_LOGE(context, "no workspace slot");
        return ge::GRAPH_FAILED;
    }
    workspaces[0] = 0;
    return ge::GRAPH_SUCCESS;
}

}  // namespace

namespace ops {
class AttentionQuant : public OpDef {
 public:
    explicit AttentionQuant(const char *name) : OpDef(name) {
        fa_host::DescribeNd(this->Input("x"), REQUIRED, {ge::DT_FLOAT16, ge::DT_BF16});
        fa_host::DescribeNd(this->Output("y"), REQUIRED, {ge::DT_INT8, ge::DT_INT8});
        fa_host::DescribeNd(this->Output("scale"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        this->Attr("block_size").AttrType(OPTIONAL).Int(128);
        this->Attr("smooth").AttrType(OPTIONAL).Bool(false);
        this->Attr("input_layout").AttrType(OPTIONAL).String("BNSD");
        this->Attr("num_heads").AttrType(OPTIONAL).Int(0);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3Coupled);
    }
};
OP_ADD(AttentionQuant);
}  // namespace ops
