// flash_attention_tiling.h -- the tiling data that op_host fills and op_kernel reads.
//
// One plain struct of fixed-width fields (the msopgen "plain struct" tiling style:
// host `context->GetTilingData<FlashAttentionTilingData>()`, kernel
// `REGISTER_TILING_DEFAULT(FlashAttentionTilingData); GET_TILING_DATA(td, tiling);`).
// Included by op_host, op_kernel, the simulator and (as a cffi declaration with a
// size/offset test) the Python driver: change all of them together.
#pragma once

#include <cstdint>

#include "attention_band.h"               // attn_band::kUnboundedTokens
#include "kernel_tiling/kernel_tiling.h"  // TCubeTiling

// Most AIC cores any supported chip has (910A: 32 coupled cores); bounds coreItemStart.
constexpr uint32_t FA_MAX_CORES = 64;

// input_layout codes.
constexpr uint32_t FA_LAYOUT_BNSD = 0;  // [B, N, S, D]
constexpr uint32_t FA_LAYOUT_BSND = 1;  // [B, S, N, D]
constexpr uint32_t FA_LAYOUT_BSH = 2;   // [B, S, N*D]; same memory order as BSND
constexpr uint32_t FA_LAYOUT_TND = 3;   // [T, N, D]: sequences packed along T (varlen); BSND's order

// pre_tokens / next_tokens at or above this bound the band on that side not at all.
constexpr int64_t FA_UNBOUNDED_TOKENS = attn_band::kUnboundedTokens;

// Tiling key bits (op_host sets, the kernel entry dispatches on them):
//   bit 0     dtype: 1 bfloat16 (with bit 6 clear)
//   bit 1     band: pre_tokens or next_tokens bounds the visible keys (causal is next_tokens 0)
//   bits 2-3  layout (FA_LAYOUT_*; BSH and TND run the BSND path)
//   bit 4     Sq tail: Sq % blockM != 0
//   bit 5     Skv tail: Skv % blockN != 0
//   bit 6     dtype: 1 float32
//   bit 7     path: 1 coupled AI Core (910A arch 1001, 310P arch 2002), 0 MIX AIC:AIV 1:2 (arch 2201)
//   bit 8     MIX path, float16 / bfloat16: S in the input dtype in the workspace (the high-performance
//             precision, FlashAttentionV4 inner_precise 1); 0: S in float32
// The dtype is float16 when bits 0 and 6 are clear.
constexpr uint64_t FA_KEY_BF16 = 1u << 0;
constexpr uint64_t FA_KEY_CAUSAL = 1u << 1;
constexpr uint32_t FA_KEY_LAYOUT_SHIFT = 2;
constexpr uint64_t FA_KEY_SQ_TAIL = 1u << 4;
constexpr uint64_t FA_KEY_SKV_TAIL = 1u << 5;
constexpr uint64_t FA_KEY_FP32 = 1u << 6;
constexpr uint64_t FA_KEY_COUPLED = 1u << 7;
constexpr uint64_t FA_KEY_NARROW_S = 1u << 8;

// Work items are (b, n, query block) triples, numbered
//   item = (b * numHeads + n) * numQBlocks + p
// where p is the position of the query block in a per-head order: with qZigzag == 0,
// block index qb = p; with qZigzag == 1 (a band), qb = p / 2 for even p and
// numQBlocks - 1 - p / 2 for odd p, so consecutive pairs have equal causal work.
// Varlen (layout TND): sequence b has its own nq(b) = ceil(Sq(b) / blockM) query blocks and the
// items of sequence b follow those of b - 1: item = firstItem(b) + n * nq(b) + p, with
// firstItem(b) = numHeads * (nq(0) + ... + nq(b - 1)); Sq(b), Skv(b) come from the cumulative
// ends actual_seq_qlen / actual_seq_kvlen the kernel reads from GM.
// Core c (block index c of the launch: an AIC with its two AIVs on the MIX path, one AI Core
// on the coupled path) runs items [coreItemStart[c], coreItemStart[c + 1]). On the MIX path
// its two AIVs split every item's rows: sub-block 0 takes the first ceil(rows / 2) rows,
// sub-block 1 the rest; a coupled AI Core takes all of them.
//
// Per-vector-unit buffers (m = subBlockM rows: blockM / 2 per AIV, blockM per coupled AI Core;
// c = chunkRows, the rows of one score tile (MIX: the largest multiple of 8 up to m whose buffers
// fit; coupled: m); n = blockN, d = headDim, T = input dtype, t = its bytes). UB, in the kernels'
// InitBuffer order:
//   scoreQue   VECIN  depth 1   c*n*4              S tile, fp32 (MIX: from the workspace;
//                                                  coupled: scoreBuf, the QK Matmul's C in UB)
//   probQue    VECOUT depth 1   c*n*t              P tile, T, to the workspace for P.V (none for
//                                                  fp32; coupled: probBuf, the PV Matmul's A in UB)
//   pvQue      VECIN  depth 1   c*d*4              P.V rows of one kv block, fp32 (coupled: pvBuf, C in UB;
//                                                  MIX with n >= d: none, scoreQue's buffer)
//   outQue     VECOUT depth 1   c*d*t              final O rows in T (MIX with n >= d and T not
//                                                  fp32: none, probQue's buffer)
//   accBuf     TBuf             m*d*4              O accumulator, fp32
//   statBuf    TBuf             7*align32(m*4)     per-row fp32 vectors: max (2 slots), sum,
//                                                  block max, block sum, alpha (2 slots)
//   foldBuf    TBuf             c*64*4             row reductions: a tile folded to 64 columns
//   brcbBuf    TBuf             m*8*4              Brcb of a per-row vector, one 32-B block per row
//   lseQue     VECOUT depth 1   align32(m*4)       LSE rows, fp32
//   mmWorkBuf  TBuf             mmUbBytes          coupled only: the Matmul API's ND<->NZ workspace
// (InitBuffer places each buffer 32-B aligned, so the sum of these is the UB used.)
// Only with the V2 options (MIX path), after lseQue:
//   maskBuf    TBuf             MaskTiles::UbBytes(maskRows, n)      atten_mask given
//   philoxBuf  TBuf             PhiloxKeepMask::UbBytes(philoxLanes) keep_prob < 1
//   keepBuf    TBuf             48*philoxLanes + c*align32(n)        dropout_mask output given: a
//                                                                    chunk's keep bytes and as half,
//                                                                    then 32-B aligned rows
// GM workspace per AIC group (MIX path only; after the system workspace), each region 512-byte
// aligned, M = blockM (the item's rows: one QK and one P.V per K/V block serve both AIVs, each
// of which reads S and P.V and writes P in its own rows of these tiles):
//   score  [2][M][n] fp32  (double buffer: QK of block j+1 runs while block j is softmaxed)
//   prob   [2][M][n] T     (double buffer: P.V of block j-1 reads one slot while block j's P
//   pv     [2][M][d] fp32   is written to the other; its result lands in pv slot (j-1) % 2)
// then, shared, from wsMaskSummaryOffset: the mask's block summary (atten_mask given).
struct FlashAttentionTilingData {
    // ---- problem ----
    uint32_t batch;          // B
    uint32_t numHeads;       // N, query heads
    uint32_t numKvHeads;     // Nkv; numHeads % numKvHeads == 0
    uint32_t groupSize;      // numHeads / numKvHeads (query heads per kv head)
    uint32_t seqQ;           // Sq >= 1 (varlen: the longest sequence's)
    uint32_t seqKv;          // Skv >= 1 (varlen: the longest sequence's)
    uint32_t headDim;        // D, multiple of 16, <= 256
    uint32_t layout;         // FA_LAYOUT_*
    uint32_t causal;         // the V1 attr (informational: the kernel applies preTokens / nextTokens)
    float scaleValue;        // multiplies Q.K^T before the softmax
    // ---- blocks ----
    uint32_t blockM;         // query rows per work item, multiple of 16
    uint32_t blockN;         // key/value rows per inner step, multiple of 16
    uint32_t subBlockM;      // rows per AIV = blockM / 2
    uint32_t numQBlocks;     // ceil(Sq / blockM)
    uint32_t numKvBlocks;    // ceil(Skv / blockN)
    uint32_t qZigzag;        // 1: query blocks visited in zigzag order (see above)
    // ---- work split over AIC cores ----
    uint32_t usedCoreNum;    // block dim of the launch (AIC cores with at least one item)
    uint32_t totalItems;     // batch * numHeads * numQBlocks
    uint32_t coreItemStart[FA_MAX_CORES + 1];  // item ranges per core; [usedCoreNum] == totalItems
    // ---- GM workspace, bytes, per AIC group, relative to that group's slice of the user workspace ----
    uint64_t wsScoreOffset;  // [2][blockM][blockN] fp32
    uint64_t wsProbOffset;   // == wsScoreOffset: P lives in S's rows ([2][blockM][blockN] T, row stride
                             // blockN * 4 / sizeof(T) elements; flash_attention_kernel.h)
    uint64_t wsPvOffset;     // [2][blockM][headDim] fp32
    uint64_t wsBytesPerCore; // slice size; group (block index) c's slice starts at c * wsBytesPerCore
    // ---- coupled path ----
    uint32_t mmUbBytes;      // UB for the Matmul API's ND<->NZ conversions (SetLocalWorkspace)
    // ---- MIX path ----
    uint32_t soloRows;       // 0: one QK and one P.V per K/V block serve both AIVs of a group (the item's
                             // blockM rows); 1: each AIV issues its own for its half (narrow bands, where
                             // the union of the halves' bands would waste cube work)
    // ---- band and sequences ----
    int64_t preTokens;       // key j is visible to query i iff i + diag - preTokens <= j <= i + diag + nextTokens,
    int64_t nextTokens;      // diag = Skv - Sq of the row's sequence; >= FA_UNBOUNDED_TOKENS: no bound that side
    uint32_t varlen;         // 1: layout TND; batch sequences whose lengths the kernel reads from GM
    uint32_t tokensQ;        // rows of query / out along the packed token axis: Tq (varlen), else batch * seqQ
    uint32_t tokensKv;       // rows of key / value: Tkv (varlen), else batch * seqKv
    uint32_t chunkRows;      // c: score rows per vector tile, a multiple of 8 up to subBlockM (MIX path;
                             // coupled: subBlockM). An AIV softmaxes its m rows of a block c rows at a
                             // time; the row state and acc stay resident for all m
    // ---- matmul tilings (single core shapes for one item; MIX: sub-block 0 issues them) ----
    TCubeTiling qkTiling;    // S = Q.K^T: M = blockM, N = blockN, K = headDim; B transposed
    TCubeTiling pvTiling;    // O = P.V:   M = blockM, N = headDim, K = blockN
                             // (coupled: C of both, and A of P.V, in UB)
    // ---- attention mask (FlashAttentionV2 atten_mask; MIX path only) ----
    uint32_t hasMask;        // 1: atten_mask uint8 [maskB, maskN, maskQ, seqKv], 1 = masked out
    uint32_t maskB;          // 1 or batch
    uint32_t maskN;          // 1 or numHeads
    uint32_t maskQ;          // 1 or seqQ
    uint32_t maskRows;       // mask tile rows per pass (attention_mask.h MaskTiles capacity, multiple of 4)
    float softcap;           // FlashAttentionV3: > 0 caps the scaled scores, S = softcap * tanh(S / softcap),
                             // before the mask (flash_attention_rows.h); 0 = off (V1, V2). Also keeps the
                             // next field 8-byte aligned
    uint64_t wsMaskSummaryOffset;  // bytes from the user workspace's start: the block summary, one byte
                                   // per (mask batch, mask head, query block, key block), shared by all AIVs
    // ---- dropout (FlashAttentionV2 keep_prob < 1; MIX path only) ----
    uint32_t philoxLanes;    // 0: no dropout; else PhiloxKeepMask capacity (counters per chunk)
    uint32_t keepThreshold;  // keep iff the 8-bit Philox draw >= this, 0..256 (docs/attention_options.md#dropout)
    float invKeepProb;       // kept P values are multiplied by this (float32 1 / keep_prob)
    uint32_t hasDropoutMask; // 1: the dropout_mask output (uint8 [B, N, Sq, Skv], 1 = kept) is written
    uint64_t seed;           // Philox key (uint64 bits of the int64 attr)
    uint64_t offset;         // first Philox stream of the call; (b, n) uses offset + b * N + n
    // ---- precision (FlashAttentionV4; MIX path only) ----
    uint32_t innerPrecise;   // 0: S leaves the cube as float32 (default); 1: as the input dtype (tiling key
                             // bit 8; the high-performance precision, docs/attention_options.md)
    uint32_t reservedTail;   // keeps the struct's size a multiple of 8
    // ---- score modifiers (FlashAttentionV5; MIX path only; op_kernel/common/score_mods.h) ----
    uint32_t hasAlibi;       // 1: alibi_slopes float32 [B, N]: S += -slope[b, h] * |i + diag - j|, after the cap
    uint32_t hasSinks;       // 1: sinks float32 [N]: exp(sink[h]) joins every row's softmax denominator
    uint32_t hasBias;        // 1: atten_bias T [biasB, biasN, biasQ, seqKv] added to the scores (a float mask)
    uint32_t biasB;          // 1 or batch
    uint32_t biasN;          // 1 or numHeads
    uint32_t biasQ;          // 1 or seqQ
    uint32_t biasRows;       // float mask tile rows per pass (FloatBiasTiles capacity, a multiple of 8)
    uint32_t reservedMods;   // keeps the struct's size a multiple of 8
};
