// plan_marshal.h -- the conversions every C ABI of libaclfa_plan.so shares: the C structs of
// aclfa_plan.h into the policies' C++ types (problem, chip limits) and their budget lines and
// errors back.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "aclfa_plan.h"
#include "tiling_policy.h"

namespace aclfa_plan {

inline fa_policy::Problem ProblemFromC(const aclfaPlanProblem &problem) {
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
    return p;
}

// The fields every policy shares (ProblemFromC), then the V2 entries' band, for TND the
// per-sequence lengths, and the mask and dropout (the forward's and the backward's policies).
inline fa_policy::Problem ProblemWithOptionsFromC(const aclfaPlanProblem &problem) {
    fa_policy::Problem p = aclfa_plan::ProblemFromC(problem);
    p.preTokens = problem.preTokens;
    p.nextTokens = problem.nextTokens;
    if (problem.layout == fa_policy::kLayoutTnd && problem.seqLensQ != nullptr && problem.seqLensKv != nullptr) {
        p.seqLensQ.assign(problem.seqLensQ, problem.seqLensQ + problem.batch);
        p.seqLensKv.assign(problem.seqLensKv, problem.seqLensKv + problem.batch);
        p.tokensQ = problem.tokensQ;
        p.tokensKv = problem.tokensKv;
    }
    p.mask = problem.mask != 0;
    p.maskB = problem.maskB;
    p.maskN = problem.maskN;
    p.maskQ = problem.maskQ;
    p.dropout = problem.dropout != 0;
    p.dropoutMaskOut = problem.dropoutMaskOut != 0;
    p.alibi = problem.alibi != 0;
    p.sinks = problem.sinks != 0;
    p.bias = problem.bias != 0;
    p.biasB = problem.bias != 0 ? problem.biasB : 1;
    p.biasN = problem.bias != 0 ? problem.biasN : 1;
    p.biasQ = problem.bias != 0 ? problem.biasQ : 1;
    p.narrowScores = problem.narrowScores != 0;
    p.halfScores = problem.halfScores != 0;
    p.halfSoftmax = problem.halfSoftmax != 0;
    return p;
}

inline fa_policy::ChipLimits LimitsFromC(const aclfaPlanLimits &limits) {
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
    c.l2BytesPerCycle = limits.l2BytesPerCycle;
    return c;
}

// Copies the budget into lines[ACLFA_PLAN_MAX_LINES]; false when it has more lines.
inline bool BudgetToC(const std::vector<fa_policy::BudgetLine> &budget, aclfaPlanBudgetLine *lines,
                      uint32_t *numLines) {
    if (budget.size() > ACLFA_PLAN_MAX_LINES) return false;
    for (size_t i = 0; i < budget.size(); ++i) {
        std::snprintf(lines[i].name, sizeof(lines[i].name), "%s", budget[i].name.c_str());
        lines[i].bytes = budget[i].bytes;
        lines[i].capacity = budget[i].capacity;
    }
    *numLines = static_cast<uint32_t>(budget.size());
    return true;
}

inline int32_t Ok(char *errBuf, size_t errLen);

// The fields the forward's and the gradient's C plans share (the work balance, the workspace,
// the tiling key, the budget lines, whose count the caller checked), then Ok().
template <typename Plan, typename CPlan>
int32_t FinishPlanToC(const Plan &out, CPlan *plan, char *errBuf, size_t errLen) {
    plan->totalWork = out.totalWork;
    plan->maxCoreWork = out.maxCoreWork;
    plan->meanCoreWork = out.meanCoreWork;
    plan->imbalance = out.imbalance;
    plan->userWorkspaceBytes = out.userWorkspaceBytes;
    plan->tilingKey = out.tilingKey;
    BudgetToC(out.budget, plan->lines, &plan->numLines);
    return Ok(errBuf, errLen);
}

// The C ABI's error convention: the message in errBuf (NUL-terminated, truncated to errLen)
// and -1; Ok() empties errBuf and returns 0.
inline int32_t Report(char *errBuf, size_t errLen, const std::string &message) {
    if (errBuf != nullptr && errLen > 0) std::snprintf(errBuf, errLen, "%s", message.c_str());
    return -1;
}

inline int32_t Ok(char *errBuf, size_t errLen) {
    if (errBuf != nullptr && errLen > 0) errBuf[0] = '\0';
    return 0;
}

}  // namespace aclfa_plan
