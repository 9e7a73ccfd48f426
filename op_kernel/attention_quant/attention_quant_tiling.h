// attention_quant_tiling.h -- the tiling data of the AttentionQuant op (op_host/attention_quant/),
// filled by its TilingFunc and read by its kernel (attention_quant_kernel.h).
#pragma once

#include <cstdint>

struct AttentionQuantTilingData {
    uint32_t batch;         // B
    uint32_t numHeads;      // N (of x: query heads for Q, kv heads for K)
    uint32_t seq;           // S
    uint32_t headDim;       // D, a multiple of 16
    uint32_t layout;        // FA_LAYOUT_BNSD (0), or BSND / BSH (1, 2: rows numHeads * D elements apart)
    uint32_t blockSize;     // rows per scale (the forward's block_m for Q, block_n for K)
    uint32_t numBlocks;     // ceil(S / blockSize): scale is [B, N, numBlocks] fp32
    uint32_t smooth;        // 1: subtract each head's per-channel mean over S first (K)
    uint32_t unitsPerHead;  // work units of one head: numBlocks (no smoothing), 1 (smoothing: the mean spans S)
    uint32_t usedCoreNum;   // AIVs (A2/A3 AIV-only launch) that get work units
    uint32_t unitsPerCore;  // contiguous work units per AIV: core c takes [c * unitsPerCore, ...)
    uint32_t chunkRows;     // rows of a block in UB at a time (<= blockSize): a block wider than UB holds is
                            // read twice, once for its max |x'| and once to quantize it
    uint32_t foldPeaks;     // 1 (smooth, blocks wider than a chunk, the head's column bounds fit UB): the
                            // mean pass also keeps each block's per-channel max and -min, from which
                            // max |x'| follows exactly, so a block is read once more, to quantize it
};
