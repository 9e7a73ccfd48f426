// generic_op.h -- the one implementation behind every custom op's aclnn entries. The entries
// themselves are generated from the op JSON (gen_aclnn.py): they hand their arguments to
// PhaseOne / PhaseTwo with the op's interface (OpInterface), and nothing here knows any op.
//
// Phase one does what CANN's generated op API and nnopbase do before a launch: check each
// tensor (non-null unless optional, device data, ND, contiguous, no empty dimension), the
// memory of the outputs against the other arguments, the dtype/format combination against the
// OpDef's columns; copy value-depend inputs to the host; run the op's InferShape (outputs
// checked against it) and TilingFunc for the simulated chip; make the executor. Phase two
// enqueues the kernel entry named by the op on the stream, with the GM addresses in the JSON's
// order (inputs, outputs, workspace, tiling); kernel faults surface at the next stream
// synchronization, as on the chip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aclnn/acl_meta.h"
#include "ascendc_sim/kernel_macros.h"
#include "sim_host/op_runtime.h"

namespace acl_fa_sim {
namespace opapi {

// One tensor of the op JSON: its name there (the OpDef's), its aclnn parameter name (for
// messages), and whether it is optional (NULL = absent) and value-depend (the TilingFunc sees
// a host copy of its values).
struct TensorParam {
    const char *name;
    const char *argName;
    bool optional;
    bool valueDepend;
};

struct OpInterface {
    const char *opType;  // the JSON's "op"
    const char *kernel;  // the kernel entry: snake_case of opType
    const char *phase1;  // aclnn<Op>GetWorkspaceSize
    const char *phase2;  // aclnn<Op>
    const TensorParam *inputs;
    size_t numInputs;
    const TensorParam *outputs;
    size_t numOutputs;
    uint32_t kernelType;  // what the kernel declares for dav-c220 (KERNEL_TASK_TYPE_DEFAULT)
};

// tensors: the inputs then the outputs, in the JSON's order; attrs: by JSON name (an absent
// optional string attr left out, so that the OpDef's default applies).
aclnnStatus PhaseOne(const OpInterface &op, const aclTensor *const *tensors, std::vector<host::AttrInfo> attrs,
                     uint64_t *workspaceSize, aclOpExecutor **executor);

aclnnStatus PhaseTwo(const OpInterface &op, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                     aclrtStream stream);

}  // namespace opapi
}  // namespace acl_fa_sim
