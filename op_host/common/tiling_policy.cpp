// tiling_policy.cpp -- see tiling_policy.h.
#include "tiling_policy.h"

#include "block_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

namespace fa_policy {
namespace {

constexpr uint32_t kBlockAlign = 16;      // cube fractal edge: blocks are multiples of 16 rows
constexpr uint32_t kAutoBlockMStep = 32;  // auto blockM keeps both AIV halves multiples of 16
constexpr uint32_t kAutoBlockNStep = 64;  // auto blockN: whole 256-B fp32 repeats per score row
constexpr uint64_t kExactSplitItems = 1u << 16;  // cost model: split items exactly up to this count
constexpr double kMaxCausalMacs = 1.05;   // auto blocks: executed / visible (query, key) pairs
constexpr double kCapSlack = 1.10;        // ... unless a candidate over it models this much faster
constexpr uint64_t kUbAlign = 32;         // UB allocations are 32-B granular
constexpr uint64_t kChunkAlign = 8;       // row chunks: 8 fp32 row values fill one 32-B block
constexpr uint64_t kFp32 = 4;
constexpr uint64_t kMaxDim = 256;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

uint64_t MaskTilesUbBytes(uint64_t rows, uint64_t n) {
    const uint64_t elems = rows * AlignUp(n, kUbAlign);
    return AlignUp(elems, kUbAlign) + 2 * elems + 4 * elems + AlignUp(CeilDiv(elems, 8), kUbAlign) + 32;
}

uint64_t AlibiUbBytes(uint64_t m, uint64_t n) {
    // key ramp and slope * ramp [align16(n)] fp32 each, row ramp and row values [align8(m)] fp32
    // each, a scratch row [align16(n)] fp32 and the Brcb rows [m, 8] fp32.
    const uint64_t cols = AlignUp(n, 16) * kFp32, rows = AlignUp(m, 8) * kFp32;
    return 3 * cols + 2 * rows + m * 8 * kFp32;
}

uint64_t FloatBiasUbBytes(uint64_t rows, uint64_t n, uint64_t dtypeBytes) {
    // [rows, align16(n)] in the input dtype as loaded (none for float32) and as fp32.
    const uint64_t elems = rows * AlignUp(n, 16);
    return (dtypeBytes == kFp32 ? 0 : AlignUp(elems * dtypeBytes, kUbAlign)) + elems * kFp32;
}

uint64_t PhiloxUbBytes(uint64_t lanes) { return lanes * 4 * 58 + AlignUp(lanes * 2, kUbAlign); }

uint32_t PhiloxLanes(uint32_t n) {
    constexpr uint32_t kMinLanes = 128;  // 29 KiB; fewer lanes pay the per-instruction cost more often
    const uint32_t row = static_cast<uint32_t>(AlignUp(CeilDiv(n, 16), 8));  // a row's counters, whole planes
    return std::max(row, kMinLanes);
}

namespace {

uint64_t PhiloxChunkUbBytes(uint64_t lanes, uint64_t m, uint64_t n, bool maskOut) {
    // With dropout_mask: a chunk's keep bytes (16 elements a lane) and as half, then [m, align32(n)] uint8 rows.
    return PhiloxUbBytes(lanes) + (maskOut ? 3 * 16 * lanes + m * AlignUp(n, kUbAlign) : 0);
}

uint32_t PhiloxLanesForUb(uint64_t m, uint64_t n, uint64_t freeUb, bool maskOut) {
    // A chunk issues the same Philox instructions whatever its lanes and generates every row of
    // its capacity (docs/dropout_and_mask.md#chunk-size): m rows in k chunks of ceil(m / k) rows
    // issue k chunks' instructions and generate fewer than k rows past m (at m = 32, n = 320: 2
    // chunks of 16 rows, where 128 lanes made 6 chunks of 6 rows, 36 rows generated). The fewest
    // chunks that fit `freeUb`.
    const uint32_t floor = PhiloxLanes(static_cast<uint32_t>(n));
    const uint64_t perRow = CeilDiv(n, 16);
    for (uint64_t k = 1; k <= m; ++k) {
        const uint64_t lanes = AlignUp(CeilDiv(m, k) * perRow, 8);
        if (lanes <= floor) break;
        if (PhiloxChunkUbBytes(lanes, m, n, maskOut) <= freeUb) return static_cast<uint32_t>(lanes);
    }
    return floor;
}

}  // namespace

std::string Format(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

std::string ValidateHeads(uint64_t headDim, uint64_t numHeads, uint64_t numKvHeads) {
    if (headDim % kBlockAlign != 0 || headDim > kMaxDim) {
        return Format("head_dim must be a multiple of 16 and at most 256, got %llu",
                      static_cast<unsigned long long>(headDim));
    }
    if (numHeads % numKvHeads != 0) {
        return Format("num_heads (%llu) must be a multiple of num_kv_heads (%llu)",
                      static_cast<unsigned long long>(numHeads), static_cast<unsigned long long>(numKvHeads));
    }
    return {};
}

std::string ValidateSequenceLengths(const Problem &p) {
    if (p.seqLensQ.empty() && p.seqLensKv.empty()) return {};
    if (p.seqLensQ.size() != p.batch || p.seqLensKv.size() != p.batch) {
        return Format("actual_seq_qlen and actual_seq_kvlen must both hold one length per sequence: %zu and %zu "
                      "lengths for %llu sequences", p.seqLensQ.size(), p.seqLensKv.size(),
                      static_cast<unsigned long long>(p.batch));
    }
    for (size_t s = 0; s < p.seqLensQ.size(); ++s) {
        if (p.seqLensQ[s] > p.seqQ || p.seqLensKv[s] > p.seqKv) {
            return Format("sequence %zu (%llu queries, %llu keys) is longer than seq_q %llu / seq_kv %llu", s,
                          static_cast<unsigned long long>(p.seqLensQ[s]),
                          static_cast<unsigned long long>(p.seqLensKv[s]), static_cast<unsigned long long>(p.seqQ),
                          static_cast<unsigned long long>(p.seqKv));
        }
    }
    return {};
}

// On the coupled architectures the Matmul API converts ND operands and results through a UB
// workspace the kernel provides (SetLocalWorkspace) of 2 x transLength, transLength being the
// largest ND tile it converts (asc-devkit impl/adv_api/tiling/matmul/matmul_tiling_algorithm.cpp
// GetTransLength; matmul_tiling.cpp MatmulGetTmpBufSize). A base tile is at most the single-core
// shape, so the largest of QK's A [m,d] T, B [n,d] T, C [m,n] fp32 and PV's A [m,n] T, B [n,d] T,
// C [m,d] fp32 bounds it.
uint64_t MatmulLocalWorkspaceBytes(uint64_t m, uint64_t n, uint64_t d, uint64_t t) {
    const uint64_t transLength = std::max({m * d * t, n * d * t, m * n * kFp32, m * n * t, m * d * kFp32});
    return 2 * transLength;
}

namespace {

// The kernel's per-vector-unit UB buffers, in its InitBuffer order (flash_attention_tiling.h),
// for m rows per vector unit moved c rows at a time (the row state and acc hold all m).
// An fp32 P needs no cast, so there is no probQue for fp32 on the MIX path; the coupled path
// keeps P [m,n] in UB as the cube's A operand (c = m), and the Matmul API's ND<->NZ local workspace.
// MIX path: scoreQue's buffers (flash_attention_kernel.h SCORE_BUFFERS): the next chunk's S moves
// GM -> UB while the vector unit softmaxes this one.
constexpr uint64_t kScoreBuffers = 2;
// MIX path: probQue's (flash_attention_kernel.h PROB_BUFFERS): a chunk's P is cast while the
// previous chunk's P moves UB -> GM.
constexpr uint64_t kProbBuffers = 2;

std::vector<BudgetLine> UbLines(uint64_t m, uint64_t c, uint64_t n, uint64_t d, uint64_t t, uint64_t ub,
                                bool coupled) {
    // MIX path, n >= d: P.V rows go through scoreQue's buffer and O rows (T not fp32) through
    // probQue's (flash_attention_kernel.h, pvIn_ / outOut_).
    const bool shareTiles = !coupled && n >= d;
    const bool probQue = coupled || t != kFp32;
    // MIX path, P rows of >= 256 B: the softmax's row reductions fold into probQue's buffer.
    const bool foldInProb = !coupled && probQue && n * t >= 64 * kFp32;
    std::vector<BudgetLine> lines = {
        {coupled ? "scoreBuf S [m,n] fp32" : "scoreQue S 2 x [c,n] fp32", (coupled ? 1 : kScoreBuffers) * c * n * kFp32,
         ub},
        {coupled ? "probBuf P [m,n] T" : "probQue P 2 x [c,n] T", probQue ? (coupled ? 1 : kProbBuffers) * c * n * t : 0,
         ub},
        {coupled ? "pvBuf PV [m,d] fp32" : shareTiles ? "pvQue PV in scoreQue" : "pvQue PV [c,d] fp32",
         shareTiles ? 0 : c * d * kFp32, ub},
        {shareTiles && probQue ? "outQue O in probQue" : coupled ? "outQue O [m,d] T" : "outQue O [c,d] T",
         shareTiles && probQue ? 0 : c * d * t, ub},
        {"accBuf acc [m,d] fp32", m * d * kFp32, ub},
        {"statBuf 7 x [m] fp32", 7 * AlignUp(m * kFp32, kUbAlign), ub},
        {foldInProb ? "foldBuf in probQue" : coupled ? "foldBuf [m,64] fp32" : "foldBuf [c,64] fp32",
         foldInProb ? 0 : c * 64 * kFp32, ub},
        {"brcbBuf [m,8] fp32", m * 8 * kFp32, ub},
        {"lseQue lse [m] fp32", AlignUp(m * kFp32, kUbAlign), ub},
    };
    if (coupled) lines.push_back({"mmWorkBuf Matmul ND<->NZ", MatmulLocalWorkspaceBytes(m, n, d, t), ub});
    return lines;
}

// The V2 options' UB lines (none when off), after lseQue in the kernel's InitBuffer order; the
// Philox lanes they budget (0 without dropout). Dropout takes the UB the other lines leave, in
// PhiloxLanesForUb's chunks of the c rows one score tile holds, and never less than
// PhiloxLanes(n): blocks fit exactly when they fit with that floor, so every line still grows
// with c and n as far as fitting goes.
uint32_t OptionUbLines(const Problem &p, uint64_t c, uint64_t n, uint64_t ub, std::vector<BudgetLine> *lines) {
    if (p.mask) lines->push_back({"maskBuf mask tiles [16,n] u8/f16/f32", MaskTilesUbBytes(kMaskRows, n), ub});
    if (p.alibi) lines->push_back({"alibiBuf ALiBi ramps [n],[m] fp32", AlibiUbBytes(c, n), ub});
    if (p.bias) lines->push_back({"biasBuf float mask [16,n] T+fp32", FloatBiasUbBytes(kBiasRows, n, p.dtypeBytes), ub});
    if (!p.dropout) return 0;
    uint64_t used = 0;
    for (const auto &line : *lines) used += line.bytes;
    const uint32_t lanes = PhiloxLanesForUb(c, n, ub > used ? ub - used : 0, p.dropoutMaskOut);
    lines->push_back({"philoxBuf Philox4x32-10 keep mask", PhiloxUbBytes(lanes), ub});
    if (p.dropoutMaskOut) {
        lines->push_back({"keepBuf dropout_mask chunk u8+f16, rows [c,n] u8",
                          PhiloxChunkUbBytes(lanes, c, n, true) - PhiloxUbBytes(lanes), ub});
    }
    return lanes;
}

// Rows one vector unit owns per item: an AIV takes half of the item on the MIX path, a
// coupled AI Core all of it.
uint64_t RowsPerVector(uint32_t blockM, bool coupled) { return coupled ? blockM : blockM / 2; }

// L1: on the MIX path the Matmul buffers of one item's two jobs over all its blockM rows (S =
// Q.K^T: A [M,d], B [n,d]; O = P.V: A [M,n], B [n,d]; one AIV issues them for both), each keeping
// its B -- the K or V block -- resident along K when it fits (block_cost.h PlanStepL1; op_host
// KeepBResident writes the same steps), so a K/V block is read from GM once per job even when M
// spans two base tiles; else the least one A and one B base tile take. Coupled: the whole
// operands of both jobs. L0C: on the MIX path
// the result goes to GM (C in GM) one base tile at a time, FixPipe writing each tile once as the
// Matmul API iterates them, so L0C holds a base tile -- at most kMaxBaseTileM x kMaxBaseTileN,
// the widest the tiling picks here (block_cost.h; MatmulApiTiling shrinks
// it until it fits, and FillCubeTiling fails otherwise); coupled, the whole [M,n] or [M,d] fp32
// result (M padded to the 16-row fractal) goes L0C -> UB at once.
struct Needs {
    std::vector<BudgetLine> lines;
    uint64_t ubTotal = 0, l1Total = 0, l0cQk = 0, l0cPv = 0;
    uint32_t philoxLanes = 0;  // dropout: Philox counters per chunk the UB lines hold
    uint32_t chunkRows = 0;    // c: score rows per vector tile
};

Needs ComputeNeeds(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c) {
    const bool coupled = FeaturesOfSoc(c.socVersion).coupled;
    const uint64_t m = RowsPerVector(blockM, coupled), n = blockN, d = p.headDim, t = p.dtypeBytes;
    const uint64_t mc = blockM;  // the cube's rows per matmul
    Needs needs;
    // MIX path: the largest row chunk, a multiple of 8 (a chunk's per-row vectors start 32-B
    // aligned), whose lines fit; when none does, the smallest one's lines say why. Coupled: the
    // Matmul API writes S for all m rows into UB, one tile.
    for (uint64_t rows = m; rows > 0; rows = rows > kChunkAlign ? rows - kChunkAlign : 0) {
        needs.lines = UbLines(m, rows, n, d, t, c.ubBytes, coupled);
        needs.philoxLanes = OptionUbLines(p, rows, n, c.ubBytes, &needs.lines);
        needs.chunkRows = static_cast<uint32_t>(rows);
        needs.ubTotal = 0;
        for (const auto &line : needs.lines) needs.ubTotal += line.bytes;
        if (coupled || needs.ubTotal <= c.ubBytes) break;
    }
    if (coupled) {
        needs.l1Total = (mc * d + n * d) * t + (mc * n + n * d) * t;
    } else {
        const StepCosts costs = StepCostsOf(c.l2BytesPerCycle, c.aicNum, c.l1Bytes);
        needs.l1Total = static_cast<uint64_t>(PlanStepL1(static_cast<double>(mc), static_cast<double>(n),
                                                         static_cast<double>(d), static_cast<double>(t), costs)
                                                  .Bytes());
    }
    const uint64_t l0cRows = coupled ? AlignUp(mc, kBlockAlign) : std::min<uint64_t>(AlignUp(mc, kBlockAlign), kMaxBaseTileM);
    auto l0cCols = [&](uint64_t cols) { return coupled ? cols : std::min<uint64_t>(AlignUp(cols, kBlockAlign), kMaxBaseTileN); };
    needs.l0cQk = l0cRows * l0cCols(n) * kFp32;
    needs.l0cPv = l0cRows * l0cCols(d) * kFp32;
    needs.lines.push_back({coupled ? "UB total per AI Core" : "UB total per AIV", needs.ubTotal, c.ubBytes});
    needs.lines.push_back({coupled ? "L1 QK+PV operands" : "L1 QK+PV Matmul buffers", needs.l1Total, c.l1Bytes});
    needs.lines.push_back({coupled ? "L0C QK result [m,n] fp32" : "L0C QK base tile fp32", needs.l0cQk, c.l0cBytes});
    needs.lines.push_back({coupled ? "L0C PV result [m,d] fp32" : "L0C PV base tile fp32", needs.l0cPv, c.l0cBytes});
    return needs;
}

// Empty when (blockM, blockN) fits the chip, else why not (which memory, how much).
std::string CheckFits(uint32_t blockM, uint32_t blockN, const Problem &p, const ChipLimits &c) {
    const Needs needs = ComputeNeeds(blockM, blockN, p, c);
    const bool coupled = FeaturesOfSoc(c.socVersion).coupled;
    const char *vectorUnit = coupled ? "AI Core" : "AIV";
    const std::string what = Format("block_m=%u, block_n=%u (head_dim=%llu, %u-byte dtype)", blockM, blockN,
                                    static_cast<unsigned long long>(p.headDim), p.dtypeBytes);
    if (needs.ubTotal > c.ubBytes) {
        const size_t ubLines = needs.lines.size() - 4;
        const auto largest = std::max_element(
            needs.lines.begin(), needs.lines.begin() + ubLines,
            [](const BudgetLine &a, const BudgetLine &b) { return a.bytes < b.bytes; });
        return Format("%s needs %llu B of UB per %s (largest line: %s, %llu B); %s has %llu B",
                      what.c_str(), static_cast<unsigned long long>(needs.ubTotal), vectorUnit,
                      largest->name.c_str(), static_cast<unsigned long long>(largest->bytes), c.socName.c_str(),
                      static_cast<unsigned long long>(c.ubBytes));
    }
    if (needs.l1Total > c.l1Bytes) {
        return Format("%s needs %llu B of L1 per %s (QK and PV %s); %s has %llu B", what.c_str(),
                      static_cast<unsigned long long>(needs.l1Total), coupled ? "AI Core" : "AIC",
                      coupled ? "operands" : "Matmul base tiles",
                      c.socName.c_str(), static_cast<unsigned long long>(c.l1Bytes));
    }
    if (needs.l0cQk > c.l0cBytes || needs.l0cPv > c.l0cBytes) {
        return Format("%s needs %llu B of L0C for one matmul result; %s has %llu B", what.c_str(),
                      static_cast<unsigned long long>(std::max(needs.l0cQk, needs.l0cPv)), c.socName.c_str(),
                      static_cast<unsigned long long>(c.l0cBytes));
    }
    return {};
}

}  // namespace

// A rank-4 mask's leading dims [mb, mn, mq] against the problem's [B, N, Sq]: each 1 (broadcast)
// or the full size. "" or what is wrong, naming the input `name`.
std::string BroadcastDimsError(const char *name, uint64_t mb, uint64_t mn, uint64_t mq, const Problem &p) {
    const struct {
        const char *name;
        uint64_t value, full;
    } dims[] = {{"batch", mb, p.batch}, {"heads", mn, p.numHeads}, {"seq_q", mq, p.seqQ}};
    for (const auto &dim : dims) {
        if (dim.value != 1 && dim.value != dim.full) {
            return Format("%s %s dimension must be 1 or %llu, got %llu", name, dim.name,
                          static_cast<unsigned long long>(dim.full), static_cast<unsigned long long>(dim.value));
        }
    }
    return "";
}

std::string ValidateProblem(const Problem &p) {
    const struct {
        const char *name;
        uint64_t value;
    } sizes[] = {{"batch", p.batch},   {"num_heads", p.numHeads}, {"num_kv_heads", p.numKvHeads},
                 {"seq_q", p.seqQ},    {"seq_kv", p.seqKv},       {"head_dim", p.headDim}};
    for (const auto &s : sizes) {
        if (s.value < 1) return Format("%s must be >= 1, got %llu", s.name, static_cast<unsigned long long>(s.value));
        if (s.value > UINT32_MAX) {
            return Format("%s must be < 2^32, got %llu", s.name, static_cast<unsigned long long>(s.value));
        }
    }
    const std::string heads = ValidateHeads(p.headDim, p.numHeads, p.numKvHeads);
    if (!heads.empty()) return heads;
    if (p.dtypeBytes != 2 && p.dtypeBytes != 4) {
        return Format("dtype must be float16, bfloat16 (2 bytes) or float32 (4 bytes), got %u bytes", p.dtypeBytes);
    }
    if (p.dtypeBytes == 4 && p.bf16) return "dtype: bfloat16 is 2 bytes, got 4";
    if (p.layout > kLayoutTnd) {
        return Format("input_layout code must be 0 (BNSD), 1 (BSND), 2 (BSH) or 3 (TND), got %u", p.layout);
    }
    // Per-sequence lengths: always with TND; the backward's policy passes them with the BSND
    // code (TND's row strides).
    const bool varlen = !p.seqLensQ.empty() || !p.seqLensKv.empty();
    if (p.layout == kLayoutTnd && !varlen) {
        return "input_layout TND needs the sequence lengths (actual_seq_qlen, actual_seq_kvlen)";
    }
    const std::string lengths = ValidateSequenceLengths(p);
    if (!lengths.empty()) return lengths;
    const Band band = EffectiveBand(p);
    if (band.pre < -kUnboundedTokens || band.next < -kUnboundedTokens || band.pre + band.next < 0) {
        return Format("pre_tokens + next_tokens must be >= 0 (a band of at least one diagonal), got pre_tokens=%lld, "
                      "next_tokens=%lld%s", static_cast<long long>(p.preTokens), static_cast<long long>(p.nextTokens),
                      p.causal ? " with causal (next_tokens <= 0)" : "");
    }
    // Masks of a varlen batch: batch = sequences, seqQ / seqKv the longest (each sequence reads
    // the top-left corner of its [seqQ, seqKv] slice).
    if (p.mask) {
        const std::string error = BroadcastDimsError("atten_mask", p.maskB, p.maskN, p.maskQ, p);
        if (!error.empty()) return error;
    }
    if (p.bias) {
        const std::string error = BroadcastDimsError("atten_bias", p.biasB, p.biasN, p.biasQ, p);
        if (!error.empty()) return error;
    }
    const struct {
        const char *name;
        uint32_t value, max;
    } blocks[] = {{"block_m", p.userBlockM, kMaxBlockM}, {"block_n", p.userBlockN, kMaxBlockN}};
    for (const auto &b : blocks) {
        if (b.value != 0 && (b.value % kBlockAlign != 0 || b.value > b.max)) {
            return Format("%s must be 0 (auto) or a multiple of 16 up to %u, got %u", b.name, b.max, b.value);
        }
    }

    return {};
}

// The dtype must be one the chip's cube and vector units take.
std::string ValidateDtypeOnChip(const Problem &p, const ChipLimits &c) {
    const ArchFeatures f = FeaturesOfSoc(c.socVersion);
    if (p.bf16 && !f.bf16) {
        return Format("dtype bfloat16 is not supported on %s: its AI Core has no bfloat16 (use float16)",
                      c.socName.c_str());
    }
    if (p.dtypeBytes == 4 && !f.cubeFp32) {
        return Format("dtype float32 is not supported on %s: its cube takes float16 operands only, not float32 "
                      "(use float16)", c.socName.c_str());
    }
    return {};
}

std::string ValidateChip(const ChipLimits &c) {
    if (!FeaturesOfSoc(c.socVersion).known) {
        return Format("%s: SocVersion %u is not one the operator is built for (ASCEND910 0, ASCEND910B 1, "
                      "ASCEND310P 2)", c.socName.c_str(), c.socVersion);
    }
    if (c.ubBytes == 0 || c.l1Bytes == 0 || c.l0cBytes == 0 || c.aicNum == 0) {
        return Format("chip limits of %s are incomplete (UB %llu, L1 %llu, L0C %llu B, %u AIC cores)",
                      c.socName.c_str(), static_cast<unsigned long long>(c.ubBytes),
                      static_cast<unsigned long long>(c.l1Bytes), static_cast<unsigned long long>(c.l0cBytes),
                      c.aicNum);
    }
    return {};
}

namespace {

// Largest multiple of `step` in [step, cap] for which fits(v) holds; 0 when none does.
template <typename Fits>
uint32_t LargestFitting(uint32_t cap, uint32_t step, Fits fits) {
    for (uint32_t v = cap / step * step; v >= step; v -= step) {
        if (fits(v)) return v;
    }
    return 0;
}

// (query, key) pairs the cube computes with (blockM, blockN) over the pairs the mask leaves
// visible: 1 without a causal mask (tails are trimmed to the real rows and columns, and a query
// block's last K/V block to its last visible key, where the MIX kernel's QK and P.V stop).
// Whether the band is exactly causal: the V1 attr, or FlashAttentionV2+'s pre_tokens unbounded and
// next_tokens 0 (how the V2 faces pass causal), so both entries choose the same blocks.
bool CausalBand(const Problem &p) {
    const Band band = EffectiveBand(p);
    return band.pre >= kUnboundedTokens && band.next == 0;
}

double ExecutedOverVisiblePairs(const Problem &p, uint32_t blockM, uint32_t blockN) {
    if (!CausalBand(p)) return 1.0;
    // Row i sees max(0, i + Skv - Sq + 1) keys (never more than Skv since i < Sq): an arithmetic
    // series from the first row that sees a key to the last row, which sees all Skv.
    const uint64_t firstSeeing = p.seqQ > p.seqKv ? p.seqQ - p.seqKv : 0;
    const uint64_t rows = p.seqQ - firstSeeing;
    const double visible = static_cast<double>(rows) * static_cast<double>(p.seqKv - rows + 1 + p.seqKv) / 2;
    double executed = 0;
    const Band band = EffectiveBand(p);
    for (uint64_t qb = 0; qb * blockM < p.seqQ; ++qb) {
        const uint64_t row0 = qb * blockM, blockRows = std::min<uint64_t>(blockM, p.seqQ - row0);
        uint64_t first = 0, end = 0;
        if (!VisibleKeys(band, p.seqQ, p.seqKv, row0, row0 + blockRows, &first, &end)) continue;
        executed += static_cast<double>(blockRows) * static_cast<double>(end - first / blockN * blockN);
    }
    return visible == 0 ? 1.0 : executed / visible;
}

// Auto blocks on the MIX path: of the (blockM, blockN) that fit -- blockM a multiple of 32 up to
// Sq rounded up to 32 and kMaxBlockM (or the user's), blockN a multiple of 64 below Skv rounded up
// to 16, or that itself, at most kMaxBlockN (or the user's) -- the one of least modeled time (ties: the larger
// blockM, then blockN). False when none fits.
bool ChooseBlocksByCost(const Problem &p, const ChipLimits &c, uint32_t capM, uint32_t capN, uint32_t *blockM,
                        uint32_t *blockN) {
    std::vector<uint32_t> ms, ns;
    if (p.userBlockM != 0) {
        ms.push_back(p.userBlockM);
    } else {
        for (uint32_t m = capM / kAutoBlockMStep * kAutoBlockMStep; m >= kAutoBlockMStep; m -= kAutoBlockMStep) {
            ms.push_back(m);
        }
    }
    if (p.userBlockN != 0) {
        ns.push_back(p.userBlockN);
    } else {
        // Multiples of 64 (whole 256-B fp32 repeats per score row) and all of Skv when it is shorter.
        ns.push_back(capN);
        for (uint32_t n = (capN - 1) / kAutoBlockNStep * kAutoBlockNStep; n >= kAutoBlockNStep; n -= kAutoBlockNStep) {
            ns.push_back(n);
        }
    }
    // Causal blocks that cross the diagonal compute masked pairs too; the cube may do at most
    // kMaxCausalMacs times the visible pairs' work (the work-efficiency goal of bench/RESULTS.md),
    // unless no fitting candidate meets it or the cheapest candidate over it models more than
    // kCapSlack times faster than the cheapest within it (short causal sequences, where only the
    // smallest blockM meet the cap: 32 rows at S = 1024).
    struct Candidate {
        uint32_t m, n;
        bool efficient;
    };
    std::vector<Candidate> fitting;  // in the search order: larger blockM, then larger blockN first
    bool anyEfficient = false;
    for (uint32_t m : ms) {
        for (uint32_t n : ns) {
            if (!CheckFits(m, n, p, c).empty()) continue;
            const bool efficient = ExecutedOverVisiblePairs(p, m, n) <= kMaxCausalMacs;
            fitting.push_back({m, n, efficient});
            anyEfficient = anyEfficient || efficient;
        }
    }
    // The cheapest candidate within the cap and the cheapest of all (first in the search order on ties).
    double bestEfficient = 0, bestAny = 0;
    const Candidate *efficientPick = nullptr, *anyPick = nullptr;
    for (const Candidate &k : fitting) {
        const double cycles = ModeledKernelCycles(p, c, k.m, k.n);
        if (anyPick == nullptr || cycles < bestAny) {
            bestAny = cycles;
            anyPick = &k;
        }
        if (k.efficient && (efficientPick == nullptr || cycles < bestEfficient)) {
            bestEfficient = cycles;
            efficientPick = &k;
        }
    }
    const bool found = anyPick != nullptr;
    if (found) {
        const Candidate *pick = anyEfficient && bestEfficient <= kCapSlack * bestAny ? efficientPick : anyPick;
        *blockM = pick->m;
        *blockN = pick->n;
    }
    return found;
}

// Blocks for a narrow band (pre_tokens and next_tokens both bounded, band width
// W = pre + next + 1 keys per row): a cube tile of r rows touches about r + W - 1 keys, rounded
// out to blockN, so it executes about (r + W + blockN) / W of the useful work. When the usual
// blocks have blockM + blockN > W / kNarrowBandShare, they are replaced by the largest blockM and
// blockN (powers of two from the smallest blockM -- 32 on the MIX path, whose AIV halves are
// multiples of 16 rows, 16 when coupled -- and from 16) within that share, or the smallest of
// each when the band is narrower still, and returns true: then each AIV of the MIX path computes
// its own half (r = blockM / 2, Plan::soloRows), so the waste stays below the share. The rule
// bounds blockM + blockN, the whole item's rows, although a solo tile has only half of them: it
// keeps the blocks it chose when the tile was the item's (a rule on blockM / 2 would pick larger
// blocks for some bands, e.g. 64 x 64 instead of 32 x 64 at W = 1024).
// Nothing changes for a block the caller gave or a band unbounded on a side.
constexpr uint64_t kNarrowBandShare = 10;
bool NarrowBandBlocks(const Problem &p, const ChipLimits &c, uint32_t *blockM, uint32_t *blockN) {
    const Band band = EffectiveBand(p);
    if (p.userBlockM != 0 || p.userBlockN != 0 || !attn_band::Bounded(band.pre) || !attn_band::Bounded(band.next)) {
        return false;
    }
    const uint64_t width = static_cast<uint64_t>(band.pre + band.next + 1);
    const bool coupled = FeaturesOfSoc(c.socVersion).coupled;
    const uint32_t minM = coupled ? kBlockAlign : kAutoBlockMStep;
    if ((*blockM + *blockN) * kNarrowBandShare <= width) return false;
    uint32_t bestM = minM, bestN = kBlockAlign;
    for (uint32_t m = minM; m <= *blockM; m *= 2) {
        for (uint32_t n = kBlockAlign; n <= *blockN; n *= 2) {
            if ((m + n) * kNarrowBandShare <= width && m + n > bestM + bestN) {
                bestM = m;
                bestN = n;
            }
        }
    }
    // Smaller than blocks that fit: these fit too (every budget line grows with m and n).
    *blockM = bestM;
    *blockN = bestN;
    return true;
}

// Chooses (blockM, blockN) or explains why none fits. On the MIX path the blocks of least
// modeled time (ChooseBlocksByCost); when none of those fits, and on the coupled path: auto
// blockM is the largest that fits with blockN = min(128, Skv rounded to 16), capped at Sq
// rounded up to 32 (both AIVs' halves multiples of 16) and kMaxBlockM; then auto blockN the
// largest that fits with that blockM, capped at Skv rounded up to 16 and kMaxBlockN.
bool ChooseBlocks(const Problem &p, const ChipLimits &c, uint32_t *blockM, uint32_t *blockN, std::string *error) {
    const uint32_t capM = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqQ, kAutoBlockMStep), kMaxBlockM));
    const uint32_t capN = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqKv, kBlockAlign), kMaxBlockN));
    if (p.userBlockM != 0 && p.userBlockN != 0) {
        *error = CheckFits(p.userBlockM, p.userBlockN, p, c);
        *blockM = p.userBlockM;
        *blockN = p.userBlockN;
        return error->empty();
    }
    if (!FeaturesOfSoc(c.socVersion).coupled && ChooseBlocksByCost(p, c, capM, capN, blockM, blockN)) {
        error->clear();
        return true;
    }
    uint32_t m = p.userBlockM;
    if (m == 0) {
        // With the reference blockN first; when no blockM fits with it (e.g. float32 with D = 256
        // overflows L1 even at 16 rows), with smaller blockN until one does.
        uint32_t refN = p.userBlockN != 0 ? p.userBlockN : std::min(kReferenceBlockN, capN);
        for (;;) {
            m = LargestFitting(capM, kAutoBlockMStep, [&](uint32_t v) { return CheckFits(v, refN, p, c).empty(); });
            if (m == 0) {
                m = LargestFitting(capM, kBlockAlign, [&](uint32_t v) { return CheckFits(v, refN, p, c).empty(); });
            }
            if (m != 0 || p.userBlockN != 0 || refN <= kBlockAlign) break;
            refN -= kBlockAlign;
        }
        if (m == 0) {
            *error = CheckFits(kBlockAlign, refN, p, c) + " (no block_m fits)";
            return false;
        }
    }
    uint32_t n = p.userBlockN;
    if (n == 0) {
        n = LargestFitting(capN, kBlockAlign, [&](uint32_t v) { return CheckFits(m, v, p, c).empty(); });
        if (n == 0) {
            *error = CheckFits(m, kBlockAlign, p, c) + " (no block_n fits)";
            return false;
        }
    }
    *error = CheckFits(m, n, p, c);
    *blockM = m;
    *blockN = n;
    return error->empty();
}

// Position p of a query block in the per-head visiting order -> query block index.
uint64_t QueryBlockAt(uint64_t pos, uint64_t numQBlocks, bool zigzag) {
    if (!zigzag) return pos;
    return pos % 2 == 0 ? pos / 2 : numQBlocks - 1 - pos / 2;
}

}  // namespace

// Splits items (each with cost work[i]) into at most `cores` contiguous ranges with the
// smallest possible maximum range cost (binary search on that maximum; greedy check).
std::vector<uint32_t> SplitContiguous(const std::vector<uint64_t> &work, uint32_t cores) {
    uint64_t lo = 0, hi = 0;
    for (uint64_t w : work) {
        lo = std::max(lo, w);
        hi += w;
    }
    auto partsNeeded = [&](uint64_t cap) {
        uint32_t parts = 1;
        uint64_t load = 0;
        for (uint64_t w : work) {
            if (load + w > cap) {
                ++parts;
                load = 0;
            }
            load += w;
        }
        return parts;
    };
    lo = std::max<uint64_t>(lo, 1);
    hi = std::max(hi, lo);
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (partsNeeded(mid) <= cores) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    // Greedy fill with the optimal cap, but never leave a later core without an item
    // while items remain (so the block dim uses every core it can).
    const size_t items = work.size();
    std::vector<uint32_t> starts{0};
    uint64_t load = 0;
    for (size_t i = 0; i < items; ++i) {
        const size_t coresLeft = cores - (starts.size() - 1);
        const size_t itemsLeft = items - i;
        const bool mustCut = i > starts.back() && coresLeft > 1 && itemsLeft < coresLeft;
        if (i > starts.back() && (load + work[i] > lo || mustCut)) {
            starts.push_back(static_cast<uint32_t>(i));
            load = 0;
        }
        load += work[i];
    }
    starts.push_back(static_cast<uint32_t>(items));
    return starts;
}

uint32_t DropoutThreshold(float keepProb) {
    const double t = std::floor((1.0 - static_cast<double>(keepProb)) * 256.0 + 0.5);
    return t <= 0.0 ? 0u : (t >= 256.0 ? 256u : static_cast<uint32_t>(t));
}

Band EffectiveBand(const Problem &p) {
    Band band;
    band.pre = std::min(p.preTokens, kUnboundedTokens);
    band.next = attn_band::FoldCausal(std::min(p.nextTokens, kUnboundedTokens), p.causal);
    return band;
}

bool VisibleKeys(const Band &band, uint64_t sq, uint64_t skv, uint64_t row0, uint64_t rowEnd, uint64_t *first,
                 uint64_t *end) {
    int64_t from = 0, to = 0;
    const bool any = attn_band::VisibleKeys(static_cast<int64_t>(row0), static_cast<int64_t>(rowEnd),
                                            attn_band::Diagonal(static_cast<int64_t>(sq), static_cast<int64_t>(skv)),
                                            static_cast<int64_t>(skv), band.pre, band.next, &from, &to);
    *first = static_cast<uint64_t>(from);
    *end = static_cast<uint64_t>(to);
    return any;
}

uint64_t SeqLenQ(const Problem &p, uint64_t seq) { return p.seqLensQ.empty() ? p.seqQ : p.seqLensQ[seq]; }
uint64_t SeqLenKv(const Problem &p, uint64_t seq) { return p.seqLensKv.empty() ? p.seqKv : p.seqLensKv[seq]; }

// Keys [first, end) some row of query block qb (blockM rows) of sequence seq sees; false if none.
static bool QueryBlockKeys(const Problem &p, uint32_t blockM, uint64_t qb, uint64_t seq, uint64_t *first,
                           uint64_t *end) {
    const uint64_t sq = SeqLenQ(p, seq), skv = SeqLenKv(p, seq);
    const uint64_t row0 = qb * blockM;
    return row0 < sq && VisibleKeys(EffectiveBand(p), sq, skv, row0, std::min<uint64_t>(row0 + blockM, sq), first, end);
}

uint64_t ExecutedKeys(const Problem &p, uint32_t blockM, uint32_t blockN, uint64_t qb, uint64_t seq) {
    uint64_t first = 0, end = 0;
    return QueryBlockKeys(p, blockM, qb, seq, &first, &end) ? end - first / blockN * blockN : 0;
}

uint64_t KvBlocksForQueryBlock(const Problem &p, uint32_t blockM, uint32_t blockN, uint64_t qb, uint64_t seq) {
    uint64_t first = 0, end = 0;
    return QueryBlockKeys(p, blockM, qb, seq, &first, &end) ? CeilDiv(end, blockN) - first / blockN : 0;
}

double ModeledKernelCycles(const Problem &p, const ChipLimits &c, uint32_t blockM, uint32_t blockN) {
    const uint64_t numQBlocks = CeilDiv(p.seqQ, blockM);
    const bool zigzag = CausalBand(p);
    std::vector<uint64_t> perPosition(numQBlocks);
    // A step's cost in full-block steps: the Sq tail's query block has fewer rows, and a query
    // block's last K/V block fewer keys where the band or the Skv tail cuts it; such steps cost the
    // cube and the AIVs about in proportion (QK, P.V and the softmax, whose tiles are only as wide
    // as the keys the cube computed, are that much smaller).
    std::vector<double> rowShare(numQBlocks);
    uint64_t perHead = 0, largestItem = 0;
    double perHeadWeighted = 0, perHeadCols = 0;  // ... and the keys the cube computes
    for (uint64_t pos = 0; pos < numQBlocks; ++pos) {
        const uint64_t qb = QueryBlockAt(pos, numQBlocks, zigzag);
        perPosition[pos] = KvBlocksForQueryBlock(p, blockM, blockN, qb);
        const double keys = static_cast<double>(ExecutedKeys(p, blockM, blockN, qb, 0));
        const double keyShare = perPosition[pos] == 0 ? 1 : keys / (static_cast<double>(perPosition[pos]) * blockN);
        rowShare[pos] = static_cast<double>(std::min<uint64_t>(blockM, p.seqQ - qb * blockM)) / blockM * keyShare;
        perHead += perPosition[pos];
        perHeadWeighted += perPosition[pos] * rowShare[pos];
        perHeadCols += keys;
        largestItem = std::max(largestItem, perPosition[pos]);
    }
    const uint64_t items = p.batch * p.numHeads * numQBlocks;
    const uint64_t cores = std::max<uint64_t>(1, std::min<uint64_t>({c.aicNum, kMaxCores, items}));
    // The busiest core's steps: from the real split while the item list is small, else the larger
    // of an even share and the largest item
    // (and its items, each adding the pipeline's fill and drain).
    double busiest = std::max(static_cast<double>(p.batch * p.numHeads) * perHeadWeighted / cores,
                              static_cast<double>(largestItem));
    double busiestItems = static_cast<double>(CeilDiv(items, cores));
    if (items <= kExactSplitItems) {
        std::vector<uint64_t> work(items);
        for (uint64_t i = 0; i < items; ++i) work[i] = perPosition[i % numQBlocks];
        const std::vector<uint32_t> starts = SplitContiguous(work, static_cast<uint32_t>(cores));
        double most = 0;
        for (size_t core = 0; core + 1 < starts.size(); ++core) {
            double load = 0;
            for (uint32_t i = starts[core]; i < starts[core + 1]; ++i) load += work[i] * rowShare[i % numQBlocks];
            if (load >= most) {
                most = load;
                busiestItems = starts[core + 1] - starts[core];
            }
        }
        busiest = most;
    }
    const StepCosts costs = StepCostsOf(c.l2BytesPerCycle, c.aicNum, c.l1Bytes);
    const uint32_t chunkRows = FeaturesOfSoc(c.socVersion).coupled ? 0 : ComputeNeeds(blockM, blockN, p, c).chunkRows;
    ScoreForm form;
    if (p.halfScores) form.bytes = 2;
    // The half softmax takes a block whose tile is whole 128-column repeats (a cut block's tile is
    // rounded up to them when blockN is a multiple of 128).
    if (p.halfSoftmax && blockN % 128 == 0) form.repeatsPer64 = kHalfSoftmaxRepeatsPer64;
    const double core = busiest * StepCycles(blockM, blockN, p.headDim, p.dtypeBytes, costs, chunkRows, form) +
                        busiestItems * ItemFillCycles(blockM, blockN, p.headDim, p.dtypeBytes, costs, form);
    const double steps = static_cast<double>(p.batch * p.numHeads * perHead);
    const double colShare = perHead == 0 ? 1 : perHeadCols / (static_cast<double>(perHead) * blockN);
    return std::max(core, steps * GroupStepBytes(blockM, blockN, p.headDim, p.dtypeBytes, costs, colShare, form) /
                              costs.gmBytesPerCycle);
}

ArchFeatures FeaturesOfSoc(uint32_t socVersion) {
    ArchFeatures f;
    switch (socVersion) {
        case kSocAscend910B:  // dav-c220: Mmad float<-half/float/bfloat16; separate AIC and AIV
            f.cubeFp32 = true;
            f.bf16 = true;
            f.known = true;
            break;
        case kSocAscend310P:  // dav-m200: Mmad float<-half only; one AI Core with both units
        case kSocAscend910:   // dav-c100: likewise, no bfloat16
            f.coupled = true;
            f.known = true;
            break;
        default:
            break;
    }
    return f;
}

bool ComputePlan(const Problem &p, const ChipLimits &c, Plan *plan, std::string *error) {
    *error = ValidateProblem(p);
    if (error->empty()) *error = ValidateChip(c);
    if (error->empty()) *error = ValidateDtypeOnChip(p, c);
    if (!error->empty()) return false;
    const bool coupled = FeaturesOfSoc(c.socVersion).coupled;
    if (coupled && (p.mask || p.dropout || p.dropoutMaskOut)) {
        // The Philox generator needs ShiftLeft / ShiftRight and the mask pre-pass a cross-core
        // barrier between vector cores: built for the A2/A3 MIX path (docs/dropout_and_mask.md).
        *error = Format("%s is supported on Atlas A2/A3 (Ascend910B*, Ascend910_93*) only; %s has coupled AI Cores",
                        p.mask ? (p.dropout ? "atten_mask and dropout (keep_prob < 1)" : "atten_mask")
                               : "dropout (keep_prob < 1, dropout_mask)",
                        c.socName.c_str());
        return false;
    }
    if (coupled && (p.alibi || p.sinks || p.bias)) {
        // FlashAttentionV5's score modifiers are wired into the MIX kernel's score stage only
        // (op_kernel/common/score_mods.h); the coupled kernel has no GM inputs for them.
        std::string used = p.alibi ? "alibi_slopes" : "";
        if (p.sinks) used += used.empty() ? "sinks" : ", sinks";
        if (p.bias) used += used.empty() ? "atten_bias (a float mask)" : ", atten_bias (a float mask)";
        *error = Format("%s: supported on Atlas A2/A3 (Ascend910B*, Ascend910_93*) only; %s has coupled AI Cores",
                        used.c_str(), c.socName.c_str());
        return false;
    }
    if (p.narrowScores && (coupled || p.dtypeBytes == 4)) {
        // S rounded by FixPipe on its way out of L0C to GM: the MIX path's hand-off, for 2-byte inputs.
        *error = coupled ? Format("inner_precise=1 (high-performance precision) is supported on Atlas A2/A3 "
                                  "(Ascend910B*, Ascend910_93*) only; %s has coupled AI Cores", c.socName.c_str())
                         : std::string("inner_precise=1 (high-performance precision) needs float16 or bfloat16 "
                                       "inputs; float32 is computed at full precision only");
        return false;
    }
    uint32_t blockM = 0, blockN = 0;
    if (!ChooseBlocks(p, c, &blockM, &blockN, error)) return false;
    const bool narrow = NarrowBandBlocks(p, c, &blockM, &blockN);

    Plan out;
    // A band narrower than the item's rows plus a key block: one QK over the union of both AIVs'
    // bands would compute keys only one half sees (the tile waste the rule above keeps near
    // 1 / kNarrowBandShare), so each AIV computes its own half's band.
    out.soloRows = narrow && !coupled ? 1 : 0;
    out.blockM = blockM;
    out.blockN = blockN;
    out.subBlockM = static_cast<uint32_t>(RowsPerVector(blockM, coupled));
    out.coupled = coupled;
    out.numQBlocks = static_cast<uint32_t>(CeilDiv(p.seqQ, blockM));
    out.numKvBlocks = static_cast<uint32_t>(CeilDiv(p.seqKv, blockN));
    const Band band = EffectiveBand(p);
    out.qZigzag = band.Restricted() ? 1 : 0;
    const Needs needs = ComputeNeeds(blockM, blockN, p, c);
    out.budget = needs.lines;
    out.chunkRows = needs.chunkRows;

    // Work items (sequence b, head n, query-block position), numbered as the tiling header
    // says: the items of sequence b follow those of b - 1, each sequence with its own number
    // of query blocks when the batch is varlen. The count is checked against 2^32 as it grows.
    std::vector<uint64_t> work;
    for (uint64_t b = 0; b < p.batch; ++b) {
        const uint64_t nq = CeilDiv(SeqLenQ(p, b), blockM);
        if (nq == 0) continue;
        if (p.numHeads * nq > UINT32_MAX - work.size()) {
            *error = Format("batch * num_heads * ceil(seq_q / block_m) = %llu * %llu * %llu work items exceeds 2^32",
                            static_cast<unsigned long long>(p.batch), static_cast<unsigned long long>(p.numHeads),
                            static_cast<unsigned long long>(nq));
            return false;
        }
        std::vector<uint64_t> perPosition(nq);
        for (uint64_t pos = 0; pos < nq; ++pos) {
            perPosition[pos] = KvBlocksForQueryBlock(p, blockM, blockN, QueryBlockAt(pos, nq, out.qZigzag), b);
        }
        for (uint64_t n = 0; n < p.numHeads; ++n) work.insert(work.end(), perPosition.begin(), perPosition.end());
        if (p.seqLensQ.empty()) {
            // Fixed lengths: every sequence's items are the same; copy the first one's.
            const size_t perSeq = work.size();
            if (perSeq * p.batch > UINT32_MAX) {
                *error = Format("batch * num_heads * ceil(seq_q / block_m) = %llu * %llu * %llu work items exceeds "
                                "2^32", static_cast<unsigned long long>(p.batch),
                                static_cast<unsigned long long>(p.numHeads), static_cast<unsigned long long>(nq));
                return false;
            }
            const std::vector<uint64_t> first = work;
            work.reserve(perSeq * p.batch);
            for (uint64_t rest = 1; rest < p.batch; ++rest) work.insert(work.end(), first.begin(), first.end());
            break;
        }
    }
    out.totalItems = work.size();
    const uint32_t cores = std::min<uint32_t>(c.aicNum, kMaxCores);
    out.coreItemStart = work.empty() ? std::vector<uint32_t>{0, 0} : SplitContiguous(work, cores);
    out.usedCoreNum = static_cast<uint32_t>(out.coreItemStart.size() - 1);
    for (uint32_t core = 0; core < out.usedCoreNum; ++core) {
        uint64_t load = 0;
        for (uint32_t i = out.coreItemStart[core]; i < out.coreItemStart[core + 1]; ++i) load += work[i];
        out.totalWork += load;
        out.maxCoreWork = std::max(out.maxCoreWork, load);
    }
    out.meanCoreWork = static_cast<double>(out.totalWork) / out.usedCoreNum;
    out.imbalance = out.totalWork == 0 ? 1.0 : static_cast<double>(out.maxCoreWork) / out.meanCoreWork;

    // GM workspace per AIC group (header order), each region 512-B aligned: the slots of one
    // item's blockM rows, which the group's two AIVs share (each reads and writes its half). P
    // has no region: each AIV writes P_j over the rows of S_j it read (row r of P at the first
    // byte of row r of S; op_kernel/flash_attention/flash_attention_kernel.h says why that is race-free), so
    // wsProbOffset is wsScoreOffset. The coupled path hands S, P and P.V between cube and
    // vector inside the AI Core: no workspace.
    if (coupled) {
        out.mmUbBytes = MatmulLocalWorkspaceBytes(out.subBlockM, blockN, p.headDim, p.dtypeBytes);
    } else {
        // Sized to the chosen blocks and the used cores only (SlotsOf).
        const WorkspaceSlots slots = SlotsOf(p, blockM, blockN);
        out.wsScoreOffset = slots.scoreOffset;
        out.wsProbOffset = out.wsScoreOffset;
        out.wsPvOffset = slots.pvOffset;
        out.wsBytesPerCore = slots.bytesPerCore;
        out.userWorkspaceBytes = out.usedCoreNum * out.wsBytesPerCore;
        if (p.mask) {
            out.maskRows = kMaskRows;
            out.maskSummaryBytes = MaskSummaryBytes(p, blockM, blockN);
            out.wsMaskSummaryOffset = out.userWorkspaceBytes;
            out.userWorkspaceBytes += AlignUp(out.maskSummaryBytes, kWorkspaceAlign);
        }
        if (p.dropout) out.philoxLanes = needs.philoxLanes;
    }

    // BSH and TND have BSND's memory order and run its path: the key carries BSND. The causal
    // bit stands for any restricting band; a varlen batch sets both tail bits (any sequence
    // may end inside a block).
    const bool varlen = p.layout == kLayoutTnd;
    const uint32_t keyLayout = p.layout == kLayoutBsh || varlen ? kLayoutBsnd : p.layout;
    out.tilingKey = (p.bf16 ? kKeyBf16 : 0) | (p.dtypeBytes == 4 ? kKeyFp32 : 0) | (coupled ? kKeyCoupled : 0) |
                    (p.narrowScores ? kKeyNarrowScores : 0) |
                    (band.Restricted() ? kKeyCausal : 0) |
                    (static_cast<uint64_t>(keyLayout) << kKeyLayoutShift) |
                    (varlen || p.seqQ % blockM != 0 ? kKeySqTail : 0) |
                    (varlen || p.seqKv % blockN != 0 ? kKeySkvTail : 0);
    *plan = std::move(out);
    return true;
}

WorkspaceSlots SlotsOf(const Problem &p, uint32_t blockM, uint32_t blockN) {
    const uint64_t m = blockM, n = blockN, d = p.headDim;
    // S's slots hold S as the QK Matmul writes it: the input dtype in the high-performance
    // precision (narrowScores), fp32 otherwise.
    const uint64_t scoreBytes = p.narrowScores ? p.dtypeBytes : kFp32;
    WorkspaceSlots slots;
    slots.pvOffset = slots.scoreOffset + AlignUp(2 * m * n * scoreBytes, kWorkspaceAlign);
    slots.bytesPerCore = slots.pvOffset + AlignUp(2 * m * d * kFp32, kWorkspaceAlign);
    return slots;
}

uint64_t MaskSummaryBytes(const Problem &p, uint32_t blockM, uint32_t blockN) {
    if (!p.mask) return 0;
    // A query block is an item's blockM rows, or one block for a mask shared by every query (maskQ 1).
    const uint64_t qBlocks = p.maskQ == 1 ? 1 : CeilDiv(p.maskQ, blockM);
    return p.maskB * p.maskN * qBlocks * CeilDiv(p.seqKv, blockN);
}

namespace {

// The most user workspace a plan with (blockM, blockN) can ask for: a slice per core that can get
// an item (SplitContiguous never makes more ranges than cores or items) and the mask summary.
uint64_t UserWorkspaceBound(const Problem &p, const ChipLimits &c, uint32_t blockM, uint32_t blockN) {
    uint64_t items = 0;
    for (uint64_t b = 0; b < p.batch && items < kMaxCores; ++b) items += p.numHeads * CeilDiv(SeqLenQ(p, b), blockM);
    const uint64_t cores = std::min<uint64_t>({c.aicNum, kMaxCores, items});
    return cores * SlotsOf(p, blockM, blockN).bytesPerCore + AlignUp(MaskSummaryBytes(p, blockM, blockN), kWorkspaceAlign);
}

}  // namespace

bool ComputePlanWithin(const Problem &p, const ChipLimits &c, uint64_t userWorkspaceLimit, Plan *plan,
                       std::string *error) {
    if (!ComputePlan(p, c, plan, error)) return false;
    if (plan->userWorkspaceBytes <= userWorkspaceLimit || plan->coupled ||
        (p.userBlockM != 0 && p.userBlockN != 0)) {
        return true;
    }
    // Candidates: blockM a multiple of 32 (both AIV halves multiples of 16) up to the auto plan's
    // cap, blockN 16, 32, the multiples of 64 and all of Skv (rounded up to 16) up to its cap --
    // smaller blocks than the auto search tries, as a smaller slot is the point here; a block the
    // caller fixed stays fixed.
    const uint32_t capM = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqQ, kAutoBlockMStep), kMaxBlockM));
    const uint32_t capN = static_cast<uint32_t>(std::min<uint64_t>(AlignUp(p.seqKv, kBlockAlign), kMaxBlockN));
    std::vector<uint32_t> ms, ns;
    if (p.userBlockM != 0) {
        ms.push_back(p.userBlockM);
    } else {
        for (uint32_t m = kAutoBlockMStep; m <= capM; m += kAutoBlockMStep) ms.push_back(m);
    }
    if (p.userBlockN != 0) {
        ns.push_back(p.userBlockN);
    } else {
        for (uint32_t n : {kBlockAlign, 2 * kBlockAlign}) {
            if (n < capN) ns.push_back(n);
        }
        for (uint32_t n = kAutoBlockNStep; n < capN; n += kAutoBlockNStep) ns.push_back(n);
        ns.push_back(capN);
    }
    struct Candidate {
        uint32_t m, n;
        uint64_t bound;
        double cycles;
    };
    std::vector<Candidate> within, all;
    for (uint32_t m : ms) {
        for (uint32_t n : ns) {
            const uint64_t bound = UserWorkspaceBound(p, c, m, n);
            all.push_back({m, n, bound, 0.0});
            if (bound <= userWorkspaceLimit) within.push_back({m, n, bound, ModeledKernelCycles(p, c, m, n)});
        }
    }
    // Fastest first (ties: the larger blockM, then blockN); then, for the floor, least workspace first.
    std::stable_sort(within.begin(), within.end(), [](const Candidate &a, const Candidate &b) {
        return a.cycles < b.cycles || (a.cycles == b.cycles && (a.m > b.m || (a.m == b.m && a.n > b.n)));
    });
    std::stable_sort(all.begin(), all.end(), [](const Candidate &a, const Candidate &b) { return a.bound < b.bound; });
    within.insert(within.end(), all.begin(), all.end());
    Problem fixed = p;
    for (const Candidate &k : within) {
        fixed.userBlockM = k.m;
        fixed.userBlockN = k.n;
        Plan candidate;
        std::string refused;
        // Refused: the blocks break a UB or L1 budget line; the next candidate is tried.
        if (ComputePlan(fixed, c, &candidate, &refused) &&
            (candidate.userWorkspaceBytes <= userWorkspaceLimit || k.bound > userWorkspaceLimit)) {
            *plan = std::move(candidate);
            return true;
        }
    }
    return true;  // no candidate fits UB: the auto plan, over the limit
}

}  // namespace fa_policy
