// test_hooks.h -- what the generic op path hands to code outside it at a launch: the test-only
// tiling hook (in libaclfa_sim_testhooks.so, a test library that is never installed) and the
// per-core work-item hint the launch statistics report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace acl_fa_sim {
namespace test_hooks {

// Env var of the test-only tiling hook: a block_m (multiple of 16, >= 16) that replaces the one
// the forward's TilingFunc chose (tests/ops/test_reliability.py). When set, phase one loads the test
// library at $ACL_FA_SIM_TEST_HOOKS (tests/sim_hooks/, built by the tests on demand, never
// installed) and lets its aclfaSimTestTilingHook rewrite the tiling.
constexpr const char *ENV_TEST_FORCE_BLOCK_M = "ACL_FA_SIM_TEST_FORCE_BLOCK_M";
constexpr const char *ENV_TEST_HOOK_LIBRARY = "ACL_FA_SIM_TEST_HOOKS";

// Inert (true) unless ENV_TEST_FORCE_BLOCK_M is set; false with *error when the hook library is
// missing or refuses the value.
bool ApplyTilingHook(const char *opType, std::vector<uint8_t> *tilingData, uint64_t *tilingKey, std::string *error);

// The work items each AIC core is given by the tiling of a launch of `opType`, for the launch
// statistics (empty: not known).
std::vector<uint64_t> WorkItemsHint(const char *opType, const std::vector<uint8_t> &tilingData);

}  // namespace test_hooks
}  // namespace acl_fa_sim
