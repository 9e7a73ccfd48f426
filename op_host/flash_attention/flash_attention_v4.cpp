// flash_attention_v4.cpp -- the FlashAttentionV4 operator's host side: FlashAttentionV3
// (flash_attention_v3.cpp) plus the attr inner_precise after V3's last (the interface of
// op_host/flash_attention/flash_attention_v4.json), as FusedInferAttentionScore's innerPrecise:
// 0 (the default) keeps S = Q.K^T in float32 between the cube and the vector units; 1, the
// high-performance precision, lets FixPipe round S to the input dtype (float16 / bfloat16) on its
// way out of L0C, which halves the S bytes through GM, and the softmax then starts from S rounded
// to that dtype (docs/attention_options.md#high-performance-precision-flashattentionv4). V3's
// interface, InferShape and tiling serve unchanged; this file adds the attr, checks it and
// selects the tiling. Written against the real CANN host APIs only; errors go to the CANN log.
#include <cstdint>

#include "forward_tiling.h"

namespace {

// V4's attrs are V3's (scale_value ... softcap, indices 0..11) and then these.
enum AttrIndex : size_t { kInnerPrecise = 12 };

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const int64_t *innerPrecise = attrs != nullptr ? attrs->GetInt(kInnerPrecise) : nullptr;
    if (innerPrecise == nullptr) {
        FA_LOGE(context, "attr inner_precise missing");
        return ge::GRAPH_FAILED;
    }
    if (*innerPrecise != 0 && *innerPrecise != 1) {
        FA_LOGE(context, "inner_precise must be 0 (high precision) or 1 (high performance), got %lld",
                static_cast<long long>(*innerPrecise));
        return ge::GRAPH_FAILED;
    }
    return fa_host::TileFlashAttentionV3(context, *innerPrecise == 1);
}

}  // namespace

namespace ops {
class FlashAttentionV4 : public OpDef {
 public:
    explicit FlashAttentionV4(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionV2(*this);
        this->Attr("softcap").AttrType(OPTIONAL).Float(0.0);
        this->Attr("inner_precise").AttrType(OPTIONAL).Int(0);
        fa_host::RegisterFlashAttentionV2(*this, TilingFunc);
    }
};
OP_ADD(FlashAttentionV4);
}  // namespace ops
