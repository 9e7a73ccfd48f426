// flash_attention_grad_host.h -- what the FlashAttentionGrad, FlashAttentionGradV2 and
// FlashAttentionGradV3 op_hosts share: reading B, N, Nkv, Sq, Skv, D from the tensors' shapes in the layout, and the tiling
// (policy plan -> FlashAttentionGradTilingData, matmul tilings, workspace, block dim, key).
// Written against the real CANN host APIs only.
#pragma once

#include <cstdint>
#include <string>

#include "register/op_def_registry.h"
#include "flash_attention_grad_policy.h"

namespace fa_host {

struct GradDims {
    uint32_t layout = 0;  // FA_LAYOUT_* (TND: FA_LAYOUT_BSND's row strides, varlen = true)
    bool varlen = false;
    // Dense layouts: all set. TND: numHeads, numKvHeads, headDim and the token counts; batch,
    // seqQ, seqKv come from actual_seq_qlen / kvlen (sequences, longest lengths).
    int64_t batch = 0, numHeads = 0, numKvHeads = 0, seqQ = 0, seqKv = 0, headDim = 0;
    int64_t tokensQ = 0, tokensKv = 0;
};

std::string GradShapeText(const gert::Shape &s);

// The dims from query, key (value, attention_out, dout and softmax_lse must match) in the layout
// BNSD | BSND | BSH, or TND when allowTnd (q [Tq, N, D], k/v [Tkv, Nkv, D], lse [N, Tq]).
// "" or what is wrong.
std::string ReadGradDims(const gert::Shape &q, const gert::Shape &k, const gert::Shape &v, const gert::Shape &out,
                         const gert::Shape &dout, const gert::Shape &lse, const char *layoutAttr, int64_t numHeadsAttr,
                         int64_t numKvHeadsAttr, bool allowTnd, GradDims *d);

// InferShape of both ops once the dims were read (`error` "" or what is wrong): dq, dk, dv take
// the shapes of inputs 0, 1, 2 (query, key, value). InferDataType: query's dtype.
ge::graphStatus InferGradShapes(gert::InferShapeContext *context, const std::string &error);
ge::graphStatus InferGradDataTypes(gert::InferDataTypeContext *context);

// Dropout of a call: keep_prob (1 = none; problem.dropout says keep_prob < 1), the Philox key
// and first stream (the uint64 bits of the int64 attrs).
struct GradDropout {
    float keepProb = 1.0f;
    uint64_t seed = 0, offset = 0;
};

// Plans `problem` for the context's chip and fills the tiling data, matmul tilings, block dim,
// schedule mode, tiling key and workspace. `problem` holds every size, the band (and varlen
// lengths), the mask's dims and whether dropout is on; *error names what failed.
ge::graphStatus TileGrad(gert::TilingContext *context, const GradDims &d, fa_policy::Problem problem,
                         bool deterministic, float scale, const GradDropout &dropout, std::string *error);

// ---- FlashAttentionGradV2's interface, which V3 extends by trailing inputs, outputs and attrs ----
// Inputs in OpDef order (V3 adds alibi_slopes, sinks after these).
enum GradV2Input : size_t {
    kGradQuery = 0, kGradKey, kGradValue, kGradAttentionOut, kGradDout, kGradSoftmaxLse, kGradAttenMask,
    kGradActualSeqQlen, kGradActualSeqKvlen
};
// Attrs in OpDef order (V3 adds softcap after these).
enum GradV2Attr : size_t {
    kGradScaleValue = 0, kGradPreTokens, kGradNextTokens, kGradInputLayout, kGradNumHeads, kGradNumKvHeads,
    kGradKeepProb, kGradSeed, kGradOffset, kGradDeterministic, kGradBlockM, kGradBlockN
};
constexpr size_t kGradV2RequiredInputs = 6;

// The dims from V2's required input shapes and attrs; "" or what is wrong.
std::string ReadGradV2Dims(const gert::RuntimeAttrs *attrs, const gert::Shape *const shapes[kGradV2RequiredInputs],
                           GradDims *d);
// The problem of a V2 (or V3) call from its context: dims, band, varlen lengths, mask, dropout,
// blocks. "" or what is wrong.
std::string ReadGradV2Problem(gert::TilingContext *context, GradDims *d, fa_policy::Problem *p, bool *deterministic,
                              float *scale, GradDropout *dropout);
// V2's inputs (query .. actual_seq_kvlen), outputs dq, dk, dv and attrs (scale_value .. block_n),
// in OpDef order; V3 appends its own after each group.
void DescribeGradV2Inputs(ops::OpDef &def);
void DescribeGradOutputs(ops::OpDef &def);
void DescribeGradV2Attrs(ops::OpDef &def);

}  // namespace fa_host
