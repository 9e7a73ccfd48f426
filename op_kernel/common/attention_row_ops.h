// attention_row_ops.h -- row-wise vector helpers of the attention kernels on a [rows, width]
// fp32 tile in UB with row stride `stride` (elements, a multiple of 8): reductions into a
// per-row vector, and updates of each row by a per-row value. Each processes 64 columns (one
// 256-B repeat) at a time with one repeat per row (rows <= 255); repeat strides are in 32-B
// blocks. Per-row values are broadcast with Brcb (one 32-B block per row), so the scalar unit
// never touches tile elements -- except on dav-c100 (910A, arch 1001), which has no Brcb
// (asc-devkit impl/basic_api/dav_c100/kernel_operator_vec_brcb_impl.h reports it unsupported):
// there ApplyRowValues reads each row's value with the scalar unit and applies it with one
// scalar-operand vector instruction per row.
#pragma once

#include "kernel_operator.h"

namespace attn_rows {

constexpr uint32_t FP32_PER_REPEAT = 64;  // one 256-B vector repeat of fp32
constexpr uint32_t FP32_PER_BLOCK = 8;    // one 32-B data block of fp32

#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
constexpr bool HAS_BRCB = false;
#else
constexpr bool HAS_BRCB = true;
#endif

// What each architecture's vector unit has for the fp32 row reductions (docs/simulator.md, "The
// per-chip API surface"; asc-devkit API reference 归约计算/ReduceRepeat.md, ReduceDataBlock.md and
// 基础算术/Maxs.md, impl/basic_api/dav_c100 and dav_m200):
//   dav-c220 (2201): WholeReduceMax / WholeReduceSum on float, every ReduceOrder.
//   dav-m200 (2002): WholeReduce* and BlockReduce* on float, but WholeReduceMax only with
//                    ORDER_VALUE_INDEX / ORDER_INDEX_VALUE (no ORDER_ONLY_VALUE).
//   dav-c100 (1001): no float reduction at all (vcmax, vcadd, vcgmax, vcgadd, vcpadd take half
//                    only) and no Maxs.
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
constexpr bool HAS_FP32_REDUCE = false;
constexpr bool HAS_MAXS = false;
#else
constexpr bool HAS_FP32_REDUCE = true;
constexpr bool HAS_MAXS = true;
#endif
// FusedMulAdd (dst = src0 * dst + src1) on half and float: A2/A3 and 310P AI Core, not the Atlas
// training series (asc-devkit 基础API/Memory矢量计算/复合计算/FusedMulAdd.md, 产品支持情况).
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001
constexpr bool HAS_FUSED_MUL_ADD = false;
#else
constexpr bool HAS_FUSED_MUL_ADD = true;
#endif
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 2002
constexpr bool HAS_ORDER_ONLY_VALUE = false;
#else
constexpr bool HAS_ORDER_ONLY_VALUE = true;  // (1001 has no float WholeReduceMax to ask)
#endif

// Orders the pipe named second after the pipe named first (e.g. MTE3_S: the scalar unit waits
// until the last GM write of MTE3 has landed).
template <AscendC::HardEvent EVENT>
__aicore__ inline void WaitForPipe()
{
    event_t eventId = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
    AscendC::SetFlag<EVENT>(eventId);
    AscendC::WaitFlag<EVENT>(eventId);
}

__aicore__ inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__aicore__ inline uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }

enum class Reduce { MAX, SUM };
enum class Op { SUB, MUL, DIV };

// dst[r] = max (sum) of tile[r, 0:width]. fold: [rows, 64] fp32 scratch.
// fold[r, 0:64] = max (sum) over the 64-column chunks of tile[r, 0:width], from the identity
// (-inf, 0) so a chunk narrower than 64 leaves the rest neutral. fold: [rows, 64] fp32.
template <Reduce OP>
__aicore__ inline void FoldRows(const AscendC::LocalTensor<float> &fold, const AscendC::LocalTensor<float> &tile,
                                uint32_t rows, uint32_t width, uint32_t stride)
{
    const uint8_t tileRep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 1, 8, 8, tileRep);
    AscendC::Duplicate(fold, OP == Reduce::MAX ? -__builtin_inff() : 0.0f, rows * FP32_PER_REPEAT);
    for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
        const uint64_t w = Min(FP32_PER_REPEAT, width - c);
        if constexpr (OP == Reduce::MAX) {
            AscendC::Max(fold, fold, tile[c], w, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Add(fold, fold, tile[c], w, static_cast<uint8_t>(rows), params);
        }
    }
}

// dst[r] = max (sum) of tile[r, 0:width]. fold: [rows, 64] fp32 scratch. FoldRows, then one
// WholeReduce per row: for dav-c220 (and dav-m200's sum); ReduceRowsOnArch picks per architecture.
template <Reduce OP>
__aicore__ inline void ReduceRows(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &tile,
                                  const AscendC::LocalTensor<float> &fold, uint32_t rows, uint32_t width,
                                  uint32_t stride)
{
    FoldRows<OP>(fold, tile, rows, width, stride);
    if constexpr (OP == Reduce::MAX) {
        AscendC::WholeReduceMax(dst, fold, FP32_PER_REPEAT, rows, 1, 1, 8, AscendC::ReduceOrder::ORDER_ONLY_VALUE);
    } else {
        AscendC::WholeReduceSum(dst, fold, FP32_PER_REPEAT, rows, 1, 1, 8);
    }
}

// fold[r, 0:8] = max (sum) of fold[r, 0:64]: three halvings 64 -> 32 -> 16 -> 8 with the element-wise
// repeat forms of Max / Add, which every architecture has for float (one repeat per row).
template <Reduce OP>
__aicore__ inline void HalveToBlock(const AscendC::LocalTensor<float> &fold, uint32_t rows)
{
    const AscendC::BinaryRepeatParams params(1, 1, 1, 8, 8, 8);  // one 64-float fold row per repeat
    for (uint32_t half = FP32_PER_REPEAT / 2; half >= FP32_PER_BLOCK; half /= 2) {
        if constexpr (OP == Reduce::MAX) {
            AscendC::Max(fold, fold, fold[half], half, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Add(fold, fold, fold[half], half, static_cast<uint8_t>(rows), params);
        }
    }
}

// dst[r] = max (sum) of the 8 floats fold[r, 0:8] (HalveToBlock's result). With a float
// BlockReduce (dav-m200, dav-c220): one repeat covers 8 rows -- block b of repeat q is row 8q + b,
// 8 blocks (one fold row) apart -- and writes their 8 results to dst[8q, 8q + 8). dav-c100 has no
// float reduction: the scalar unit reads the 8 partials of each row (8 reads and 1 write per row,
// per call; not per score element).
template <Reduce OP>
__aicore__ inline void ReduceBlocks(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &fold,
                                    uint32_t rows)
{
    if constexpr (HAS_FP32_REDUCE) {
        constexpr int32_t ROW_BLOCKS = FP32_PER_REPEAT / FP32_PER_BLOCK;  // 32-B blocks per fold row
        const uint32_t full = rows / FP32_PER_BLOCK, tail = rows % FP32_PER_BLOCK;
        const AscendC::LocalTensor<float> tailDst = dst[full * FP32_PER_BLOCK];
        const AscendC::LocalTensor<float> tailSrc = fold[full * FP32_PER_BLOCK * FP32_PER_REPEAT];
        if constexpr (OP == Reduce::MAX) {
            if (full > 0) {
                AscendC::BlockReduceMax(dst, fold, full, FP32_PER_REPEAT, 1, ROW_BLOCKS, 8 * ROW_BLOCKS);
            }
            if (tail > 0) {
                AscendC::BlockReduceMax(tailDst, tailSrc, 1, tail * FP32_PER_BLOCK, 1, ROW_BLOCKS, 8 * ROW_BLOCKS);
            }
        } else {
            if (full > 0) {
                AscendC::BlockReduceSum(dst, fold, full, FP32_PER_REPEAT, 1, ROW_BLOCKS, 8 * ROW_BLOCKS);
            }
            if (tail > 0) {
                AscendC::BlockReduceSum(tailDst, tailSrc, 1, tail * FP32_PER_BLOCK, 1, ROW_BLOCKS, 8 * ROW_BLOCKS);
            }
        }
    } else {
        WaitForPipe<AscendC::HardEvent::V_S>();
        for (uint32_t r = 0; r < rows; ++r) {
            float v = fold.GetValue(r * FP32_PER_REPEAT);
            for (uint32_t j = 1; j < FP32_PER_BLOCK; ++j) {
                const float x = fold.GetValue(r * FP32_PER_REPEAT + j);
                if constexpr (OP == Reduce::MAX) {
                    v = x > v ? x : v;
                } else {
                    v += x;
                }
            }
            dst.SetValue(r, v);
        }
        WaitForPipe<AscendC::HardEvent::S_V>();
    }
}

// dst[r] = max (sum) of tile[r, 0:width] (fp32, as ReduceRows) with only the instructions the
// architecture has: ReduceRows where WholeReduce serves (dav-c220; dav-m200's sum), else FoldRows,
// HalveToBlock and ReduceBlocks. The coupled-core kernels call this; fold: [rows, 64] fp32.
template <Reduce OP>
__aicore__ inline void ReduceRowsOnArch(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &tile,
                                        const AscendC::LocalTensor<float> &fold, uint32_t rows, uint32_t width,
                                        uint32_t stride)
{
    if constexpr (HAS_FP32_REDUCE && (OP == Reduce::SUM || HAS_ORDER_ONLY_VALUE)) {
        ReduceRows<OP>(dst, tile, fold, rows, width, stride);
    } else {
        FoldRows<OP>(fold, tile, rows, width, stride);
        HalveToBlock<OP>(fold, rows);
        ReduceBlocks<OP>(dst, fold, rows);
    }
}

// dst[0:count] = max(src[0:count], value): Maxs where the architecture has it; on dav-c100 (no
// Maxs) Max against `konst`, one 32-B block of fp32 scratch filled with value and read with
// block and repeat stride 0. count <= 255 * 64.
__aicore__ inline void MaxsOnArch(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &src,
                                  float value, uint32_t count, const AscendC::LocalTensor<float> &konst)
{
    if constexpr (HAS_MAXS) {
        AscendC::Maxs(dst, src, value, static_cast<int32_t>(count));
    } else {
        AscendC::Duplicate(konst, value, static_cast<int32_t>(FP32_PER_BLOCK));
        const AscendC::BinaryRepeatParams params(1, 1, 0, 8, 8, 0);  // dst, src, konst: blk, then rep strides
        const uint32_t full = count / FP32_PER_REPEAT, tail = count % FP32_PER_REPEAT;
        if (full > 0) {
            AscendC::Max(dst, src, konst, FP32_PER_REPEAT, static_cast<uint8_t>(full), params);
        }
        if (tail > 0) {
            const uint32_t at = full * FP32_PER_REPEAT;
            AscendC::Max(dst[at], src[at], konst, tail, 1, params);
        }
    }
}

// Whether ReduceRowsWhole takes a [rows, width] tile of row stride `stride`: contiguous rows
// (stride == width) of whole 512-column groups, so that each row's 64-column partials fill whole
// 32-B blocks, and at most 64 partials per row (the [rows, 64] fold buffer holds them).
__aicore__ inline bool WholeRowReducible(uint32_t width, uint32_t stride)
{
    return width == stride && width % (8 * FP32_PER_REPEAT) == 0 && width / FP32_PER_REPEAT <= FP32_PER_REPEAT;
}

// dst[r] = max (sum) of tile[r, 0:width] for a tile WholeRowReducible takes, in two WholeReduce
// passes whose instruction count does not grow with width: one 64-column partial per repeat over
// the whole tile (up to 255 repeats per instruction), then one repeat per row over its
// width / 64 partials. partial: [rows, 64] fp32 scratch (ReduceRows' fold buffer). The sum adds
// 64-column partials in order, as ReduceRows adds 64-column chunks: both fp32, different orders.
template <Reduce OP>
__aicore__ inline void ReduceRowsWhole(const AscendC::LocalTensor<float> &dst, const AscendC::LocalTensor<float> &tile,
                                       const AscendC::LocalTensor<float> &partial, uint32_t rows, uint32_t width)
{
    constexpr uint32_t MAX_REPEATS = 255;
    const uint32_t perRow = width / FP32_PER_REPEAT;  // partials per row, a multiple of 8
    const uint32_t total = rows * perRow;
    for (uint32_t done = 0; done < total; done += MAX_REPEATS) {
        const int32_t repeats = static_cast<int32_t>(Min(MAX_REPEATS, total - done));
        if constexpr (OP == Reduce::MAX) {
            AscendC::WholeReduceMax(partial[done], tile[done * FP32_PER_REPEAT], FP32_PER_REPEAT, repeats, 1, 1, 8,
                                    AscendC::ReduceOrder::ORDER_ONLY_VALUE);
        } else {
            AscendC::WholeReduceSum(partial[done], tile[done * FP32_PER_REPEAT], FP32_PER_REPEAT, repeats, 1, 1, 8);
        }
    }
    const int32_t rowBlocks = static_cast<int32_t>(perRow / FP32_PER_BLOCK);  // a row's partials, in 32-B blocks
    if constexpr (OP == Reduce::MAX) {
        AscendC::WholeReduceMax(dst, partial, static_cast<int32_t>(perRow), static_cast<int32_t>(rows), 1, 1,
                                rowBlocks, AscendC::ReduceOrder::ORDER_ONLY_VALUE);
    } else {
        AscendC::WholeReduceSum(dst, partial, static_cast<int32_t>(perRow), static_cast<int32_t>(rows), 1, 1,
                                rowBlocks);
    }
}

// tile[r, 0:width] = tile[r, 0:width] (OP) value of row r (brcb from BroadcastRows), one
// instruction per row over its width / 64 repeats: fewer instructions than ApplyRows' one per 64
// columns when rows < width / 64. width a multiple of 64.
template <Op OP>
__aicore__ inline void ApplyRowsByRow(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &brcb,
                                      uint32_t rows, uint32_t width, uint32_t stride)
{
    const AscendC::BinaryRepeatParams params(1, 1, 0, 8, 8, 0);  // the row's block of brcb for every repeat
    const uint8_t repeats = static_cast<uint8_t>(width / FP32_PER_REPEAT);
    for (uint32_t r = 0; r < rows; ++r) {
        const AscendC::LocalTensor<float> row = tile[r * stride];
        const AscendC::LocalTensor<float> value = brcb[r * FP32_PER_BLOCK];
        if constexpr (OP == Op::SUB) {
            AscendC::Sub(row, row, value, FP32_PER_REPEAT, repeats, params);
        } else if constexpr (OP == Op::MUL) {
            AscendC::Mul(row, row, value, FP32_PER_REPEAT, repeats, params);
        } else {
            AscendC::Div(row, row, value, FP32_PER_REPEAT, repeats, params);
        }
    }
}

// brcb[r, 0:8] = rowValues[r]. brcb holds align8(rows) * 8 floats.
__aicore__ inline void BroadcastRows(const AscendC::LocalTensor<float> &brcb,
                                     const AscendC::LocalTensor<float> &rowValues, uint32_t rows)
{
    AscendC::Brcb(brcb, rowValues, static_cast<uint8_t>(CeilDiv(rows, FP32_PER_BLOCK)),
                  AscendC::BrcbRepeatParams(1, 8));
}

// tile[r, 0:width] = tile[r, 0:width] (OP) value of row r, read from brcb (BroadcastRows) with
// block stride 0.
template <Op OP>
__aicore__ inline void ApplyRows(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &brcb,
                                 uint32_t rows, uint32_t width, uint32_t stride)
{
    const uint8_t tileRep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 0, tileRep, tileRep, 1);
    for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
        const uint64_t w = Min(FP32_PER_REPEAT, width - c);
        if constexpr (OP == Op::SUB) {
            AscendC::Sub(tile[c], tile[c], brcb, w, static_cast<uint8_t>(rows), params);
        } else if constexpr (OP == Op::MUL) {
            AscendC::Mul(tile[c], tile[c], brcb, w, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Div(tile[c], tile[c], brcb, w, static_cast<uint8_t>(rows), params);
        }
    }
}

// tile[r, 0:width] = scale * tile[r, 0:width] + shift of row r in one FusedMulAdd pass (where
// HAS_FUSED_MUL_ADD): konst is one 32-B block of fp32 holding scale 8 times, read with block and
// repeat stride 0 as src0; brcb the shifts (BroadcastRows), block stride 0 as src1. byRow: one
// instruction per row over its width / 64 repeats (ApplyRowsByRow's order; width a multiple of
// 64), else one per 64 columns with a repeat per row (ApplyRows' order). It replaces Muls(scale)
// followed by a row-wise Sub: the same two roundings (the product, then the sum), one pass.
__aicore__ inline void ScaleShiftRows(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &konst,
                                      const AscendC::LocalTensor<float> &brcb, uint32_t rows, uint32_t width,
                                      uint32_t stride, bool byRow)
{
    if constexpr (HAS_FUSED_MUL_ADD) {  // callers test it too; the 910A build never names the API
        if (byRow) {
            const AscendC::BinaryRepeatParams params(1, 0, 0, 8, 0, 0);
            const uint8_t repeats = static_cast<uint8_t>(width / FP32_PER_REPEAT);
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::FusedMulAdd(tile[r * stride], konst, brcb[r * FP32_PER_BLOCK], FP32_PER_REPEAT, repeats,
                                     params);
            }
            return;
        }
        const uint8_t tileRep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
        const AscendC::BinaryRepeatParams params(1, 0, 0, tileRep, 0, 1);
        for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
            const uint64_t w = Min(FP32_PER_REPEAT, width - c);
            AscendC::FusedMulAdd(tile[c], konst, brcb, w, static_cast<uint8_t>(rows), params);
        }
    }
}

// acc[r, 0:d] = alpha[r] * acc[r, 0:d] + pv[r, 0:d] in one FusedMulAdd pass (where
// HAS_FUSED_MUL_ADD; the running output's rescale and its P.V update), brcb holding alpha
// (BroadcastRows). acc and pv: [rows, d] fp32, d a multiple of 8.
__aicore__ inline void RescaleAddRows(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &brcb,
                                      const AscendC::LocalTensor<float> &pv, uint32_t rows, uint32_t d)
{
    if constexpr (HAS_FUSED_MUL_ADD) {
        const uint8_t rowRep = static_cast<uint8_t>(d / FP32_PER_BLOCK);
        const AscendC::BinaryRepeatParams params(1, 0, 1, rowRep, 1, rowRep);
        for (uint32_t c = 0; c < d; c += FP32_PER_REPEAT) {
            const uint64_t w = Min(FP32_PER_REPEAT, d - c);
            AscendC::FusedMulAdd(acc[c], brcb, pv[c], w, static_cast<uint8_t>(rows), params);
        }
    }
}

// 16-bit (half) row operations of the high-performance softmax: a [rows, width] tile with
// contiguous rows (row stride width), width a multiple of 128 (one 256-B repeat of half),
// width / 16 <= 255 (the repeat stride in 32-B blocks); rows <= 255. One repeat holds half as
// many fp32 elements, so these take half the repeats of their fp32 counterparts.
constexpr uint32_t B16_PER_REPEAT = 128;  // one 256-B vector repeat of a 16-bit type
constexpr uint32_t B16_PER_BLOCK = 16;    // one 32-B data block of a 16-bit type

// dst[r] = max of tile[r, 0:width]: the 128-column chunks folded into scratch [rows, 128] with
// element-wise Max, then one WholeReduceMax repeat per row (ORDER_ONLY_VALUE: dav-c220).
template <typename T>
__aicore__ inline void ReduceRowsMaxB16(const AscendC::LocalTensor<T> &dst, const AscendC::LocalTensor<T> &tile,
                                        const AscendC::LocalTensor<T> &scratch, uint32_t rows, uint32_t width)
{
    const uint8_t tileRep = static_cast<uint8_t>(width / B16_PER_BLOCK);
    constexpr uint8_t SCRATCH_REP = B16_PER_REPEAT / B16_PER_BLOCK;
    if (width == B16_PER_REPEAT) {
        AscendC::WholeReduceMax(dst, tile, B16_PER_REPEAT, static_cast<int32_t>(rows), 1, 1, tileRep,
                                AscendC::ReduceOrder::ORDER_ONLY_VALUE);
        return;
    }
    const AscendC::BinaryRepeatParams first(1, 1, 1, SCRATCH_REP, tileRep, tileRep);
    AscendC::Max(scratch, tile, tile[B16_PER_REPEAT], B16_PER_REPEAT, static_cast<uint8_t>(rows), first);
    const AscendC::BinaryRepeatParams next(1, 1, 1, SCRATCH_REP, SCRATCH_REP, tileRep);
    for (uint32_t c = 2 * B16_PER_REPEAT; c < width; c += B16_PER_REPEAT) {
        AscendC::Max(scratch, scratch, tile[c], B16_PER_REPEAT, static_cast<uint8_t>(rows), next);
    }
    AscendC::WholeReduceMax(dst, scratch, B16_PER_REPEAT, static_cast<int32_t>(rows), 1, 1, SCRATCH_REP,
                            AscendC::ReduceOrder::ORDER_ONLY_VALUE);
}

// tile[r, 0:width] -= value of row r, brcb [align8(rows), 16] (Brcb of the row values: one 32-B
// block per row) read with block stride 0.
template <typename T>
__aicore__ inline void SubtractRowsB16(const AscendC::LocalTensor<T> &tile, const AscendC::LocalTensor<T> &brcb,
                                       uint32_t rows, uint32_t width)
{
    const uint8_t tileRep = static_cast<uint8_t>(width / B16_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 0, tileRep, tileRep, 1);
    for (uint32_t c = 0; c < width; c += B16_PER_REPEAT) {
        AscendC::Sub(tile[c], tile[c], brcb, B16_PER_REPEAT, static_cast<uint8_t>(rows), params);
    }
}

// tile[r, 0:width] = tile[r, 0:width] (OP) rowValues[r] on every architecture: BroadcastRows into
// brcb ([align8(rows), 8] fp32) + ApplyRows where there is Brcb, else per row through the scalar
// unit (brcb unused).
template <Op OP>
__aicore__ inline void ApplyRowValues(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &brcb,
                                      const AscendC::LocalTensor<float> &rowValues, uint32_t rows, uint32_t width,
                                      uint32_t stride)
{
    if constexpr (HAS_BRCB) {
        BroadcastRows(brcb, rowValues, rows);
        ApplyRows<OP>(tile, brcb, rows, width, stride);
    } else {
        // rows scalar reads per call, independent of width.
        WaitForPipe<AscendC::HardEvent::V_S>();
        for (uint32_t r = 0; r < rows; ++r) {
            const float value = rowValues.GetValue(r);
            const AscendC::LocalTensor<float> row = tile[r * stride];
            if constexpr (OP == Op::SUB) {
                AscendC::Adds(row, row, -value, width);
            } else if constexpr (OP == Op::MUL) {
                AscendC::Muls(row, row, value, width);
            } else {
                AscendC::Muls(row, row, 1.0f / value, width);
            }
        }
    }
}

// tile[0:count] = cap * tanh(scale * tile[0:count] / cap), cap > 0: flash-attn's soft-capping of
// the scaled scores. Composed of vector instructions every architecture has: Ascend C's own Tanh
// (asc-devkit include/adv_api/math/tanh.h) needs a scratch buffer and exists for arch 2201 and
// 2002 but not 1001 (910A); it uses the same exponential formula,
//   cap * tanh(y / cap) = cap - 2 cap / (exp(2 y / cap) + 1),  y = scale * tile,
// which is exact at both ends (exp -> inf gives cap, exp -> 0 gives -cap, so large scores stay
// finite and ordered) and has an absolute error of a few fp32 ulps of cap everywhere -- relative to
// a capped score y << cap that is about cap / |y| ulps (the cancellation of 1 - 2 / (1 + exp(2x))
// near x = 0): far below float16 / bfloat16 rounding, but above a float32 naive attention's error
// when cap is 20 or more times the scores (docs/attention_options.md#soft-capping-flashattentionv3).
// konst: one 32-B block of fp32 scratch, filled with -2 cap and read with block and repeat stride
// 0 as Div's dividend.
// shifted: leave out the final + cap (tile = cap * tanh(...) - cap), one pass less, for a softmax that
// adds cap to its LSE instead (a constant on every score of a row does not change P).
__aicore__ inline void SoftCap(const AscendC::LocalTensor<float> &tile, const AscendC::LocalTensor<float> &konst,
                               uint32_t count, float scale, float cap, bool shifted = false)
{
    AscendC::Muls(tile, tile, 2.0f * scale / cap, static_cast<int32_t>(count));
    AscendC::Exp(tile, tile, static_cast<int32_t>(count));
    AscendC::Adds(tile, tile, 1.0f, static_cast<int32_t>(count));
    AscendC::Duplicate(konst, -2.0f * cap, static_cast<int32_t>(FP32_PER_BLOCK));
    const AscendC::BinaryRepeatParams params(1, 0, 1, 8, 0, 8);  // dst, konst, tile: blk, then rep strides
    constexpr uint32_t MAX_REPEATS = 255;
    uint32_t done = 0;
    while (done < count) {
        const uint32_t repeats = Min((count - done) / FP32_PER_REPEAT, MAX_REPEATS);
        const uint32_t width = repeats > 0 ? FP32_PER_REPEAT : count - done;  // a last partial repeat
        const uint32_t times = repeats > 0 ? repeats : 1;
        AscendC::Div(tile[done], konst, tile[done], width, static_cast<uint8_t>(times), params);
        done += width * times;
    }
    if (!shifted) {
        AscendC::Adds(tile, tile, cap, static_cast<int32_t>(count));
    }
}

// Bits [0, k) of a 64-bit mask word (k >= 64: all of them; a shift by 64 would be undefined).
__aicore__ inline uint64_t LowBits(uint32_t k) { return k >= 64 ? ~0ULL : ((1ULL << k) - 1); }

// The bit mask of elements [lo, hi) of one repeat (hi <= 128): mask[0] holds elements 0..63,
// mask[1] 64..127 (a 16-bit type's repeat; a 32-bit type's has only mask[0], mask[1] stays 0).
__aicore__ inline void RepeatRangeBits(uint32_t lo, uint32_t hi, uint64_t mask[2])
{
    mask[0] = LowBits(hi) & ~LowBits(lo);
    mask[1] = (hi > 64 ? LowBits(hi - 64) : 0) & ~(lo > 64 ? LowBits(lo - 64) : 0);
}

// Sets columns [from, to) of the row starting at rowBase (a multiple of 16 elements) to
// `value`: whole repeats (64 fp32 / 128 half columns) as one contiguous run, a partial repeat
// through a bit mask. E is float or a 16-bit type (the high-performance precision's half tile).
template <typename E>
__aicore__ inline void FillColumns(const AscendC::LocalTensor<E> &tile, uint32_t rowBase, uint32_t from, uint32_t to,
                                   E value)
{
    constexpr uint32_t PER_REPEAT = 256 / sizeof(E);
    while (from < to) {
        const uint32_t chunk = from / PER_REPEAT * PER_REPEAT;
        if (from == chunk && to - chunk >= PER_REPEAT) {
            const uint32_t whole = (to - chunk) / PER_REPEAT * PER_REPEAT;
            AscendC::Duplicate(tile[rowBase + chunk], value, static_cast<int32_t>(whole));
            from = chunk + whole;
            continue;
        }
        const uint32_t end = Min(chunk + PER_REPEAT, to);
        uint64_t mask[2];
        RepeatRangeBits(from - chunk, end - chunk, mask);
        AscendC::Duplicate(tile[rowBase + chunk], value, mask, 1, 1, 8);
        from = end;
    }
}

// Sets the columns of the row starting at rowBase outside [from, to) -- [0, from) and [to, n) --
// to `value`, for a row of n columns (from <= to <= n). A row of at most one repeat takes both
// sides in one bit-masked Duplicate.
template <typename E>
__aicore__ inline void FillOutside(const AscendC::LocalTensor<E> &tile, uint32_t rowBase, uint32_t from, uint32_t to,
                                   uint32_t n, E value)
{
    if (n <= 256 / sizeof(E)) {
        uint64_t all[2], seen[2];
        RepeatRangeBits(0, n, all);
        RepeatRangeBits(from, to, seen);
        uint64_t mask[2] = {all[0] & ~seen[0], all[1] & ~seen[1]};
        if (mask[0] != 0 || mask[1] != 0) {
            AscendC::Duplicate(tile[rowBase], value, mask, 1, 1, 8);
        }
        return;
    }
    FillColumns(tile, rowBase, 0, from, value);
    FillColumns(tile, rowBase, to, n, value);
}

}  // namespace attn_rows
