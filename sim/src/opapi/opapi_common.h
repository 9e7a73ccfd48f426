// opapi_common.h -- the pieces of the generic op path (generic_op.h): failures with their
// aclnn status and message, the checks of a tensor argument (non-null, device data, ND,
// contiguous, no empty dimension), and conversions to the op runtime's TensorInfo.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "aclnn/acl_meta.h"
#include "aclnn/opdev/op_errno.h"
#include "sim_host/op_runtime.h"

namespace acl_fa_sim {
namespace opapi {

constexpr int32_t FORMAT_ND = 2;  // aclFormat / ge::Format ACL_FORMAT_ND

struct Failure {
    aclnnStatus code = 0;
    std::string message;
};

Failure Fail(aclnnStatus code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Sets aclGetRecentErrMsg to the failure's message and returns its code.
aclnnStatus Report(const Failure &failure);

// Phase two of every op (`api`, e.g. "aclnnFlashAttention"): runs on `stream` the executor that
// phase one made; a null executor is ACLNN_ERR_PARAM_NULLPTR with the API named.
aclnnStatus RunPhase2(const char *api, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                      aclrtStream stream);

// The directory libcust_opapi.so was loaded from (the kernel binaries and test libraries lie next to it).
std::string LibraryDirectory();

// Bytes of one element of an aclDataType / ge::DataType (1 for those of one byte or fewer).
size_t ElementBytes(int32_t dtype);
std::string ShapeString(const aclfaSimTensorView &view);
std::string ShapeString(const std::vector<int64_t> &shape);

// A tensor argument as phase one checks it.
struct Arg {
    const char *name;
    aclfaSimTensorView view{};
};

// Fills arg->view; false (and *failure) when the tensor is null, has no data, is not ND, not
// contiguous or has an empty dimension. `api` names the entry in messages.
bool CheckTensor(const char *api, const aclTensor *tensor, Arg *arg, Failure *failure);
// The caller's output has the shape InferShape gave.
bool CheckOutput(const char *api, const Arg &arg, const host::TensorInfo &expected, Failure *failure);
host::TensorInfo InfoOf(const Arg &arg);
uint8_t *DataOf(const Arg &arg, size_t elementBytes);
// Phase two's checks of the workspace it was given against the `needed` bytes of phase one;
// ACLNN_SUCCESS or the status (message set).
aclnnStatus CheckWorkspace(const char *api, void *workspace, uint64_t workspaceSize, uint64_t needed);

}  // namespace opapi
}  // namespace acl_fa_sim
