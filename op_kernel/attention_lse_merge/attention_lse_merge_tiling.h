// attention_lse_merge_tiling.h -- the tiling data that op_host fills and op_kernel reads for
// AttentionLseMerge (plain struct style, as flash_attention_tiling.h).
//
// The problem: two partial attention results over disjoint key sets for the same query rows,
// out_a / out_b [R, D] (any leading dims flattened into R rows) with their LSEs lse_a / lse_b
// [R] fp32, merged into attention_out [R, D] and softmax_lse [R]:
//   m = max(lse_a, lse_b, -FLT_MAX);  w_x = exp(lse_x - m);  s = w_a + w_b
//   attention_out = (w_a out_a + w_b out_b) / max(s, FLT_MIN);  softmax_lse = m + ln(s)
// (docs/lse_merge.md). A row whose two LSEs are -inf (no key seen by either) gets w = 0, an
// output of 0 and LSE -inf.
//
// Work: rows in blocks of 8 (one 32-B block of LSE), blocks split over usedCoreNum cores as
// equal ranges: core c owns blocks [c * B / C, (c + 1) * B / C), B = ceil(R / 8), so every core
// starts at a 32-B aligned LSE offset and only the last core holds the R % 8 tail rows. A core
// walks its rows in tiles of tileRows (a multiple of 8, at most 248: one vector repeat per row).
//
// Per-core UB (t = tileRows, d = headDim; sizes in bytes), InitBuffer order:
//   inA     VECIN   2 x t*d*sizeof(A)   out_a rows (double-buffered)
//   inB     VECIN   2 x t*d*sizeof(B)   out_b rows
//   lseIn   VECIN   2 x 2*t*4           lse_a rows, then lse_b rows
//   outQue  VECOUT  2 x t*d*sizeof(O)   attention_out rows
//   lseOut  VECOUT  2 x t*4             softmax_lse rows
//   workA   TBuf    t*d*4 when A is not fp32 (out_a cast to fp32), else none
//   workB   TBuf    t*d*4 when B is not fp32
//   stat    TBuf    4 x t*4             m, w_a, w_b, s per row
//   brcb    TBuf    t*8*4               a per-row value broadcast to one 32-B block per row
// AttentionLseMergeInt16 (out_a int16_t fixed point with bound_a; docs/lse_merge.md) adds:
//   lseIn holds 3 x t*4 (bound_a rows after the LSEs), lseOut 2 x t*4 (bound_out after the LSE),
//   stat 6 x t*4 (the row max of |out_b| and the int16 scale), workA t*d*4 (|out_b|, then out_a in
//   fp32), and
//   fold    TBuf    t*64*4              the row-max fold (attn_rows::ReduceRows)
// No GM workspace: the kernel uses no library API that needs one.
#pragma once

#include <cstdint>

// Tiling key bits: bit 0 out_a is float32; bit 1 attention_out is float32; bits 2-3 the dtype of
// out_b (0 float16, 1 bfloat16, 2 float32). With out_b float32 every tensor is float32 (key 11).
constexpr uint64_t ALM_KEY_A_FP32 = 1u << 0;
constexpr uint64_t ALM_KEY_OUT_FP32 = 1u << 1;
constexpr uint64_t ALM_KEY_B_SHIFT = 2;
constexpr uint64_t ALM_KEY_B_FP16 = 0;
constexpr uint64_t ALM_KEY_B_BF16 = 1;
constexpr uint64_t ALM_KEY_B_FP32 = 2;
// AttentionLseMergeInt16's keys: bit 4 marks out_a int16_t fixed point, bit 5 attention_out
// int16_t (a running merge); without bit 5 attention_out is out_b's dtype (the final conversion,
// bit 1 set when that is float32).
constexpr uint64_t ALM_KEY_A_FIXED16 = 1u << 4;
constexpr uint64_t ALM_KEY_OUT_FIXED16 = 1u << 5;

constexpr uint32_t ALM_ROW_BLOCK = 8;        // rows per 32-B block of fp32 LSE
constexpr uint32_t ALM_MAX_TILE_ROWS = 248;  // rows of a tile: <= 255 repeats, a multiple of 8

struct AttentionLseMergeTilingData {
    uint64_t rows;         // R: product of the LSE dims
    uint32_t headDim;      // D: a multiple of 16 (each row a whole number of 32-B blocks in every dtype)
    uint32_t usedCoreNum;  // block dim
    uint32_t tileRows;     // t
    uint32_t reserved;
};
