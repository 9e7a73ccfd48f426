// flash_attention_decode_v2.cpp -- the FlashAttentionDecodeV2 operator's host side:
// FlashAttentionDecode (flash_attention_decode.cpp) plus the optional inputs alibi_slopes [B, N],
// sinks [N] (fp32) and cache_leftpad [B] (int32) after V1's inputs and the attr softcap after
// V1's attrs (the interface of
// op_host/flash_attention_decode/flash_attention_decode_v2.json). V1's InferShape / InferDataType
// and tiling serve; this file checks the score modifiers and passes them to the tiling
// (docs/decode.md, "Score modifiers in decode"). Real CANN host APIs only; errors go to the CANN log.
#include <cmath>
#include <cstdint>
#include <string>

#include "flash_attention_decode_host.h"
#include "op_registration.h"
#include "toolchain/slog.h"

#define FAD2_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

// V2's inputs: V1's (query 0 .. actual_seq_lengths_kv 4), then these; attrs: V1's (0 .. 4), then softcap.
enum InputIndex : size_t { kQuery = 0, kAlibiSlopes = 5, kSinks = 6, kCacheLeftpad = 7 };
enum AttrIndex : size_t { kSoftcap = 5 };

}  // namespace

namespace fa_host {

// "" or what is wrong with the optional input's shape (expected: `dims`).
std::string CheckDecodeInputShape(const gert::StorageShape *shape, const char *name, const std::vector<int64_t> &dims) {
    if (shape == nullptr) return "";
    const gert::Shape &s = shape->GetOriginShape();
    bool same = s.GetDimNum() == dims.size();
    for (size_t i = 0; same && i < dims.size(); ++i) same = s.GetDim(i) == dims[i];
    if (same) return "";
    std::string want = "[", got = "[";
    for (size_t i = 0; i < dims.size(); ++i) want += (i ? ", " : "") + std::to_string(dims[i]);
    for (size_t i = 0; i < s.GetDimNum(); ++i) got += (i ? ", " : "") + std::to_string(s.GetDim(i));
    return std::string(name) + " must be " + want + "], got " + got + "]";
}

ge::graphStatus ReadDecodeV2Inputs(gert::TilingContext *context, DecodeV2Inputs *mods) {
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const float *softcap = attrs != nullptr ? attrs->GetFloat(kSoftcap) : nullptr;
    const gert::StorageShape *q = context->GetInputShape(kQuery);
    if (softcap == nullptr || q == nullptr) {
        FAD2_LOGE(context, "attr softcap or input query missing");
        return ge::GRAPH_FAILED;
    }
    if (!std::isfinite(*softcap) || *softcap < 0.0f) {
        FAD2_LOGE(context, "softcap must be finite and >= 0 (0 = off), got %f", static_cast<double>(*softcap));
        return ge::GRAPH_FAILED;
    }
    const gert::Shape &qs = q->GetOriginShape();
    const int64_t batch = qs.GetDimNum() == 4 ? qs.GetDim(0) : 0, heads = qs.GetDimNum() == 4 ? qs.GetDim(2) : 0;
    const gert::StorageShape *slopes = context->GetOptionalInputShape(kAlibiSlopes);
    const gert::StorageShape *sinks = context->GetOptionalInputShape(kSinks);
    const gert::StorageShape *leftpad = context->GetOptionalInputShape(kCacheLeftpad);
    std::string error = CheckDecodeInputShape(slopes, "alibi_slopes", {batch, heads});
    if (error.empty()) error = CheckDecodeInputShape(sinks, "sinks", {heads});
    if (error.empty()) error = CheckDecodeInputShape(leftpad, "cache_leftpad", {batch});
    if (!error.empty()) {
        FAD2_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    mods->softcap = *softcap;
    mods->alibi = slopes != nullptr;
    mods->sinks = sinks != nullptr;
    mods->leftpad = leftpad != nullptr;
    return ge::GRAPH_SUCCESS;
}

void DefineFlashAttentionDecodeV2(ops::OpDef &def) {
    const std::vector<ge::DataType> floatTypes = {ge::DT_FLOAT, ge::DT_FLOAT};
    DescribeNd(def.Input("alibi_slopes"), ops::OPTIONAL, floatTypes);
    DescribeNd(def.Input("sinks"), ops::OPTIONAL, floatTypes);
    DescribeNd(def.Input("cache_leftpad"), ops::OPTIONAL, {ge::DT_INT32, ge::DT_INT32});
    def.Attr("softcap").AttrType(ops::OPTIONAL).Float(0.0);
}

}  // namespace fa_host

namespace {

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    fa_host::DecodeV2Inputs mods;
    const ge::graphStatus status = fa_host::ReadDecodeV2Inputs(context, &mods);
    return status == ge::GRAPH_SUCCESS ? fa_host::TileFlashAttentionDecode(context, mods) : status;
}

}  // namespace

namespace ops {
class FlashAttentionDecodeV2 : public OpDef {
 public:
    explicit FlashAttentionDecodeV2(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionDecode(*this);
        fa_host::DefineFlashAttentionDecodeV2(*this);
        fa_host::RegisterHost(*this, fa_host::InferDecodeShape, fa_host::InferDecodeDataType, TilingFunc,
                              fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionDecodeV2);
}  // namespace ops
