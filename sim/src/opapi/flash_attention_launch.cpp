// flash_attention_launch.cpp -- runs op_kernel's flash_attention entry on the kernel engine from a
// stream's worker thread, as the runtime would dispatch the binary to the AI Cores.
//
// The entry is compiled once per architecture (sim/src/opapi/CMakeLists.txt); the binary of the
// simulated chip's architecture runs, with the kernel type that architecture launches it as:
// MIX AIC:AIV 1:2 on dav-c220 (2201), one AI Core per block on the coupled dav-m200 (2002) and
// dav-c100 (1001).
#include "flash_attention_launch.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "acl_fa_sim.h"
#include "acl_fa_sim_kernel.h"
#include "flash_attention_tiling.h"
#include "kernel_operator.h"

namespace acl_fa_sim {
namespace {

using KernelEntry = void (*)(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attention_out,
                             GM_ADDR softmax_lse, GM_ADDR workspace, GM_ADDR tiling);
using KernelEntryV2 = void (*)(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR atten_mask,
                               GM_ADDR actual_seq_qlen, GM_ADDR actual_seq_kvlen, GM_ADDR attention_out,
                               GM_ADDR softmax_lse, GM_ADDR dropout_mask, GM_ADDR workspace, GM_ADDR tiling);

// The directory this library was loaded from (the kernel modules lie next to it).
std::string OwnDirectory()
{
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&EnqueueFlashAttention), &info) == 0 || info.dli_fname == nullptr) {
        return ".";
    }
    const std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}


aclError RunOnStream(void *userData, char *errBuf, size_t errBufLen)
{
    const auto *launch = static_cast<const FlashAttentionLaunch *>(userData);
    const aclfaSimChip *chip = aclfaSimGetChip();
    std::string error;
    const std::string name = launch->v2 ? "flash_attention_v2" : "flash_attention";
    void *entry = KernelEntryFor(chip->npuArch, name, &error);
    if (entry == nullptr) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
        return ACL_ERROR_RT_AICORE_EXCEPTION;
    }
    const uint32_t kernelType = chip->coupled != 0 ? KERNEL_TYPE_AICORE : KERNEL_TYPE_MIX_AIC_1_2;
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
        name.c_str(), launch->blockDim, kernelType,
        [launch, entry] {
            uint8_t *tiling = const_cast<uint8_t *>(launch->tilingData.data());
            if (launch->v2) {
                reinterpret_cast<KernelEntryV2>(entry)(launch->query, launch->key, launch->value, launch->attenMask,
                                                       launch->actualSeqQlen, launch->actualSeqKvlen,
                                                       launch->attentionOut, launch->softmaxLse, launch->dropoutMask,
                                                       launch->workspace, tiling);
            } else {
                reinterpret_cast<KernelEntry>(entry)(launch->query, launch->key, launch->value, launch->attentionOut,
                                                     launch->softmaxLse, launch->workspace, tiling);
            }
        },
        &error);
    if (rc != ACL_SUCCESS) {
        snprintf(errBuf, errBufLen, "%s", error.c_str());
    }
    return rc;
}

void Release(void *userData) { delete static_cast<FlashAttentionLaunch *>(userData); }

}  // namespace

void *KernelEntryFor(int32_t npuArch, const std::string &name, std::string *error)
{
    static std::mutex mutex;
    static std::map<std::pair<int32_t, std::string>, void *> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    auto found = loaded.find({npuArch, name});
    if (found != loaded.end()) return found->second;
    const std::string path = OwnDirectory() + "/libflash_attention_kernel_" + std::to_string(npuArch) + ".so";
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char *why = dlerror();
        *error = "no kernel binary for arch " + std::to_string(npuArch) + ": " +
                 (why != nullptr ? why : path);
        return nullptr;
    }
    void *entry = dlsym(handle, name.c_str());
    if (entry == nullptr) {
        *error = path + " has no " + name + " entry";
        return nullptr;
    }
    loaded[{npuArch, name}] = entry;
    return entry;
}

aclError EnqueueFlashAttention(aclrtStream stream, FlashAttentionLaunch *launch)
{
    return aclfaSimStreamEnqueue(stream, launch->v2 ? "flash_attention_v2" : "flash_attention", RunOnStream, launch,
                                 Release);
}

}  // namespace acl_fa_sim
