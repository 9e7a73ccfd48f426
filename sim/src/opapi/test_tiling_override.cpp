// test_tiling_override.cpp -- see test_tiling_override.h (TEST-ONLY).
#include "test_tiling_override.h"

#include <cstdlib>
#include <cstring>

#include "flash_attention_tiling.h"

namespace acl_fa_sim {

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

}  // namespace acl_fa_sim
