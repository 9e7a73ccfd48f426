// flash_attention_decode_host.h -- what FlashAttentionDecode (flash_attention_decode.cpp) and
// FlashAttentionDecodeV2 (flash_attention_decode_v2.cpp) share on the host: V1's inputs, outputs
// and attrs (V2 appends its own after them), InferShape / InferDataType, and the TilingFunc body,
// which V2 calls with its score modifiers. Real CANN host APIs only.
#pragma once

#include "register/op_def_registry.h"

namespace fa_host {

// FlashAttentionDecodeV2's score modifiers (docs/decode.md, "Score modifiers in decode") and left
// padding; all off for FlashAttentionDecode.
struct DecodeV2Inputs {
    float softcap = 0.0f;  // > 0: S = softcap * tanh(scale * Q.K^T / softcap)
    bool alibi = false;    // alibi_slopes [B, N] fp32 given
    bool sinks = false;    // sinks [N] fp32 given
    bool leftpad = false;  // cache_leftpad [B] int32 given
};

// FlashAttentionDecode's inputs query, key, value, block_table, actual_seq_lengths_kv, outputs
// attention_out, softmax_lse, attrs scale_value, block_size, pre_tokens, next_tokens, num_splits.
void DefineFlashAttentionDecode(ops::OpDef &def);

ge::graphStatus InferDecodeShape(gert::InferShapeContext *context);
ge::graphStatus InferDecodeDataType(gert::InferDataTypeContext *context);
ge::graphStatus TileFlashAttentionDecode(gert::TilingContext *context, const DecodeV2Inputs &mods);

}  // namespace fa_host
