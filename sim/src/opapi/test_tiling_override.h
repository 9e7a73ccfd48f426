// test_tiling_override.h -- TEST-ONLY hook of the simulator's op API: forces an oversized block
// into the tiling bytes after the operator's TilingFunc has run, so that a test can prove the
// kernel engine's UB capacity check stops such a launch (issue 8, item 4). Not part of CANN and
// never in op_host/op_kernel; inert unless its env var is set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acl_fa_sim {

// Env var read by ApplyTestTilingOverride: a block_m (multiple of 16, >= 16) that replaces the
// one TilingFunc chose. Test use only.
constexpr const char *ENV_TEST_FORCE_BLOCK_M = "ACL_FA_SIM_TEST_FORCE_BLOCK_M";

// When ACL_FA_SIM_TEST_FORCE_BLOCK_M is set, rewrites blockM, subBlockM (= blockM / 2), chunkRows
// (= subBlockM: one S / P tile of all an AIV's rows),
// numQBlocks, totalItems and the per-core item ranges of the FlashAttentionTilingData in
// `tilingData`, and the Sq-tail bit of `tilingKey` (everything else, workspace and matmul
// tilings included, stays as TilingFunc sized it). Returns false with *error set when the value
// or the bytes are unusable.
bool ApplyTestTilingOverride(std::vector<uint8_t> *tilingData, uint64_t *tilingKey, std::string *error);

}  // namespace acl_fa_sim
