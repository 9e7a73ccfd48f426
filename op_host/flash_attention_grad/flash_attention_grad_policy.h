// flash_attention_grad_policy.h -- the FlashAttentionGrad tiling policy: a pure function
//   (problem, deterministic, chip limits) -> plan or a rejection naming the broken limit.
// No CANN include (like tiling_policy.h, whose Problem, ChipLimits and BudgetLine it shares);
// op_host/flash_attention_grad/flash_attention_grad.cpp adapts it to CANN, native/plan_capi.cpp exports it to
// Python. The buffers it budgets are the kernel's (op_kernel/flash_attention_grad/flash_attention_grad_tiling.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiling_policy.h"

namespace fa_policy {

struct GradPlan {
    uint32_t blockM = 0, blockN = 0;           // query rows per step, key rows per unit
    uint32_t numQBlocks = 0, numKvBlocks = 0;
    uint32_t rowChunk = 0;                     // rows per row-phase chunk
    uint32_t blockDim = 0;                     // MIX 1:2 blocks of the launch
    uint32_t aivNum = 0;                       // 2 * blockDim
    uint32_t panelRows = 0;                    // query rows per cube request, a multiple of blockM
    uint64_t totalUnits = 0;                   // B * Nkv * numKvBlocks (varlen: B sequences, the longest's blocks)
    std::vector<uint32_t> unitStart;           // aivNum + 1 entries
    // Work = query rows walked (a unit of kv head h walks groupSize heads' rows that see its keys;
    // a unit that walks none, or a varlen unit past its sequence's keys, counts 1).
    uint64_t totalWork = 0, maxCoreWork = 0;
    double meanCoreWork = 0, imbalance = 0;    // over the AIVs that have units
    std::vector<BudgetLine> budget;            // per-AIV UB lines, then totals (L1, L0C)
    // User workspace (after the system workspace), bytes; regions 512-B aligned.
    uint64_t wsDeltaOffset = 0, wsNormOffset = 0, wsMaxOffset = 0, wsDqOffset = 0, wsDqBytes = 0;
    uint64_t wsScratchOffset = 0, wsScratchBytes = 0;
    uint64_t wsScoreOffset = 0, wsGradOffset = 0, wsProbOffset = 0, wsDsOffset = 0;
    uint64_t wsDkOffset = 0, wsDvOffset = 0, wsDqPartOffset = 0;
    // Attention mask (problem.mask): MaskTiles rows per pass and the per-block summary
    // (maskB x maskN x query blocks x kv blocks bytes, after the scratch slices).
    uint32_t maskRows = 0;
    uint64_t wsMaskSummaryOffset = 0, wsMaskSummaryBytes = 0;
    // Dropout (problem.dropout): Philox counters per chunk (PhiloxKeepMask's capacity).
    uint32_t philoxLanes = 0;
    uint64_t userWorkspaceBytes = 0;
    uint64_t tilingKey = 0;
    // Deterministic dQ over K/V block pairs: each AIV's scratch slice holds two [groupSize, seqQ, D]
    // fp32 pair sums at wsDqGroupOffset (one filled while the other is added), and unit ranges
    // start on even blocks.
    bool dqGroup = false;
    uint64_t wsDqGroupOffset = 0;
    // dqGroup's pairs dealt over the AIVs in rounds instead of contiguous ranges (the kernel's
    // UnitOfAiv; unitStart then only counts each AIV's units).
    bool unitsDealt = false;
    // dqGroup: K/V blocks per group (2: pairs; 4 where there are kGradDqGroupMinPairs groups of 4).
    uint32_t dqGroupBlocks = 0;
};

// Largest [groupSize, seqQ, D] fp32 pair sum per AIV the deterministic dQ takes (else no pairs).
constexpr uint64_t kGradDqGroupMaxBytes = 4ull << 20;
// Fewest K/V block pairs (over all kv heads) for pairs: 3 per AIV of a 48-AIV chip, a problem's
// constant (not the chip's core count, so that the summation is the same on every chip). Dealt
// (unitsDealt), N8 S4096 causal's 152 pairs load the busiest AIV 1.09x the mean; N4's 76, 1.26x.
constexpr uint64_t kGradDqGroupMinPairs = 144;
// Most K/V blocks per deterministic dQ group (FAG_DQ_GROUP_MAX_BLOCKS); groups of this many are
// taken where there are kGradDqGroupMinPairs of them, else pairs.
constexpr uint32_t kGradDqGroupMaxBlocks = 4;

// Largest blocks the backward chooses or accepts.
constexpr uint32_t kGradMaxBlockM = 128;
constexpr uint32_t kGradMaxBlockN = 256;
constexpr uint32_t kGradReferenceBlockN = 128;  // blockN tried first (cube-friendly)
constexpr uint32_t kGradMaxAiv = 128;           // FAG_MAX_AIV of the tiling struct

// Tiling-key bits (FAG_KEY_* of flash_attention_grad_tiling.h; op_host static_asserts them).
constexpr uint64_t kGradKeyBf16 = 1u << 0;
constexpr uint64_t kGradKeyCausal = 1u << 1;  // the band bit: causal or windowed
constexpr uint32_t kGradKeyLayoutShift = 2;
constexpr uint64_t kGradKeyDeterministic = 1u << 4;

bool ComputeGradPlan(const Problem &problem, bool deterministic, const ChipLimits &chip, GradPlan *plan,
                     std::string *error);

// The band the backward applies: (pre, next) of the problem with causal folded in (next <= 0).
void GradBand(const Problem &problem, int64_t *pre, int64_t *next);

// Query blocks [*first, *end) (of blockM rows) of sequence `seq` holding a row that sees one of
// its keys [keyBegin, keyEnd) (both 0 when none does); the kernel's QueryBlocksSeeing.
void QueryBlocksSeeing(const Problem &problem, uint32_t blockM, uint64_t seq, uint64_t keyBegin, uint64_t keyEnd,
                       uint32_t *first, uint32_t *end);
// Query rows of sequence `seq` that see one of its keys [keyBegin, keyEnd).
uint64_t RowsSeeing(const Problem &problem, uint64_t seq, uint64_t keyBegin, uint64_t keyEnd);

}  // namespace fa_policy
