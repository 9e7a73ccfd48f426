// exe_graph/runtime/sim_node_data.h -- simulator only (no CANN counterpart): the declaration of
// the node that the simulator's gert contexts and tensors view (acl_fa_sim::host::NodeData,
// sim/src/host/node_data.h), for the headers that hold a pointer to it.
#pragma once

namespace acl_fa_sim {
namespace host {
struct NodeData;
}  // namespace host
}  // namespace acl_fa_sim
