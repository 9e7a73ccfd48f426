// flash_attention_v3.cpp -- the FlashAttentionV3 operator's host side: FlashAttentionV2
// (flash_attention_v2.cpp) plus the attr softcap after V2's last (the interface of
// op_host/flash_attention/flash_attention_v3.json). softcap > 0 caps the scaled scores as
// flash-attn 2.6 does, S = softcap * tanh(S / softcap) before the mask and the softmax; 0 is off
// (docs/attention_options.md#soft-capping-flashattentionv3). V2's interface, InferShape and
// tiling serve unchanged; this file adds the attr, checks it and writes it into the tiling data.
// Written against the real CANN host APIs only; errors go to the CANN log (module OP).
#include <cmath>
#include <cstdint>

#include "forward_tiling.h"

namespace {

// V3's attrs are V2's (scale_value ... block_n, indices 0..10) and then these.
enum AttrIndex : size_t { kSoftcap = 11 };

ge::graphStatus TilingFunc(gert::TilingContext *context) { return fa_host::TileFlashAttentionV3(context, false); }

}  // namespace

namespace fa_host {

ge::graphStatus TileFlashAttentionV3(gert::TilingContext *context, bool narrowScores, ProblemReader readMods) {
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const float *softcap = attrs != nullptr ? attrs->GetFloat(kSoftcap) : nullptr;
    if (softcap == nullptr) {
        FA_LOGE(context, "attr softcap missing");
        return ge::GRAPH_FAILED;
    }
    // NaN fails the comparison; an infinite cap would make every score 0 * inf.
    if (!(*softcap >= 0.0f) || std::isinf(*softcap)) {
        FA_LOGE(context, "softcap must be a finite number >= 0 (0 = off), got %g", static_cast<double>(*softcap));
        return ge::GRAPH_FAILED;
    }
    const ge::graphStatus status = TileFlashAttentionV2Precision(context, narrowScores, readMods);
    if (status != ge::GRAPH_SUCCESS) return status;
    context->GetTilingData<FlashAttentionTilingData>()->softcap = *softcap;
    return ge::GRAPH_SUCCESS;
}

}  // namespace fa_host

namespace ops {
class FlashAttentionV3 : public OpDef {
 public:
    explicit FlashAttentionV3(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionV2(*this);
        this->Attr("softcap").AttrType(OPTIONAL).Float(0.0);
        fa_host::RegisterFlashAttentionV2(*this, TilingFunc);
    }
};
OP_ADD(FlashAttentionV3);
}  // namespace ops
