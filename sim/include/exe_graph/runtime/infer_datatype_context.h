// exe_graph/runtime/infer_datatype_context.h -- gert::InferDataTypeContext (metadef
// inc/external/exe_graph/runtime/infer_datatype_context.h, subset).
#pragma once

#include <cstddef>

#include "exe_graph/runtime/extended_kernel_context.h"
#include "graph/types.h"

namespace gert {
class InferDataTypeContext : public ExtendedKernelContext {
 public:
    // DT_UNDEFINED when index is out of range.
    ge::DataType GetInputDataType(const size_t index) const;
    ge::DataType GetOutputDataType(const size_t index) const;
    ge::graphStatus SetOutputDataType(const size_t index, const ge::DataType datatype);

 private:
    friend struct acl_fa_sim::host::NodeData;
    explicit InferDataTypeContext(acl_fa_sim::host::NodeData *node) : ExtendedKernelContext(node) {}
};
}  // namespace gert
