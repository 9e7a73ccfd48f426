// ophost_probe.cpp -- libophost_probe.so, a test-only C view of sim_host/op_runtime.h over
// the real op_host code (FlashAttention): tests/ops/flash_attention/test_op_host.py drives InferShape and
// TilingFunc through it and decodes the tiling bytes. Not installed with the package.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flash_attention_tiling.h"
#include "sim_host/op_runtime.h"

extern "C" {

#define ACLFA_PROBE_MAX_DIMS 8

typedef struct aclfaProbeTensor {
    int64_t dims[ACLFA_PROBE_MAX_DIMS];
    uint32_t dimNum;
    int32_t dtype;  // ge::DataType
} aclfaProbeTensor;

// FlashAttention's attrs; bit i of `given` says attr i (OpDef order) is passed, else its
// OpDef default applies.
typedef struct aclfaProbeAttrs {
    float scaleValue;
    int32_t causal;
    const char *inputLayout;
    int64_t numHeads, numKvHeads, blockM, blockN;
    uint32_t given;
} aclfaProbeAttrs;

}  // extern "C"

namespace {
using acl_fa_sim::host::AttrInfo;
using acl_fa_sim::host::TensorInfo;

const char *const kOp = "FlashAttention";

std::vector<TensorInfo> ToTensors(const aclfaProbeTensor *t, size_t n) {
    std::vector<TensorInfo> out(n);
    for (size_t i = 0; i < n; ++i) {
        out[i].shape.assign(t[i].dims, t[i].dims + t[i].dimNum);
        out[i].dtype = t[i].dtype;
    }
    return out;
}

std::vector<AttrInfo> ToAttrs(const aclfaProbeAttrs *a) {
    std::vector<AttrInfo> out;
    if (a->given & (1u << 0)) out.push_back({"scale_value", a->scaleValue});
    if (a->given & (1u << 1)) out.push_back({"causal", a->causal != 0});
    if (a->given & (1u << 2)) out.push_back({"input_layout", std::string(a->inputLayout ? a->inputLayout : "")});
    if (a->given & (1u << 3)) out.push_back({"num_heads", a->numHeads});
    if (a->given & (1u << 4)) out.push_back({"num_kv_heads", a->numKvHeads});
    if (a->given & (1u << 5)) out.push_back({"block_m", a->blockM});
    if (a->given & (1u << 6)) out.push_back({"block_n", a->blockN});
    return out;
}

void SetError(char *buf, size_t len, const std::string &msg) {
    if (buf != nullptr && len > 0) std::snprintf(buf, len, "%s", msg.c_str());
}
}  // namespace

extern "C" {

int32_t aclfaProbeHasOp(char *err, size_t errLen) {
    std::vector<TensorInfo> outs;
    std::string error;
    if (acl_fa_sim::host::HasOp(kOp)) return 1;
    // RunInferShape explains why the op is unavailable.
    acl_fa_sim::host::RunInferShape(kOp, {}, {}, &outs, &error);
    SetError(err, errLen, error);
    return 0;
}

uint32_t aclfaProbeInferShape(const aclfaProbeTensor *inputs, const aclfaProbeAttrs *attrs,
                              aclfaProbeTensor *outputs, char *err, size_t errLen) {
    std::vector<TensorInfo> outs;
    std::string error;
    const uint32_t rc = acl_fa_sim::host::RunInferShape(kOp, ToTensors(inputs, 3), ToAttrs(attrs), &outs, &error);
    SetError(err, errLen, error);
    if (rc != 0) return rc;
    for (size_t i = 0; i < outs.size() && i < 2; ++i) {
        outputs[i].dimNum = static_cast<uint32_t>(outs[i].shape.size());
        for (size_t d = 0; d < outs[i].shape.size() && d < ACLFA_PROBE_MAX_DIMS; ++d) outputs[i].dims[d] = outs[i].shape[d];
        outputs[i].dtype = outs[i].dtype;
    }
    return 0;
}

uint32_t aclfaProbeTiling(const aclfaProbeTensor *inputs, const aclfaProbeTensor *outputs,
                          const aclfaProbeAttrs *attrs, uint32_t *blockDim, uint64_t *tilingKey, uint8_t *tiling,
                          size_t tilingCap, size_t *tilingSize, uint64_t *workspace0, char *err, size_t errLen) {
    acl_fa_sim::host::TilingResult result;
    std::string error;
    const uint32_t rc = acl_fa_sim::host::RunTiling(kOp, ToTensors(inputs, 3), ToTensors(outputs, 2),
                                                    ToAttrs(attrs), &result, &error);
    SetError(err, errLen, error);
    if (rc != 0) return rc;
    *blockDim = result.blockDim;
    *tilingKey = result.tilingKey;
    *tilingSize = result.tilingData.size();
    std::memcpy(tiling, result.tilingData.data(), std::min(tilingCap, result.tilingData.size()));
    *workspace0 = result.workspaceSizes.empty() ? 0 : result.workspaceSizes[0];
    return 0;
}

size_t aclfaProbeTilingDataSize(void) { return sizeof(FlashAttentionTilingData); }

// Offsets of a few fields, for the cffi declaration check.
size_t aclfaProbeTilingOffset(int32_t which) {
    switch (which) {
        case 0: return offsetof(FlashAttentionTilingData, scaleValue);
        case 1: return offsetof(FlashAttentionTilingData, coreItemStart);
        case 2: return offsetof(FlashAttentionTilingData, wsScoreOffset);
        case 3: return offsetof(FlashAttentionTilingData, qkTiling);
        case 4: return offsetof(FlashAttentionTilingData, pvTiling);
        case 5: return offsetof(FlashAttentionTilingData, preTokens);
        case 6: return offsetof(FlashAttentionTilingData, tokensQ);
        case 7: return offsetof(FlashAttentionTilingData, hasMask);
        case 8: return offsetof(FlashAttentionTilingData, wsMaskSummaryOffset);
        case 9: return offsetof(FlashAttentionTilingData, seed);
        default: return 0;
    }
}

}  // extern "C"
