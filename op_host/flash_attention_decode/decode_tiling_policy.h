// decode_tiling_policy.h -- the FlashAttentionDecode tiling policy: a pure function
//   (decode problem, chip limits) -> plan or a rejection naming the broken limit.
//
// No CANN include (op_host/flash_attention_decode/flash_attention_decode.cpp adapts it to gert::TilingContext; tests
// and the plan C API drive it directly). The buffers it budgets are exactly the kernel's
// (op_kernel/flash_attention_decode/flash_attention_decode_tiling.h): per AIV, m = rows = groupSize * Sq,
// n = blockN, d = headDim, T = dtypeBytes.
//
// The tiling cannot see the sequences' lengths (they are a device tensor): it fixes the chunk
// size, the number of parts (every AIV of every AIC core) and the workspace bounds; the kernel
// cuts the actual keys into equal ranges per part at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiling_policy.h"  // ChipLimits, BudgetLine

namespace fa_policy {

struct DecodeProblem {
    uint64_t batch = 0;            // B
    uint64_t numHeads = 0;         // N, query heads
    uint64_t numKvHeads = 0;       // Nkv
    uint64_t seqQ = 0;             // Sq, query tokens per sequence
    uint64_t headDim = 0;          // D
    uint64_t numBlocks = 0;        // cache blocks
    uint64_t blockSize = 0;        // keys per cache block
    uint64_t maxBlocksPerSeq = 0;  // block table row length
    uint32_t dtypeBytes = 2;
    bool bf16 = false;
    int64_t numSplits = 0;         // 0: auto (cut groups between parts); 1: never cut a group;
                                   // S >= 2: at most S pieces per group (clamped to numParts)
    bool scoreMods = false;        // FlashAttentionDecodeV2's ALiBi or sinks: the modBuf UB line
    bool kvInt8 = false;           // FlashAttentionDecodeV3: int8 cache, dequantized per chunk
};

struct DecodePlan {
    uint32_t rows = 0;            // m = rowGroupHeads * rowGroupTokens: the matmul M of one group
    uint32_t blockN = 0;          // keys per chunk
    uint32_t chunksPerBlock = 0;  // ceil(blockSize / blockN)
    uint32_t qkBaseN = 0;         // the matmuls' fixed baseN (MatmulApiTiling::SetFixSplit): the
    uint32_t pvBaseN = 0;         // base tile that costs each job least in the timing model's form
    uint32_t splitKv = 0;         // 1: SyncAll + combine (batch schedule mode)
    uint32_t splitsPerGroup = 0;  // explicit split count after clamping (>= 2), 0 otherwise
    uint32_t usedCoreNum = 0;     // block dim: all AIC cores
    uint32_t numParts = 0;        // 2 * usedCoreNum AIVs, each an equal share of the keys
    uint32_t maxSlots = 0;        // partial (O, LSE) slots: groups + parts when splitKv (groups * S
                                  // with an explicit S)
    uint32_t lseStride = 0;       // floats per partial LSE slot
    std::vector<BudgetLine> budget;  // per-AIV UB lines in InitBuffer order, then totals
    uint64_t wsQOffset = 0, wsScoreOffset = 0, wsProbOffset = 0, wsPvOffset = 0, wsBytesPerAiv = 0;
    uint64_t wsPartialOOffset = 0, wsPartialLseOffset = 0;
    uint64_t userWorkspaceBytes = 0;
    uint64_t tilingKey = 0;
    // Row groups (more than kDecodeMaxRows query rows per kv head, e.g. GQA 8 x 64 speculative
    // tokens): a kv head's groupSize x Sq rows are cut into rowGroups groups of rowGroupHeads query
    // heads x rowGroupTokens tokens (rows = their product <= kDecodeMaxRows). rowGroupHeads divides
    // groupSize and rowGroupTokens divides Sq; tokens are cut only when one head's Sq alone is too
    // many (then rowGroupHeads = 1). Each row group is a work group of its own: its keys are read
    // once per row group.
    uint32_t rowGroupHeads = 0;
    uint32_t rowGroupTokens = 0;
    uint32_t rowGroups = 0;    // per kv head: (groupSize / rowGroupHeads) * (Sq / rowGroupTokens)
    // FlashAttentionDecodeV3 (int8 cache): keys dequantized per UB pass, the per-AIV K / V tiles.
    uint32_t dequantRows = 0;
    uint64_t wsKDeqOffset = 0, wsVDeqOffset = 0;
};

// Largest keys per chunk the policy picks and rows per work group (vector repeat counts are
// 8-bit: one repeat per row); more rows per kv head are cut into row groups (DecodePlan).
constexpr uint32_t kDecodeMaxBlockN = 512;
constexpr uint32_t kDecodeMaxRows = 255;
// Tiling-key bits; op_host static_asserts that they equal FAD_KEY_*.
constexpr uint64_t kDecodeKeyBf16 = 1u << 0;
constexpr uint64_t kDecodeKeySplit = 1u << 1;
constexpr uint64_t kDecodeKeyInt8 = 1u << 2;
// Keys an int8 cache's chunk is dequantized by per UB pass (each pass one MTE2 copy in, one out).
constexpr uint32_t kDecodeDequantRows = 128;

bool ComputeDecodePlan(const DecodeProblem &problem, const ChipLimits &chip, DecodePlan *plan, std::string *error);

// The row groups of a kv head's groupSize query heads x seqQ tokens (DecodePlan::rowGroup*): the
// whole kv head when it is <= kDecodeMaxRows rows and fits the chip's UB / L1 with 16-key chunks;
// else the largest group of whole heads, or of one head's tokens, that fits with chunks of up to
// 128 keys (then 16). false when not even one row fits.
bool ChooseDecodeRowGroups(const DecodeProblem &problem, const ChipLimits &chip, uint32_t *heads, uint32_t *tokens,
                           uint32_t *count);

// The kernel's work split for given sequence lengths (the tiling cannot see them: the kernel
// computes this from actual_seq_lengths_kv at run time, op_kernel/flash_attention_decode/flash_attention_decode_kernel.h
// Process()), for `acl-fa plan`: which vector core (part) computes which key chunks ("units")
// of which (sequence, kv head, row group) group, and which groups are merged after SyncAll.
struct DecodeSchedule {
    uint64_t groups = 0;          // B * Nkv * rowGroups
    uint64_t totalUnits = 0;      // key chunks of all groups
    uint64_t pieces = 0;          // work items (group, piece) over all groups
    uint64_t combineGroups = 0;   // groups cut into >= 2 pieces (merged by LSE)
    uint64_t keys = 0;            // visible keys of all groups (the chunks' columns)
    uint32_t minPieces = 0, maxPieces = 0;  // pieces per group (splits per sequence and kv head)
    std::vector<uint64_t> partUnits;   // per part (AIV block index): chunks computed
    std::vector<uint32_t> partPieces;  // per part: pieces computed
    std::vector<uint32_t> partCombines;  // per part: groups it merges
};

// seqLens: B lengths (keys in the cache per sequence); preTokens / nextTokens as the op's
// attributes (2147483647 = unbounded; nextTokens 0 = causal).
bool ComputeDecodeSchedule(const DecodeProblem &problem, const DecodePlan &plan, const std::vector<int64_t> &seqLens,
                           int64_t preTokens, int64_t nextTokens, DecodeSchedule *schedule, std::string *error);

// The modeled cycles of one decode launch with this schedule on `chip`: a closed form of the
// pipeline timing model (docs/timing_model.md) for the decode kernel, as block_cost.h is for the
// forward, so that a caller can compare the two ops without running either (acl_fa/plan/routing.py).
// Per AI Core: its two AIVs' chunks, each costing the cube a QK and a P.V job (block_cost.h's
// MatmulJobCycles: the jobs of both AIVs run one at a time on the shared cube) or an AIV's chain
// of one chunk (S from GM, the softmax passes, P to GM, the P.V of the chunk before from GM),
// whichever is longer, plus per piece the pipeline's fill and drain (Q packed, the first QK waited
// for, the last P.V added, the output written); then SyncAll and the merges of the busiest
// merging AIV when groups are cut. The launch is at least all its GM bytes at the chip's GM rate.
double DecodeModeledCycles(const DecodeProblem &problem, const DecodePlan &plan, const DecodeSchedule &schedule,
                           const ChipLimits &chip);

}  // namespace fa_policy
