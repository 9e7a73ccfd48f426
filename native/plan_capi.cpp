// plan_capi.cpp -- the C ABI of aclfa_plan.h over fa_policy::ComputePlan.
#include "aclfa_plan.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "tiling_policy.h"

namespace {

void CopyName(char (&dst)[ACLFA_PLAN_NAME_LEN], const std::string &src) {
    std::snprintf(dst, sizeof(dst), "%s", src.c_str());
}

void SetError(char *errBuf, size_t errLen, const std::string &msg) {
    if (errBuf != nullptr && errLen > 0) std::snprintf(errBuf, errLen, "%s", msg.c_str());
}

fa_policy::Problem ToPolicy(const aclfaPlanProblem &problem) {
    fa_policy::Problem p;
    p.batch = problem.batch;
    p.numHeads = problem.numHeads;
    p.numKvHeads = problem.numKvHeads;
    p.seqQ = problem.seqQ;
    p.seqKv = problem.seqKv;
    p.headDim = problem.headDim;
    p.dtypeBytes = problem.dtypeBytes;
    p.bf16 = problem.bf16 != 0;
    p.layout = problem.layout;
    p.causal = problem.causal != 0;
    p.userBlockM = problem.blockM;
    p.userBlockN = problem.blockN;
    p.preTokens = problem.preTokens;
    p.nextTokens = problem.nextTokens;
    if (problem.layout == fa_policy::kLayoutTnd && problem.seqLensQ != nullptr && problem.seqLensKv != nullptr) {
        p.seqLensQ.assign(problem.seqLensQ, problem.seqLensQ + problem.batch);
        p.seqLensKv.assign(problem.seqLensKv, problem.seqLensKv + problem.batch);
        p.tokensQ = problem.tokensQ;
        p.tokensKv = problem.tokensKv;
    }
    return p;
}

fa_policy::ChipLimits ToPolicy(const aclfaPlanLimits &limits) {
    fa_policy::ChipLimits c;
    c.socName = std::string(limits.socName, strnlen(limits.socName, ACLFA_PLAN_NAME_LEN));
    c.ubBytes = limits.ubBytes;
    c.l1Bytes = limits.l1Bytes;
    c.l0aBytes = limits.l0aBytes;
    c.l0bBytes = limits.l0bBytes;
    c.l0cBytes = limits.l0cBytes;
    c.aicNum = limits.aicNum;
    c.aivNum = limits.aivNum;
    c.socVersion = limits.socVersion;
    return c;
}

}  // namespace

extern "C" int32_t aclfaPlanCompute(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits,
                                    aclfaPlan *plan, char *errBuf, size_t errLen) {
    if (problem == nullptr || limits == nullptr || plan == nullptr) {
        SetError(errBuf, errLen, "aclfaPlanCompute: problem, limits and plan must not be NULL");
        return -1;
    }
    if (problem->layout == fa_policy::kLayoutTnd && (problem->seqLensQ == nullptr || problem->seqLensKv == nullptr)) {
        SetError(errBuf, errLen, "aclfaPlanCompute: layout TND needs seqLensQ and seqLensKv");
        return -1;
    }
    const fa_policy::Problem p = ToPolicy(*problem);
    const fa_policy::ChipLimits c = ToPolicy(*limits);

    fa_policy::Plan out;
    std::string error;
    if (!fa_policy::ComputePlan(p, c, &out, &error)) {
        SetError(errBuf, errLen, error);
        return -1;
    }
    if (out.budget.size() > ACLFA_PLAN_MAX_LINES) {
        SetError(errBuf, errLen, "aclfaPlanCompute: the plan has more budget lines than ACLFA_PLAN_MAX_LINES");
        return -1;
    }
    std::memset(plan, 0, sizeof(*plan));
    plan->blockM = out.blockM;
    plan->blockN = out.blockN;
    plan->subBlockM = out.subBlockM;
    plan->numQBlocks = out.numQBlocks;
    plan->numKvBlocks = out.numKvBlocks;
    plan->qZigzag = out.qZigzag;
    plan->usedCoreNum = out.usedCoreNum;
    plan->totalItems = out.totalItems;
    plan->totalWork = out.totalWork;
    plan->maxCoreWork = out.maxCoreWork;
    plan->meanCoreWork = out.meanCoreWork;
    plan->imbalance = out.imbalance;
    plan->wsScoreOffset = out.wsScoreOffset;
    plan->wsProbOffset = out.wsProbOffset;
    plan->wsPvOffset = out.wsPvOffset;
    plan->wsBytesPerAiv = out.wsBytesPerAiv;
    plan->userWorkspaceBytes = out.userWorkspaceBytes;
    plan->tilingKey = out.tilingKey;
    for (size_t i = 0; i < out.coreItemStart.size(); ++i) plan->coreItemStart[i] = out.coreItemStart[i];
    plan->numLines = static_cast<uint32_t>(out.budget.size());
    for (size_t i = 0; i < out.budget.size(); ++i) {
        CopyName(plan->lines[i].name, out.budget[i].name);
        plan->lines[i].bytes = out.budget[i].bytes;
        plan->lines[i].capacity = out.budget[i].capacity;
    }
    SetError(errBuf, errLen, "");
    return 0;
}

extern "C" size_t aclfaPlanSizeOf(int32_t which) {
    switch (which) {
        case 0: return sizeof(aclfaPlanProblem);
        case 1: return sizeof(aclfaPlanLimits);
        case 2: return sizeof(aclfaPlanBudgetLine);
        case 3: return sizeof(aclfaPlan);
        default: return 0;
    }
}

extern "C" double aclfaPlanModeledCycles(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits,
                                         uint32_t blockM, uint32_t blockN) {
    if (problem == nullptr || limits == nullptr || blockM == 0 || blockN == 0) return -1.0;
    return fa_policy::ModeledKernelCycles(ToPolicy(*problem), ToPolicy(*limits), blockM, blockN);
}
