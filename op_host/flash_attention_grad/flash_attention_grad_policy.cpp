// flash_attention_grad_policy.cpp -- see flash_attention_grad_policy.h.
#include "flash_attention_grad_policy.h"

#include <algorithm>

namespace fa_policy {
namespace {

constexpr uint32_t kBlockAlign = 16;  // cube fractal edge
constexpr uint64_t kUbAlign = 32;
constexpr uint64_t kFp32 = 4;
// Rows per cube request (a panel, docs/backward.md): the request latencies, the K / V reads and
// the dK / dV write-out are paid once per panel; the per-AIV scratch holds S, dP, P and dS of one
// panel. 1024 (was 512): -2.2 GM B per visible pair, -4.7% modeled at N32 S4096 causal; 2048 was
// slower in the atomic mode (bench/RESULTS.md "Backward speed, third step").
constexpr uint64_t kGradPanelRows = 1024;
constexpr uint64_t kMaxSlotBytes = 32;  // deterministic: one AIV's max |K| (or |V|), 8 fp32 copies
// Philox counters per chunk with dropout: a chunk covers 16 x lanes tile elements, which the
// kernel drops out through foldBuf [m, 64] fp32, so lanes <= 4 m; 128 (29 KiB of UB) when m
// allows. Always >= blockN / 16 (a tile row) and a multiple of 8 (philox_dropout.h Init).
constexpr uint32_t kGradPhiloxLanes = 128;
uint32_t GradPhiloxLanes(uint32_t blockM) { return std::min<uint32_t>(kGradPhiloxLanes, 4 * blockM); }

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Query rows per panel: the largest multiple of blockM up to kGradPanelRows, at most the query rows.
uint64_t PanelRows(uint64_t blockM, uint64_t seqQ) {
    return std::min(std::max<uint64_t>(kGradPanelRows / blockM, 1) * blockM, CeilDiv(seqQ, blockM) * blockM);
}
// The least L1 one Matmul object of an M x N x K request needs: one A and one B base tile
// (baseM x baseK and baseN x baseK, T elements), with the bases the Matmul tiling picks first
// (op_host/common/cube_tiling.h): baseM <= 128 and baseN <= 256 within L0C, then the largest
// baseK (a multiple of 16, at most K) whose A and B tiles double-buffer in L0A / L0B. L1 is
// then fitted by fewer K steps, down to one, but never by a smaller baseK.
uint64_t ObjectL1(uint64_t m, uint64_t n, uint64_t k, uint64_t t, const ChipLimits &c) {
    uint64_t bm = std::min<uint64_t>(AlignUp(m, kBlockAlign), 128), bn = std::min<uint64_t>(AlignUp(n, kBlockAlign), 256);
    while (bm * bn * kFp32 > c.l0cBytes && (bm > kBlockAlign || bn > kBlockAlign)) {
        if (bn >= bm) {
            bn -= kBlockAlign;
        } else {
            bm -= kBlockAlign;
        }
    }
    uint64_t bk = AlignUp(k, kBlockAlign);
    while (bk > kBlockAlign && (bm * bk * t * 2 > c.l0aBytes || bk * bn * t * 2 > c.l0bBytes)) bk -= kBlockAlign;
    return (bm + bn) * bk * t;
}

struct Needs {
    std::vector<BudgetLine> lines;
    uint64_t ub = 0, l1 = 0, l0c = 0;
};

// The kernel's per-AIV UB buffers in InitBuffer order, and the cube's needs: L1 holds, for
// each of the AIC's 2 AIVs, the operand tiles of its 4 Matmul objects (S / dP [P,n] from [P,d] x
// [n,d]^T; dV and dK [n,d] from [P,n]^T x [P,d]; dQ [P,d] from [P,n] x [n,d]; P = panel rows);
// L0C one base tile ([m,n], [n,d] or [m,d] fp32).
// L1 of the AIC's 2 x 4 Matmul objects, each given an eighth of L1 (flash_attention_grad_host.cpp):
// 8 x the largest object's need, so that it fits exactly when every object does.
uint64_t ObjectsL1(uint64_t panel, uint64_t n, const Problem &p, const ChipLimits &c) {
    const uint64_t d = p.headDim, t = p.dtypeBytes;
    return 8 * std::max({ObjectL1(panel, n, d, t, c), ObjectL1(n, d, panel, t, c), ObjectL1(panel, d, n, t, c)});
}

// The panel of blockM x blockN blocks: PanelRows, or with shortPanel (a user's blocks) the
// largest multiple of blockM below it whose Matmul objects fit L1 (an object whose base tiles
// are square needs 64 KiB at baseK 128, a little over an eighth of the 910B's L1).
uint64_t FitPanel(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c, bool shortPanel) {
    const uint64_t full = PanelRows(blockM, p.seqQ);
    for (uint64_t panel = full; shortPanel && panel >= blockM; panel -= blockM) {
        if (ObjectsL1(panel, blockN, p, c) <= c.l1Bytes) return panel;
    }
    return full;
}

Needs ComputeNeeds(uint32_t blockM, uint32_t blockN, uint64_t panel, const Problem &p, const ChipLimits &c) {
    const uint64_t m = blockM, n = blockN, d = p.headDim, t = p.dtypeBytes;
    Needs needs;
    needs.lines = {
        {"scoreBuf S/P [m,n] fp32", m * n * kFp32, c.ubBytes},
        {"gradBuf dP/dS [m,n] fp32", m * n * kFp32, c.ubBytes},
        {"probBuf P [m,n] T", m * n * t, c.ubBytes},
        {"dsBuf dS [m,n] T", m * n * t, c.ubBytes},
        {"lseBuf [panel] fp32", AlignUp(panel * kFp32, kUbAlign), c.ubBytes},
        {"deltaBuf [panel] fp32", AlignUp(panel * kFp32, kUbAlign), c.ubBytes},
        {"brcbBuf [m,8] fp32", m * 8 * kFp32, c.ubBytes},
        {"foldBuf [m,64] fp32", m * 64 * kFp32, c.ubBytes},
    };
    if (p.mask) needs.lines.push_back({"maskBuf mask tiles [16,n] u8/f16/f32", MaskTilesUbBytes(kMaskRows, n), c.ubBytes});
    if (p.dropout) {
        needs.lines.push_back({"keepBuf Philox4x32-10 keep mask", PhiloxUbBytes(GradPhiloxLanes(blockM)), c.ubBytes});
    }
    if (p.alibi) {
        // Column indices [n] (padded to whole 64-column repeats, read 64 at a time) and the tile's row
        // indices and row values [m] each, fp32: the kernel's ALiBi bias (AddAlibi).
        needs.lines.push_back({"alibiBuf ALiBi indices [align64(n) + 2m] fp32", (AlignUp(n, 64) + 2 * m) * kFp32,
                               c.ubBytes});
    }
    for (const auto &line : needs.lines) needs.ub += line.bytes;
    needs.l1 = ObjectsL1(panel, n, p, c);
    const uint64_t mPad = AlignUp(m, kBlockAlign);
    needs.l0c = std::max({mPad * n, n * d, mPad * d}) * kFp32;
    needs.lines.push_back({"UB total per AIV", needs.ub, c.ubBytes});
    needs.lines.push_back({"L1 8 x the largest Matmul object's tiles", needs.l1, c.l1Bytes});
    needs.lines.push_back({"L0C largest result fp32", needs.l0c, c.l0cBytes});
    return needs;
}

std::string CheckFits(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c, bool shortPanel) {
    const Needs needs = ComputeNeeds(blockM, blockN, FitPanel(blockM, blockN, p, c, shortPanel), p, c);
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
        return Format("%s needs %llu B of L1 per AIC (8 Matmul objects: 2 AIVs x 4, each an eighth); %s has %llu B",
                      what.c_str(),
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
    uint32_t capN = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqKv, kBlockAlign), kGradReferenceBlockN));
    // A band of bounded width W = pre + next + 1: each key block of n keys is seen by about
    // n + W - 1 rows, of which every key sees W, so executed / useful MACs ~ (n + W - 1) / W;
    // n <= W / 16 keeps that near 1.06 (the kernel trims each step to the rows that see it).
    int64_t pre = 0, next = 0;
    GradBand(p, &pre, &next);
    if (attn_band::Bounded(pre) && attn_band::Bounded(next)) {
        const uint64_t width = static_cast<uint64_t>(pre + next + 1);
        capN = std::min<uint32_t>(capN, static_cast<uint32_t>(std::max<uint64_t>(width / 16 / kBlockAlign * kBlockAlign,
                                                                                   kBlockAlign)));
    }
    std::vector<uint32_t> ns;
    if (p.userBlockN != 0) {
        ns.push_back(p.userBlockN);
    } else {
        for (uint32_t n = capN; n >= kBlockAlign; n -= kBlockAlign) ns.push_back(n);
    }
    for (uint32_t n : ns) {
        if (p.userBlockM != 0) {
            *error = CheckFits(p.userBlockM, n, p, c, true);
            if (error->empty() || p.userBlockN != 0) {
                *blockM = p.userBlockM;
                *blockN = n;
                return error->empty();
            }
            continue;
        }
        for (uint32_t m = capM; m >= kBlockAlign; m -= kBlockAlign) {
            if (CheckFits(m, n, p, c, p.userBlockN != 0).empty()) {
                *blockM = m;
                *blockN = n;
                error->clear();
                return true;
            }
        }
    }
    *error = CheckFits(p.userBlockM ? p.userBlockM : kBlockAlign, ns.back(), p, c, true) + " (no backward block fits)";
    return false;
}

}  // namespace

void GradBand(const Problem &p, int64_t *pre, int64_t *next) {
    *pre = p.preTokens;
    *next = attn_band::FoldCausal(p.nextTokens, p.causal);
}

namespace {
uint64_t SeqQ(const Problem &p, uint64_t seq) { return p.seqLensQ.empty() ? p.seqQ : p.seqLensQ[seq]; }
uint64_t SeqKv(const Problem &p, uint64_t seq) { return p.seqLensKv.empty() ? p.seqKv : p.seqLensKv[seq]; }
}  // namespace

uint64_t RowsSeeing(const Problem &p, uint64_t seq, uint64_t keyBegin, uint64_t keyEnd) {
    const int64_t sq = static_cast<int64_t>(SeqQ(p, seq));
    const int64_t skv = static_cast<int64_t>(SeqKv(p, seq));
    const int64_t keyStop = std::min<int64_t>(static_cast<int64_t>(keyEnd), skv);
    if (static_cast<int64_t>(keyBegin) >= keyStop) return 0;
    int64_t pre = 0, next = 0;
    GradBand(p, &pre, &next);
    const int64_t diag = skv - sq;
    const int64_t rowLo = std::max<int64_t>(static_cast<int64_t>(keyBegin) - diag - next, 0);
    const int64_t rowHi = std::min<int64_t>(keyStop - diag + pre, sq);
    return rowHi > rowLo ? static_cast<uint64_t>(rowHi - rowLo) : 0;
}

void QueryBlocksSeeing(const Problem &p, uint32_t blockM, uint64_t seq, uint64_t keyBegin, uint64_t keyEnd,
                       uint32_t *first, uint32_t *end) {
    // Key k is seen by rows [k - diag - next, k - diag + pre] (diag = Skv - Sq); as pre + next >= 0
    // the rows of consecutive keys overlap or touch, so a key range is seen by one row range.
    *first = *end = 0;
    const int64_t sq = static_cast<int64_t>(SeqQ(p, seq));
    const int64_t skv = static_cast<int64_t>(SeqKv(p, seq));
    const int64_t keyStop = std::min<int64_t>(static_cast<int64_t>(keyEnd), skv);
    if (static_cast<int64_t>(keyBegin) >= keyStop) return;
    int64_t pre = 0, next = 0;
    GradBand(p, &pre, &next);
    const int64_t diag = skv - sq;
    const int64_t rowLo = std::max<int64_t>(static_cast<int64_t>(keyBegin) - diag - next, 0);
    const int64_t rowHi = std::min<int64_t>(keyStop - diag + pre, sq);
    if (rowHi <= rowLo) return;
    *first = static_cast<uint32_t>(rowLo / blockM);
    *end = static_cast<uint32_t>(CeilDiv(static_cast<uint64_t>(rowHi), blockM));
}

namespace {

// Work of each of `aivs` AIVs when items (pairs) are dealt (the kernel's UnitOfAiv with
// unitsDealt): item i = head * perHead + x is dealt as s = x * heads + head -- all heads' first
// pair, then their second, ... : for causal and full attention, non-increasing work -- and AIV a takes
// s = q * aivs + a in even rounds q and s = q * aivs + aivs - 1 - a in odd ones (a snake, so the
// AIV that took the heaviest item of a round takes the lightest of the next).
// units[a]: the units AIV a runs (itemUnits[i]: item i's).
std::vector<uint64_t> DealtLoads(const std::vector<uint64_t> &items, const std::vector<uint32_t> &itemUnits,
                                 uint64_t heads, uint32_t aivs, std::vector<uint32_t> *units) {
    std::vector<uint64_t> loads(aivs, 0);
    units->assign(aivs, 0);
    const uint64_t perHead = items.size() / heads;
    for (uint64_t s = 0; s < items.size(); ++s) {
        const uint64_t q = s / aivs, k = s % aivs, a = q % 2 == 0 ? k : aivs - 1 - k;
        const uint64_t item = s % heads * perHead + s / heads;
        loads[a] += items[item];
        (*units)[a] += itemUnits[item];
    }
    return loads;
}

// "" or what is wrong with the band and the per-sequence lengths (varlen).
std::string ValidateBandAndSequences(const Problem &p) {
    int64_t pre = 0, next = 0;
    GradBand(p, &pre, &next);
    if (pre < -kUnboundedTokens || next < -kUnboundedTokens || pre + next < 0) {
        return Format("pre_tokens + next_tokens must be >= 0 (a band of at least one diagonal), got pre_tokens=%lld, "
                      "next_tokens=%lld%s", static_cast<long long>(pre), static_cast<long long>(next),
                      p.causal ? " (causal: next_tokens <= 0)" : "");
    }
    return ValidateSequenceLengths(p);
}

}  // namespace

bool ComputeGradPlan(const Problem &p, bool deterministic, const ChipLimits &c, GradPlan *plan, std::string *error) {
    // The layout code only picks row strides here: TND (varlen) has BSND's.
    Problem checked = p;
    if (checked.layout == kLayoutTnd) checked.layout = kLayoutBsnd;
    *error = ValidateProblem(checked);
    if (error->empty()) *error = ValidateBandAndSequences(p);
    if (error->empty()) *error = ValidateChip(c);
    if (!error->empty()) return false;
    GradPlan out;
    if (!ChooseBlocks(p, c, &out.blockM, &out.blockN, error)) return false;
    const uint64_t m = out.blockM, n = out.blockN, d = p.headDim, t = p.dtypeBytes;
    out.numQBlocks = static_cast<uint32_t>(CeilDiv(p.seqQ, m));
    out.numKvBlocks = static_cast<uint32_t>(CeilDiv(p.seqKv, n));
    out.rowChunk = static_cast<uint32_t>(std::min<uint64_t>(m, m * n / d));
    // A user's blocks may take a shorter panel to fit L1; auto blocks keep the full one.
    const bool userBlocks = p.userBlockM != 0 || p.userBlockN != 0;
    out.panelRows = static_cast<uint32_t>(FitPanel(out.blockM, out.blockN, p, c, userBlocks));
    out.budget = ComputeNeeds(out.blockM, out.blockN, out.panelRows, p, c).lines;


    // Units (b, h, j) with their work: the query heads of h's group times the rows seeing block j.
    const uint64_t group = p.numHeads / p.numKvHeads;
    out.totalUnits = p.batch * p.numKvHeads * out.numKvBlocks;
    if (out.totalUnits > UINT32_MAX || p.batch * p.numHeads * p.seqQ * d > (uint64_t{1} << 40)) {
        *error = Format("the backward's problem is too large: %llu K/V block units",
                        static_cast<unsigned long long>(out.totalUnits));
        return false;
    }
    // Query rows each kv block of each sequence walks (the same for every kv head): the kernel
    // trims every panel to the rows that see the block.
    std::vector<uint64_t> perBlock(p.seqLensKv.empty() ? out.numKvBlocks : p.batch * out.numKvBlocks);
    for (size_t at = 0; at < perBlock.size(); ++at) {
        const uint64_t seq = at / out.numKvBlocks, j = at % out.numKvBlocks;
        perBlock[at] = group * RowsSeeing(p, seq, j * n, (j + 1) * n);
    }
    std::vector<uint64_t> work(out.totalUnits);
    for (uint64_t u = 0; u < out.totalUnits; ++u) {
        const uint64_t seq = u / (p.numKvHeads * out.numKvBlocks), j = u % out.numKvBlocks;
        work[u] = std::max<uint64_t>(perBlock[p.seqLensKv.empty() ? j : seq * out.numKvBlocks + j], 1);
    }
    const uint32_t aivs = std::min<uint32_t>({c.aivNum ? c.aivNum : 2 * c.aicNum, kGradMaxAiv, 2 * kMaxCores});
    // Deterministic dQ over pairs of K/V blocks (2t, 2t + 1) of a kv head: the cube sums the pair's
    // dQ parts in fp32 (the second added to the first in request order on one AIV) and the AIV adds
    // the sum once in fixed point: half the part's read and int32 add (docs/backward.md). The pairs
    // are fixed by the blocks, not by the cores, so unit ranges must not split a pair: the split is
    // over pairs. Only where the rows that see block 2t + 1 are among those that see 2t (no bounded
    // pre_tokens window, no mask, dense), the pair sums fit kGradDqGroupMaxBytes and there are at
    // least kGradDqGroupMinPairs pairs (fewer balance badly even dealt). Every condition is the
    // problem's, none the chip's: a problem sums its dQ the same way, to the same bits, on every
    // core count.
    // Groups of 4 blocks (4t .. 4t + 3) instead of pairs where there are as many groups: a quarter
    // of the parts read and added (the rows that see 4t + k are among those that see 4t alike).
    int64_t preBand = 0, nextBand = 0;
    GradBand(p, &preBand, &nextBand);
    const uint64_t heads = p.batch * p.numKvHeads;
    const bool grouped = deterministic && !p.mask && p.seqLensQ.empty() && !attn_band::Bounded(preBand) &&
                         group * p.seqQ * d * kFp32 <= kGradDqGroupMaxBytes;
    for (uint32_t blocks : {kGradDqGroupMaxBlocks, 2u}) {
        if (grouped && out.dqGroupBlocks == 0 && heads * CeilDiv(out.numKvBlocks, blocks) >= kGradDqGroupMinPairs) {
            out.dqGroupBlocks = blocks;
        }
    }
    out.dqGroup = out.dqGroupBlocks != 0;
    const uint64_t pairsPerHead = out.dqGroup ? CeilDiv(out.numKvBlocks, out.dqGroupBlocks) : 0;
    // Items: K/V block pairs (dqGroup) or units, item i = head * perHead + x (x: the pair or block
    // of kv head `head` of its sequence), split over the AIVs in contiguous ranges
    // (SplitContiguous). Pairs may instead be dealt in rounds (DealtLoads, the kernel's UnitOfAiv),
    // where the busiest AIV then has less work: N8 S4096 causal's 152 pairs, 1.22x the mean in
    // ranges, 1.09x dealt (modeled 843 -> 770 us). Units are never dealt: dealt units balanced
    // better on paper but modeled slower (N32 S4096 atomic 2694 us against 2658 us in ranges, N8
    // 693.5 against 687.9: bench/RESULTS.md "Backward speed, third step"). Either way every item
    // runs once on one AIV, so the results are the same bits.
    const uint64_t perHead = out.dqGroup ? pairsPerHead : out.numKvBlocks;
    std::vector<uint64_t> items(heads * perHead, 0);
    std::vector<uint32_t> itemUnits(heads * perHead, 0);
    for (uint64_t u = 0; u < out.totalUnits; ++u) {
        const uint64_t item = u / out.numKvBlocks * perHead +
                              (out.dqGroup ? u % out.numKvBlocks / out.dqGroupBlocks : u % out.numKvBlocks);
        items[item] += work[u];
        ++itemUnits[item];
    }
    const uint32_t unitsPerItem = out.dqGroup ? out.dqGroupBlocks : 1;
    std::vector<uint32_t> starts;
    std::vector<uint64_t> loads;
    for (uint32_t s : SplitContiguous(items, aivs)) {
        // Positions in units: a pair's two blocks are consecutive units (a head's last pair with
        // an odd block count has one; the range then ends at the next head's first block).
        starts.push_back(s == items.size() ? static_cast<uint32_t>(out.totalUnits)
                                           : static_cast<uint32_t>(s / perHead * out.numKvBlocks + s % perHead * unitsPerItem));
        if (s != 0) {
            loads.push_back(0);
            for (uint32_t u = starts[starts.size() - 2]; u < starts.back(); ++u) loads.back() += work[u];
        }
    }
    const uint32_t dealtAivs = static_cast<uint32_t>(std::min<uint64_t>(aivs, AlignUp(items.size(), 2)));
    std::vector<uint32_t> dealtUnits;
    const std::vector<uint64_t> dealt = DealtLoads(items, itemUnits, heads, dealtAivs, &dealtUnits);
    if (out.dqGroup && *std::max_element(dealt.begin(), dealt.end()) < *std::max_element(loads.begin(), loads.end())) {
        out.unitsDealt = true;
        loads = dealt;
        starts.assign(1, 0);  // informative only (the kernel deals): each AIV's unit count, summed
        for (uint32_t units : dealtUnits) starts.push_back(starts.back() + units);
    }
    const uint32_t used = static_cast<uint32_t>(starts.size() - 1);
    out.blockDim = (used + 1) / 2;
    out.aivNum = 2 * out.blockDim;
    while (starts.size() < out.aivNum + 1u) starts.push_back(starts.back());
    out.unitStart = starts;
    for (uint64_t load : loads) {
        out.totalWork += load;
        out.maxCoreWork = std::max(out.maxCoreWork, load);
    }
    out.meanCoreWork = static_cast<double>(out.totalWork) / used;
    out.imbalance = out.totalWork == 0 ? 1.0 : static_cast<double>(out.maxCoreWork) / out.meanCoreWork;

    // Workspace: D; deterministic, ||dO_r||_1 and the AIVs' K / V maxima; the dQ accumulator
    // (fp32 or int32); then one scratch slice per AIV.
    const uint64_t panel = out.panelRows;
    const uint64_t rowBytes = AlignUp(p.batch * p.numHeads * p.seqQ * kFp32, kWorkspaceAlign);
    out.wsDeltaOffset = 0;
    out.wsNormOffset = rowBytes;
    out.wsMaxOffset = out.wsNormOffset + (deterministic ? rowBytes : 0);
    out.wsDqOffset = out.wsMaxOffset + (deterministic ? AlignUp(2 * out.aivNum * kMaxSlotBytes, kWorkspaceAlign) : 0);
    out.wsDqBytes = p.batch * p.numHeads * p.seqQ * d * kFp32;
    out.wsScratchOffset = out.wsDqOffset + AlignUp(out.wsDqBytes, kWorkspaceAlign);
    uint64_t at = 0;
    for (auto [field, bytes] : {std::pair<uint64_t *, uint64_t>{&out.wsScoreOffset, panel * n * kFp32},
                                {&out.wsGradOffset, panel * n * kFp32}, {&out.wsProbOffset, 2 * panel * n * t},
                                {&out.wsDsOffset, 2 * panel * n * t}, {&out.wsDkOffset, n * d * kFp32},
                                {&out.wsDvOffset, n * d * kFp32},
                                {&out.wsDqPartOffset, deterministic ? 2 * panel * d * kFp32 : 0},
                                {&out.wsDqGroupOffset, out.dqGroup ? 2 * group * p.seqQ * d * kFp32 : 0}}) {
        *field = at;
        at += AlignUp(bytes, kWorkspaceAlign);
    }
    out.wsScratchBytes = at;
    out.userWorkspaceBytes = out.wsScratchOffset + out.aivNum * out.wsScratchBytes;
    if (p.mask) {
        // One summary byte per (mask batch, mask head, query block, kv block): the steps' blocks.
        out.maskRows = kMaskRows;
        out.wsMaskSummaryOffset = AlignUp(out.userWorkspaceBytes, kWorkspaceAlign);
        out.wsMaskSummaryBytes = p.maskB * p.maskN * (p.maskQ == 1 ? 1 : out.numQBlocks) * out.numKvBlocks;
        out.userWorkspaceBytes = out.wsMaskSummaryOffset + AlignUp(out.wsMaskSummaryBytes, kWorkspaceAlign);
    }
    if (p.dropout) out.philoxLanes = GradPhiloxLanes(out.blockM);

    const uint32_t keyLayout = p.layout == kLayoutBnsd ? kLayoutBnsd : kLayoutBsnd;  // BSH, TND: BSND's path
    int64_t pre = 0, next = 0;
    GradBand(p, &pre, &next);
    const bool band = attn_band::Bounded(pre) || attn_band::Bounded(next);
    out.tilingKey = (p.bf16 ? kGradKeyBf16 : 0) | (band ? kGradKeyCausal : 0) |
                    (static_cast<uint64_t>(keyLayout) << kGradKeyLayoutShift) |
                    (deterministic ? kGradKeyDeterministic : 0);
    *plan = std::move(out);
    return true;
}

}  // namespace fa_policy
