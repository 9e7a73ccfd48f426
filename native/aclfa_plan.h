/*
 * aclfa_plan.h -- C ABI of the FlashAttention tiling policy (libaclfa_plan.so).
 *
 * Not part of CANN: a plain C view of op_host/common/tiling_policy.h for `acl-fa plan`.
 * Fixed-width fields only, plain C: the cffi declarations are read from this file
 * (acl_fa/cdefs/plan.h names it), and aclfaPlanSizeOf() lets the driver check the sizes.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for the longest budget label with its NUL ("L0C one result [m,max(n,d)] fp32" is 32 characters). */
#define ACLFA_PLAN_NAME_LEN 48
#define ACLFA_PLAN_MAX_LINES 16
#define ACLFA_PLAN_MAX_CORES 64

typedef struct aclfaPlanProblem {
    uint64_t batch, numHeads, numKvHeads, seqQ, seqKv, headDim;
    uint32_t dtypeBytes; /* 2 for float16 / bfloat16, 4 for float32 */
    uint32_t bf16;       /* 1: bfloat16 (tiling-key bit) */
    uint32_t layout;     /* 0 BNSD, 1 BSND, 2 BSH, 3 TND */
    uint32_t causal;
    uint32_t blockM;     /* 0 = choose */
    uint32_t blockN;     /* 0 = choose */
    /* FlashAttentionV2: the band (key j visible to query i iff i + diag - preTokens <= j <=
     * i + diag + nextTokens; 2147483647 = unbounded: set both, 0 is a bound) and, for layout
     * 3 (TND), the batch's per-sequence lengths (batch entries each; NULL otherwise) and
     * token counts. */
    int64_t preTokens, nextTokens;
    const uint64_t *seqLensQ, *seqLensKv;
    uint64_t tokensQ, tokensKv;
    /* FlashAttentionV2's mask (device mask [maskB, maskN, maskQ, seqKv], each 1 or the full
     * size) and dropout (keep_prob < 1; dropoutMaskOut: the keep mask is written): each adds its
     * UB and workspace only when set. The forward's policy only. */
    uint32_t mask, dropout, dropoutMaskOut, reserved;
    uint64_t maskB, maskN, maskQ;
    /* FlashAttentionV5's score modifiers: ALiBi slopes, attention sinks, an additive float mask
     * [biasB, biasN, biasQ, seqKv] in the input dtype (each 1 or the full size). The forward's
     * policy only (UB lines; the coupled chips refuse them). */
    uint32_t alibi, sinks, bias, reservedMods;
    uint64_t biasB, biasN, biasQ;
    /* FlashAttentionV4's high-performance precision (inner_precise 1): S's workspace slots in the
     * input dtype (fa_policy::Problem::narrowScores). The forward's policy only. */
    uint32_t narrowScores, reservedPrecision;
    /* How the kernel holds S, for the blocks' modeled cost only (tiling_policy.h Problem):
     * halfScores 1, S leaves the cube as half; halfSoftmax 1, the softmax runs in half on
     * 128-column tiles (FlashAttentionInt8 on A2/A3 with a float16 value: both). */
    uint32_t halfScores, halfSoftmax;
} aclfaPlanProblem;

typedef struct aclfaPlanLimits {
    char socName[ACLFA_PLAN_NAME_LEN];
    uint64_t ubBytes, l1Bytes, l0aBytes, l0bBytes, l0cBytes; /* UB/L1 as GetCoreMemSize answers */
    uint32_t aicNum, aivNum;
    uint32_t socVersion; /* platform_ascendc::SocVersion: ASCEND910 0, ASCEND910B 1, ASCEND310P 2 */
    uint32_t reserved;
    uint64_t l2BytesPerCycle; /* one AI Core's L2 rate as GetCoreMemBw(L2) answers; 0 = unknown */
} aclfaPlanLimits;

typedef struct aclfaPlanBudgetLine {
    char name[ACLFA_PLAN_NAME_LEN];
    uint64_t bytes;
    uint64_t capacity;
} aclfaPlanBudgetLine;

typedef struct aclfaPlan {
    uint32_t blockM, blockN, subBlockM, numQBlocks, numKvBlocks, qZigzag;
    uint32_t usedCoreNum;
    uint32_t numLines;
    uint64_t totalItems;
    uint64_t totalWork, maxCoreWork; /* kv blocks computed: all cores / the busiest */
    double meanCoreWork, imbalance;  /* totalWork / usedCoreNum; maxCoreWork / meanCoreWork */
    uint64_t wsScoreOffset, wsProbOffset, wsPvOffset, wsBytesPerCore;
    uint64_t userWorkspaceBytes;     /* usedCoreNum * wsBytesPerCore (+ mask summary; 0 on the coupled path) */
    uint64_t tilingKey;
    uint32_t coreItemStart[ACLFA_PLAN_MAX_CORES + 1];
    uint32_t soloRows;               /* 1: each AIV issues its own QK and P.V (narrow bands), 0: shared per group */
    aclfaPlanBudgetLine lines[ACLFA_PLAN_MAX_LINES];
} aclfaPlan;

/* 0 and *plan filled, or -1 with the reason in errBuf (NUL-terminated, truncated to errLen). */
int32_t aclfaPlanCompute(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits, aclfaPlan *plan,
                         char *errBuf, size_t errLen);

/* aclfaPlanCompute for a device whose free memory leaves userWorkspaceLimit bytes for the user
 * workspace (fa_policy::ComputePlanWithin, docs/memory.md): the auto plan when its
 * userWorkspaceBytes fits, else the fastest blocks whose workspace fits, else the plan of least
 * workspace (userWorkspaceBytes > userWorkspaceLimit: nothing fits). 0, or -1 as aclfaPlanCompute. */
int32_t aclfaPlanComputeWithin(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits,
                               uint64_t userWorkspaceLimit, aclfaPlan *plan, char *errBuf, size_t errLen);

/* sizeof of the structs above: 0 problem, 1 limits, 2 budget line, 3 plan; 0 otherwise. */
size_t aclfaPlanSizeOf(int32_t which);

/* The policy's analytic modeled cycles of the forward with (blockM, blockN) on the MIX path
 * (op_host/common/block_cost.h): what the auto blocks minimize. -1 on NULL arguments or a zero block. */
double aclfaPlanModeledCycles(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits, uint32_t blockM,
                              uint32_t blockN);

#ifdef __cplusplus
}
#endif
