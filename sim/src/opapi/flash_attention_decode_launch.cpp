// flash_attention_decode_launch.cpp -- runs op_kernel's flash_attention_decode entry on the
// kernel engine from a stream's worker thread.
#include "flash_attention_decode_launch.h"

#include <cstdio>
#include <string>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "kernel_operator.h"

extern "C" void flash_attention_decode(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR block_table,
                                       GM_ADDR actual_seq_lengths_kv, GM_ADDR attention_out, GM_ADDR softmax_lse,
                                       GM_ADDR workspace, GM_ADDR tiling);

namespace acl_fa_sim {
namespace {

aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *l = static_cast<const FlashAttentionDecodeLaunch *>(userData);
    std::string error;
    SetLaunchTilingKey(l->tilingKey);
    const aclError rc = LaunchKernel(
        "flash_attention_decode", l->blockDim, KERNEL_TYPE_MIX_AIC_1_2,
        [l] {
            flash_attention_decode(l->query, l->key, l->value, l->blockTable, l->actualSeqLengthsKv,
                                   l->attentionOut, l->softmaxLse, l->workspace,
                                   const_cast<uint8_t *>(l->tilingData.data()));
        },
        &error);
    if (rc != ACL_SUCCESS) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
    }
    return rc;
}

void Release(void *userData) { delete static_cast<FlashAttentionDecodeLaunch *>(userData); }

}  // namespace

aclError EnqueueFlashAttentionDecode(aclrtStream stream, FlashAttentionDecodeLaunch *launch)
{
    return aclfaSimStreamEnqueue(stream, "flash_attention_decode", RunOnStream, launch, Release);
}

}  // namespace acl_fa_sim
