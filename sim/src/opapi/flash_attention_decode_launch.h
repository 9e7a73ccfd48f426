// flash_attention_decode_launch.h -- one launch of the flash_attention_decode kernel on a
// simulated stream.
#pragma once

#include <cstdint>
#include <vector>

#include "acl/acl_base.h"

namespace acl_fa_sim {

// Device pointers (simulated GM) and the tiling of one launch; the stream task owns a copy.
struct FlashAttentionDecodeLaunch {
    uint8_t *query = nullptr;
    uint8_t *key = nullptr;
    uint8_t *value = nullptr;
    uint8_t *blockTable = nullptr;
    uint8_t *actualSeqLengthsKv = nullptr;
    uint8_t *attentionOut = nullptr;
    uint8_t *softmaxLse = nullptr;
    uint8_t *workspace = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    std::vector<uint8_t> tilingData;  // FlashAttentionDecodeTilingData bytes
};

// Enqueues the launch on `stream` (NULL = default stream). On success the stream task owns
// `launch`; on failure the caller still owns it.
aclError EnqueueFlashAttentionDecode(aclrtStream stream, FlashAttentionDecodeLaunch *launch);

}  // namespace acl_fa_sim
