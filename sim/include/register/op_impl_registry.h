// register/op_impl_registry.h -- the function types an op registers for shape/dtype
// inference and tiling (metadef inc/external/register/op_impl_registry.h, subset: the
// type aliases of gert::OpImplRegisterV2; the simulator's OP_ADD records them in the
// OpDef registry instead of an OpImplRegisterV2 object).
#pragma once

#include "exe_graph/runtime/base_type.h"
#include "exe_graph/runtime/infer_datatype_context.h"
#include "exe_graph/runtime/infer_shape_context.h"
#include "exe_graph/runtime/tiling_context.h"
#include "graph/types.h"

namespace gert {
class OpImplRegisterV2 {
 public:
    using InferShapeKernelFunc = UINT32 (*)(InferShapeContext *);
    using TilingKernelFunc = UINT32 (*)(TilingContext *);
    using InferDataTypeKernelFunc = UINT32 (*)(InferDataTypeContext *);
};
}  // namespace gert
