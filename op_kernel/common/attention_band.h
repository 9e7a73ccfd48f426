// attention_band.h -- the causal / window band: which keys a query row sees. The one definition
// of the rule, used by every tiling policy (op_host, native/'s libaclfa_plan.so) and every kernel.
//
// Query row i of a sequence with Sq queries and Skv keys sees key j iff
//     i + diag - pre <= j <= i + diag + next,    diag = Skv - Sq   (bottom-right aligned),
// pre / next being the op's pre_tokens / next_tokens; causal is next = 0 (FoldCausal), and a value
// at or above kUnboundedTokens bounds that side not at all. The ops require pre + next >= 0, so
// the intervals of consecutive rows (and the rows of consecutive keys) overlap or touch: the keys
// a run of rows sees, and the rows that see a run of keys, are one contiguous range.
//
// Host and kernel compile this same header. Ascend C marks device functions __aicore__, which
// CANN's own headers define only when nobody has (asc-devkit impl/utils/sys_macros.h:
// `#ifndef __aicore__` / `#define __aicore__ [aicore]`), and which CANN's CPU-debug build
// (ASCENDC_CPU_DEBUG) leaves empty so that the host compiler reads kernel code as plain C++. This
// header follows that convention: a kernel includes it after kernel_operator.h (which has defined
// __aicore__ as the device attribute), a host policy includes no CANN header, and there __aicore__
// is defined empty below, making the functions ordinary inline C++.
#pragma once

#include <cstdint>

#ifndef __aicore__
#define __aicore__
#endif

namespace attn_band {

// pre_tokens / next_tokens at or above this bound the band on that side not at all (the ops'
// attribute default, INT32_MAX).
constexpr int64_t kUnboundedTokens = 2147483647;

// How far an unbounded side reaches: beyond any row + diag that 32-bit sizes can form, so the
// positions below need no separate case for "no bound" and cannot overflow.
constexpr int64_t kNoBoundReach = int64_t{1} << 40;

__aicore__ inline int64_t Reach(int64_t tokens) { return tokens >= kUnboundedTokens ? kNoBoundReach : tokens; }
__aicore__ inline bool Bounded(int64_t tokens) { return tokens < kUnboundedTokens; }

// The diagonal offset of a sequence: its last query row sees its last key when next = 0.
__aicore__ inline int64_t Diagonal(int64_t seqQ, int64_t seqKv) { return seqKv - seqQ; }

// next_tokens with causal folded in: causal caps it at 0 (it may be negative already).
__aicore__ inline int64_t FoldCausal(int64_t next, bool causal) { return causal && next > 0 ? 0 : next; }

// Row `row`'s first visible key and one past its last, unclipped (may lie outside [0, Skv)).
__aicore__ inline int64_t KeyBegin(int64_t row, int64_t diag, int64_t pre) { return row + diag - Reach(pre); }
__aicore__ inline int64_t KeyEnd(int64_t row, int64_t diag, int64_t next) { return row + diag + Reach(next) + 1; }

// The first row that sees key `key` and one past the last, unclipped (may lie outside [0, Sq)).
__aicore__ inline int64_t RowBegin(int64_t key, int64_t diag, int64_t next) { return key - diag - Reach(next); }
__aicore__ inline int64_t RowEnd(int64_t key, int64_t diag, int64_t pre) { return key - diag + Reach(pre) + 1; }

// [lo, hi) clipped to [0, limit) into [*first, *end); false, with first = end = 0, when that is empty.
__aicore__ inline bool ClipRange(int64_t lo, int64_t hi, int64_t limit, int64_t *first, int64_t *end)
{
    lo = lo < 0 ? 0 : lo;
    hi = hi > limit ? limit : hi;
    const bool any = lo < hi;
    *first = any ? lo : 0;
    *end = any ? hi : 0;
    return any;
}

// Keys [*first, *end) of [0, seqKv) that rows [row0, rowEnd) see (the union of their intervals).
// False, with first = end = 0, when none of the rows sees a key.
__aicore__ inline bool VisibleKeys(int64_t row0, int64_t rowEnd, int64_t diag, int64_t seqKv, int64_t pre,
                                   int64_t next, int64_t *first, int64_t *end)
{
    return ClipRange(KeyBegin(row0, diag, pre), rowEnd <= row0 ? 0 : KeyEnd(rowEnd - 1, diag, next), seqKv, first,
                     end);
}

// Rows [*first, *end) of [0, seqQ) that see a key of [key0, keyEnd) (the union of the keys'
// row intervals). False, with first = end = 0, when no row sees any of the keys.
__aicore__ inline bool SeeingRows(int64_t key0, int64_t keyEnd, int64_t diag, int64_t seqQ, int64_t pre,
                                  int64_t next, int64_t *first, int64_t *end)
{
    return ClipRange(RowBegin(key0, diag, next), keyEnd <= key0 ? 0 : RowEnd(keyEnd - 1, diag, pre), seqQ, first,
                     end);
}

}  // namespace attn_band
