// flash_attention_launch.cpp -- runs op_kernel's flash_attention entry on the kernel engine from a
// stream's worker thread, as the runtime would dispatch the binary to the AI Cores.
#include "flash_attention_launch.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "flash_attention_tiling.h"
#include "kernel_operator.h"

extern "C" void flash_attention(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                                GM_ADDR softmax_lse, GM_ADDR workspace, GM_ADDR tiling);

namespace acl_fa_sim {
namespace {

aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *launch = static_cast<const FlashAttentionLaunch *>(userData);
    std::string error;
    SetLaunchTilingKey(launch->tilingKey);
    // AIC core c owns items [coreItemStart[c], coreItemStart[c + 1]) (flash_attention_tiling.h).
    if (launch->tilingData.size() >= sizeof(FlashAttentionTilingData)) {
        FlashAttentionTilingData tiling;
        std::memcpy(&tiling, launch->tilingData.data(), sizeof tiling);
        std::vector<uint64_t> items;
        for (uint32_t c = 0; c < tiling.usedCoreNum && c < FA_MAX_CORES; ++c) {
            items.push_back(tiling.coreItemStart[c + 1] - tiling.coreItemStart[c]);
        }
        SetLaunchWorkItems(std::move(items));
    }
    const aclError rc = LaunchKernel(
        "flash_attention", launch->blockDim, KERNEL_TYPE_MIX_AIC_1_2,
        [launch] {
            flash_attention(launch->query, launch->key, launch->value, launch->attentionOut,
                            launch->softmaxLse, launch->workspace,
                            const_cast<uint8_t *>(launch->tilingData.data()));
        },
        &error);
    if (rc != ACL_SUCCESS) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
    }
    return rc;
}

void Release(void *userData) { delete static_cast<FlashAttentionLaunch *>(userData); }

}  // namespace

aclError EnqueueFlashAttention(aclrtStream stream, FlashAttentionLaunch *launch)
{
    return aclfaSimStreamEnqueue(stream, "flash_attention", RunOnStream, launch, Release);
}

}  // namespace acl_fa_sim
