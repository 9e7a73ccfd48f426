/*
 * cffi declarations of the FlashAttentionGrad tiling policy in libaclfa_plan.so
 * (native/aclfa_grad_plan.h). NOT part of CANN. ACLFA_GRAD_PLAN_MAX_AIV + 1 = 129;
 * acl_fa/grad_plan.py checks the struct size against aclfaGradPlanSizeOf().
 */
typedef struct aclfaGradPlan {
    uint32_t blockM, blockN, numQBlocks, numKvBlocks, rowChunk;
    uint32_t blockDim, aivNum;
    uint32_t numDqFlags;
    uint32_t numLines, reserved;
    uint64_t totalUnits;
    uint64_t totalWork, maxCoreWork;
    double meanCoreWork, imbalance;
    uint64_t wsDeltaOffset, wsDqOffset, wsDqBytes, wsScratchOffset, wsScratchBytes;
    uint64_t userWorkspaceBytes;
    uint64_t tilingKey;
    uint32_t unitStart[129];
    uint32_t reserved2;
    aclfaPlanBudgetLine lines[16];
} aclfaGradPlan;

int32_t aclfaGradPlanCompute(const aclfaPlanProblem *problem, uint32_t deterministic, const aclfaPlanLimits *limits,
                             aclfaGradPlan *plan, char *errBuf, size_t errLen);
size_t aclfaGradPlanSizeOf(void);
