// flash_attention_grad_policy.cpp -- see flash_attention_grad_policy.h.
#include "flash_attention_grad_policy.h"

#include <algorithm>

namespace fa_policy {
namespace {

constexpr uint32_t kBlockAlign = 16;  // cube fractal edge
constexpr uint64_t kUbAlign = 32;
constexpr uint64_t kFp32 = 4;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Needs {
    std::vector<BudgetLine> lines;
    uint64_t ub = 0, l1 = 0, l0c = 0;
};

// The kernel's per-AIV UB buffers in InitBuffer order, and the cube's needs: L1 holds, for
// each of the AIC's 2 AIVs, the operands of the step's three matmul shapes (score Q.K^T and
// dO.V^T: [m,d] + [n,d]; kv grads P^T.dO and dS^T.Q: [m,n] + [m,d]; dq dS.K: [m,n] + [n,d]);
// L0C one whole result ([m,n], [n,d] or [m,d] fp32).
Needs ComputeNeeds(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c) {
    const uint64_t m = blockM, n = blockN, d = p.headDim, t = p.dtypeBytes;
    Needs needs;
    needs.lines = {
        {"scoreBuf S/P [m,n] fp32", m * n * kFp32, c.ubBytes},
        {"gradBuf dP/dS [m,n] fp32", m * n * kFp32, c.ubBytes},
        {"probBuf P [m,n] T", m * n * t, c.ubBytes},
        {"dsBuf dS [m,n] T", m * n * t, c.ubBytes},
        {"lseBuf [m] fp32", AlignUp(m * kFp32, kUbAlign), c.ubBytes},
        {"deltaBuf [m] fp32", AlignUp(m * kFp32, kUbAlign), c.ubBytes},
        {"brcbBuf [m,8] fp32", m * 8 * kFp32, c.ubBytes},
        {"foldBuf [m,64] fp32", m * 64 * kFp32, c.ubBytes},
    };
    for (const auto &line : needs.lines) needs.ub += line.bytes;
    needs.l1 = 2 * ((m * d + n * d) + (m * n + m * d) + (m * n + n * d)) * t;
    const uint64_t mPad = AlignUp(m, kBlockAlign);
    needs.l0c = std::max({mPad * n, n * d, mPad * d}) * kFp32;
    needs.lines.push_back({"UB total per AIV", needs.ub, c.ubBytes});
    needs.lines.push_back({"L1 operands of 3 matmuls x2 AIV", needs.l1, c.l1Bytes});
    needs.lines.push_back({"L0C largest result fp32", needs.l0c, c.l0cBytes});
    return needs;
}

std::string CheckFits(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c) {
    const Needs needs = ComputeNeeds(blockM, blockN, p, c);
    const std::string what = Format("backward block_m=%u, block_n=%u (head_dim=%llu)", blockM, blockN,
                                    static_cast<unsigned long long>(p.headDim));
    if (needs.ub > c.ubBytes) {
        const auto largest = std::max_element(needs.lines.begin(), needs.lines.end() - 3,
                                              [](const BudgetLine &a, const BudgetLine &b) { return a.bytes < b.bytes; });
        return Format("%s needs %llu B of UB per AIV (largest line: %s, %llu B); %s has %llu B", what.c_str(),
                      static_cast<unsigned long long>(needs.ub), largest->name.c_str(),
                      static_cast<unsigned long long>(largest->bytes), c.socName.c_str(),
                      static_cast<unsigned long long>(c.ubBytes));
    }
    if (needs.l1 > c.l1Bytes) {
        return Format("%s needs %llu B of L1 per AIC (operands of 3 matmuls for 2 AIVs); %s has %llu B", what.c_str(),
                      static_cast<unsigned long long>(needs.l1), c.socName.c_str(),
                      static_cast<unsigned long long>(c.l1Bytes));
    }
    if (needs.l0c > c.l0cBytes) {
        return Format("%s needs %llu B of L0C for one matmul result; %s has %llu B", what.c_str(),
                      static_cast<unsigned long long>(needs.l0c), c.socName.c_str(),
                      static_cast<unsigned long long>(c.l0cBytes));
    }
    return {};
}

// Auto blocks: blockN = min(128, Skv rounded to 16) (or the user's), then the largest blockM
// (multiple of 16, at most 128 and Sq rounded up to 16) that fits; when none does with that
// blockN, smaller blockN are tried. A user block is taken as given or refused.
bool ChooseBlocks(const Problem &p, const ChipLimits &c, uint32_t *blockM, uint32_t *blockN, std::string *error) {
    const struct {
        const char *name;
        uint32_t value, max;
    } users[] = {{"block_m", p.userBlockM, kGradMaxBlockM}, {"block_n", p.userBlockN, kGradMaxBlockN}};
    for (const auto &u : users) {
        if (u.value > u.max) {
            *error = Format("backward %s must be 0 (auto) or a multiple of 16 up to %u, got %u", u.name, u.max, u.value);
            return false;
        }
    }
    const uint32_t capM = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqQ, kBlockAlign), kGradMaxBlockM));
    const uint32_t capN = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqKv, kBlockAlign), kGradReferenceBlockN));
    std::vector<uint32_t> ns;
    if (p.userBlockN != 0) {
        ns.push_back(p.userBlockN);
    } else {
        for (uint32_t n = capN; n >= kBlockAlign; n -= kBlockAlign) ns.push_back(n);
    }
    for (uint32_t n : ns) {
        if (p.userBlockM != 0) {
            *error = CheckFits(p.userBlockM, n, p, c);
            if (error->empty() || p.userBlockN != 0) {
                *blockM = p.userBlockM;
                *blockN = n;
                return error->empty();
            }
            continue;
        }
        for (uint32_t m = capM; m >= kBlockAlign; m -= kBlockAlign) {
            if (CheckFits(m, n, p, c).empty()) {
                *blockM = m;
                *blockN = n;
                error->clear();
                return true;
            }
        }
    }
    *error = CheckFits(p.userBlockM ? p.userBlockM : kBlockAlign, ns.back(), p, c) + " (no backward block fits)";
    return false;
}

}  // namespace

uint32_t FirstQueryBlockSeeing(const Problem &p, uint32_t blockM, uint32_t blockN, uint64_t j) {
    const uint32_t numQBlocks = static_cast<uint32_t>(CeilDiv(p.seqQ, blockM));
    if (!p.causal) return 0;
    // Row i sees key k iff k <= i + Skv - Sq: the block's first key j * blockN is seen from row
    // j * blockN - (Skv - Sq) on; the query block holding that row is the first.
    const int64_t firstRow = static_cast<int64_t>(j * blockN) - (static_cast<int64_t>(p.seqKv) - static_cast<int64_t>(p.seqQ));
    if (firstRow <= 0) return 0;
    if (static_cast<uint64_t>(firstRow) >= p.seqQ) return numQBlocks;
    return static_cast<uint32_t>(static_cast<uint64_t>(firstRow) / blockM);
}

bool ComputeGradPlan(const Problem &p, bool deterministic, const ChipLimits &c, GradPlan *plan, std::string *error) {
    *error = ValidateProblem(p);
    if (error->empty()) *error = ValidateChip(c);
    if (!error->empty()) return false;
    GradPlan out;
    if (!ChooseBlocks(p, c, &out.blockM, &out.blockN, error)) return false;
    const uint64_t m = out.blockM, n = out.blockN, d = p.headDim, t = p.dtypeBytes;
    out.numQBlocks = static_cast<uint32_t>(CeilDiv(p.seqQ, m));
    out.numKvBlocks = static_cast<uint32_t>(CeilDiv(p.seqKv, n));
    out.rowChunk = static_cast<uint32_t>(std::min<uint64_t>(m, m * n / d));
    out.budget = ComputeNeeds(out.blockM, out.blockN, p, c).lines;

    // Units (b, h, j) with their work: the query heads of h's group times the query blocks seeing j.
    const uint64_t group = p.numHeads / p.numKvHeads;
    out.totalUnits = p.batch * p.numKvHeads * out.numKvBlocks;
    if (out.totalUnits > UINT32_MAX || p.batch * p.numHeads * p.seqQ * d > (uint64_t{1} << 40)) {
        *error = Format("the backward's problem is too large: %llu K/V block units",
                        static_cast<unsigned long long>(out.totalUnits));
        return false;
    }
    std::vector<uint64_t> perBlock(out.numKvBlocks);
    for (uint32_t j = 0; j < out.numKvBlocks; ++j) {
        perBlock[j] = group * (out.numQBlocks - FirstQueryBlockSeeing(p, out.blockM, out.blockN, j));
    }
    std::vector<uint64_t> work(out.totalUnits);
    for (uint64_t u = 0; u < out.totalUnits; ++u) work[u] = std::max<uint64_t>(perBlock[u % out.numKvBlocks], 1);
    const uint32_t aivs = std::min<uint32_t>({c.aivNum ? c.aivNum : 2 * c.aicNum, kGradMaxAiv, 2 * kMaxCores});
    std::vector<uint32_t> starts = SplitContiguous(work, aivs);
    const uint32_t used = static_cast<uint32_t>(starts.size() - 1);
    out.blockDim = (used + 1) / 2;
    out.aivNum = 2 * out.blockDim;
    while (starts.size() < out.aivNum + 1u) starts.push_back(starts.back());
    out.unitStart = starts;
    for (uint32_t a = 0; a < used; ++a) {
        uint64_t load = 0;
        for (uint32_t u = starts[a]; u < starts[a + 1]; ++u) load += work[u];
        out.totalWork += load;
        out.maxCoreWork = std::max(out.maxCoreWork, load);
        if (starts[a + 1] > starts[a]) {
            out.numSlots += (starts[a + 1] - 1) / out.numKvBlocks - starts[a] / out.numKvBlocks + 1;
        }
    }
    out.meanCoreWork = static_cast<double>(out.totalWork) / used;
    out.imbalance = out.totalWork == 0 ? 1.0 : static_cast<double>(out.maxCoreWork) / out.meanCoreWork;

    // Workspace: D, the dQ accumulator (or partial slots), then one scratch slice per AIV.
    const uint64_t headRows = p.seqQ * d * kFp32;  // one query head's [Sq, D] fp32
    out.wsDeltaOffset = 0;
    out.wsDqOffset = AlignUp(p.batch * p.numHeads * p.seqQ * kFp32, kWorkspaceAlign);
    out.wsDqBytes = deterministic ? out.numSlots * group * headRows : p.batch * p.numHeads * headRows;
    out.wsScratchOffset = out.wsDqOffset + AlignUp(out.wsDqBytes, kWorkspaceAlign);
    uint64_t at = 0;
    for (auto [field, bytes] : {std::pair<uint64_t *, uint64_t>{&out.wsScoreOffset, m * n * kFp32},
                                {&out.wsGradOffset, m * n * kFp32}, {&out.wsProbOffset, m * n * t},
                                {&out.wsDsOffset, m * n * t}, {&out.wsDkOffset, n * d * kFp32},
                                {&out.wsDvOffset, n * d * kFp32}, {&out.wsDqPartOffset, m * d * kFp32}}) {
        *field = at;
        at += AlignUp(bytes, kWorkspaceAlign);
    }
    out.wsScratchBytes = at;
    out.userWorkspaceBytes = out.wsScratchOffset + out.aivNum * out.wsScratchBytes;

    const uint32_t keyLayout = p.layout == kLayoutBsh ? kLayoutBsnd : p.layout;
    out.tilingKey = (p.bf16 ? kGradKeyBf16 : 0) | (p.causal ? kGradKeyCausal : 0) |
                    (static_cast<uint64_t>(keyLayout) << kGradKeyLayoutShift) |
                    (deterministic ? kGradKeyDeterministic : 0);
    *plan = std::move(out);
    return true;
}

}  // namespace fa_policy
