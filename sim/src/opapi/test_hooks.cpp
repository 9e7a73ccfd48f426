// test_hooks.cpp -- see test_hooks.h.
#include "test_hooks.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "flash_attention_tiling.h"
#include "opapi_common.h"

namespace acl_fa_sim {
namespace test_hooks {
namespace {

using TilingHook = int (*)(const char *opType, uint8_t *tiling, size_t size, uint64_t *tilingKey, char *error,
                           size_t errorLen);

}  // namespace

bool ApplyTilingHook(const char *opType, std::vector<uint8_t> *tilingData, uint64_t *tilingKey, std::string *error)
{
    const char *text = std::getenv(ENV_TEST_FORCE_BLOCK_M);
    if (text == nullptr || *text == '\0') return true;
    const char *path = std::getenv(ENV_TEST_HOOK_LIBRARY);
    void *handle = path != nullptr && *path != '\0' ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    void *hook = handle != nullptr ? dlsym(handle, "aclfaSimTestTilingHook") : nullptr;
    if (hook == nullptr) {
        *error = std::string(ENV_TEST_FORCE_BLOCK_M) + " is set but the test library " + ENV_TEST_HOOK_LIBRARY +
                 "=" + (path != nullptr ? path : "(unset)") + " cannot be loaded (the tests build it, it is never "
                 "installed)";
        return false;
    }
    char buffer[512] = {};
    if (reinterpret_cast<TilingHook>(hook)(opType, tilingData->data(), tilingData->size(), tilingKey, buffer,
                                          sizeof buffer) != 0) {
        *error = buffer;
        return false;
    }
    return true;
}

namespace {

// The forward ops, whose tiling is FlashAttentionTilingData: FlashAttention and its versioned
// entries FlashAttentionV<n> (V2, V3, ... -- a new version needs no edit here), not
// FlashAttentionGrad / FlashAttentionDecode.
bool IsForwardOp(const char *opType)
{
    constexpr char kForward[] = "FlashAttention";
    const size_t n = sizeof kForward - 1;
    if (std::strncmp(opType, kForward, n) != 0) return false;
    const char *version = opType + n;
    if (*version == '\0') return true;
    if (*version != 'V' || version[1] == '\0') return false;
    for (const char *c = version + 1; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9') return false;
    }
    return true;
}

}  // namespace

std::vector<uint64_t> WorkItemsHint(const char *opType, const std::vector<uint8_t> &tilingData)
{
    std::vector<uint64_t> items;
    if (!IsForwardOp(opType) || tilingData.size() < sizeof(FlashAttentionTilingData)) return items;
    // AIC core c owns items [coreItemStart[c], coreItemStart[c + 1]) (flash_attention_tiling.h).
    FlashAttentionTilingData tiling;
    std::memcpy(&tiling, tilingData.data(), sizeof tiling);
    for (uint32_t c = 0; c < tiling.usedCoreNum && c < FA_MAX_CORES; ++c) {
        items.push_back(tiling.coreItemStart[c + 1] - tiling.coreItemStart[c]);
    }
    return items;
}

}  // namespace test_hooks
}  // namespace acl_fa_sim
