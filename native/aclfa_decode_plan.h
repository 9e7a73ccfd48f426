/*
 * aclfa_decode_plan.h -- C ABI of the FlashAttentionDecode tiling policy and of the kernel's work
 * split for given sequence lengths (libaclfa_plan.so).
 *
 * Not part of CANN: a plain C view of op_host/flash_attention_decode/decode_tiling_policy.h for `acl-fa plan --decode`.
 * Plain C: the cffi declarations are read from this file (acl_fa/cdefs/plan_decode.h names it);
 * aclfaDecodePlanSizeOf() lets the driver check the sizes. Chip limits and budget lines are aclfa_plan.h's.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "aclfa_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACLFA_DECODE_PLAN_MAX_PARTS 128 /* vector cores: 2 per AI Core, at most 64 AI Cores */

typedef struct aclfaDecodePlanProblem {
    uint64_t batch, numHeads, numKvHeads, seqQ, headDim;
    uint64_t numBlocks, blockSize, maxBlocksPerSeq; /* contiguous cache: B, S_max, 1 */
    int64_t numSplits;                             /* 0 auto, 1 whole, S >= 2 pieces per group */
    int64_t preTokens, nextTokens;                 /* 2147483647 unbounded; nextTokens 0 causal */
    uint32_t dtypeBytes, bf16;
} aclfaDecodePlanProblem;

typedef struct aclfaDecodePlan {
    /* the tiling */
    uint32_t rows, blockN, chunksPerBlock, splitKv, splitsPerGroup;
    uint32_t usedCoreNum, numParts, maxSlots, lseStride, numLines;
    uint64_t wsBytesPerAiv, userWorkspaceBytes, tilingKey;
    /* the kernel's split for the given lengths */
    uint64_t groups, totalUnits, pieces, combineGroups;
    uint32_t minPieces, maxPieces;
    uint64_t partUnits[ACLFA_DECODE_PLAN_MAX_PARTS];
    uint32_t partPieces[ACLFA_DECODE_PLAN_MAX_PARTS];
    uint32_t partCombines[ACLFA_DECODE_PLAN_MAX_PARTS];
    aclfaPlanBudgetLine lines[ACLFA_PLAN_MAX_LINES];
    /* the closed form of the modeled launch time, cycles (fa_policy::DecodeModeledCycles) */
    double modeledCycles;
    /* row groups per kv head (more than 255 query rows): heads x tokens each, rows = their product */
    uint32_t rowGroupHeads, rowGroupTokens, rowGroups, reserved;
} aclfaDecodePlan;

/* 0 and *plan filled, or -1 with the reason in errBuf. seqLens: problem->batch lengths. */
int32_t aclfaDecodePlanCompute(const aclfaDecodePlanProblem *problem, const int64_t *seqLens,
                               const aclfaPlanLimits *limits, aclfaDecodePlan *plan, char *errBuf, size_t errLen);

/* sizeof: 0 aclfaDecodePlanProblem, 1 aclfaDecodePlan; 0 otherwise. */
size_t aclfaDecodePlanSizeOf(int32_t which);

#ifdef __cplusplus
}
#endif
