// block_cost.h -- the tiling policy's analytic cost of a (blockM, blockN) choice on the MIX path
// (AIC + 2 AIV): a closed form of the pipeline timing model (docs/timing_model.md) for the
// forward kernel's per-K/V-block step (op_kernel/flash_attention_kernel.h), cheap enough to
// evaluate for every candidate inside TilingFunc. Pure: no CANN include, no globals.
//
// The step of one work item over one K/V block of n columns, for each of the two AIVs with
// r = blockM / 2 rows (T = bytes of the input dtype, D = head dim):
//   AIC: four Matmul jobs run one at a time on the shared cube -- per AIV S = Q.K^T [r, n, D]
//        and O' = P.V [r, D, n]; a job costs the MTE2 and FixPipe latencies plus its MTE2 /
//        MTE1 / cube / FixPipe stages pipelined over its base tiles.
//   AIV: the chain the kernel waits on: S from GM -> the softmax vector passes -> P to GM ->
//        the synchronous P.V request -> O' from GM, plus on average half a cube round of the
//        other AIV's jobs queued ahead of its P.V request.
//   step = max(cube busy, AIV chain, the group's GM bytes at its share of the chip's GM rate).
// Kernel time ~ (K/V-block steps of the busiest core) x step. Checked against the full event
// model on a grid by tests/test_block_cost.py; its error is recorded in bench/RESULTS.md
// ("Blocks chosen by modeled time").
#pragma once

#include <algorithm>
#include <cstdint>

namespace fa_policy {

// The cost table of docs/timing_model.md (the simulator's aclfaSimGetPipeCosts for the 910B
// family), in cycles and bytes per cycle; a test keeps the two equal.
struct StepCosts {
    double vectorIssueCycles = 12;    // per vector instruction
    double vectorRepeatCycles = 1;    // per 256-B repeat
    double vectorExpRepeatCycles = 2;
    double cubeFractalCycles = 1;     // per 16 x 16 x (32 B / T) MAC step
    double corePortBytesPerCycle = 128;
    double mte1BytesPerCycle = 256;
    double fixpipeBytesPerCycle = 128;
    double mte2LatencyCycles = 400;
    double mte3LatencyCycles = 200;
    double fixpipeLatencyCycles = 100;
    double matmulRequestCycles = 400;
    double flagLatencyCycles = 10;
    double gmBytesPerCycle = 4000e9 / 1800e6;  // chip GM (L2) rate; 910B4: half
    double baseTiles = 2;             // Matmul base tiles a job is pipelined over (typical)
};

// Cycles of one Matmul job C[m, n] fp32 = A[m, k] . B[k, n] reading `readBytes` from GM.
inline double MatmulJobCycles(double m, double n, double k, double t, double readBytes, const StepCosts &c) {
    auto up = [](double v, double a) { return static_cast<double>(static_cast<uint64_t>((v + a - 1) / a)); };
    const double c0 = 32.0 / t;  // K elements per fractal row
    const double fractals = up(m, 16) * up(n, 16) * up(k, c0);
    const double l0Bytes = t * up(m, 16) * 16 * k + t * k * up(n, 16) * 16;
    const double stages[4] = {readBytes / c.corePortBytesPerCycle, l0Bytes / c.mte1BytesPerCycle,
                              fractals * c.cubeFractalCycles, m * n * 4 / c.fixpipeBytesPerCycle};
    double sum = 0, peak = 0;
    for (double s : stages) {
        sum += s;
        peak = std::max(peak, s);
    }
    return c.mte2LatencyCycles + c.fixpipeLatencyCycles + (sum + (c.baseTiles - 1) * peak) / c.baseTiles;
}

// Modeled cycles of one K/V-block step of a blockM x blockN item (both AIVs).
inline double StepCycles(uint32_t blockM, uint32_t blockN, uint64_t headDim, uint32_t dtypeBytes, uint32_t groups,
                         const StepCosts &c) {
    const double r = blockM / 2.0, n = blockN, d = static_cast<double>(headDim), t = dtypeBytes;
    const double port = c.corePortBytesPerCycle;
    const double qk = MatmulJobCycles(r, n, d, t, (r + n) * d * t, c);
    const double pv = MatmulJobCycles(r, d, n, t, r * n * t + n * d * t, c);
    // Softmax over [r, n] fp32: ~8 passes of r*n/64 repeats (scale, max folds, subtract, exp x2,
    // sum folds, cast) and ~16 + 3 n/64 instructions; rescale-accumulate over [r, d]: 2 passes.
    const double repeats = (8 * r * n + 2 * r * d) / 64;
    const double instructions = 16 + 3 * (n / 64) + d / 64;
    const double vector = instructions * c.vectorIssueCycles + repeats * c.vectorRepeatCycles;
    const double chain = (c.mte2LatencyCycles + r * n * 4 / port) + vector + (c.mte3LatencyCycles + r * n * t / port) +
                         c.matmulRequestCycles + pv + (c.mte2LatencyCycles + r * d * 4 / port) +
                         2 * c.flagLatencyCycles;
    const double cube = 2 * (qk + pv);
    const double step = std::max(cube, chain + 0.5 * (qk + pv));
    // GM bytes of the group per step: the AIC's operand reads and result writes, the AIVs' S and
    // O' reads and P writes.
    const double groupBytes = 2 * ((r + n) * d * t + r * n * 4 + (r * n + n * d) * t + r * d * 4) +
                              2 * (r * n * 4 + r * d * 4 + r * n * t);
    return std::max(step, groups * groupBytes / c.gmBytesPerCycle);
}

}  // namespace fa_policy
