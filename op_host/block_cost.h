// block_cost.h -- the tiling policy's analytic cost of a (blockM, blockN) choice on the MIX path
// (AIC + 2 AIV): a closed form of the pipeline timing model (docs/timing_model.md) for the
// forward kernel's per-K/V-block step (op_kernel/flash_attention_kernel.h), cheap enough to
// evaluate for every candidate inside TilingFunc. Pure: no CANN include, no globals.
//
// The step of one work item of M = blockM rows over one K/V block of n columns (T = bytes of the
// input dtype, D = head dim); each of the two AIVs softmaxes r = M / 2 of the rows:
//   AIC: two Matmul jobs for all M rows, one at a time (sub-block 0 issues both) -- S = Q.K^T
//        [M, n, D] and O' = P.V [M, D, n]; a job costs the MTE2 and FixPipe latencies plus its
//        MTE2 / MTE1 / cube / FixPipe stages pipelined over its base tiles.
//   AIV: the chain of one step on the vector unit: S (its r rows) from GM -> the softmax vector
//        passes -> P to GM -> O' of the previous block from GM and the rescale-accumulate, with
//        the pair's two meetings (mode-1 cross-core flags). The cube's jobs are off this chain:
//        P_{j-1}.V_{j-1} and S_{j+1} run while block j is softmaxed, so the AIV waits for the
//        cube only when the cube is the busier of the two.
//   step = max(cube busy, AIV chain); each work item adds the pipeline's fill and drain.
// Kernel time ~ max((K/V-block steps of the busiest core) x step + its items x fill,
//                   all groups' GM bytes at the chip's GM rate). Checked against the full event
// model on a grid by tests/test_block_cost.py; its error is recorded in bench/RESULTS.md
// ("Blocks chosen by modeled time").
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace fa_policy {

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
    double l0bHalfBytes = 32768;      // one of L0B's two 64-KiB / 2 buffers: bounds baseN x baseK
    double maxBaseN = 256;            // the widest base tile the Matmul tiling picks here
    double maxBaseM = 128;            // the tallest base tile (128 x 256 fp32 fills A2's L0C)
};

// Rows of the M side one operand load of B serves: B is loaded once per pass of baseM * stepM
// rows, A once per pass of baseN * stepN columns (the simulator's Matmul counts its GM reads
// so); the Matmul tiling here keeps stepM = stepN = 1.
inline double MatmulPasses(double rows, double base) {
    return static_cast<double>(static_cast<uint64_t>((rows + base - 1) / base));
}

// GM bytes of one Matmul job C[m, n] = A[m, k] . B[k, n]: A once per N pass, B once per M pass.
inline double MatmulReadBytes(double m, double n, double k, double t, const StepCosts &c) {
    const double baseN = std::min(static_cast<double>(static_cast<uint64_t>((n + 15) / 16)) * 16, c.maxBaseN);
    return m * k * t * MatmulPasses(n, baseN) + k * n * t * MatmulPasses(m, c.maxBaseM);
}

// The costs on a chip: its GM rates from the platform's L2 rate per AI Core (docs/timing_model.md:
// GM bandwidth); a chip that reports none (0) leaves GM reads and the chip's rate out of the cost.
inline StepCosts StepCostsOf(uint64_t l2BytesPerCycle, uint32_t aicNum) {
    StepCosts c;
    const double unbounded = std::numeric_limits<double>::infinity();
    c.corePortBytesPerCycle = l2BytesPerCycle == 0 ? unbounded : static_cast<double>(l2BytesPerCycle);
    c.gmBytesPerCycle = l2BytesPerCycle == 0 ? unbounded : static_cast<double>(l2BytesPerCycle) * aicNum;
    return c;
}

// Cycles of one Matmul job C[m, n] fp32 = A[m, k] . B[k, n] reading `readBytes` from GM.
inline double MatmulJobCycles(double m, double n, double k, double t, double readBytes, const StepCosts &c) {
    auto up = [](double v, double a) { return static_cast<double>(static_cast<uint64_t>((v + a - 1) / a)); };
    const double c0 = 32.0 / t;  // K elements per fractal row
    const double fractals = up(m, 16) * up(n, 16) * up(k, c0);
    // Base tiles as the Matmul tiling chooses them for these shapes: baseM = min(m, 128),
    // baseN = min(n, 256), baseK the largest multiple of 16 with baseN x baseK in half of L0B.
    // Every (M, N) base tile moves its A and B tiles to L0, so A goes once per N block and B
    // once per M block.
    const double baseN = std::min(up(n, 16) * 16, c.maxBaseN);
    const double baseK = std::min(up(k, 16) * 16, std::max(16.0, 16 * static_cast<double>(static_cast<uint64_t>(
                                                                    c.l0bHalfBytes / t / baseN / 16))));
    const double mBlocks = up(m, c.maxBaseM), nBlocks = up(n, baseN), tiles = mBlocks * nBlocks * up(k, baseK);
    const double l0Bytes = t * up(m, 16) * 16 * k * nBlocks + t * k * up(n, 16) * 16 * mBlocks;
    const double stages[4] = {readBytes / c.corePortBytesPerCycle, l0Bytes / c.mte1BytesPerCycle,
                              fractals * c.cubeFractalCycles,
                              m * n * 4 / std::min(c.fixpipeBytesPerCycle, c.corePortWriteBytesPerCycle)};
    double sum = 0, peak = 0;
    for (double s : stages) {
        sum += s;
        peak = std::max(peak, s);
    }
    return c.mte2LatencyCycles + c.fixpipeLatencyCycles + (sum + (tiles - 1) * peak) / tiles;
}

// GM bytes one group (AIC + 2 AIV) moves per K/V-block step: the AIC's operand reads
// (MatmulReadBytes: K and V once per M pass of the item's M rows) and result writes, the AIVs'
// S and O' reads and P writes.
inline double GroupStepBytes(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                             const StepCosts &c) {
    const double m = blockM, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    return (MatmulReadBytes(m, n, d, t, c) + m * n * 4 + MatmulReadBytes(m, d, n, t, c) + m * d * 4) +
           (m * n * 4 + m * d * 4 + m * n * t);
}

// Modeled cycles of one K/V-block step of a blockM x blockN item (both AIVs) on its own core; the
// chip's GM rate bounds the whole launch instead (ModeledKernelCycles).
inline double StepCycles(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                         const StepCosts &c) {
    const double m = blockM, r = blockM / 2.0, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const double port = c.corePortBytesPerCycle;
    const double qk = MatmulJobCycles(m, n, d, t, MatmulReadBytes(m, n, d, t, c), c);
    const double pv = MatmulJobCycles(m, d, n, t, MatmulReadBytes(m, d, n, t, c), c);
    // Softmax over [r, n] fp32: ~8 passes of r*n/64 repeats (scale, max folds, subtract, exp x2,
    // sum folds, cast) and ~16 + 3 n/64 instructions; rescale-accumulate over [r, d]: 2 passes.
    const double repeats = (8 * r * n + 2 * r * d) / 64;
    const double instructions = 16 + 3 * (n / 64) + d / 64;
    const double vector = instructions * c.vectorIssueCycles + repeats * c.vectorRepeatCycles;
    const double chain = (c.mte2LatencyCycles + r * n * 4 / port) + vector +
                         (c.mte3LatencyCycles + r * n * t / c.mte3BytesPerCycle) +
                         (c.mte2LatencyCycles + r * d * 4 / port) + 2 * c.flagLatencyCycles +
                         2 * c.crossCoreFlagCycles;
    const double cube = qk + pv;
    return std::max(cube, chain);
}

// Modeled cycles a work item adds to its steps: the pipeline's fill and drain. Its first S is
// waited for with nothing to overlap (request + QK), and its last P.V is waited for after the
// last softmax (request + P.V + a meeting + O' from GM), on the vector unit of each AIV.
inline double ItemFillCycles(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes,
                             const StepCosts &c) {
    const double m = blockM, r = blockM / 2.0, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const double qk = MatmulJobCycles(m, n, d, t, MatmulReadBytes(m, n, d, t, c), c);
    const double pv = MatmulJobCycles(m, d, n, t, MatmulReadBytes(m, d, n, t, c), c);
    return 2 * c.matmulRequestCycles + qk + pv + c.crossCoreFlagCycles + c.mte2LatencyCycles +
           r * d * 4 / c.corePortBytesPerCycle;
}

}  // namespace fa_policy
