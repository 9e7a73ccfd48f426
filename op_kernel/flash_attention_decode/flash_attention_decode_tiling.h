// flash_attention_decode_tiling.h -- the tiling data that op_host fills and op_kernel reads for
// FlashAttentionDecode (plain struct style, as flash_attention_tiling.h).
//
// The problem: query [B, Sq, N, D] (BSND), a paged K/V cache key/value [numBlocks, blockSize,
// Nkv, D], block_table [B, maxBlocksPerSeq] int32 (key j of sequence b lives in cache block
// block_table[b][j / blockSize], row j % blockSize), actual_seq_lengths_kv [B] int32 (the keys
// each sequence has; never read past). A contiguous cache [B, Smax, Nkv, D] is the paged one
// with blockSize = Smax and block_table[b] = {b}. Outputs attention_out [B, Sq, N, D] and
// softmax_lse [B, N, Sq] fp32.
//
// Groups are (b, kv head h, row group rg) triples, g = (b * Nkv + h) * rowGroups + rg. A kv
// head's query rows are its groupSize query heads times the Sq tokens; a row group holds
// rowGroupHeads of those heads (from hg * rowGroupHeads, hg = rg / tokenGroups) times
// rowGroupTokens tokens (from tg * rowGroupTokens, tg = rg % tokenGroups, tokenGroups = Sq /
// rowGroupTokens), ordered r = gq * rowGroupTokens + sl (gq = head within the row group, sl =
// token within it): the M dimension of every matmul (GQA packing), so the group's K/V is read
// once per step and row group, not once per query head. rowGroups = 1 (the whole kv head)
// whenever groupSize * Sq <= 255 rows.
//
// Work: the keys a group can see, [lo, hi) (hi = min(L, L + nextTokens), lo = max(0, L - Sq -
// preTokens) with L = actual_seq_lengths_kv[b]), are cut into units: key chunks of at most
// blockN keys that never cross a cache block (chunk c of cache block p holds keys
// p * blockSize + [c * blockN, min((c + 1) * blockN, blockSize))). Units of all groups, in
// group order, are split into numParts = 2 * usedCoreNum equal ranges, one per AIV (part a =
// AIV block index a, units [a * U / numParts, (a + 1) * U / numParts)); the kernel computes
// this from the lengths at run time (the tiling does not see them). With fewer units than
// parts (U < numParts) a part holds at most one unit and some hold none: a group's pieces are
// then its units, and parts without units take no piece. With splitKv == 0 a
// group is never cut: it runs whole on the part owning its first unit.
// An explicit split count S = splitsPerGroup >= 2 (num_splits of the call) replaces the equal
// ranges: each group's n units are cut into p = min(S, n) pieces of equal units (piece j:
// units [j * n / p, (j + 1) * n / p)), and the pieces of all groups, numbered k = 0, 1, ... in
// group then piece order, go round-robin to the parts (piece k on part k % numParts).
//
// A part's share of a group is a piece. A group with one piece writes its output directly.
// A group with P >= 2 pieces: piece j writes its normalized O and its LSE into partial slot
// slotBase(g) + j (slotBase counts the pieces of the multi-piece groups before g); after
// SyncAll, AIV (g % numParts) merges the P partials weighted by exp(LSE_j - max LSE) in
// order j = 0 .. P - 1 (deterministic).
//
// Per-AIV UB (m = rows = groupSize * Sq, n = blockN, d = headDim, T 2 bytes), InitBuffer order:
//   scoreQue   VECIN   m*n*4             S tile fp32; in the combine: nothing
//   probQue    VECOUT  m*n*2             P tile T
//   pvQue      VECIN   m*d*4             P.V of a chunk fp32; in the combine: one partial O
//   outQue     VECOUT  m*d*2             O rows T; packing Q rows
//   accBuf     TBuf    m*d*4             O accumulator fp32
//   statBuf    TBuf    7*align32(m*4)    row max (2 slots), row sum, block max, block sum, alpha (2 slots)
//   lseQue     VECOUT  align32(m*4)      LSE rows fp32
//   foldBuf    TBuf    m*64*4            row reductions
//   brcbBuf    TBuf    align8(m)*8*4     Brcb of a per-row vector
//   modBuf     TBuf    3*n*4 + 2*align32(m*4)  V2 with ALiBi or sinks: key ramp, distance and bias rows,
//                                        the rows' slopes, the rows' sinks
//   V3 (int8 cache), r = dequantRows:
//   kvInQue    VECIN   2 x r*d           int8 cache rows
//   kvOutQue   VECOUT  2 x r*d*2         the rows as T
//   kvWideBuf  TBuf    r*d*4             bf16 only: int8 -> half -> fp32 -> bf16
//   scaleBuf   TBuf    d*4 + n*4         the kv head's K channel scales, the chunk's V token scales
// GM workspace: per AIV (after the system workspace), each region 512-B aligned:
//   q      [m][d] T         the group's query rows, packed (GQA rows are not one stride apart)
//   score  [2][m][n] fp32   double buffer
//   prob   [2][m][n] T      double buffer (chunk parity)
//   pv     [2][m][d] fp32   double buffer (chunk parity)
//   kDeq   [2][n][d] T      V3: the chunk's K as T (chunk parity)
//   vDeq   [2][n][d] T      V3: the chunk's V as T (chunk parity)
// then, after the 2 * usedCoreNum slices, shared by all AIVs:
//   partialO    [maxSlots][m][d] fp32
//   partialLse  [maxSlots][lseStride] fp32
#pragma once

#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"  // TCubeTiling

// Tiling key bits: bit 0 dtype (0 float16, 1 bfloat16); bit 1 splitKv; bit 2 int8 cache (V3).
constexpr uint64_t FAD_KEY_BF16 = 1u << 0;
constexpr uint64_t FAD_KEY_SPLIT = 1u << 1;
constexpr uint64_t FAD_KEY_INT8 = 1u << 2;  // FlashAttentionDecodeV3: int8 key/value cache

struct FlashAttentionDecodeTilingData {
    // ---- problem ----
    uint32_t batch;            // B
    uint32_t numHeads;         // N
    uint32_t numKvHeads;       // Nkv
    uint32_t groupSize;        // N / Nkv
    uint32_t seqQ;             // Sq, query tokens per sequence
    uint32_t headDim;          // D, multiple of 16, <= 256
    uint32_t numBlocks;        // cache blocks in key/value
    uint32_t blockSize;        // keys per cache block
    uint32_t maxBlocksPerSeq;  // block_table row length
    int32_t preTokens;         // keys visible before a row's diagonal (clamped to int32)
    int32_t nextTokens;        // keys visible after it; 0 = causal
    float scaleValue;          // multiplies Q.K^T
    // ---- blocks ----
    uint32_t rows;             // m = groupSize * seqQ
    uint32_t blockN;           // keys per chunk, multiple of 16
    uint32_t chunksPerBlock;   // ceil(blockSize / blockN)
    uint32_t splitKv;          // 1: groups may be cut between parts (SyncAll + combine)
    // ---- work ----
    uint32_t usedCoreNum;      // block dim (AIC cores); numParts = 2 * usedCoreNum
    uint32_t numParts;
    uint32_t splitsPerGroup;   // S >= 2: pieces per group (round-robin); 0: equal ranges or whole
    uint32_t maxSlots;         // partial slots: numGroups + numParts (numGroups * S when S >= 2)
    uint32_t lseStride;        // floats per partial LSE slot: rows rounded up to 8
    // ---- GM workspace, bytes ----
    uint64_t wsQOffset;        // per AIV slice: [m][d] T
    uint64_t wsScoreOffset;    // [2][m][n] fp32
    uint64_t wsProbOffset;     // [2][m][n] T
    uint64_t wsPvOffset;       // [2][m][d] fp32
    uint64_t wsBytesPerAiv;    // slice size; AIV a's slice starts at a * wsBytesPerAiv
    uint64_t wsPartialOOffset;    // from the user workspace start
    uint64_t wsPartialLseOffset;
    // ---- matmul tilings ----
    TCubeTiling qkTiling;      // S = Q.K^T: M = rows, N = blockN, K = headDim; B transposed
    TCubeTiling pvTiling;      // O = P.V:   M = rows, N = headDim, K = blockN
    // ---- row groups (more than 255 query rows per kv head) ----
    uint32_t rowGroupHeads;    // query heads per row group (divides groupSize)
    uint32_t rowGroupTokens;   // query tokens per row group (divides seqQ; < seqQ only with 1 head)
    uint32_t rowGroups;        // row groups per kv head; rows = rowGroupHeads * rowGroupTokens
    // ---- FlashAttentionDecodeV2's score modifiers (0 in FlashAttentionDecode) ----
    float softcap;             // > 0: S = softcap * tanh(scale * Q.K^T / softcap)
    uint32_t hasAlibi;         // 1: alibi_slopes [B, N] fp32, S -= slope[b, h] * |s + L - Sq - j|
    uint32_t hasSinks;         // 1: sinks [N] fp32 join each row's softmax denominator, once
    uint32_t hasLeftpad;       // 1: cache_leftpad [B] int32, keys [0, leftpad[b]) of sequence b invisible
    // ---- FlashAttentionDecodeV3's int8 cache (0 otherwise; docs/int8.md "Int8 KV cache (decode)") ----
    uint32_t kvInt8;           // 1: key/value int8, key_antiquant_scale [Nkv, D] (per channel),
                               //    value_antiquant_scale [numBlocks, Nkv, blockSize] (per token) fp32;
                               //    a unit is then keys [u * blockN, (u + 1) * blockN) of the sequence,
                               //    across cache blocks (chunksPerBlock unused)
    uint32_t dequantRows;      // keys dequantized per UB pass (<= blockN)
    uint64_t wsKDeqOffset;     // per AIV slice: [2][blockN][d] T, dequantized K chunks (chunk parity)
    uint64_t wsVDeqOffset;     // per AIV slice: [2][blockN][d] T, V chunks as T (scale folded into P)
};
