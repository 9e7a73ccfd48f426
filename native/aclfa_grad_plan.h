/*
 * aclfa_grad_plan.h -- C ABI of the FlashAttentionGrad tiling policy (libaclfa_plan.so).
 *
 * Not part of CANN: a plain C view of op_host/flash_attention_grad/flash_attention_grad_policy.h for
 * `acl-fa plan --backward` and the driver's check of user blocks before device work.
 * Plain C: the cffi declarations are read from this file (acl_fa/cdefs/plan_grad.h names it);
 * aclfaGradPlanSizeOf() lets the driver check the size.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "aclfa_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACLFA_GRAD_PLAN_MAX_AIV 128

typedef struct aclfaGradPlan {
    uint32_t blockM, blockN, numQBlocks, numKvBlocks, rowChunk;
    uint32_t blockDim, aivNum; /* MIX 1:2 blocks; vector cores = 2 * blockDim */
    uint32_t panelRows;        /* query rows per cube request; dQ is summed in int32 fixed point when deterministic */
    uint32_t numLines;
    uint32_t dqGroupBlocks;    /* deterministic dQ summed per group of this many K/V blocks (0: single parts) */
    uint64_t totalUnits;       /* B * Nkv * numKvBlocks */
    uint64_t totalWork, maxCoreWork; /* query blocks walked: all AIVs / the busiest */
    double meanCoreWork, imbalance;
    uint64_t wsDeltaOffset, wsDqOffset, wsDqBytes, wsScratchOffset, wsScratchBytes;
    uint64_t userWorkspaceBytes;
    uint64_t tilingKey;
    uint32_t unitStart[ACLFA_GRAD_PLAN_MAX_AIV + 1]; /* contiguous unit ranges (dealt: each AIV's unit count, summed) */
    uint32_t unitsDealt;       /* 1: pairs / units dealt to the AIVs in rounds (tiling unitsDealt) */
    aclfaPlanBudgetLine lines[ACLFA_PLAN_MAX_LINES];
} aclfaGradPlan;

/* 0 and *plan filled, or -1 with the reason in errBuf. problem->blockM/blockN are the user's. */
int32_t aclfaGradPlanCompute(const aclfaPlanProblem *problem, uint32_t deterministic, const aclfaPlanLimits *limits,
                             aclfaGradPlan *plan, char *errBuf, size_t errLen);

/* sizeof(aclfaGradPlan). */
size_t aclfaGradPlanSizeOf(void);

#ifdef __cplusplus
}
#endif
