// exe_graph/runtime/extended_kernel_context.h -- what every gert op context answers about the
// node: tensor descs, attrs, names (metadef inc/external/exe_graph/runtime/, subset).
//
// Simulator: CANN builds contexts over a KernelRunContext chain; here each context views a
// acl_fa_sim::host::NodeData (sim/src/host) that op_runtime fills from concrete tensors.
#pragma once

#include <cstddef>

#include "exe_graph/runtime/compute_node_info.h"
#include "exe_graph/runtime/runtime_attrs.h"
#include "exe_graph/runtime/sim_node_data.h"
#include "graph/types.h"

namespace gert {
class ExtendedKernelContext {
 public:
    // nullptr when index is out of range. `index` counts the inputs present (an absent
    // OPTIONAL input takes no index, as in CANN); the *Optional* getters take the OpDef index.
    const CompileTimeTensorDesc *GetInputDesc(const size_t index) const;
    const CompileTimeTensorDesc *GetOutputDesc(const size_t index) const;
    // By the input's index in the OpDef (ir_index); nullptr when that OPTIONAL input is absent.
    const CompileTimeTensorDesc *GetOptionalInputDesc(const size_t ir_index) const;
    size_t GetComputeNodeInputNum() const;
    size_t GetComputeNodeOutputNum() const;
    const RuntimeAttrs *GetAttrs() const;
    const ge::char_t *GetNodeType() const;
    const ge::char_t *GetNodeName() const;

 protected:
    explicit ExtendedKernelContext(acl_fa_sim::host::NodeData *node) : node_(node) {}
    acl_fa_sim::host::NodeData *node_;
};
}  // namespace gert
