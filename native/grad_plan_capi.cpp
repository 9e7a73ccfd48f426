// grad_plan_capi.cpp -- the C ABI of aclfa_grad_plan.h over fa_policy::ComputeGradPlan.
#include "aclfa_grad_plan.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "flash_attention_grad_policy.h"
#include "plan_marshal.h"

extern "C" int32_t aclfaGradPlanCompute(const aclfaPlanProblem *problem, uint32_t deterministic,
                                        const aclfaPlanLimits *limits, aclfaGradPlan *plan, char *errBuf,
                                        size_t errLen) {
    auto fail = [&](const std::string &msg) { return aclfa_plan::Report(errBuf, errLen, msg); };
    if (problem == nullptr || limits == nullptr || plan == nullptr) {
        return fail("aclfaGradPlanCompute: problem, limits and plan must not be NULL");
    }
    const fa_policy::Problem p = aclfa_plan::ProblemWithOptionsFromC(*problem);  // band, lengths, mask too
    const fa_policy::ChipLimits c = aclfa_plan::LimitsFromC(*limits);

    fa_policy::GradPlan out;
    std::string error;
    if (!fa_policy::ComputeGradPlan(p, deterministic != 0, c, &out, &error)) return fail(error);
    if (out.budget.size() > ACLFA_PLAN_MAX_LINES || out.unitStart.size() > ACLFA_GRAD_PLAN_MAX_AIV + 1) {
        return fail("aclfaGradPlanCompute: the plan exceeds the C struct's arrays");
    }
    std::memset(plan, 0, sizeof(*plan));
    plan->blockM = out.blockM;
    plan->blockN = out.blockN;
    plan->numQBlocks = out.numQBlocks;
    plan->numKvBlocks = out.numKvBlocks;
    plan->rowChunk = out.rowChunk;
    plan->blockDim = out.blockDim;
    plan->aivNum = out.aivNum;
    plan->panelRows = out.panelRows;
    plan->totalUnits = out.totalUnits;
    plan->wsDeltaOffset = out.wsDeltaOffset;
    plan->wsDqOffset = out.wsDqOffset;
    plan->wsDqBytes = out.wsDqBytes;
    plan->wsScratchOffset = out.wsScratchOffset;
    plan->wsScratchBytes = out.wsScratchBytes;
    for (size_t i = 0; i < out.unitStart.size(); ++i) plan->unitStart[i] = out.unitStart[i];
    plan->unitsDealt = out.unitsDealt ? 1 : 0;
    plan->dqGroupBlocks = out.dqGroupBlocks;
    return aclfa_plan::FinishPlanToC(out, plan, errBuf, errLen);  // budget size checked above
}

extern "C" size_t aclfaGradPlanSizeOf(void) { return sizeof(aclfaGradPlan); }
