// flash_attention_launch.h -- one launch of the forward kernel on a simulated stream: the
// flash_attention entry (FlashAttention) or flash_attention_v2 (FlashAttentionV2, with its
// optional inputs and outputs; null when not given).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl_base.h"

namespace acl_fa_sim {

// Device pointers (simulated GM) and the tiling of one launch; the stream task owns a copy.
struct FlashAttentionLaunch {
    uint8_t *query = nullptr;
    uint8_t *key = nullptr;
    uint8_t *value = nullptr;
    uint8_t *attentionOut = nullptr;
    uint8_t *softmaxLse = nullptr;
    bool v2 = false;                    // run flash_attention_v2 with the pointers below
    uint8_t *attenMask = nullptr;       // V2 optional inputs
    uint8_t *actualSeqQlen = nullptr;
    uint8_t *actualSeqKvlen = nullptr;
    uint8_t *dropoutMask = nullptr;     // V2 optional output
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;  // FlashAttentionTilingData bytes, as TilingFunc wrote them
};

// The kernel entry `name` of the per-architecture kernel binary for `npuArch`
// (libflash_attention_kernel_<arch>.so next to this library: the forward's entries and
// attention_lse_merge), loaded once; nullptr with *error set when it cannot be loaded.
void *KernelEntryFor(int32_t npuArch, const std::string &name, std::string *error);

// Enqueues the launch on `stream` (NULL = default stream). On success the stream task owns
// `launch` and deletes it when done; on failure the caller still owns it.
aclError EnqueueFlashAttention(aclrtStream stream, FlashAttentionLaunch *launch);

}  // namespace acl_fa_sim
