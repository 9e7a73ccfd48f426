// decode_tiling_policy.cpp -- see decode_tiling_policy.h.
#include "decode_tiling_policy.h"

#include <algorithm>
#include <cmath>

#include "block_cost.h"  // StepCosts, MatmulJobCycles: the closed form of the timing model

namespace fa_policy {
namespace {

constexpr uint64_t kAlign = 16;  // cube fractal edge; head_dim and chunks are multiples of it
constexpr uint64_t kUbAlign = 32;
constexpr uint64_t kFp32 = 4;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Per-AIV UB of the kernel, in its InitBuffer order; then L1 and L0C needs of the cube.
struct Needs {
    std::vector<BudgetLine> lines;
    uint64_t ub = 0, l1 = 0, l0c = 0;
};

// Keys per dequantization pass of an int8 cache's chunk (FlashAttentionDecodeV3).
uint64_t DequantRows(uint64_t n) { return std::min<uint64_t>(n, kDecodeDequantRows); }

Needs DecodeNeeds(uint64_t m, uint64_t n, uint64_t d, uint64_t t, const DecodeProblem &p, const ChipLimits &c) {
    const uint64_t stat = AlignUp(m * kFp32, kUbAlign);
    Needs needs;
    needs.lines = {
        {"scoreQue S [m,n] fp32", m * n * kFp32, c.ubBytes},
        {"probQue P [m,n] T", m * n * t, c.ubBytes},
        {"pvQue PV [m,d] fp32", m * d * kFp32, c.ubBytes},
        {"outQue O [m,d] T", m * d * t, c.ubBytes},
        {"accBuf acc [m,d] fp32", m * d * kFp32, c.ubBytes},
        {"statBuf 7 x [m] fp32", 7 * stat, c.ubBytes},
        {"lseQue lse [m] fp32", stat, c.ubBytes},
        {"foldBuf [m,64] fp32", m * 64 * kFp32, c.ubBytes},
        {"brcbBuf [align8(m),8] fp32", AlignUp(m, 8) * 8 * kFp32, c.ubBytes},
    };
    if (p.scoreMods) {  // V2's ALiBi / sinks: key ramp, distance and bias rows [3,n], per-row slope and sink [2,m]
        needs.lines.push_back({"modBuf ramp,dist,bias [3,n] + slope,sink [2,m] fp32", 3 * n * kFp32 + 2 * stat,
                               c.ubBytes});
    }
    if (p.kvInt8) {  // V3: int8 rows in, the rows as T out (2 buffers each), bf16's fp32 step, the scales
        const uint64_t r = DequantRows(n);
        needs.lines.push_back({"kvInQue int8 2 x [r,d]", 2 * r * d, c.ubBytes});
        needs.lines.push_back({"kvOutQue T 2 x [r,d]", 2 * r * d * t, c.ubBytes});
        if (p.bf16) needs.lines.push_back({"kvWideBuf fp32 [r,d] (bf16)", r * d * kFp32, c.ubBytes});
        needs.lines.push_back({"scaleBuf K [d] + V [n] fp32", (d + n) * kFp32, c.ubBytes});
    }
    for (const auto &line : needs.lines) needs.ub += line.bytes;
    // An AIC holds, for each of its 2 AIVs, both matmuls' operands (Q [m,d] + K [n,d];
    // P [m,n] + V [n,d]) and one [m16,n] or [m16,d] fp32 result in L0C.
    needs.l1 = 2 * ((m * d + n * d) * t + (m * n + n * d) * t);
    needs.l0c = AlignUp(m, kAlign) * std::max(n, d) * kFp32;
    needs.lines.push_back({"UB total per AIV", needs.ub, c.ubBytes});
    needs.lines.push_back({"L1 QK+PV operands x2 AIV", needs.l1, c.l1Bytes});
    needs.lines.push_back({"L0C one result [m,max(n,d)] fp32", needs.l0c, c.l0cBytes});
    return needs;
}

// One Matmul job C[m, n] = A[m, k] . B[k, n] of the decode kernel with A read once per N pass of
// baseN columns and B once (one M pass: m <= 128 for every shape but the largest groups), at the
// baseN that costs least (block_cost.h's MatmulJobCycles with the base tile capped at it: narrower
// tiles let the MTE2 load of one overlap the MTE1 / cube / FixPipe work of the one before, at the
// price of A read once more per tile). op_host fixes that baseN (MatmulApiTiling::SetFixSplit).
struct JobChoice {
    double cycles = 0;
    uint32_t baseN = 0;
};
JobChoice BestJob(double m, double n, double k, double t, const StepCosts &c) {
    JobChoice best;
    const double widest = std::min(c.maxBaseN, static_cast<double>(AlignUp(static_cast<uint64_t>(n), kAlign)));
    for (double bn = widest; bn >= kAlign; bn -= kAlign) {
        StepCosts capped = c;
        capped.maxBaseN = bn;
        const double passes = static_cast<double>(CeilDiv(static_cast<uint64_t>(n), static_cast<uint64_t>(bn)));
        const double cycles = MatmulJobCycles(m, n, k, t, m * k * t * passes + n * k * t, capped);
        if (best.baseN == 0 || cycles < best.cycles) {
            best.cycles = cycles;
            best.baseN = static_cast<uint32_t>(bn);
        }
    }
    return best;
}

// The cube's cycles for one chunk of `cols` keys: its QK (S [m, cols] = Q [m, d] . K^T) and P.V
// (O' [m, d] = P [m, cols] . V) jobs, each at its best baseN.
double ChunkCubeCycles(double m, double cols, double d, double t, const StepCosts &c) {
    return BestJob(m, cols, d, t, c).cycles + BestJob(m, d, cols, t, c).cycles;
}

// The cube's cycles for one cache block of `blockSize` keys in chunks of n, the last one short
// when n does not divide the block.
double BlockCubeCycles(uint64_t m, uint64_t n, uint64_t d, uint64_t t, uint64_t blockSize, const StepCosts &c) {
    const double full = static_cast<double>(blockSize / n), tail = static_cast<double>(blockSize % n);
    const double md = static_cast<double>(m), dd = static_cast<double>(d), td = static_cast<double>(t);
    return full * ChunkCubeCycles(md, static_cast<double>(n), dd, td, c) +
           (tail > 0 ? ChunkCubeCycles(md, tail, dd, td, c) : 0.0);
}

bool Fits(const Needs &n, const ChipLimits &c) { return n.ub <= c.ubBytes && n.l1 <= c.l1Bytes && n.l0c <= c.l0cBytes; }

std::string Validate(const DecodeProblem &p, const ChipLimits &c) {
    const struct {
        const char *name;
        uint64_t value;
    } sizes[] = {{"batch", p.batch},         {"num_heads", p.numHeads},  {"num_kv_heads", p.numKvHeads},
                 {"seq_q", p.seqQ},          {"head_dim", p.headDim},    {"num_blocks", p.numBlocks},
                 {"block_size", p.blockSize}, {"max_blocks_per_seq", p.maxBlocksPerSeq}};
    for (const auto &s : sizes) {
        if (s.value < 1 || s.value > INT32_MAX) {
            return Format("%s must be in [1, 2^31), got %llu", s.name, static_cast<unsigned long long>(s.value));
        }
    }
    const std::string heads = ValidateHeads(p.headDim, p.numHeads, p.numKvHeads);
    if (!heads.empty()) return heads;
    if (p.dtypeBytes != 2) return Format("dtype must be float16 or bfloat16, got %u bytes", p.dtypeBytes);
    if (p.kvInt8 && p.headDim % 32 != 0) {  // DataCopyPad starts each int8 row at a 32-B boundary of UB
        return Format("an int8 key/value cache needs head_dim a multiple of 32 (its rows are copied into UB "
                      "whole 32-B blocks), got %llu", static_cast<unsigned long long>(p.headDim));
    }
    if (p.numSplits < 0 || p.numSplits > INT32_MAX) {
        return Format("num_splits must be 0 (auto: split the keys over all cores), 1 (one core per sequence and "
                      "kv head) or a split count >= 2 (below 2^31), got %lld",
                      static_cast<long long>(p.numSplits));
    }
    if (c.ubBytes == 0 || c.l1Bytes == 0 || c.l0cBytes == 0 || c.aicNum == 0) {
        return Format("chip limits of %s are incomplete", c.socName.c_str());
    }
    if (c.aivNum != 2 * c.aicNum) {
        return Format("the decode kernel runs AIC:AIV 1:2 (Atlas A2/A3); %s has %u AIC and %u AIV cores",
                      c.socName.c_str(), c.aicNum, c.aivNum);
    }
    return {};
}

}  // namespace

bool ChooseDecodeRowGroups(const DecodeProblem &p, const ChipLimits &c, uint32_t *heads, uint32_t *tokens,
                           uint32_t *count) {
    const uint64_t group = p.numHeads / p.numKvHeads, sq = p.seqQ, d = p.headDim, t = p.dtypeBytes;
    auto fits = [&](uint64_t m, uint64_t n) { return Fits(DecodeNeeds(m, n, d, t, p, c), c); };
    auto take = [&](uint64_t h, uint64_t tk) {
        *heads = static_cast<uint32_t>(h);
        *tokens = static_cast<uint32_t>(tk);
        *count = static_cast<uint32_t>((group / h) * (sq / tk));
        return true;
    };
    // The whole kv head as one group whenever it can be (one read of its keys per step).
    if (group * sq <= kDecodeMaxRows && fits(group * sq, kAlign)) return take(group, sq);
    // Else the largest row group that fits with chunks of up to 128 keys (short chunks would make
    // every chunk pay the cube's fixed costs), then with 16-key ones: whole heads (all Sq tokens,
    // so a head's rows stay one copy) while one head's tokens fit, else one head's tokens cut.
    const uint64_t wide = std::min<uint64_t>({128, kDecodeMaxBlockN, AlignUp(p.blockSize, kAlign)});
    for (const uint64_t n : {wide, kAlign}) {
        for (uint64_t h = group; h >= 1; --h) {
            if (group % h == 0 && h * sq <= kDecodeMaxRows && fits(h * sq, n)) return take(h, sq);
        }
        for (uint64_t tk = std::min<uint64_t>(sq, kDecodeMaxRows); tk >= 1; --tk) {
            if (sq % tk == 0 && fits(tk, n)) return take(1, tk);
        }
    }
    return false;
}

bool ComputeDecodePlan(const DecodeProblem &p, const ChipLimits &c, DecodePlan *plan, std::string *error) {
    *error = Validate(p, c);
    if (!error->empty()) return false;
    uint32_t rgHeads = 0, rgTokens = 0, rowGroups = 0;
    if (!ChooseDecodeRowGroups(p, c, &rgHeads, &rgTokens, &rowGroups)) {
        const Needs needs = DecodeNeeds(1, kAlign, p.headDim, p.dtypeBytes, p, c);
        *error = Format("one query row with head_dim %llu needs %llu B of UB per AIV and %llu B of L1 even with "
                        "16-key chunks; %s has %llu B UB, %llu B L1",
                        static_cast<unsigned long long>(p.headDim), static_cast<unsigned long long>(needs.ub),
                        static_cast<unsigned long long>(needs.l1), c.socName.c_str(),
                        static_cast<unsigned long long>(c.ubBytes), static_cast<unsigned long long>(c.l1Bytes));
        return false;
    }
    const uint64_t m = uint64_t{rgHeads} * rgTokens, d = p.headDim, t = p.dtypeBytes;

    // Chunk: of the multiples of 16 that fit, up to the cache block (rounded up to 16), the one
    // whose chunks cost the cube least over one cache block (ChunkCubeCycles: each chunk is a QK
    // and a P.V job, each with its fixed latencies, so few long chunks beat many short ones, and a
    // chunk that leaves a short tail in every block pays that tail's jobs too).
    // V3 (int8 cache): a chunk is blockN consecutive keys of the sequence across cache blocks (the
    // AIV gathers it into a contiguous tile for the cube), so neither its size nor its cost is set by
    // the block: the cost is taken over the sequence's whole reach.
    const uint64_t run = p.kvInt8 ? p.blockSize * p.maxBlocksPerSeq : p.blockSize;
    const uint64_t cap = std::min<uint64_t>(kDecodeMaxBlockN, AlignUp(run, kAlign));
    const StepCosts costs = StepCostsOf(c.l2BytesPerCycle, c.aicNum, c.l1Bytes);
    uint64_t n = 0;
    double least = 0;
    for (uint64_t cand = cap; cand >= kAlign; cand -= kAlign) {
        if (!Fits(DecodeNeeds(m, cand, d, t, p, c), c)) continue;
        const double cost = BlockCubeCycles(m, cand, d, t, run, costs);
        if (n == 0 || cost < least) {
            n = cand;
            least = cost;
        }
    }
    if (n == 0) {
        const Needs needs = DecodeNeeds(m, kAlign, d, t, p, c);
        *error = Format("%llu query rows per kv head with head_dim %llu need %llu B of UB per AIV and %llu B of L1 "
                        "even with 16-key chunks; %s has %llu B UB, %llu B L1",
                        static_cast<unsigned long long>(m), static_cast<unsigned long long>(d),
                        static_cast<unsigned long long>(needs.ub), static_cast<unsigned long long>(needs.l1),
                        c.socName.c_str(), static_cast<unsigned long long>(c.ubBytes),
                        static_cast<unsigned long long>(c.l1Bytes));
        return false;
    }

    DecodePlan out;
    out.rows = static_cast<uint32_t>(m);
    out.blockN = static_cast<uint32_t>(n);
    out.chunksPerBlock = static_cast<uint32_t>(CeilDiv(p.blockSize, n));
    out.qkBaseN = BestJob(static_cast<double>(m), static_cast<double>(n), static_cast<double>(d),
                          static_cast<double>(t), costs).baseN;
    out.pvBaseN = BestJob(static_cast<double>(m), static_cast<double>(d), static_cast<double>(n),
                          static_cast<double>(t), costs).baseN;
    out.splitKv = p.numSplits == 1 ? 0 : 1;
    out.usedCoreNum = c.aicNum;
    out.numParts = 2 * c.aicNum;
    // An explicit count: more pieces of one group than AIVs cannot run at once.
    out.splitsPerGroup = p.numSplits >= 2 ? static_cast<uint32_t>(std::min<int64_t>(p.numSplits, out.numParts)) : 0;
    out.budget = DecodeNeeds(m, n, d, t, p, c).lines;
    out.lseStride = static_cast<uint32_t>(AlignUp(m, 8));
    out.rowGroupHeads = rgHeads;
    out.rowGroupTokens = rgTokens;
    out.rowGroups = rowGroups;
    const uint64_t groups = p.batch * p.numKvHeads * rowGroups;
    // Each part boundary inside a group adds one piece: sum of pieces <= groups + parts; with an
    // explicit count, at most that many pieces per group.
    const uint64_t slots = out.splitsPerGroup >= 2 ? groups * out.splitsPerGroup
                                                   : (out.splitKv ? groups + out.numParts : 0);
    if (slots > UINT32_MAX) {
        *error = Format("%llu partial slots (batch x num_kv_heads x row groups x num_splits) exceed 2^32",
                        static_cast<unsigned long long>(slots));
        return false;
    }
    out.maxSlots = static_cast<uint32_t>(slots);

    out.wsQOffset = 0;
    out.wsScoreOffset = out.wsQOffset + AlignUp(m * d * t, kWorkspaceAlign);
    out.wsProbOffset = out.wsScoreOffset + AlignUp(2 * m * n * kFp32, kWorkspaceAlign);
    out.wsPvOffset = out.wsProbOffset + AlignUp(2 * m * n * t, kWorkspaceAlign);
    out.wsBytesPerAiv = out.wsPvOffset + AlignUp(2 * m * d * kFp32, kWorkspaceAlign);
    if (p.kvInt8) {  // V3: the dequantized K and V chunks, by chunk parity
        out.dequantRows = static_cast<uint32_t>(DequantRows(n));
        out.wsKDeqOffset = out.wsBytesPerAiv;
        out.wsVDeqOffset = out.wsKDeqOffset + AlignUp(2 * n * d * t, kWorkspaceAlign);
        out.wsBytesPerAiv = out.wsVDeqOffset + AlignUp(2 * n * d * t, kWorkspaceAlign);
    }
    out.wsPartialOOffset = out.numParts * out.wsBytesPerAiv;
    out.wsPartialLseOffset = out.wsPartialOOffset + AlignUp(uint64_t{out.maxSlots} * m * d * kFp32, kWorkspaceAlign);
    out.userWorkspaceBytes =
        out.wsPartialLseOffset + AlignUp(uint64_t{out.maxSlots} * out.lseStride * kFp32, kWorkspaceAlign);
    out.tilingKey = (p.bf16 ? kDecodeKeyBf16 : 0) | (out.splitKv ? kDecodeKeySplit : 0) | (p.kvInt8 ? kDecodeKeyInt8 : 0);
    *plan = std::move(out);
    return true;
}

bool ComputeDecodeSchedule(const DecodeProblem &p, const DecodePlan &plan, const std::vector<int64_t> &seqLens,
                           int64_t preTokens, int64_t nextTokens, DecodeSchedule *schedule, std::string *error) {
    if (seqLens.size() != p.batch) {
        *error = Format("%zu sequence lengths for batch %llu", seqLens.size(), static_cast<unsigned long long>(p.batch));
        return false;
    }
    const uint64_t capacity = p.maxBlocksPerSeq * p.blockSize;
    std::vector<uint64_t> units(p.batch, 0);
    const uint64_t rowGroups = plan.rowGroups > 0 ? plan.rowGroups : 1;  // work groups per (b, kv head)
    DecodeSchedule out;
    for (uint64_t b = 0; b < p.batch; ++b) {
        const int64_t len = seqLens[b];
        if (len < 0 || static_cast<uint64_t>(len) > capacity) {
            *error = Format("sequence %llu has %lld keys; the cache holds 0 .. %llu per sequence",
                            static_cast<unsigned long long>(b), static_cast<long long>(len),
                            static_cast<unsigned long long>(capacity));
            return false;
        }
        // As KeysOf: the keys of [0, L) row 0 sees first to those the last row sees last (attention_band.h).
        const int64_t sq = static_cast<int64_t>(p.seqQ), diag = attn_band::Diagonal(sq, len);
        const int64_t hi = std::min(std::max(attn_band::KeyEnd(sq - 1, diag, nextTokens), int64_t{0}), len);
        const int64_t lo = std::min(std::max(attn_band::KeyBegin(0, diag, preTokens), int64_t{0}), len);
        if (lo >= hi) continue;
        const uint64_t bs = p.blockSize, bn = plan.blockN, cpb = plan.chunksPerBlock;
        const uint64_t first = (lo / bs) * cpb + (lo % bs) / bn;
        const uint64_t last = ((hi - 1) / bs) * cpb + ((hi - 1) % bs) / bn;
        units[b] = last - first + 1;
        out.totalUnits += units[b] * p.numKvHeads * rowGroups;
        out.keys += static_cast<uint64_t>(hi - lo) * p.numKvHeads * rowGroups;
    }
    const uint64_t parts = plan.numParts, total = out.totalUnits;
    out.groups = p.batch * p.numKvHeads * rowGroups;
    out.partUnits.assign(parts, 0);
    out.partPieces.assign(parts, 0);
    out.partCombines.assign(parts, 0);
    // As PartStart / PartOfUnit: part a owns units [a * U / P, (a + 1) * U / P).
    auto start = [&](uint64_t a) { return total * a / parts; };
    auto partOf = [&](uint64_t u) {
        const uint64_t a = ((u + 1) * parts + total - 1) / total - 1;
        return a < parts ? a : parts - 1;
    };
    uint64_t unitStart = 0, pieceBase = 0;
    out.minPieces = UINT32_MAX;
    for (uint64_t g = 0; g < out.groups; ++g) {
        const uint64_t n = units[g / (p.numKvHeads * rowGroups)];
        uint64_t pieces = 1;
        if (plan.splitsPerGroup >= 2) {
            pieces = n == 0 ? 1 : std::min<uint64_t>(plan.splitsPerGroup, n);
            for (uint64_t j = 0; j < pieces; ++j) {
                const uint64_t part = (pieceBase + j) % parts;
                out.partUnits[part] += n * (j + 1) / pieces - n * j / pieces;
                out.partPieces[part] += 1;
            }
        } else if (n == 0 || plan.splitKv == 0) {
            const uint64_t part = n == 0 ? g % parts : partOf(unitStart);
            out.partUnits[part] += n;
            out.partPieces[part] += 1;
        } else {
            // As PlaceGroup: with fewer units than parts, the parts between that hold none take no piece.
            const uint64_t firstPart = partOf(unitStart), lastPart = partOf(unitStart + n - 1);
            pieces = total < parts ? n : lastPart - firstPart + 1;
            for (uint64_t a = firstPart; a <= lastPart; ++a) {
                const uint64_t owned = std::min(start(a + 1), unitStart + n) - std::max(start(a), unitStart);
                if (owned == 0) continue;
                out.partUnits[a] += owned;
                out.partPieces[a] += 1;
            }
        }
        if (pieces >= 2) {
            ++out.combineGroups;
            out.partCombines[g % parts] += 1;
        }
        out.pieces += pieces;
        out.minPieces = std::min<uint32_t>(out.minPieces, static_cast<uint32_t>(pieces));
        out.maxPieces = std::max<uint32_t>(out.maxPieces, static_cast<uint32_t>(pieces));
        unitStart += n;
        pieceBase += pieces;
    }
    if (out.groups == 0) out.minPieces = 0;
    *schedule = std::move(out);
    return true;
}

namespace {

// Costs of the timing model's table (docs/timing_model.md) that block_cost.h's StepCosts does not
// carry: the all-core barrier and the MTE3 issue of small writes.
constexpr double kSyncAllCycles = 1000;

// One AIV's chain for one chunk of n keys and m rows (the cube's jobs are off it): S from GM, the
// softmax passes over [m, n] fp32 (about 8 passes and 20 instructions plus the row folds), P to GM,
// then the chunk before's P.V from GM and the rescale-accumulate over [m, d] (2 passes).
double ChunkChainCycles(double m, double n, double d, double t, const StepCosts &c) {
    const double port = c.corePortBytesPerCycle;
    const double repeats = (8 * m * n + 2 * m * d) / 64;
    const double instructions = 20 + 3 * (n / 64) + 2 * (d / 64);
    return (c.mte2LatencyCycles + m * n * 4 / port) + instructions * c.vectorIssueCycles +
           repeats * c.vectorRepeatCycles + (c.mte3LatencyCycles + m * n * t / c.mte3BytesPerCycle) +
           (c.mte2LatencyCycles + m * d * 4 / port) + 2 * c.flagLatencyCycles;
}

// What a piece adds to its chunks on its AIV: Q packed into GM (one copy per query head of the
// group, one in all when Sq = 1), the first QK requested and waited for with nothing to overlap,
// the mask of a chunk that crosses a row's limit or the sequence end (two fills per row), and
// after the last chunk its P.V added, the rows finished and O and the LSE written (one copy per
// query head, one when Sq = 1).
double PieceFillCycles(double m, double d, double t, double copies, bool masked, double qkJob, const StepCosts &c) {
    const double pack = copies * c.mte2LatencyCycles + m * d * t / c.corePortBytesPerCycle + c.mte3LatencyCycles +
                        m * d * t / c.mte3BytesPerCycle;
    const double mask = masked ? 2 * m * c.vectorIssueCycles : 0.0;
    const double finish = c.matmulRequestCycles + c.mte2LatencyCycles + m * d * 4 / c.corePortBytesPerCycle +
                          8 * c.vectorIssueCycles + (copies + 1) * c.mte3LatencyCycles +
                          m * d * t / c.mte3BytesPerCycle;
    return pack + c.matmulRequestCycles + qkJob + mask + finish;
}

// One merge of `pieces` partials as Combine does it: their LSEs in one copy, their O's in copies
// of oBatch, each weighted and added; then O and the LSE written (`copies` output copies).
double MergeCycles(double m, double d, double n, double pieces, double copies, const StepCosts &c) {
    const double oBatch = std::max(1.0, std::floor(n / d));
    const double reads = 1 + std::ceil(pieces / oBatch);
    const double perPiece = m * d * 4 / c.corePortBytesPerCycle + 8 * c.vectorIssueCycles +
                            3 * m * d / 64 * c.vectorRepeatCycles;
    return reads * c.mte2LatencyCycles + pieces * perPiece + (copies + 1) * c.mte3LatencyCycles +
           m * d * 2 / c.mte3BytesPerCycle;
}

}  // namespace

double DecodeModeledCycles(const DecodeProblem &p, const DecodePlan &plan, const DecodeSchedule &s,
                           const ChipLimits &chip) {
    const StepCosts c = StepCostsOf(chip.l2BytesPerCycle, chip.aicNum, chip.l1Bytes);
    const double m = plan.rows, d = static_cast<double>(p.headDim), t = p.dtypeBytes;
    // Columns of an average chunk (short sequences have chunks shorter than blockN).
    const double n = s.totalUnits ? std::min<double>(plan.blockN, static_cast<double>(s.keys) / s.totalUnits)
                                  : plan.blockN;
    StepCosts qkCosts = c, pvCosts = c;  // the base tiles op_host fixes
    qkCosts.maxBaseN = plan.qkBaseN;
    pvCosts.maxBaseN = plan.pvBaseN;
    const double qkPasses = static_cast<double>(CeilDiv(static_cast<uint64_t>(n), plan.qkBaseN));
    const double pvPasses = static_cast<double>(CeilDiv(static_cast<uint64_t>(d), plan.pvBaseN));
    const double qk = MatmulJobCycles(m, n, d, t, m * d * t * qkPasses + n * d * t, qkCosts);
    const double pv = MatmulJobCycles(m, d, n, t, m * n * t * pvPasses + n * d * t, pvCosts);
    const double chain = ChunkChainCycles(m, n, d, t, c);
    // One copy per query head of a row group, one in all when a head holds one token.
    const double copies = plan.rowGroupTokens <= 1 ? 1.0 : static_cast<double>(plan.rowGroupHeads);
    const bool masked = p.seqQ > 1 || (s.groups > 0 && (s.keys / s.groups) % plan.blockN != 0);  // a tail chunk
    const double fill = PieceFillCycles(m, d, t, copies, masked, qk, c);
    double busiest = 0;
    for (uint32_t core = 0; core < plan.usedCoreNum; ++core) {
        const uint64_t a = 2 * core, b = a + 1;
        if (b >= s.partUnits.size()) break;
        const double units = static_cast<double>(s.partUnits[a] + s.partUnits[b]);
        const double aivUnits = static_cast<double>(std::max(s.partUnits[a], s.partUnits[b]));
        const double pieces = std::max(s.partPieces[a], s.partPieces[b]);
        busiest = std::max(busiest, std::max(units * (qk + pv), aivUnits * chain) + pieces * fill);
    }
    if (s.combineGroups > 0) {
        uint32_t merges = 0;
        for (uint32_t count : s.partCombines) merges = std::max(merges, count);
        const double pieces = s.combineGroups ? static_cast<double>(s.pieces) / static_cast<double>(s.groups) : 1;
        busiest += kSyncAllCycles + merges * MergeCycles(m, d, plan.blockN, std::max(2.0, pieces), copies, c);
    }
    const double rowsAll = static_cast<double>(p.batch) * p.numHeads * p.seqQ;
    const double gmBytes = 2.0 * static_cast<double>(s.keys) * d * t + 2 * rowsAll * d * t + rowsAll * 4;
    return std::max(busiest, gmBytes / c.gmBytesPerCycle);
}

}  // namespace fa_policy
