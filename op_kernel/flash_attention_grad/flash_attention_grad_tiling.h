// flash_attention_grad_tiling.h -- the tiling data that op_host fills and op_kernel reads for
// the FlashAttentionGrad op (REGISTER_TILING_DEFAULT(FlashAttentionGradTilingData)).
// Included by op_host, op_kernel, the simulator and (as a cffi declaration) the Python driver.
#pragma once

#include <cstdint>

#include "kernel_tiling/kernel_tiling.h"  // TCubeTiling

// Most vector cores any supported chip has (64 AIC x 2 AIV); bounds unitStart.
constexpr uint32_t FAG_MAX_AIV = 128;
// Deterministic dQ: |part sums| <= bound_r are scaled to at most 2^26 (see below); int32 keeps 5
// bits of headroom for an LSE a little off the forward's (sum_k P_rk up to 32).
constexpr uint32_t FAG_DQ_FIXED_BITS = 26;

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
// Work: a unit is one K/V block j of one kv head of one sequence,
//   unit = (b * numKvHeads + h) * numKvBlocks + j,
// and owns dK, dV of its blockN key rows: it walks the query heads of h's group and, for each,
// the query rows of the band that see block j, in panels of at most panelRows rows (whole query
// blocks of blockM rows, the first and last trimmed to the rows that see j). One panel is one
// cube request per matmul: S and dP [rows, blockN], then dV_j += P^T dO and dK_j += dS^T Q with
// K = the panel's rows (summed in L0C inside the request, written once per panel), and dQ's part
// dS K_j [rows, D]. The vector cores recompute P and dS in between, one query block (blockM rows,
// the UB tile) at a time. (Varlen: blocks past the sequence's own Skv are empty units.) Vector
// core a (block index a of the MIX 1:2 launch's AIVs) runs units [unitStart[a], unitStart[a + 1]),
// a contiguous range that may span kv heads; ranges are balanced by the query rows walked. Or,
// with unitsDealt, the K/V block pairs dealt to it in rounds (see unitsDealt).
//
// dQ gathers the contributions of every unit of a kv head into one [B, N, Sq, D] accumulator
// (zeroed before the first SyncAll, cast to dQ after the second):
//   deterministic = 0: fp32; each part is added by the cube's atomic add (Matmul enAtomic) in
//     whatever order the cores reach it, so the last bits vary between runs.
//   deterministic = 1: int32 fixed point. Row r's parts are scaled by f_r = 2^FAG_DQ_FIXED_BITS /
//     bound_r, rounded to integers and added with SetAtomicAdd<int32_t>: integer addition is
//     exact and associative, so the sum -- and dQ_r = sum / f_r -- is the same in any order: on
//     every run, host thread count and core count, with no core waiting for another.
//     bound_r = scale * (||dO_r||_1 * max|V| * invKeepProb + |D_r|) * max|K| bounds |dQ_r| and
//     every partial sum of its parts (sum_k P_rk <= 1), so no sum overflows; its inputs are
//     computed before the first SyncAll (||dO_r||_1 at wsNormOffset, each AIV's max |K|, |V| of
//     its share at wsMaxOffset) and reduced the same way on every core (docs/backward.md).
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
//   maskBuf   MaskTiles::UbBytes(maskRows, n)   with an attention mask only (attention_mask.h)
//   keepBuf   PhiloxKeepMask::UbBytes(philoxLanes)   with dropout only (philox_dropout.h)
// Row phases (the D pre-pass, the dQ fold, the dK/dV write-out) take rowChunk rows at a time,
// rowChunk * D <= m * n and rowChunk <= m.
//
// Attention mask (hasMask = 1; FlashAttentionGradV2 only, dense layouts): uint8 [maskB, maskN,
// maskQ, Skv], 1 = masked out, broadcast over dims of size 1. Before the first SyncAll every AIV
// classifies its share of the summary rows (attention_mask.h, blocks of blockM x blockN, so one
// summary byte per query block) into the workspace at wsMaskSummaryOffset; a
// BLOCK_MASKED query block is skipped (it ends the panel: no load, no matmul), a BLOCK_MIXED one
// adds the mask's bias to its scores before P is recomputed.
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
    uint32_t blockM;         // query rows per vector tile (a query block), multiple of 16
    uint32_t blockN;         // key rows per K/V block, multiple of 16
    uint32_t numQBlocks;     // ceil(Sq / blockM)
    uint32_t numKvBlocks;    // ceil(Skv / blockN)
    uint32_t rowChunk;       // rows per row-phase chunk
    uint32_t panelRows;      // query rows per cube request (a multiple of blockM)
    // ---- work split ----
    uint32_t aivNum;         // vector cores of the launch = 2 * block dim
    uint32_t totalUnits;     // batch * numKvHeads * numKvBlocks
    uint32_t unitStart[FAG_MAX_AIV + 1];  // unit ranges per AIV; [aivNum] == totalUnits
    // ---- GM workspace, bytes from the start of the user workspace ----
    uint64_t wsDeltaOffset;    // D: [B, N, Sq] fp32 (varlen: Sq the longest)
    uint64_t wsNormOffset;     // deterministic: ||dO_r||_1 [B, N, Sq] fp32
    uint64_t wsMaxOffset;      // deterministic: max |K| [aivNum][8] fp32, then max |V| [aivNum][8] (8 copies each)
    uint64_t wsDqOffset;       // the dQ accumulator [B, N, Sq, D] fp32 or int32 (varlen: Sq the longest)
    uint64_t wsScratchOffset;  // per-AIV scratch slices, AIV a's at wsScratchOffset + a * wsScratchBytes
    uint64_t wsScratchBytes;   // one slice (P = panelRows): S [P][n] fp32, dP [P][n] fp32, P [2][P][n] T,
                               // dS [2][P][n] T, dK [n][D] fp32, dV [n][D] fp32, deterministic dQ
                               // part [2][P][D] fp32 (2: slots of a panel and the next); each 512-B aligned
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
    TCubeTiling scoreTiling;   // S = Q.K^T and dP = dO.V^T: M = panelRows, N = blockN, K = D; B transposed
    TCubeTiling kvGradTiling;  // dV += P^T.dO and dK += dS^T.Q: M = blockN, N = D, K = panelRows; A transposed
    TCubeTiling dqTiling;      // dQ += dS.K: M = panelRows, N = D, K = blockN
    // ---- score modifiers (FlashAttentionGradV3; docs/attention_options.md "Score modifiers") ----
    // T = softcap * tanh(scale * S / softcap) when softcap > 0; the ALiBi bias
    // -slope[b, n] * |i + diag - j| added after it (alibi_slopes fp32 [B, N], computed per tile
    // from the row and column indices, never stored as a [Sq, Skv] bias); the sinks' logits are
    // in the forward's LSE already, so P needs nothing more. dS = P o (dP - D) o (1 - (T/softcap)^2).
    float softcap;        // > 0: on (the derivative's T/softcap kept per tile, UB fp16 in dsBuf)
    uint32_t hasAlibi;    // 1: alibi_slopes given; UB adds alibiBuf (align32((n + 2m) * 4))
    uint32_t dsinksOut;   // 1: dsinks[n] = -sum over (b, i) of exp(sinks[n] - LSE_i) * D_i, written
                          // by AIV n % aivNum in a fixed order (chunks of m * 64 rows) after the
                          // second SyncAll: the same bits on every run and core count
    // ---- deterministic dQ over K/V block pairs (docs/backward.md) ----
    uint32_t dqGroup;         // 1: the dQ parts of blocks 2t, 2t + 1 of a kv head (one AIV's, unit
                              // ranges start on even blocks) summed in fp32 by the cube into the
                              // pair sum (2t writes, 2t + 1 adds: the rows that see 2t + 1 see 2t),
                              // then added once in fixed point
    uint64_t wsDqGroupOffset; // in the scratch slice: two pair sums [2][groupSize][seqQ][D] fp32 (one
                              // filled by the cube while the AIV adds the other between its requests)
    // ---- dealt work (docs/backward.md "Dealt work") ----
    uint32_t unitsDealt;      // 1 (with dqGroup only): the K/V block pairs are dealt in rounds
                              // instead of the ranges of unitStart (which then only counts):
                              // with H = batch * numKvHeads, item s = x * H + head is pair x
                              // (blocks 2x, 2x + 1) of kv head `head` (all heads' first pair, then
                              // their second, ...); AIV a
                              // takes s = q * aivNum + a in even rounds q, q * aivNum + aivNum - 1 - a
                              // in odd ones (a snake: heavy and light items alternate per AIV)
    uint32_t dqGroupBlocks;   // with dqGroup: K/V blocks per group, G = 2 (pairs) or 4; "pair" above
                              // and in the kernel means a group of G: blocks Gt .. Gt + G - 1, the
                              // first writes the group sum, the others add in order
};
