// flash_attention_decode_host.h -- what FlashAttentionDecode (flash_attention_decode.cpp) and
// FlashAttentionDecodeV2 (flash_attention_decode_v2.cpp) share on the host: V1's inputs, outputs
// and attrs (V2 appends its own after them), InferShape / InferDataType, and the TilingFunc body,
// which V2 calls with its score modifiers. Real CANN host APIs only.
#pragma once

#include <string>
#include <vector>

#include "register/op_def_registry.h"

namespace fa_host {

// FlashAttentionDecodeV2's score modifiers (docs/decode.md, "Score modifiers in decode") and left
// padding; all off for FlashAttentionDecode.
struct DecodeV2Inputs {
    float softcap = 0.0f;  // > 0: S = softcap * tanh(scale * Q.K^T / softcap)
    bool alibi = false;    // alibi_slopes [B, N] fp32 given
    bool sinks = false;    // sinks [N] fp32 given
    bool leftpad = false;  // cache_leftpad [B] int32 given
    bool kvInt8 = false;   // FlashAttentionDecodeV3: int8 key/value with their antiquant scales
};

// FlashAttentionDecode's inputs query, key, value, block_table, actual_seq_lengths_kv, outputs
// attention_out, softmax_lse, attrs scale_value, block_size, pre_tokens, next_tokens, num_splits.
void DefineFlashAttentionDecode(ops::OpDef &def);
// The same with key / value of `cacheTypes` (one per query dtype: float16, bfloat16), as V3's int8.
void DefineFlashAttentionDecode(ops::OpDef &def, const std::vector<ge::DataType> &cacheTypes);
// FlashAttentionDecodeV2's additions after V1's: inputs alibi_slopes, sinks, cache_leftpad (optional),
// attr softcap.
void DefineFlashAttentionDecodeV2(ops::OpDef &def);
// "" or what is wrong with an optional input's shape (nullptr: absent, fine; expected: `dims`).
std::string CheckDecodeInputShape(const gert::StorageShape *shape, const char *name, const std::vector<int64_t> &dims);
// Checks V2's attr and optional inputs of the context and sets `mods` from them (V2 and V3).
ge::graphStatus ReadDecodeV2Inputs(gert::TilingContext *context, DecodeV2Inputs *mods);

ge::graphStatus InferDecodeShape(gert::InferShapeContext *context);
ge::graphStatus InferDecodeDataType(gert::InferDataTypeContext *context);
ge::graphStatus TileFlashAttentionDecode(gert::TilingContext *context, const DecodeV2Inputs &mods);

}  // namespace fa_host
