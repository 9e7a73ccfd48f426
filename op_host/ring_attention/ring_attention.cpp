// ring_attention.cpp -- the RingAttention operator's host side: one step of ring attention whose
// kernel exchanges the K/V chunk with its ring neighbours through the kernel-side HCCL client
// (op_kernel/ring_attention/ring_attention.cpp). An MC2 op: its attr `group` is the name of the
// comm (HcclGetCommName) and MC2().HcclGroup names it, as CANN's MC2 ops declare theirs
// (ops-transformer mc2/*/op_host/*_def.cpp: this->MC2().HcclGroup("group")); the runtime hands
// the kernel that comm's context (GetHcclContext<0>).
//
// Attrs past the forward's: compute (false: the chunk lies above the causal diagonal, only the
// exchange runs) and exchange (false: the ring's last step, nothing to pass on). Outputs: the
// step's partial attention_out and softmax_lse (FlashAttention's), and key_next / value_next,
// which receive rank r - 1's chunk (the same shape as key: every rank holds as many K/V rows).
// Registered for ascend910_93 only: the exchange is an AlltoAllV, which the kernel-side client
// offers on Atlas A3, not A2 (asc-devkit AlltoAllV.md, 产品支持情况).
#include <cstdint>
#include <string>

#include "forward_tiling.h"
#include "lib/hccl/hccl_tiling.h"
#include "op_registration.h"
#include "ring_attention_tiling.h"

namespace {

using fa_host::Dims;

enum InputIndex : size_t { kQuery = 0, kKey = 1, kValue = 2 };
enum OutputIndex : size_t { kAttentionOut = 0, kSoftmaxLse = 1, kKeyNext = 2, kValueNext = 3 };
enum AttrIndex : size_t {
    kGroup = 0, kScaleValue, kCausal, kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN, kCompute, kExchange
};

constexpr fa_host::ForwardAttrIndex kForwardAttrs{kInputLayout, kNumHeads, kNumKvHeads, kBlockM, kBlockN};
// HCCL's algorithm config for the exchange, as production MC2 tilings name AlltoAll's
// (ops-transformer mc2: "AlltoAll=level0:fullmesh;level1:pairwise").
constexpr const char *kAlgConfig = "AlltoAll=level0:fullmesh;level1:pairwise";
constexpr uint32_t kHcclFp16 = 3, kHcclBf16 = 11;  // HcclDataType: HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16

ge::graphStatus InferShape(gert::InferShapeContext *context) {
    gert::Shape *lse = nullptr;
    Dims d;
    if (fa_host::InferForwardShapes(context, kForwardAttrs, false, &lse, &d) != ge::GRAPH_SUCCESS) {
        return ge::GRAPH_FAILED;
    }
    lse->SetDimNum(0);  // softmax_lse: [B, N, Sq] fp32
    lse->AppendDim(d.batch).AppendDim(d.numHeads).AppendDim(d.seqQ);
    gert::Shape *keyNext = context->GetOutputShape(kKeyNext);
    gert::Shape *valueNext = context->GetOutputShape(kValueNext);
    if (keyNext == nullptr || valueNext == nullptr) {
        FA_LOGE(context, "InferShape: missing key_next / value_next shape");
        return ge::GRAPH_FAILED;
    }
    *keyNext = *context->GetInputShape(kKey);  // the neighbour's chunk: as many rows as this rank's
    *valueNext = *context->GetInputShape(kValue);
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus InferDataType(gert::InferDataTypeContext *context) {
    context->SetOutputDataType(kAttentionOut, context->GetInputDataType(kQuery));
    context->SetOutputDataType(kSoftmaxLse, ge::DT_FLOAT);
    context->SetOutputDataType(kKeyNext, context->GetInputDataType(kKey));
    context->SetOutputDataType(kValueNext, context->GetInputDataType(kValue));
    return ge::GRAPH_SUCCESS;
}

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::RuntimeAttrs *attrs = nullptr;
    Dims d;
    fa_policy::Problem problem;
    std::string error = fa_host::ReadForwardProblem(context, kForwardAttrs, false, &attrs, &d, &problem);
    const char *group = error.empty() ? attrs->GetStr(kGroup) : nullptr;
    const float *scale = error.empty() ? attrs->GetFloat(kScaleValue) : nullptr;
    const bool *causal = error.empty() ? attrs->GetBool(kCausal) : nullptr;
    const bool *compute = error.empty() ? attrs->GetBool(kCompute) : nullptr;
    const bool *exchange = error.empty() ? attrs->GetBool(kExchange) : nullptr;
    if (error.empty() && (group == nullptr || scale == nullptr || causal == nullptr || compute == nullptr ||
                          exchange == nullptr)) {
        error = "attrs group / scale_value / causal / compute / exchange missing";
    }
    if (error.empty() && group[0] == '\0') error = "attr group is empty: it must name the HCCL comm (HcclGetCommName)";
    if (!error.empty()) {
        FA_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    problem.causal = *causal;
    // The step's attention as FlashAttention tiles it (tiling key, block dim, workspace), written at
    // the head of the buffer, then moved behind the HCCL tilings.
    if (fa_host::WriteForwardTiling(context, problem, *scale, *causal) != ge::GRAPH_SUCCESS) return ge::GRAPH_FAILED;
    const FlashAttentionTilingData fa = *context->GetTilingData<FlashAttentionTilingData>();
    RingAttentionTilingData *td = context->GetTilingData<RingAttentionTilingData>();
    if (td == nullptr) {
        FA_LOGE(context, "tiling buffer smaller than RingAttentionTilingData (%zu B)", sizeof(RingAttentionTilingData));
        return ge::GRAPH_FAILED;
    }
    *td = RingAttentionTilingData{};
    td->fa = fa;
    td->kvElements = static_cast<uint64_t>(d.batch * d.numKvHeads * d.seqKv * d.headDim);
    td->stepFlags = (*compute ? RING_STEP_COMPUTE : 0) | (*exchange ? RING_STEP_EXCHANGE : 0);
    td->hcclDataType = problem.bf16 ? kHcclBf16 : kHcclFp16;
    AscendC::Mc2CcTilingConfig config(group, static_cast<uint32_t>(AscendC::HcclCMDType::HCCL_CMD_ALLTOALLV),
                                      kAlgConfig);
    if (config.GetTiling(td->init) != 0 || config.GetTiling(td->alltoAllV) != 0) {
        FA_LOGE(context, "Mc2CcTilingConfig refused group \"%s\" (at most 127 characters)", group);
        return ge::GRAPH_FAILED;
    }
    return ge::GRAPH_SUCCESS;
}

}  // namespace
namespace ops {
class RingAttention : public OpDef {
 public:
    explicit RingAttention(const char *name) : OpDef(name) {
        const std::vector<ge::DataType> types = {ge::DT_FLOAT16, ge::DT_BF16};
        fa_host::DescribeNd(this->Input("query"), REQUIRED, types);
        fa_host::DescribeNd(this->Input("key"), REQUIRED, types);
        fa_host::DescribeNd(this->Input("value"), REQUIRED, types);
        fa_host::DescribeNd(this->Output("attention_out"), REQUIRED, types);
        fa_host::DescribeNd(this->Output("softmax_lse"), REQUIRED, {ge::DT_FLOAT, ge::DT_FLOAT});
        fa_host::DescribeNd(this->Output("key_next"), REQUIRED, types);
        fa_host::DescribeNd(this->Output("value_next"), REQUIRED, types);
        this->Attr("group").AttrType(REQUIRED).String();
        fa_host::AddAttentionAttrs(*this, false);
        fa_host::AddBlockAttrs(*this);
        this->Attr("compute").AttrType(OPTIONAL).Bool(true);
        this->Attr("exchange").AttrType(OPTIONAL).Bool(true);
        this->SetInferShape(InferShape).SetInferDataType(InferDataType);
        this->AICore().SetTiling(TilingFunc).AddConfig("ascend910_93");
        this->MC2().HcclGroup("group");
    }
};
OP_ADD(RingAttention);
}  // namespace ops
