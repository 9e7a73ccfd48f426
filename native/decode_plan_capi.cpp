// decode_plan_capi.cpp -- the C ABI of aclfa_decode_plan.h over fa_policy::ComputeDecodePlan and
// ComputeDecodeSchedule.
#include "aclfa_decode_plan.h"

#include <cstring>
#include <string>
#include <vector>

#include "decode_tiling_policy.h"
#include "plan_marshal.h"

extern "C" int32_t aclfaDecodePlanCompute(const aclfaDecodePlanProblem *problem, const int64_t *seqLens,
                                          const aclfaPlanLimits *limits, aclfaDecodePlan *plan, char *errBuf,
                                          size_t errLen) {
    using aclfa_plan::Report;
    if (problem == nullptr || seqLens == nullptr || limits == nullptr || plan == nullptr) {
        return Report(errBuf, errLen, "aclfaDecodePlanCompute: problem, seqLens, limits and plan must not be NULL");
    }
    fa_policy::DecodeProblem p;
    p.batch = problem->batch;
    p.numHeads = problem->numHeads;
    p.numKvHeads = problem->numKvHeads;
    p.seqQ = problem->seqQ;
    p.headDim = problem->headDim;
    p.numBlocks = problem->numBlocks;
    p.blockSize = problem->blockSize;
    p.maxBlocksPerSeq = problem->maxBlocksPerSeq;
    p.dtypeBytes = problem->dtypeBytes;
    p.bf16 = problem->bf16 != 0;
    p.numSplits = problem->numSplits;
    fa_policy::DecodePlan out;
    std::string error;
    if (!fa_policy::ComputeDecodePlan(p, aclfa_plan::LimitsFromC(*limits), &out, &error)) {
        return Report(errBuf, errLen, error);
    }
    if (out.numParts > ACLFA_DECODE_PLAN_MAX_PARTS) {
        return Report(errBuf, errLen, "aclfaDecodePlanCompute: more parts than ACLFA_DECODE_PLAN_MAX_PARTS");
    }
    fa_policy::DecodeSchedule schedule;
    const std::vector<int64_t> lengths(seqLens, seqLens + p.batch);
    if (!fa_policy::ComputeDecodeSchedule(p, out, lengths, problem->preTokens, problem->nextTokens, &schedule,
                                          &error)) {
        return Report(errBuf, errLen, error);
    }
    std::memset(plan, 0, sizeof(*plan));
    if (!aclfa_plan::BudgetToC(out.budget, plan->lines, &plan->numLines)) {
        return Report(errBuf, errLen, "aclfaDecodePlanCompute: more budget lines than ACLFA_PLAN_MAX_LINES");
    }
    plan->rows = out.rows;
    plan->blockN = out.blockN;
    plan->chunksPerBlock = out.chunksPerBlock;
    plan->splitKv = out.splitKv;
    plan->splitsPerGroup = out.splitsPerGroup;
    plan->usedCoreNum = out.usedCoreNum;
    plan->numParts = out.numParts;
    plan->maxSlots = out.maxSlots;
    plan->lseStride = out.lseStride;
    plan->wsBytesPerAiv = out.wsBytesPerAiv;
    plan->userWorkspaceBytes = out.userWorkspaceBytes;
    plan->tilingKey = out.tilingKey;
    plan->rowGroupHeads = out.rowGroupHeads;
    plan->rowGroupTokens = out.rowGroupTokens;
    plan->rowGroups = out.rowGroups;
    plan->groups = schedule.groups;
    plan->totalUnits = schedule.totalUnits;
    plan->pieces = schedule.pieces;
    plan->combineGroups = schedule.combineGroups;
    plan->minPieces = schedule.minPieces;
    plan->maxPieces = schedule.maxPieces;
    for (size_t a = 0; a < schedule.partUnits.size(); ++a) {
        plan->partUnits[a] = schedule.partUnits[a];
        plan->partPieces[a] = schedule.partPieces[a];
        plan->partCombines[a] = schedule.partCombines[a];
    }
    plan->modeledCycles = fa_policy::DecodeModeledCycles(p, out, schedule, aclfa_plan::LimitsFromC(*limits));
    return aclfa_plan::Ok(errBuf, errLen);
}

extern "C" size_t aclfaDecodePlanSizeOf(int32_t which) {
    switch (which) {
        case 0: return sizeof(aclfaDecodePlanProblem);
        case 1: return sizeof(aclfaDecodePlan);
        default: return 0;
    }
}
