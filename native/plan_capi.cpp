// plan_capi.cpp -- the C ABI of aclfa_plan.h over fa_policy::ComputePlan.
#include "aclfa_plan.h"

#include <cstring>

#include "plan_marshal.h"
#include "tiling_policy.h"

namespace {

// aclfaPlanCompute and aclfaPlanComputeWithin: `compute` is the policy's entry (ComputePlan, or
// ComputePlanWithin with the limit bound), `api` the name for the argument errors.
template <typename Compute>
int32_t ComputeToC(const char *api, const aclfaPlanProblem *problem, const aclfaPlanLimits *limits, aclfaPlan *plan,
                   char *errBuf, size_t errLen, Compute compute) {
    if (problem == nullptr || limits == nullptr || plan == nullptr) {
        return aclfa_plan::Report(errBuf, errLen, std::string(api) + ": problem, limits and plan must not be NULL");
    }
    if (problem->layout == fa_policy::kLayoutTnd && (problem->seqLensQ == nullptr || problem->seqLensKv == nullptr)) {
        return aclfa_plan::Report(errBuf, errLen, std::string(api) + ": layout TND needs seqLensQ and seqLensKv");
    }
    const fa_policy::Problem p = aclfa_plan::ProblemWithOptionsFromC(*problem);
    const fa_policy::ChipLimits c = aclfa_plan::LimitsFromC(*limits);

    fa_policy::Plan out;
    std::string error;
    if (!compute(p, c, &out, &error)) return aclfa_plan::Report(errBuf, errLen, error);
    if (out.budget.size() > ACLFA_PLAN_MAX_LINES) {
        return aclfa_plan::Report(errBuf, errLen,
                                  "aclfaPlanCompute: the plan has more budget lines than ACLFA_PLAN_MAX_LINES");
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
    plan->wsScoreOffset = out.wsScoreOffset;
    plan->wsProbOffset = out.wsProbOffset;
    plan->wsPvOffset = out.wsPvOffset;
    plan->wsBytesPerCore = out.wsBytesPerCore;
    plan->soloRows = out.soloRows;
    for (size_t i = 0; i < out.coreItemStart.size(); ++i) plan->coreItemStart[i] = out.coreItemStart[i];
    return aclfa_plan::FinishPlanToC(out, plan, errBuf, errLen);  // budget size checked above
}

}  // namespace

extern "C" int32_t aclfaPlanCompute(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits,
                                    aclfaPlan *plan, char *errBuf, size_t errLen) {
    return ComputeToC("aclfaPlanCompute", problem, limits, plan, errBuf, errLen, fa_policy::ComputePlan);
}

extern "C" int32_t aclfaPlanComputeWithin(const aclfaPlanProblem *problem, const aclfaPlanLimits *limits,
                                          uint64_t userWorkspaceLimit, aclfaPlan *plan, char *errBuf, size_t errLen) {
    return ComputeToC("aclfaPlanComputeWithin", problem, limits, plan, errBuf, errLen,
                      [userWorkspaceLimit](const fa_policy::Problem &p, const fa_policy::ChipLimits &c,
                                           fa_policy::Plan *out, std::string *error) {
                          return fa_policy::ComputePlanWithin(p, c, userWorkspaceLimit, out, error);
                      });
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
    return fa_policy::ModeledKernelCycles(aclfa_plan::ProblemWithOptionsFromC(*problem), aclfa_plan::LimitsFromC(*limits), blockM,
                                          blockN);
}
