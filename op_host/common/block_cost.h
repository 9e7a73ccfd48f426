// block_cost.h -- the tiling policy's analytic cost of a (blockM, blockN) choice on the MIX path
// (AIC + 2 AIV): a closed form of the pipeline timing model (docs/timing_model.md) for the
// forward kernel's per-K/V-block step (op_kernel/flash_attention/flash_attention_kernel.h), cheap enough to
// evaluate for every candidate inside TilingFunc. Pure: no CANN include, no globals.
//
// The step of one work item of M = blockM rows over one K/V block of n columns (T = bytes of the
// input dtype, D = head dim); each of the two AIVs softmaxes r = M / 2 of the rows:
//   AIC: two Matmul jobs for all M rows, one at a time (sub-block 0 issues both) -- S = Q.K^T
//        [M, n, D] and O' = P.V [M, D, n]; a job costs the MTE2 and FixPipe latencies plus its
//        MTE2 / MTE1 / cube / FixPipe stages pipelined over its base tiles.
//   AIV: the chain of one step on the vector unit: S (its r rows, in chunks) from GM -> the
//        softmax vector passes -> P to GM, a chunk's load and store overlapping its neighbours'
//        vector work -> O' of the previous block from GM and the rescale-accumulate, with the
//        pair's two meetings (mode-1 cross-core flags). The cube's jobs are off this chain:
//        P_{j-1}.V_{j-1} and S_{j+1} run while block j is softmaxed, so the AIV waits for the
//        cube only when the cube is the busier of the two.
//   step = max(cube busy, AIV chain); each work item adds the pipeline's fill and drain.
// Kernel time ~ max((K/V-block steps of the busiest core) x step + its items x fill,
//                   all groups' GM bytes at the chip's GM rate). Checked against the full event
// model on a grid by tests/ops/flash_attention/test_block_cost.py; its error is recorded in bench/RESULTS.md
// ("Blocks chosen by modeled time").
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace fa_policy {

// The largest Matmul base tile (baseM x baseN) of the MIX path: 128 x 256 fp32 is all of A2's
// 128-KiB L0C (docs/cann-facts.md, chip table); MatmulApiTiling shrinks the tile until it fits
// smaller L0Cs. The cost below and the policy's L0C budget (tiling_policy.cpp) both use it.
constexpr uint64_t kMaxBaseTileM = 128;
constexpr uint64_t kMaxBaseTileN = 256;

// The cost table of docs/timing_model.md (the simulator's aclfaSimGetPipeCosts for the 910B
// family), in cycles and bytes per cycle; a test keeps the two equal. The GM rates are the
// chip's (StepCostsOf).
struct StepCosts {
    double vectorIssueCycles = 12;    // per vector instruction
    double vectorRepeatCycles = 1;    // per 256-B repeat
    double vectorExpRepeatCycles = 2;
    double cubeFractalCycles = 1;     // per 16 x 16 x (32 B / T) MAC step
    double corePortBytesPerCycle = 0;  // one AI Core's GM rate: GetCoreMemBw(L2)
    double mte1BytesPerCycle = 256;
    double fixpipeBytesPerCycle = 128;
    // GM write ports of the 910B family's platform files (docs/chips.md "Memory rates"; the MIX
    // path runs on that family only): GetCoreMemBw answers no write rate.
    double corePortWriteBytesPerCycle = 86;  // l2_write_rate: FixPipe L0C -> GM
    double mte3BytesPerCycle = 64;           // ub_to_l2_rate: MTE3 UB -> GM
    double mte2LatencyCycles = 400;
    double mte3LatencyCycles = 200;
    double fixpipeLatencyCycles = 100;
    double matmulRequestCycles = 400;
    double flagLatencyCycles = 10;
    double crossCoreFlagCycles = 100;  // a CrossCoreSetFlag reaching the waiting core
    double gmBytesPerCycle = 0;       // the chip's GM (L2) rate: AI Cores x GetCoreMemBw(L2)
    double l0aHalfBytes = 32768;      // one of L0A's two 64-KiB / 2 buffers: bounds baseM x baseK
    double l0bHalfBytes = 32768;      // one of L0B's two 64-KiB / 2 buffers: bounds baseN x baseK
    double maxBaseN = kMaxBaseTileN;  // the widest base tile the Matmul tiling picks here
    double maxBaseM = kMaxBaseTileM;  // the tallest base tile
    double l1Bytes = 0;               // the AIC's L1 (GetCoreMemSize(L1)); 0: not known, no B kept resident
};

// How the AIVs see S, the QK job's result: its bytes an element through FixPipe, GM and UB, and
// the softmax's vector repeat-cycles per 64 scores. The forward's S is fp32 and its softmax about
// 7 passes (StepCycles). The int8 forward on A2/A3 (FlashAttentionInt8) has S leave L0C as half
// (FixPipe's dequantization) and softmaxes every tile of whole 128-column repeats in half
// (OnlineSoftmax::ScoresToProbsNarrow, 128 elements a repeat): row max, subtract and scale 0.5
// each, Exp 2 x 0.5, the cast of P to fp32 and its row sum 1 each: 4.5 per 64 scores
// (bench/RESULTS.md "Int8 prefill speed (#31, second step)"; 4.0 when the int8 kernel's FixPipe
// carries the whole scale, which the cost leaves at 4.5: the blocks' order is the same).
struct ScoreForm {
    double bytes = 4;
    double repeatsPer64 = 7;
};
constexpr double kHalfSoftmaxRepeatsPer64 = 4.5;

// Base tiles of a Matmul job C[m, n] fp32 = A[m, k] . B[k, n] as the Matmul tiling picks them:
// baseM = min(m, 128), baseN = min(n, 256), baseK the largest multiple of 16 (at most k) with
// A and B tiles double-buffered in L0A and L0B.
struct BaseTiles {
    double m = 0, n = 0, k = 0;
    uint64_t kTiles = 0;  // K steps of one base tile: ceil(k / baseK)
};
inline BaseTiles BaseTilesOf(double m, double n, double k, double t, const StepCosts &c) {
    auto up16 = [](double v) { return static_cast<double>(static_cast<uint64_t>((v + 15) / 16)) * 16; };
    auto down16 = [](double v) { return static_cast<double>(static_cast<uint64_t>(v / 16)) * 16; };
    BaseTiles b;
    b.m = std::min(up16(m), c.maxBaseM);
    b.n = std::min(up16(n), c.maxBaseN);
    b.k = std::min(up16(k), std::max(16.0, std::min(down16(c.l0aHalfBytes / t / b.m), down16(c.l0bHalfBytes / t / b.n))));
    b.k = std::max(16.0, b.k);
    b.kTiles = static_cast<uint64_t>((k + b.k - 1) / b.k);
    return b;
}

// The L1 buffers of a Matmul job that keeps B resident: all of B's K tiles of stepN N columns
// in one buffer (stepKb = K tiles, depthB1 = stepN x K tiles), which the Matmul API's Norm
// template caches and, iterating ORDER_M, serves to every M block (docs/cann-facts.md, "Matmul
// L1 cache"), so B is read from GM once per job however many M blocks there are; A gets the rest
// in steps of stepKa K tiles (a divisor of the K tiles), double-buffered when that fits. A is
// loaded once per pass of stepN N blocks (ORDER_M runs an M block's stepN N blocks before the
// next M block and resets A only then: asc-devkit scheduler_norm_base.h MoveOnIterateOrderM), so
// with nBlocks > 1 (the job's N base blocks) the plan takes the fewest A passes that fit, each
// with the fewest N blocks (the rest of L1 stays for the other job).
// residentB false: B's K tiles and one A tile do not fit `share` bytes; `bytes` is then the
// least any tiling needs (one A and one B tile).
struct L1Plan {
    uint32_t stepKa = 0, depthA1 = 0, stepKb = 0, depthB1 = 0;
    double bytes = 0;
    bool residentB = false;
    uint32_t stepN = 1;  // N base blocks B's buffer holds (A is loaded once per stepN of them)
};
inline L1Plan PlanL1(uint64_t kTiles, double aTileBytes, double bTileBytes, double share, uint64_t nBlocks = 1) {
    L1Plan plan;
    nBlocks = nBlocks == 0 ? 1 : nBlocks;
    for (uint64_t passes = 1; passes <= nBlocks; ++passes) {
        const uint64_t stepN = (nBlocks + passes - 1) / passes;
        if (passes > 1 && (nBlocks + passes - 2) / (passes - 1) == stepN) continue;  // tried already
        const double b = static_cast<double>(stepN * kTiles) * bTileBytes;
        for (uint64_t stepKa = kTiles; stepKa >= 1; --stepKa) {
            if (kTiles % stepKa != 0) continue;
            for (uint32_t db = 2; db >= 1; --db) {
                const double bytes = b + db * static_cast<double>(stepKa) * aTileBytes;
                if (bytes <= share) {
                    plan.stepKa = static_cast<uint32_t>(stepKa);
                    plan.depthA1 = static_cast<uint32_t>(stepKa) * db;
                    plan.stepKb = static_cast<uint32_t>(kTiles);
                    plan.depthB1 = static_cast<uint32_t>(stepN * kTiles);
                    plan.stepN = static_cast<uint32_t>(stepN);
                    plan.bytes = bytes;
                    plan.residentB = true;
                    return plan;
                }
            }
        }
    }
    plan.bytes = aTileBytes + bTileBytes;
    return plan;
}

// The forward's two jobs per K/V-block step and their L1: QK (A = Q [M, D], B = K^T [D, n])
// plans in half of L1, over as many of its N blocks as fit there (fewer passes over Q), P.V
// (A = P [M, n], B = V [n, D]) in what QK leaves -- QK keeps one N block when its wider plan
// would cost P.V its resident V (op_host KeepBResident's callers decide the same).
struct StepL1 {
    L1Plan qk, pv;
    double Bytes() const { return qk.bytes + pv.bytes; }
};
inline StepL1 PlanStepL1(double m, double n, double d, double t, const StepCosts &c) {
    StepL1 l1;
    const BaseTiles qk = BaseTilesOf(m, n, d, t, c), pv = BaseTilesOf(m, d, n, t, c);
    const uint64_t nBlocks = static_cast<uint64_t>((n + qk.n - 1) / qk.n);
    l1.qk = PlanL1(qk.kTiles, qk.m * qk.k * t, qk.k * qk.n * t, c.l1Bytes / 2, nBlocks);
    l1.pv = PlanL1(pv.kTiles, pv.m * pv.k * t, pv.k * pv.n * t, c.l1Bytes - l1.qk.bytes);
    if (l1.qk.stepN > 1 && !l1.pv.residentB) {
        l1.qk = PlanL1(qk.kTiles, qk.m * qk.k * t, qk.k * qk.n * t, c.l1Bytes / 2);
        l1.pv = PlanL1(pv.kTiles, pv.m * pv.k * t, pv.k * pv.n * t, c.l1Bytes - l1.qk.bytes);
    }
    return l1;
}

// Passes of `base` rows over `rows`.
inline double MatmulPasses(double rows, double base) {
    return static_cast<double>(static_cast<uint64_t>((rows + base - 1) / base));
}

// GM bytes of one Matmul job C[m, n] = A[m, k] . B[k, n]: A once per N pass of stepN x baseN
// columns; B once when it stays resident in L1, else once per M pass of baseM rows (stepM = 1;
// the Matmul Norm template loads its operands so: docs/cann-facts.md "Matmul L1 cache").
inline double MatmulReadBytes(double m, double n, double k, double t, bool residentB, const StepCosts &c,
                              uint32_t stepN = 1) {
    const BaseTiles b = BaseTilesOf(m, n, k, t, c);
    return m * k * t * MatmulPasses(n, b.n * stepN) + k * n * t * (residentB ? 1 : MatmulPasses(m, b.m));
}

// The costs on a chip: its GM rates from the platform's L2 rate per AI Core (docs/timing_model.md:
// GM bandwidth); a chip that reports none (0) leaves GM reads and the chip's rate out of the cost.
// l1Bytes: the AIC's L1, which decides whether the jobs keep B resident (PlanStepL1).
inline StepCosts StepCostsOf(uint64_t l2BytesPerCycle, uint32_t aicNum, uint64_t l1Bytes) {
    StepCosts c;
    c.l1Bytes = static_cast<double>(l1Bytes);
    const double unbounded = std::numeric_limits<double>::infinity();
    c.corePortBytesPerCycle = l2BytesPerCycle == 0 ? unbounded : static_cast<double>(l2BytesPerCycle);
    c.gmBytesPerCycle = l2BytesPerCycle == 0 ? unbounded : static_cast<double>(l2BytesPerCycle) * aicNum;
    return c;
}

// Cycles of one Matmul job C[m, n] fp32 = A[m, k] . B[k, n] reading `readBytes` from GM (cBytes:
// C's bytes an element through FixPipe, 2 when it leaves L0C as half).
inline double MatmulJobCycles(double m, double n, double k, double t, double readBytes, const StepCosts &c,
                              double cBytes = 4) {
    auto up = [](double v, double a) { return static_cast<double>(static_cast<uint64_t>((v + a - 1) / a)); };
    const double c0 = 32.0 / t;  // K elements per fractal row
    const double fractals = up(m, 16) * up(n, 16) * up(k, c0);
    // Base tiles as the Matmul tiling chooses them (BaseTilesOf). Every (M, N) base tile moves
    // its A and B tiles to L0, so A goes once per N block and B once per M block.
    const BaseTiles base = BaseTilesOf(m, n, k, t, c);
    const double mBlocks = up(m, base.m), nBlocks = up(n, base.n), tiles = mBlocks * nBlocks * base.kTiles;
    const double l0Bytes = t * up(m, 16) * 16 * k * nBlocks + t * k * up(n, 16) * 16 * mBlocks;
    const double stages[4] = {readBytes / c.corePortBytesPerCycle, l0Bytes / c.mte1BytesPerCycle,
                              fractals * c.cubeFractalCycles,
                              m * n * cBytes / std::min(c.fixpipeBytesPerCycle, c.corePortWriteBytesPerCycle)};
    double sum = 0, peak = 0;
    for (double s : stages) {
        sum += s;
        peak = std::max(peak, s);
    }
    return c.mte2LatencyCycles + c.fixpipeLatencyCycles + (sum + (tiles - 1) * peak) / tiles;
}

// GM bytes one group (AIC + 2 AIV) moves per K/V-block step: the AIC's operand reads
// (MatmulReadBytes: K and V once per M pass of the item's M rows) and result writes, the AIVs'
// S and O' reads and P writes. colShare: the part of the block's n keys the cube computes (a
// causal item's last block stops at its last visible key, and the AIVs move S and P that wide).
// form: S's bytes (ScoreForm).
inline double GroupStepBytes(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                             const StepCosts &c, double colShare = 1, const ScoreForm &form = ScoreForm()) {
    const double m = blockM, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const StepL1 l1 = PlanStepL1(m, n, d, t, c);
    const double cube = MatmulReadBytes(m, n, d, t, l1.qk.residentB, c, l1.qk.stepN) + m * n * form.bytes +
                        MatmulReadBytes(m, d, n, t, l1.pv.residentB, c);
    // The AIVs move S and P only as wide as the cube computed them (rounded up to 16 columns).
    return cube * colShare + m * d * 4 + (m * n * form.bytes + m * n * t) * colShare + m * d * 4;
}

// Modeled cycles of one K/V-block step of a blockM x blockN item (both AIVs) on its own core; the
// chip's GM rate bounds the whole launch instead (ModeledKernelCycles). chunkRows: the score rows
// an AIV moves through UB at a time (the policy's c; 0 = all r rows at once). form: S's bytes and
// the softmax's repeat-cycles (ScoreForm).
inline double StepCycles(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                         const StepCosts &c, uint32_t chunkRows = 0, const ScoreForm &form = ScoreForm()) {
    const double m = blockM, r = blockM / 2.0, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const double port = c.corePortBytesPerCycle;
    const StepL1 l1 = PlanStepL1(m, n, d, t, c);
    const double qk =
        MatmulJobCycles(m, n, d, t, MatmulReadBytes(m, n, d, t, l1.qk.residentB, c, l1.qk.stepN), c, form.bytes);
    const double pv = MatmulJobCycles(m, d, n, t, MatmulReadBytes(m, d, n, t, l1.pv.residentB, c), c);
    // An AIV's rows go through UB in chunks of ch rows. Per chunk, softmax over [ch, n] fp32: ~7
    // passes of ch*n/64 repeats (max, scale-and-subtract in one FusedMulAdd, exp x2, sum, cast,
    // and about one more for the blocks the mask crosses).
    // S of chunk k + 1 moves GM -> UB and P of chunk k - 1 UB -> GM while chunk k is on the vector
    // unit (two S and two P buffers), so the step's loads, vector work and stores overlap and only
    // the first load and the last store add to the busiest of them. Per step: rescale-accumulate
    // over [r, d], 1 FusedMulAdd pass.
    const double ch = chunkRows == 0 ? r : std::min<double>(chunkRows, r);
    const double chunks = static_cast<double>(static_cast<uint64_t>((r + ch - 1) / ch));
    // Instructions per chunk: ~16 fixed; the row max's subtraction one per 64 columns, or one per row
    // when the chunk has fewer rows (ApplyRowsByRow); the two row reductions one per 64 columns,
    // or 2 each for whole 512-column groups (ReduceRowsWhole).
    const bool whole = static_cast<uint64_t>(n) % 512 == 0 && n <= 4096;
    const double perChunk = 19 + std::min(n / 64, ch) + 2 * (whole ? 2 : n / 64);
    const double vector = chunks * perChunk * c.vectorIssueCycles + form.repeatsPer64 * r * n / 64 * c.vectorRepeatCycles;
    const double loads = chunks * c.mte2LatencyCycles + r * n * form.bytes / port;
    const double stores = chunks * c.mte3LatencyCycles + r * n * t / c.mte3BytesPerCycle;
    const double firstLoad = c.mte2LatencyCycles + ch * n * form.bytes / port;
    const double lastStore = c.mte3LatencyCycles + ch * n * t / c.mte3BytesPerCycle;
    const double accumulate = (3 + d / 64) * c.vectorIssueCycles + r * d / 64 * c.vectorRepeatCycles;
    const double chain = firstLoad + std::max({vector, loads - firstLoad, stores - lastStore}) + lastStore +
                         (c.mte2LatencyCycles + r * d * 4 / port) + accumulate + 2 * c.flagLatencyCycles +
                         2 * c.crossCoreFlagCycles;
    const double cube = qk + pv;
    return std::max(cube, chain);
}

// Modeled cycles a work item adds to its steps: the pipeline's fill and drain. Its first S is
// waited for with nothing to overlap (request + QK), and its last P.V is waited for after the
// last softmax (request + P.V + a meeting + O' from GM), on the vector unit of each AIV.
inline double ItemFillCycles(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                             const StepCosts &c, const ScoreForm &form = ScoreForm()) {
    const double m = blockM, r = blockM / 2.0, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const StepL1 l1 = PlanStepL1(m, n, d, t, c);
    const double qk =
        MatmulJobCycles(m, n, d, t, MatmulReadBytes(m, n, d, t, l1.qk.residentB, c, l1.qk.stepN), c, form.bytes);
    const double pv = MatmulJobCycles(m, d, n, t, MatmulReadBytes(m, d, n, t, l1.pv.residentB, c), c);
    return 2 * c.matmulRequestCycles + qk + pv + c.crossCoreFlagCycles + c.mte2LatencyCycles +
           r * d * 4 / c.corePortBytesPerCycle;
}

}  // namespace fa_policy
