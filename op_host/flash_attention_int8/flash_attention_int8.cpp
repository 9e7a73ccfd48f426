// flash_attention_int8.cpp -- the FlashAttentionInt8 operator's host side: OpDef registration (the
// interface of op_host/flash_attention_int8/flash_attention_int8.json), InferShape / InferDataType
// and TilingFunc. The op is FlashAttention with QK^T in int8 (docs/int8.md): query and key int8,
// quantized per block of the forward's tiling (q_scale [B, N, ceil(Sq / block_m)], k_scale
// [B, Nkv, ceil(Skv / block_n)], fp32), value and the outputs float16 / bfloat16. Its tiling is the
// forward's (forward_tiling.h) for the value dtype -- the kernel's UB and workspace are the fp16
// forward's with S in int32 where that one has float32 -- with the QK matmul re-tiled for int8
// operands and an int32 result. Atlas A2/A3 (MIX kernel) and the coupled-core 310P and 910A (float16
// value only: the forward's policy refuses bfloat16 there). Real CANN host APIs only; errors go to the CANN log.
#include <cstdint>
#include <string>

#include "forward_tiling.h"
#include "op_registration.h"

namespace {

using fa_host::Dims;

enum InputIndex : size_t { kQuery = 0, kKey = 1, kValue = 2, kQScale = 3, kKScale = 4 };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse = 1 };
enum AttrIndex : size_t { kScaleValue = 0, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN };

constexpr fa_host::ForwardAttrIndex kForwardAttrs{kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN};

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    return fa_host::InferForwardShapesV1(context, kForwardAttrs);  // FlashAttention's outputs
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kValue));  // query is int8
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

// "" when `shape` is [a, b, c], else what is wrong, naming the input.
std::string CheckScaleShape(const gert::StorageShape *shape, const char *name, int64_t a, int64_t b, int64_t c,
                            const char *what) {
    const std::string want = "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + "]";
    if (shape == nullptr) return std::string(name) + " missing";
    const gert::Shape &s = shape->GetOriginShape();
    if (s.GetDimNum() != 3 || s.GetDim(0) != a || s.GetDim(1) != b || s.GetDim(2) != c) {
        return std::string(name) + " must be " + want + " (" + what + "), got " + fa_host::ShapeText(s);
    }
    return "";
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    Dims d;
    fa_policy::Problem problem;
    float scale = 0.0f;
    std::string error = fa_host::ReadForwardProblemV1(context, kForwardAttrs, kScaleValue, kCausal, &d, &problem, &scale);
    const gert::CompileTimeTensorDesc *valueDesc = context->GetInputDesc(kValue);
    if (error.empty() && valueDesc == nullptr) error = "value desc missing";
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    // The policy budgets the fp16 forward for the value dtype, whose UB and workspace the kernels
    // fit: A2/A3's S is half (two half tiles and one fp32 tile in the UB of two fp32 S tiles; the
    // first half of each fp32 S slot), the coupled chips' S int32 (as wide as fp32). Q and K are
    // read by the cube only.
    problem.dtypeBytes = 2;
    problem.bf16 = valueDesc->GetDataType() == ge::DT_BF16;
    platform_ascendc::PlatformAscendC platform(context->GetPlatformInfo());
    const bool coupled = fa_policy::FeaturesOfSoc(static_cast<uint32_t>(platform.GetSocVersion())).coupled;
    // The blocks' cost as this kernel runs them on A2/A3 (docs/int8.md "S in half on A2/A3"): S
    // half through GM and UB, and with a float16 value the half softmax on every 128-column tile.
    problem.halfScores = !coupled;
    problem.halfSoftmax = !coupled && !problem.bf16;
    if (fa_host::WriteForwardTiling(context, problem, scale, problem.causal) != ge::GRAPH_SUCCESS) {
        return ge::GRAPH_FAILED;
    }
    FlashAttentionTilingData *td = context->GetTilingData<FlashAttentionTilingData>();
    error = CheckScaleShape(context->GetInputShape(kQScale), "q_scale", d.batch, d.numHeads, td->numQBlocks,
                            ("one per block_m=" + std::to_string(td->blockM) + " query rows").c_str());
    if (error.empty()) {
        error = CheckScaleShape(context->GetInputShape(kKScale), "k_scale", d.batch, d.numKvHeads, td->numKvBlocks,
                                ("one per block_n=" + std::to_string(td->blockN) + " keys").c_str());
    }
    if (error.empty() && td->soloRows != 0) error = "a narrow band's per-AIV path has no int8 variant";
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    // QK^T re-tiled for int8 operands, in the half of L1 the forward gives it (int8 tiles take half
    // the bytes of fp16 ones, so P.V's share, sized after fp16 QK, still fits). A2/A3: C float16,
    // dequantized by FixPipe with the kernel's per-block SetQuantScalar (DequantType SCALAR, the
    // tiling's default). Coupled chips (310P, 910A): C int32 into UB through the Matmul API's UB
    // space, as the fp16 coupled forward's QK (mmUbBytes covers int8 operands and an int32 C: its
    // fp16 / fp32 sizes are larger).
    uint64_t l1Bytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::L1, l1Bytes);
    const uint64_t l1Half = l1Bytes / 2;
    fa_host::CubeSpec qk{static_cast<int32_t>(td->blockM), static_cast<int32_t>(td->blockN),
                         static_cast<int32_t>(d.headDim), false, true, false, coupled, 1,
                         coupled ? static_cast<int32_t>(td->mmUbBytes) : -1};
    qk.cInt32 = coupled;
    qk.cHalf = !coupled;
    if (!fa_host::FillCubeTiling(platform, matmul_tiling::DataType::DT_INT8, qk, l1Half, &td->qkTiling)) {
        FA_LOGE(context, "int8 matmul tiling failed for block_m=%u, block_n=%u, head_dim=%lld", td->blockM, td->blockN,
                static_cast<long long>(d.headDim));
        return ge::GRAPH_FAILED;
    }
    if (!coupled) fa_host::KeepBResident(1, l1Half, &td->qkTiling);
    return ge::GRAPH_SUCCESS;
}

}  // namespace

namespace ops {
class FlashAttentionInt8 : public OpDef {
 public:
    explicit FlashAttentionInt8(const char *name) : OpDef(name) {
        fa_host::DescribeNd(this->Input("query"), REQUIRED, {ge::DT_INT8, ge::DT_INT8});
        fa_host::DescribeNd(this->Input("key"), REQUIRED, {ge::DT_INT8, ge::DT_INT8});
        fa_host::DescribeNd(this->Input("value"), REQUIRED, {ge::DT_FLOAT16, ge::DT_BF16});
        fa_host::DescribeNd(this->Input("q_scale"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        fa_host::DescribeNd(this->Input("k_scale"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        fa_host::DescribeNd(this->Output("attention_out"), REQUIRED, {ge::DT_FLOAT16, ge::DT_BF16});
        fa_host::DescribeNd(this->Output("softmax_lse"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        fa_host::AddAttentionAttrs(*this, false);
        fa_host::AddBlockAttrs(*this);
        fa_host::RegisterHost(*this, InferShape, InferDataType, TilingFunc, fa_host::Chips::kA2A3Coupled);
    }
};
OP_ADD(FlashAttentionInt8);
}  // namespace ops
