// grad_opapi.h -- what the simulator's aclnnFlashAttentionGrad and aclnnFlashAttentionGradV2
// entries share: the dtype checks of the activations, LSE and gradients, and phase one's
// InferShape / TilingFunc / executor over a kernel entry given as an adapter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "opapi_common.h"

namespace acl_fa_sim {
namespace opapi {

// Runs the op's kernel entry for a launch: gm are the device pointers in the entry's argument
// order (nullptr for an absent optional input), then the workspace and the tiling bytes.
using GradKernelFn = void (*)(uint8_t *const *gm, uint8_t *workspace, uint8_t *tiling);

struct GradEntry {
    const char *opType;      // OpDef type
    const char *api1;        // phase one's name, for messages
    const char *api2;        // phase two's name
    const char *kernelName;  // kernel entry name, for the launch and the stream
    GradKernelFn kernel;
};

// query, key, value, attentionOut, dout share float16 / bfloat16; softmaxLse is float32; dq, dk,
// dv have query's dtype. acts: the five activations then the LSE; grads: dq, dk, dv.
bool CheckGradDtypes(const char *api, const Arg *const acts[6], const Arg *const grads[3], Failure *failure);

// Phase one after the arguments were checked: InferShape (outputs checked against grads),
// TilingFunc, and the executor that launches entry.kernel with gm (inputs in OpDef order with
// absent optional ones as nullptr, then dq, dk, dv).
aclnnStatus PrepareGrad(const GradEntry &entry, const std::vector<host::TensorInfo> &inputs,
                        const std::vector<host::AttrInfo> &attrs, const Arg *const grads[3],
                        const std::vector<uint8_t *> &gm, uint64_t *workspaceSize, aclOpExecutor **executor);

}  // namespace opapi
}  // namespace acl_fa_sim
