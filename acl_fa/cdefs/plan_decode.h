/*
 * cffi declarations of the FlashAttentionDecode tiling policy and work split in libaclfa_plan.so
 * (native/aclfa_decode_plan.h). NOT part of CANN. ACLFA_DECODE_PLAN_MAX_PARTS = 128;
 * acl_fa/decode_plan.py checks the struct sizes against aclfaDecodePlanSizeOf().
 */
typedef struct aclfaDecodePlanProblem {
    uint64_t batch, numHeads, numKvHeads, seqQ, headDim;
    uint64_t numBlocks, blockSize, maxBlocksPerSeq;
    int64_t numSplits;
    int64_t preTokens, nextTokens;
    uint32_t dtypeBytes, bf16;
} aclfaDecodePlanProblem;

typedef struct aclfaDecodePlan {
    uint32_t rows, blockN, chunksPerBlock, splitKv, splitsPerGroup;
    uint32_t usedCoreNum, numParts, maxSlots, lseStride, numLines;
    uint64_t wsBytesPerAiv, userWorkspaceBytes, tilingKey;
    uint64_t groups, totalUnits, pieces, combineGroups;
    uint32_t minPieces, maxPieces;
    uint64_t partUnits[128];
    uint32_t partPieces[128];
    uint32_t partCombines[128];
    aclfaPlanBudgetLine lines[16];
} aclfaDecodePlan;

int32_t aclfaDecodePlanCompute(const aclfaDecodePlanProblem *problem, const int64_t *seqLens,
                               const aclfaPlanLimits *limits, aclfaDecodePlan *plan, char *errBuf, size_t errLen);
size_t aclfaDecodePlanSizeOf(int32_t which);
