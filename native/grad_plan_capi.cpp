// grad_plan_capi.cpp -- the C ABI of aclfa_grad_plan.h over fa_policy::ComputeGradPlan.
#include "aclfa_grad_plan.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "flash_attention_grad_policy.h"

extern "C" int32_t aclfaGradPlanCompute(const aclfaPlanProblem *problem, uint32_t deterministic,
                                        const aclfaPlanLimits *limits, aclfaGradPlan *plan, char *errBuf,
                                        size_t errLen) {
    auto fail = [&](const std::string &msg) {
        if (errBuf != nullptr && errLen > 0) std::snprintf(errBuf, errLen, "%s", msg.c_str());
        return -1;
    };
    if (problem == nullptr || limits == nullptr || plan == nullptr) {
        return fail("aclfaGradPlanCompute: problem, limits and plan must not be NULL");
    }
    fa_policy::Problem p;
    p.batch = problem->batch;
    p.numHeads = problem->numHeads;
    p.numKvHeads = problem->numKvHeads;
    p.seqQ = problem->seqQ;
    p.seqKv = problem->seqKv;
    p.headDim = problem->headDim;
    p.dtypeBytes = problem->dtypeBytes;
    p.bf16 = problem->bf16 != 0;
    p.layout = problem->layout;
    p.causal = problem->causal != 0;
    p.userBlockM = problem->blockM;
    p.userBlockN = problem->blockN;
    fa_policy::ChipLimits c;
    c.socName = std::string(limits->socName, strnlen(limits->socName, ACLFA_PLAN_NAME_LEN));
    c.ubBytes = limits->ubBytes;
    c.l1Bytes = limits->l1Bytes;
    c.l0aBytes = limits->l0aBytes;
    c.l0bBytes = limits->l0bBytes;
    c.l0cBytes = limits->l0cBytes;
    c.aicNum = limits->aicNum;
    c.aivNum = limits->aivNum;
    c.socVersion = limits->socVersion;

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
    plan->numDqFlags = out.numDqFlags;
    plan->totalUnits = out.totalUnits;
    plan->totalWork = out.totalWork;
    plan->maxCoreWork = out.maxCoreWork;
    plan->meanCoreWork = out.meanCoreWork;
    plan->imbalance = out.imbalance;
    plan->wsDeltaOffset = out.wsDeltaOffset;
    plan->wsDqOffset = out.wsDqOffset;
    plan->wsDqBytes = out.wsDqBytes;
    plan->wsScratchOffset = out.wsScratchOffset;
    plan->wsScratchBytes = out.wsScratchBytes;
    plan->userWorkspaceBytes = out.userWorkspaceBytes;
    plan->tilingKey = out.tilingKey;
    for (size_t i = 0; i < out.unitStart.size(); ++i) plan->unitStart[i] = out.unitStart[i];
    plan->numLines = static_cast<uint32_t>(out.budget.size());
    for (size_t i = 0; i < out.budget.size(); ++i) {
        std::snprintf(plan->lines[i].name, sizeof(plan->lines[i].name), "%s", out.budget[i].name.c_str());
        plan->lines[i].bytes = out.budget[i].bytes;
        plan->lines[i].capacity = out.budget[i].capacity;
    }
    if (errBuf != nullptr && errLen > 0) errBuf[0] = '\0';
    return 0;
}

extern "C" size_t aclfaGradPlanSizeOf(void) { return sizeof(aclfaGradPlan); }
