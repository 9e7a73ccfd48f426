// test_tiling_hook.cpp -- libaclfa_sim_testhooks.so, TEST-ONLY (built by the tests on first use,
// tests/kernels/simlib.py hook_library(); never installed): forces an oversized block into a
// forward op's tiling bytes after its TilingFunc ran, so that a test can prove the kernel
// engine's UB capacity check stops such a launch (issue 8, item 4). Loaded by the generic op
// path (sim/src/opapi/test_hooks.cpp) from $ACL_FA_SIM_TEST_HOOKS only when
// ACL_FA_SIM_TEST_FORCE_BLOCK_M is set.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "flash_attention_tiling.h"

namespace {

constexpr const char *ENV_TEST_FORCE_BLOCK_M = "ACL_FA_SIM_TEST_FORCE_BLOCK_M";

// Rewrites blockM, subBlockM (= blockM / 2), chunkRows (= subBlockM), numQBlocks, totalItems and
// the per-core item ranges of the FlashAttentionTilingData, and the Sq-tail bit of the tiling
// key (everything else, workspace and matmul tilings included, stays as TilingFunc sized it).
bool ApplyTestTilingOverride(std::vector<uint8_t> *tilingData, uint64_t *tilingKey, std::string *error)
{
    const char *text = std::getenv(ENV_TEST_FORCE_BLOCK_M);
    if (text == nullptr || *text == '\0') {
        return true;
    }
    char *end = nullptr;
    const unsigned long long blockM = std::strtoull(text, &end, 10);
    if (*end != '\0' || text[0] == '-' || blockM < 16 || blockM % 16 != 0 || blockM > UINT32_MAX) {
        *error = std::string(ENV_TEST_FORCE_BLOCK_M) + "=\"" + text + "\" must be a multiple of 16, >= 16";
        return false;
    }
    FlashAttentionTilingData td;
    if (tilingData->size() != sizeof(td)) {
        *error = std::string(ENV_TEST_FORCE_BLOCK_M) + ": tiling data has " + std::to_string(tilingData->size()) +
                 " bytes, FlashAttentionTilingData has " + std::to_string(sizeof(td));
        return false;
    }
    std::memcpy(&td, tilingData->data(), sizeof(td));
    td.blockM = static_cast<uint32_t>(blockM);
    td.subBlockM = td.blockM / 2;
    td.chunkRows = td.subBlockM;  // S and P tiles of all the AIV's rows, as before row chunks
    td.numQBlocks = (td.seqQ + td.blockM - 1) / td.blockM;
    td.totalItems = td.batch * td.numHeads * td.numQBlocks;
    // The same cores (the launch's block dim is unchanged), items spread evenly over them.
    const uint32_t perCore = (td.totalItems + td.usedCoreNum - 1) / td.usedCoreNum;
    for (uint32_t c = 0; c <= td.usedCoreNum; ++c) {
        const uint64_t start = static_cast<uint64_t>(c) * perCore;
        td.coreItemStart[c] = start < td.totalItems ? static_cast<uint32_t>(start) : td.totalItems;
    }
    std::memcpy(tilingData->data(), &td, sizeof(td));
    *tilingKey = td.seqQ % td.blockM != 0 ? (*tilingKey | FA_KEY_SQ_TAIL) : (*tilingKey & ~FA_KEY_SQ_TAIL);
    return true;
}

}  // namespace

// 0, or non-zero with `error` set. Ops other than the forward ones are left alone.
extern "C" __attribute__((visibility("default"))) int aclfaSimTestTilingHook(const char *opType, uint8_t *tiling,
                                                                            size_t size, uint64_t *tilingKey,
                                                                            char *error, size_t errorLen)
{
    if (std::strcmp(opType, "FlashAttention") != 0 && std::strcmp(opType, "FlashAttentionV2") != 0) return 0;
    std::vector<uint8_t> bytes(tiling, tiling + size);
    std::string message;
    if (!ApplyTestTilingOverride(&bytes, tilingKey, &message)) {
        std::snprintf(error, errorLen, "%s", message.c_str());
        return 1;
    }
    std::memcpy(tiling, bytes.data(), size);
    return 0;
}
