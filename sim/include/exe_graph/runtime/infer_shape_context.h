// exe_graph/runtime/infer_shape_context.h -- gert::InferShapeContext (metadef
// inc/external/exe_graph/runtime/infer_shape_context.h, subset).
#pragma once

#include <cstddef>

#include "exe_graph/runtime/extended_kernel_context.h"
#include "exe_graph/runtime/shape.h"
#include "exe_graph/runtime/tensor.h"

namespace gert {
class InferShapeContext : public ExtendedKernelContext {
 public:
    // nullptr when index is out of range.
    const Shape *GetInputShape(const size_t index) const;
    // By OpDef index; nullptr when the OPTIONAL input is absent.
    const Shape *GetOptionalInputShape(const size_t ir_index) const;
    // By OpDef index; nullptr when the OPTIONAL input is absent. Its address holds the host
    // values only for an input the OpDef marks ValueDepend (scope ALL), as on CANN.
    const Tensor *GetOptionalInputTensor(const size_t ir_index) const;
    Shape *GetOutputShape(const size_t index);

 private:
    friend struct acl_fa_sim::host::NodeData;
    explicit InferShapeContext(acl_fa_sim::host::NodeData *node) : ExtendedKernelContext(node) {}
};
}  // namespace gert
