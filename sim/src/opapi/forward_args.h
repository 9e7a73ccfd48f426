// forward_args.h -- the checks phase one of the forward ops' aclnn entries share
// (aclnnFlashAttention, aclnnFlashAttentionV2): dtypes of query, key, value and the outputs,
// the layout, and the problem sizes the shapes give for it.
#pragma once

#include <cstdint>
#include <string>

#include "flash_attention_launch.h"
#include "opapi_common.h"

namespace acl_fa_sim {
namespace opapi {

// Problem sizes read from the shapes for a layout. TND ([T, N, D]): b = 1, sq / skv = Tq / Tkv.
struct ForwardDims {
    int64_t b = 0, n = 0, nkv = 0, sq = 0, skv = 0, d = 0;
};

// query, key, value, attentionOut and softmaxLse against each other and the layout (BNSD, BSND,
// BSH, and TND when allowTnd); fills *dims. False with *failure naming the argument.
bool ValidateForward(const char *api, const std::string &layout, bool allowTnd, const Arg &q, const Arg &k,
                     const Arg &v, const Arg &out, const Arg &lse, int64_t numHeads, int64_t numKvHeads,
                     ForwardDims *dims, Failure *failure);

// The end of phase one of a forward op once its tiling ran: applies the test-only tiling
// override, takes the tiling into `launch` (whose tensor pointers the caller filled) and returns
// the workspace size with an executor whose phase two (`phase2Api`) enqueues the launch.
aclnnStatus CreateForwardExecutor(const char *opType, const char *phase1Api, const char *phase2Api,
                                  host::TilingResult *tiling, const FlashAttentionLaunch &launch,
                                  uint64_t *workspaceSize, aclOpExecutor **executor);

}  // namespace opapi
}  // namespace acl_fa_sim
