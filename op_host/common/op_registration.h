// op_registration.h -- what every OpDef of the operator family registers the same way: its host
// functions and the SoCs its AI Core kernel is built for. Real CANN host APIs only.
#pragma once

#include <vector>

#include "register/op_def_registry.h"

namespace fa_host {

// Which chips an operator's kernel is built for.
enum class Chips {
    kA2A3,         // Atlas A2/A3 (ascend910b, ascend910_93): the ops that need their MIX cores or DataCopyPad
    kA2A3Coupled,  // and the coupled-core chips (ascend310p, ascend910), whose tiling refuses, naming the
                   // chip, what their AI Core cannot do
};

// An input or output of the OpDef: its param type and its dtype in each supported combination,
// every one in ND (as every tensor of the family).
inline ops::OpParamDef &DescribeNd(ops::OpParamDef &param, ops::Option type, const std::vector<ge::DataType> &dtypes) {
    const std::vector<ge::Format> nd(dtypes.size(), ge::FORMAT_ND);
    return param.ParamType(type).DataType(dtypes).Format(nd).UnknownShapeFormat(nd);
}

// Sets `def`'s InferShape, InferDataType and TilingFunc and the AI Core configs of `chips`.
inline void RegisterHost(ops::OpDef &def, gert::OpImplRegisterV2::InferShapeKernelFunc inferShape,
                         gert::OpImplRegisterV2::InferDataTypeKernelFunc inferDataType,
                         gert::OpImplRegisterV2::TilingKernelFunc tiling, Chips chips) {
    def.SetInferShape(inferShape).SetInferDataType(inferDataType);
    ops::OpAICoreDef &aicore = def.AICore().SetTiling(tiling).AddConfig("ascend910b").AddConfig("ascend910_93");
    if (chips == Chips::kA2A3Coupled) aicore.AddConfig("ascend310p").AddConfig("ascend910");
}

// The attrs a FlashAttention op and its gradient share, in their OpDef order: scale_value, the
// mask (causal; V2: the band pre_tokens / next_tokens, 2147483647 = unbounded), input_layout,
// num_heads, num_kv_heads (0 = from the shapes), and V2's dropout (keep_prob, seed, offset).
inline void AddAttentionAttrs(ops::OpDef &def, bool v2) {
    def.Attr("scale_value").AttrType(ops::OPTIONAL).Float(1.0);
    if (v2) {
        def.Attr("pre_tokens").AttrType(ops::OPTIONAL).Int(2147483647);
        def.Attr("next_tokens").AttrType(ops::OPTIONAL).Int(2147483647);
    } else {
        def.Attr("causal").AttrType(ops::OPTIONAL).Bool(false);
    }
    def.Attr("input_layout").AttrType(ops::OPTIONAL).String("BNSD");
    def.Attr("num_heads").AttrType(ops::OPTIONAL).Int(0);
    def.Attr("num_kv_heads").AttrType(ops::OPTIONAL).Int(0);
    if (v2) {
        def.Attr("keep_prob").AttrType(ops::OPTIONAL).Float(1.0);
        def.Attr("seed").AttrType(ops::OPTIONAL).Int(0);
        def.Attr("offset").AttrType(ops::OPTIONAL).Int(0);
    }
}

// The user's block sizes, the last attrs of those ops: block_m, block_n (0 = the policy's choice).
inline void AddBlockAttrs(ops::OpDef &def) {
    def.Attr("block_m").AttrType(ops::OPTIONAL).Int(0);
    def.Attr("block_n").AttrType(ops::OPTIONAL).Int(0);
}

}  // namespace fa_host
