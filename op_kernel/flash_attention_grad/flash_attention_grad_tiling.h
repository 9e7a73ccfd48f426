// flash_attention_grad_tiling.h -- the tiling data that op_host fills and op_kernel reads for
// the FlashAttentionGrad op (REGISTER_TILING_DEFAULT(FlashAttentionGradTilingData)).
// Included by op_host, op_kernel, the simulator and (as a cffi declaration) the Python driver.
#pragma once

#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"  // TCubeTiling

// Most vector cores any supported chip has (64 AIC x 2 AIV); bounds unitStart.
constexpr uint32_t FAG_MAX_AIV = 128;

// Tiling key bits: bit 0 dtype (0 float16, 1 bfloat16), bit 1 band (a causal or windowed
// problem: some key blocks are skipped or masked), bits 2-3 layout (FA_LAYOUT_* codes of
// flash_attention_tiling.h; TND runs BSND's path with per-sequence bases), bit 4 deterministic.
constexpr uint64_t FAG_KEY_BF16 = 1u << 0;
constexpr uint64_t FAG_KEY_CAUSAL = 1u << 1;
constexpr uint32_t FAG_KEY_LAYOUT_SHIFT = 2;
constexpr uint64_t FAG_KEY_DETERMINISTIC = 1u << 4;

// Visibility (the band): in a sequence of Sq queries and Skv keys, with diag = Skv - Sq, key k
// is visible to query row i iff  i + diag - preTokens <= k <= i + diag + nextTokens
// (causal = (unbounded, 0); 2147483647 = unbounded; preTokens + nextTokens >= 0).
//
// Sequences: batch b of a dense layout (all of length seqQ / seqKv), or, with varlen = 1
// (layout TND, q [Tq, N, D], k/v [Tkv, Nkv, D]), sequence b of actual_seq_qlen/kvlen (cumulative
// end offsets, int64, read by the kernel) whose lengths are at most seqQ / seqKv.
//
// Work: a unit is one K/V block of one kv head of one sequence,
//   unit = (b * numKvHeads + h) * numKvBlocks + j,
// and owns dK, dV of its blockN key rows: it walks the query heads of h's group and, for each,
// the query blocks whose band rows see block j. (Varlen: blocks past the sequence's own Skv
// are empty units.) Vector core a (block
// index a of the MIX 1:2 launch's AIVs) runs units [unitStart[a], unitStart[a + 1]), a
// contiguous range that may span kv heads; ranges are balanced by the query blocks walked.
//
// dQ gathers the contributions of every unit of a kv head into one [B, N, Sq, D] fp32
// accumulator (zeroed before a first SyncAll):
//   deterministic = 1: query block i of head (b, n) receives them in descending K/V block j,
//     handed from block j+1 to block j by IBSet/IBWait with eventID (b * N + n) * numQBlocks + i
//     and blockIdx the AIV of block j (numDqFlags = aivNum x B * N * numQBlocks 32-B int32
//     flags, zeroed with the accumulator): the sum's order depends on j alone, so the result is
//     the same on every run, host thread count and core count (flash_attention_grad_kernel.h
//     argues why the waits cannot deadlock).
//   deterministic = 0: every contribution is added with SetAtomicAdd<float>; the order of the
//     adds, and so the last bits, vary between runs.
//
// Per-AIV UB (m = blockM, n = blockN, T = input dtype, 2 bytes), in InitBuffer order:
//   scoreBuf  m*n*4      S, then P (fp32); row phases: [rows, D] fp32 tiles
//   gradBuf   m*n*4      dP, then dS (fp32); row phases: a second [rows, D] fp32 tile
//   probBuf   m*n*2      P in T for the cube; row phases: [rows, D] T tiles
//   dsBuf     m*n*2      dS * scale in T for the cube; row phases: a second T tile
//   lseBuf    align32(m*4)   LSE of the block's rows (clamped to >= -FLT_MAX), fp32
//   deltaBuf  align32(m*4)   D = rowsum(dO * O) of the block's rows, fp32
//   brcbBuf   m*8*4      Brcb of a per-row vector
//   foldBuf   m*64*4     row reductions: a tile folded to 64 columns
//   flagBuf   32         IBSet/IBWait's UB scratch (int32 x 8)
//   maskBuf   MaskTiles::UbBytes(maskRows, n)   with an attention mask only (attention_mask.h)
//   keepBuf   PhiloxKeepMask::UbBytes(philoxLanes)   with dropout only (philox_dropout.h)
// Row phases (the D pre-pass, the dQ fold, the dK/dV write-out) take rowChunk rows at a time,
// rowChunk * D <= m * n and rowChunk <= m.
//
// Attention mask (hasMask = 1; FlashAttentionGradV2 only, dense layouts): uint8 [maskB, maskN,
// maskQ, Skv], 1 = masked out, broadcast over dims of size 1. Before the first SyncAll every AIV
// classifies its share of the summary rows (attention_mask.h, blocks of blockM x blockN, so one
// summary byte per step) into the workspace at wsMaskSummaryOffset; a BLOCK_MASKED step is
// skipped (no load, no matmul; in deterministic mode it still passes the dQ hand-over on), a
// BLOCK_MIXED step adds the mask's bias to its scores before P is recomputed.
//
// Dropout (dropout = 1): the keep mask Z of the forward, regenerated from the same Philox key
// (philox_dropout.h: seed, offset, head b * N + n, positions in the sequence) for every step's
// tile: dV += (P o Z / keep_prob)^T dO, dP = (dO V^T) o Z / keep_prob, dS = P o (dP - D).
struct FlashAttentionGradTilingData {
    // ---- problem ----
    uint32_t batch;          // B (varlen: sequences)
    uint32_t numHeads;       // N
    uint32_t numKvHeads;     // Nkv; numHeads % numKvHeads == 0
    uint32_t groupSize;      // numHeads / numKvHeads
    uint32_t seqQ;           // Sq >= 1 (varlen: the longest sequence's)
    uint32_t seqKv;          // Skv >= 1 (varlen: the longest sequence's)
    uint32_t headDim;        // D, multiple of 16, <= 256
    uint32_t layout;         // FA_LAYOUT_* (varlen: FA_LAYOUT_BSND's row strides)
    uint32_t varlen;         // 1: TND, per-sequence lengths from actual_seq_qlen / actual_seq_kvlen
    uint32_t deterministic;  // 1: dQ summed in a fixed order (see above)
    uint64_t totalQ;         // varlen: Tq (rows of query, dq; columns of the [N, Tq] LSE)
    uint64_t totalKv;        // varlen: Tkv
    int64_t preTokens;       // the band (see above)
    int64_t nextTokens;
    float scaleValue;        // multiplies Q.K^T
    // ---- blocks ----
    uint32_t blockM;         // query rows per step, multiple of 16
    uint32_t blockN;         // key rows per unit, multiple of 16
    uint32_t numQBlocks;     // ceil(Sq / blockM)
    uint32_t numKvBlocks;    // ceil(Skv / blockN)
    uint32_t rowChunk;       // rows per row-phase chunk
    // ---- work split ----
    uint32_t aivNum;         // vector cores of the launch = 2 * block dim
    uint32_t totalUnits;     // batch * numKvHeads * numKvBlocks
    uint32_t unitStart[FAG_MAX_AIV + 1];  // unit ranges per AIV; [aivNum] == totalUnits
    uint32_t numDqFlags;     // deterministic: aivNum * B * N * numQBlocks IBSet/IBWait flags (see above); else 0
    // ---- GM workspace, bytes from the start of the user workspace ----
    uint64_t wsDeltaOffset;    // D: [B, N, Sq] fp32 (varlen: Sq the longest)
    uint64_t wsFlagOffset;     // deterministic: numDqFlags x 32 B (int32 flags, zeroed by the kernel)
    uint64_t wsDqOffset;       // the dQ accumulator [B, N, Sq, D] fp32 (varlen: N x [Tq, D])
    uint64_t wsScratchOffset;  // per-AIV scratch slices, AIV a's at wsScratchOffset + a * wsScratchBytes
    uint64_t wsScratchBytes;   // one slice: S [m][n] fp32, dP [m][n] fp32, P [m][n] T, dS [m][n] T,
                               // dK [n][D] fp32, dV [n][D] fp32, dQ part [m][D] fp32; each 512-B aligned
    uint64_t wsScoreOffset, wsGradOffset, wsProbOffset, wsDsOffset, wsDkOffset, wsDvOffset, wsDqPartOffset;
    // ---- attention mask (see above) ----
    uint32_t hasMask;
    uint32_t maskB, maskN, maskQ;    // device mask dims 0..2 (1 = broadcast); dim 3 is seqKv
    uint32_t maskRows;               // MaskTiles rows per pass (multiple of 4)
    uint64_t wsMaskSummaryOffset;    // summary: maskB * maskN * (maskQ == 1 ? 1 : numQBlocks) x numKvBlocks bytes
    // ---- dropout (see above) ----
    uint32_t dropout;
    uint32_t keepThreshold;          // keep iff the 8-bit Philox draw >= keepThreshold (0..256)
    float invKeepProb;               // 1 / keep_prob, the scale of kept values
    uint32_t philoxLanes;            // Philox counters per chunk (PhiloxKeepMask::Init capacity, <= 4 blockM)
    uint64_t seed;                   // Philox key (uint64 bits of the int64 attr)
    uint64_t offset;                 // first Philox stream of the call (uint64 bits)
    // ---- matmul tilings (one AIV's shapes) ----
    TCubeTiling scoreTiling;   // S = Q.K^T and dP = dO.V^T: M = blockM, N = blockN, K = D; B transposed
    TCubeTiling kvGradTiling;  // dV += P^T.dO and dK += dS^T.Q: M = blockN, N = D, K = blockM; A transposed
    TCubeTiling dqTiling;      // dQ part = dS.K: M = blockM, N = D, K = blockN
};
