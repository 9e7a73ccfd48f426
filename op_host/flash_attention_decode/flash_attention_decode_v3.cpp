// flash_attention_decode_v3.cpp -- the FlashAttentionDecodeV3 operator's host side: an int8 K/V
// cache with its dequantization ("antiquant") scales. FlashAttentionDecodeV2's inputs and attrs
// with key / value int8, then the inputs key_antiquant_scale [Nkv, D] (per channel) and
// value_antiquant_scale [numBlocks, Nkv, blockSize] (per token; a contiguous cache [B, Nkv,
// S_max]), fp32, and the attrs key_antiquant_mode (0 = per channel) and value_antiquant_mode
// (1 = per token), as FusedInferAttentionScoreV2+ name them (keyAntiquantScaleOptional,
// valueAntiquantScaleOptional, keyAntiquantMode, valueAntiquantMode; docs/int8.md "Int8 KV cache
// (decode)"). The interface is op_host/flash_attention_decode/flash_attention_decode_v3.json.
// Real CANN host APIs only; errors go to the CANN log.
#include <cstdint>
#include <string>

#include "flash_attention_decode_host.h"
#include "op_registration.h"
#include "toolchain/slog.h"

#define FAD3_LOGE(context, fmt, ...) dlog_error(OP, "[%s] " fmt, (context)->GetNodeName(), ##__VA_ARGS__)

namespace {

// V3's inputs: V2's (0 .. 7, of which 5 .. 7 optional), then the scales; attrs: V2's (0 .. 5), then
// the modes. GetInputShape counts present inputs only: the scales' index is 5 plus the optional
// inputs given.
enum InputIndex : size_t { kKey = 1, kFirstOptional = 5, kOptionalCount = 3 };
enum AttrIndex : size_t { kKeyAntiquantMode = 6, kValueAntiquantMode = 7 };
// The modes FusedInferAttentionScore numbers 0 (per channel) and 1 (per token); the kernel has
// per-channel K (folded into Q) and per-token V (folded into P).
constexpr int64_t kPerChannel = 0;
constexpr int64_t kPerToken = 1;

ge::graphStatus TilingFunc(gert::TilingContext *context) {
    fa_host::DecodeV2Inputs mods;
    ge::graphStatus status = fa_host::ReadDecodeV2Inputs(context, &mods);
    if (status != ge::GRAPH_SUCCESS) return status;
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const int64_t *keyMode = attrs->GetInt(kKeyAntiquantMode);
    const int64_t *valueMode = attrs->GetInt(kValueAntiquantMode);
    const gert::StorageShape *key = context->GetInputShape(kKey);
    size_t scaleIndex = kFirstOptional;
    for (size_t i = kFirstOptional; i < kFirstOptional + kOptionalCount; ++i) {
        scaleIndex += context->GetOptionalInputShape(i) != nullptr ? 1 : 0;
    }
    const gert::StorageShape *keyScale = context->GetInputShape(scaleIndex);
    const gert::StorageShape *valueScale = context->GetInputShape(scaleIndex + 1);
    if (keyMode == nullptr || valueMode == nullptr || key == nullptr || keyScale == nullptr || valueScale == nullptr) {
        FAD3_LOGE(context, "attrs key/value_antiquant_mode or inputs key, key/value_antiquant_scale missing");
        return ge::GRAPH_FAILED;
    }
    if (*keyMode != kPerChannel || *valueMode != kPerToken) {
        FAD3_LOGE(context, "key_antiquant_mode must be 0 (per channel) and value_antiquant_mode 1 (per token), "
                  "got %lld and %lld", static_cast<long long>(*keyMode), static_cast<long long>(*valueMode));
        return ge::GRAPH_FAILED;
    }
    const gert::Shape &k = key->GetOriginShape();  // [numBlocks, blockSize, Nkv, D]
    if (k.GetDimNum() != 4) {
        FAD3_LOGE(context, "key must be [num_blocks, block_size, Nkv, D]");
        return ge::GRAPH_FAILED;
    }
    std::string error = fa_host::CheckDecodeInputShape(keyScale, "key_antiquant_scale", {k.GetDim(2), k.GetDim(3)});
    if (error.empty()) {
        error = fa_host::CheckDecodeInputShape(valueScale, "value_antiquant_scale",
                                               {k.GetDim(0), k.GetDim(2), k.GetDim(1)});
    }
    if (!error.empty()) {
        FAD3_LOGE(context, "%s", error.c_str());
        return ge::GRAPH_FAILED;
    }
    mods.kvInt8 = true;
    return fa_host::TileFlashAttentionDecode(context, mods);
}

}  // namespace

namespace ops {
class FlashAttentionDecodeV3 : public OpDef {
 public:
    explicit FlashAttentionDecodeV3(const char *name) : OpDef(name) {
        fa_host::DefineFlashAttentionDecode(*this, {ge::DT_INT8, ge::DT_INT8});
        fa_host::DefineFlashAttentionDecodeV2(*this);
        const std::vector<ge::DataType> floatTypes = {ge::DT_FLOAT, ge::DT_FLOAT};
        fa_host::DescribeNd(this->Input("key_antiquant_scale"), REQUIRED, floatTypes);
        fa_host::DescribeNd(this->Input("value_antiquant_scale"), REQUIRED, floatTypes);
        this->Attr("key_antiquant_mode").AttrType(OPTIONAL).Int(0);
        this->Attr("value_antiquant_mode").AttrType(OPTIONAL).Int(1);
        fa_host::RegisterHost(*this, fa_host::InferDecodeShape, fa_host::InferDecodeDataType, TilingFunc,
                              fa_host::Chips::kA2A3);
    }
};
OP_ADD(FlashAttentionDecodeV3);
}  // namespace ops
