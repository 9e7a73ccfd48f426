/*
 * cffi declarations of libaclfa_plan.so (native/aclfa_plan.h): the FlashAttention tiling
 * policy behind a C ABI, for `acl-fa plan`. NOT part of CANN. Array sizes are written as
 * numbers (ACLFA_PLAN_NAME_LEN 32, ACLFA_PLAN_MAX_LINES 16, ACLFA_PLAN_MAX_CORES + 1 = 65);
 * acl_fa/plan.py checks every struct size against aclfaPlanSizeOf().
 */
#define ACLFA_PLAN_NAME_LEN 32
#define ACLFA_PLAN_MAX_LINES 16
#define ACLFA_PLAN_MAX_CORES 64

typedef struct aclfaPlanProblem {
    uint64_t batch, numHeads, numKvHeads, seqQ, seqKv, headDim;
    uint32_t dtypeBytes;
    uint32_t bf16;
    uint32_t layout;
    uint32_t causal;
    uint32_t blockM;
    uint32_t blockN;
    int64_t preTokens, nextTokens;
    const uint64_t *seqLensQ, *seqLensKv;
    uint64_t tokensQ, tokensKv;
    uint32_t mask, dropout, dropoutMaskOut, reserved;
    uint64_t maskB, maskN, maskQ;
} aclfaPlanProblem;

typedef struct aclfaPlanLimits {
    char socName[32];
    uint64_t ubBytes, l1Bytes, l0aBytes, l0bBytes, l0cBytes;
    uint32_t aicNum, aivNum;
    uint32_t socVersion; /* platform_ascendc::SocVersion: ASCEND910 0, ASCEND910B 1, ASCEND310P 2 */
    uint32_t reserved;
    uint64_t l2BytesPerCycle;
} aclfaPlanLimits;

typedef struct aclfaPlanBudgetLine {
    char name[32];
    uint64_t bytes;
    uint64_t capacity;
} aclfaPlanBudgetLine;

typedef struct aclfaPlan {
    uint32_t blockM, blockN, subBlockM, numQBlocks, numKvBlocks, qZigzag;
    uint32_t usedCoreNum;
    uint32_t numLines;
    uint64_t totalItems;
    uint64_t totalWork, maxCoreWork;
    double meanCoreWork, imbalance;
    uint64_t wsScoreOffset, wsProbOffset, wsPvOffset, wsBytesPerCore;
    uint64_t userWorkspaceBytes;
    uint64_t tilingKey;
    uint32_t coreItemStart[65];
    uint32_t soloRows;
    aclfaPlanBudgetLine lines[16];
} aclfaPlan;

int32_t aclfaPlanCompute(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits, aclfaPlan *plan,
                         char *errBuf, size_t errLen);
size_t aclfaPlanSizeOf(int32_t which);

/* The policy's analytic modeled cycles of the forward with (blockM, blockN) on the MIX path
 * (op_host/block_cost.h): what the auto blocks minimize. -1 on NULL arguments or a zero block. */
double aclfaPlanModeledCycles(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits, uint32_t blockM,
                              uint32_t blockN);
