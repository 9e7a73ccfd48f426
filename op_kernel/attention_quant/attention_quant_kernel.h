// attention_quant_kernel.h -- AttentionQuant: x (half / bfloat16) -> y int8 and scale fp32, one
// scale per block of blockSize rows of each (b, head), optionally smoothed (docs/int8.md).
//   mean[c]  = sum_s x[s, c] / S                    (smooth only; fp32; exact for softmax: it shifts
//                                                    each query row's scores by q . mean)
//   x'       = x - mean                             (smooth) or x
//   scale_b  = max(|x'| over the block) / 127       (fp32; a block of zeros gets FLT_MIN / 127)
//   y        = round(x' / scale_b)                  (fp32 -> half, then half -> int8 with CAST_RINT:
//                                                    the A2/A3 vector unit has no direct fp32 -> int8 Cast,
//                                                    asc-devkit Cast.md; |x'/scale| <= 127)
// A vector-only kernel (KERNEL_TYPE_AIV_ONLY; on 310P the AI Core's vector unit, KERNEL_TYPE_AICORE). A work unit is one block of one head, or one whole
// head when smoothing (its mean spans the sequence); AIV c takes units [c * per, (c + 1) * per).
// A block moves through UB chunkRows rows at a time ([chunkRows, D] as T, fp32, |fp32| and int8; op_host
// sizes chunkRows to the UB): one pass when the block is one chunk, else a pass for its max |x'| and a
// second that quantizes it -- except when smoothing with foldPeaks (op_host: the blocks' per-channel
// bounds fit UB), where the mean pass also yields every block's max |x'| (MeanAndBounds, FoldedPeak)
// and x is read twice in all.
#pragma once

#include "kernel_operator.h"

#include "attention_quant_tiling.h"
#include "attention_row_ops.h"
#include "flash_attention_tiling.h"

namespace attn_quant {

using attn_rows::Min;
using attn_rows::WaitForPipe;

constexpr float INT8_MAX_VALUE = 127.0f;
constexpr float SCALE_FLOOR = 1.17549435082228750797e-38f;  // FLT_MIN: amax of a block of zeros
constexpr float FLT_MAX_VALUE = 3.40282346638528859812e+38f;  // FLT_MAX: the bounds' start
constexpr uint32_t FP32_PER_REPEAT = 64;                    // one 256-B repeat of fp32
constexpr uint32_t FP32_PER_BLOCK = 8;                      // one 32-B block of fp32
constexpr uint32_t MAX_REPEATS = 255;                       // repeatTime is uint8_t
// half -> int8 to nearest even: CAST_RINT on A2/A3; the Atlas inference AI Core (310P) and the
// training series (910A) take no CAST_RINT for the pair, and CAST_NONE rounds to nearest even
// where the conversion loses precision (asc-devkit Cast.md, RoundMode and the per-product tables).
#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
constexpr AscendC::RoundMode HALF_TO_INT8_ROUND = AscendC::RoundMode::CAST_NONE;
#else
constexpr AscendC::RoundMode HALF_TO_INT8_ROUND = AscendC::RoundMode::CAST_RINT;
#endif

template <typename T>
class AttentionQuantKernel {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR scale, const AttentionQuantTilingData *tiling,
                                AscendC::TPipe *pipe)
    {
        td_ = tiling;
        pipe_ = pipe;
        const uint32_t d = td_->headDim;
        const uint64_t elems = static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seq * d;
        xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(x), elems);
        yGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int8_t *>(y), elems);
        scaleGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(scale),
                                 static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->numBlocks);
        const uint32_t tile = td_->chunkRows * d;
        pipe_->InitBuffer(inQue_, 1, tile * sizeof(T));           // [c, D] T, then half for the int8 Cast
        pipe_->InitBuffer(valBuf_, tile * sizeof(float));         // [c, D] fp32 x'
        pipe_->InitBuffer(absBuf_, tile * sizeof(float));         // [c, D] fp32 |x'|
        pipe_->InitBuffer(outQue_, 1, tile * sizeof(int8_t));     // [c, D] int8 (and ReduceMax's scratch)
        pipe_->InitBuffer(meanBuf_, d * sizeof(float));           // [D] fp32
        pipe_->InitBuffer(maxBuf_, 32);                           // ReduceMax result
        pipe_->InitBuffer(scaleQue_, 1, 32);                      // one scale, DataCopyPad'ed out
        if (td_->foldPeaks != 0) {
            pipe_->InitBuffer(boundBuf_, td_->numBlocks * 2 * d * sizeof(float));  // [numBlocks, 2, D] fp32
        }
        rowStride_ = td_->layout == FA_LAYOUT_BNSD ? d : td_->numHeads * d;
    }

    __aicore__ inline void Process()
    {
        const uint32_t core = AscendC::GetBlockIdx();
        if (core >= td_->usedCoreNum) {
            return;
        }
        const uint32_t units = td_->batch * td_->numHeads * td_->unitsPerHead;
        const uint32_t first = core * td_->unitsPerCore;
        const uint32_t end = Min(units, first + td_->unitsPerCore);
        for (uint32_t unit = first; unit < end; ++unit) {
            const uint32_t head = unit / td_->unitsPerHead;  // b * numHeads + n
            if (td_->foldPeaks != 0) {
                MeanAndBounds(head);
                for (uint32_t blk = 0; blk < td_->numBlocks; ++blk) {
                    QuantizeWithPeak(head, blk, FoldedPeak(blk));
                }
            } else if (td_->smooth != 0) {
                ChannelMean(head);
                for (uint32_t blk = 0; blk < td_->numBlocks; ++blk) {
                    QuantizeBlock(head, blk);
                }
            } else {
                QuantizeBlock(head, unit % td_->unitsPerHead);
            }
        }
    }

private:
    // Element offset of row s of head (b * numHeads + n).
    __aicore__ inline uint64_t RowOffset(uint32_t head, uint32_t s) const
    {
        const uint64_t d = td_->headDim;
        if (td_->layout == FA_LAYOUT_BNSD) {
            return (static_cast<uint64_t>(head) * td_->seq + s) * d;
        }
        const uint32_t b = head / td_->numHeads, n = head % td_->numHeads;
        return ((static_cast<uint64_t>(b) * td_->seq + s) * td_->numHeads + n) * d;
    }

    // Rows [s0, s0 + rows) of the head into UB as fp32 [rows, D] (valBuf_).
    __aicore__ inline void LoadRows(uint32_t head, uint32_t s0, uint32_t rows)
    {
        const uint32_t d = td_->headDim;
        AscendC::LocalTensor<T> in = inQue_.AllocTensor<T>();
        const uint16_t rowBlocks = static_cast<uint16_t>(d * sizeof(T) / 32);
        const AscendC::DataCopyParams params{static_cast<uint16_t>(rows), rowBlocks,
                                             static_cast<uint16_t>((rowStride_ - d) * sizeof(T) / 32), 0};
        AscendC::DataCopy(in, xGm_[RowOffset(head, s0)], params);
        inQue_.EnQue(in);
        in = inQue_.DeQue<T>();
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::Cast(val, in, AscendC::RoundMode::CAST_NONE, rows * d);
        inQue_.FreeTensor(in);
    }

    // mean[c] over the head's S rows, by chunks: each chunk's rows summed pairwise (log2 rows Adds).
    __aicore__ inline void ChannelMean(uint32_t head)
    {
        const uint32_t d = td_->headDim;
        AscendC::LocalTensor<float> mean = meanBuf_.Get<float>();
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::Duplicate(mean, 0.0f, d);
        for (uint32_t s0 = 0; s0 < td_->seq; s0 += td_->chunkRows) {
            uint32_t rows = Min(td_->chunkRows, td_->seq - s0);
            LoadRows(head, s0, rows);
            while (rows > 1) {
                const uint32_t half = rows / 2;  // rows [rows - half, rows) onto [0, half): disjoint
                AscendC::Add(val, val, val[(rows - half) * d], half * d);
                rows -= half;
            }
            AscendC::Add(mean, mean, val, d);
        }
        AscendC::Muls(mean, mean, 1.0f / static_cast<float>(td_->seq), d);
    }

    // Folds rows [0, rows) of the [rows, D] fp32 `tile` onto its row 0 with OP (log2 rows steps, each
    // over disjoint halves), then into acc [D] with OP.
    template <bool MAX>
    __aicore__ inline void FoldRows(const AscendC::LocalTensor<float> &acc, const AscendC::LocalTensor<float> &tile,
                                    uint32_t rows)
    {
        const uint32_t d = td_->headDim;
        while (rows > 1) {
            const uint32_t half = rows / 2;  // rows [rows - half, rows) onto [0, half): disjoint
            if constexpr (MAX) {
                AscendC::Max(tile, tile, tile[(rows - half) * d], half * d);
            } else {
                AscendC::Add(tile, tile, tile[(rows - half) * d], half * d);
            }
            rows -= half;
        }
        if constexpr (MAX) {
            AscendC::Max(acc, acc, tile, d);
        } else {
            AscendC::Add(acc, acc, tile, d);
        }
    }

    // ChannelMean's pass, block by block, also keeping each block's per-channel max of x and max of -x
    // (boundBuf_ [numBlocks, 2, D]): rounding is monotonic, so max |fl(x - mean)| over a block is
    // max over channels of fl(max x - mean) and fl(mean + max(-x)), exactly the peak a second pass over
    // x' would find (FoldedPeak).
    __aicore__ inline void MeanAndBounds(uint32_t head)
    {
        const uint32_t d = td_->headDim;
        AscendC::LocalTensor<float> mean = meanBuf_.Get<float>();
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::LocalTensor<float> work = absBuf_.Get<float>();
        AscendC::LocalTensor<float> bounds = boundBuf_.Get<float>();
        AscendC::Duplicate(mean, 0.0f, d);
        AscendC::Duplicate(bounds, -FLT_MAX_VALUE, td_->numBlocks * 2 * d);
        for (uint32_t blk = 0; blk < td_->numBlocks; ++blk) {
            const uint32_t b0 = blk * td_->blockSize;
            const uint32_t bEnd = Min(b0 + td_->blockSize, td_->seq);
            for (uint32_t s0 = b0; s0 < bEnd; s0 += td_->chunkRows) {
                const uint32_t rows = Min(td_->chunkRows, bEnd - s0);
                LoadRows(head, s0, rows);
                AscendC::Adds(work, val, 0.0f, rows * d);  // a copy: x + 0 == x
                FoldRows<true>(bounds[blk * 2 * d], work, rows);
                AscendC::Muls(work, val, -1.0f, rows * d);
                FoldRows<true>(bounds[blk * 2 * d + d], work, rows);
                FoldRows<false>(mean, val, rows);
            }
        }
        AscendC::Muls(mean, mean, 1.0f / static_cast<float>(td_->seq), d);
    }

    // max |x'| of block blk from its bounds and the mean (after MeanAndBounds), floored as QuantizeBlock's.
    __aicore__ inline float FoldedPeak(uint32_t blk)
    {
        const uint32_t d = td_->headDim;
        AscendC::LocalTensor<float> mean = meanBuf_.Get<float>();
        AscendC::LocalTensor<float> bounds = boundBuf_.Get<float>();
        AscendC::LocalTensor<float> work = absBuf_.Get<float>();
        AscendC::LocalTensor<float> amax = maxBuf_.Get<float>();
        AscendC::LocalTensor<int8_t> scratch = outQue_.AllocTensor<int8_t>();
        AscendC::Sub(work, bounds[blk * 2 * d], mean, d);     // max x - mean
        AscendC::Add(work[d], bounds[blk * 2 * d + d], mean, d);  // mean - min x
        AscendC::Max(work, work, work[d], d);
        AscendC::ReduceMax(amax, work, scratch.template ReinterpretCast<float>(), d);
        outQue_.FreeTensor(scratch);
        WaitForPipe<AscendC::HardEvent::V_S>();
        const float peak = amax.GetValue(0);
        return peak > SCALE_FLOOR ? peak : SCALE_FLOOR;
    }

    // x' -= mean, row by row: one instruction per 64 columns, repeated over the rows (src1 stays).
    __aicore__ inline void SubtractMean(uint32_t rows)
    {
        const uint32_t d = td_->headDim;
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::LocalTensor<float> mean = meanBuf_.Get<float>();
        AscendC::BinaryRepeatParams params;
        params.dstRepStride = static_cast<uint8_t>(d / FP32_PER_BLOCK);
        params.src0RepStride = static_cast<uint8_t>(d / FP32_PER_BLOCK);
        params.src1RepStride = 0;
        for (uint32_t r0 = 0; r0 < rows; r0 += MAX_REPEATS) {
            const uint8_t reps = static_cast<uint8_t>(Min(MAX_REPEATS, rows - r0));
            for (uint32_t c0 = 0; c0 < d; c0 += FP32_PER_REPEAT) {
                const uint64_t mask = Min(FP32_PER_REPEAT, d - c0);
                AscendC::Sub(val[r0 * d + c0], val[r0 * d + c0], mean[c0], mask, reps, params);
            }
        }
    }

    // Rows [s0, s0 + rows) into valBuf_ as fp32 x' (the mean subtracted when smoothing).
    __aicore__ inline void LoadChunk(uint32_t head, uint32_t s0, uint32_t rows)
    {
        LoadRows(head, s0, rows);
        if (td_->smooth != 0) {
            SubtractMean(rows);
        }
    }

    // max |x'| over the chunk in valBuf_ (count elements); `out` lends ReduceMax its scratch.
    __aicore__ inline float ChunkPeak(uint32_t count)
    {
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::LocalTensor<float> mag = absBuf_.Get<float>();
        AscendC::LocalTensor<float> amax = maxBuf_.Get<float>();
        AscendC::LocalTensor<int8_t> scratch = outQue_.AllocTensor<int8_t>();
        AscendC::Abs(mag, val, count);
        AscendC::ReduceMax(amax, mag, scratch.template ReinterpretCast<float>(), count);
        outQue_.FreeTensor(scratch);
        WaitForPipe<AscendC::HardEvent::V_S>();
        return amax.GetValue(0);
    }

    // y = rint(x' * (127 / peak)) of the chunk in valBuf_, via half (|y| <= 127 is exact in half
    // before the rounding to int8), to GM rows [s0, s0 + rows).
    __aicore__ inline void StoreChunk(uint32_t head, uint32_t s0, uint32_t rows, float peak)
    {
        const uint32_t d = td_->headDim;
        const uint32_t count = rows * d;
        AscendC::LocalTensor<float> val = valBuf_.Get<float>();
        AscendC::Muls(val, val, INT8_MAX_VALUE / peak, count);
        AscendC::LocalTensor<half> narrow = inQue_.AllocTensor<half>();
        AscendC::LocalTensor<int8_t> out = outQue_.AllocTensor<int8_t>();
        AscendC::Cast(narrow, val, AscendC::RoundMode::CAST_NONE, count);
        AscendC::Cast(out, narrow, HALF_TO_INT8_ROUND, count);
        inQue_.FreeTensor(narrow);
        outQue_.EnQue(out);
        out = outQue_.DeQue<int8_t>();
#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
        // No DataCopyPad (dav-m200 / dav-c100): rows of D int8, whole 32-B blocks (op_host asks
        // D % 32 == 0 on these chips), rowStride_ - D elements apart in GM.
        const AscendC::DataCopyParams rowsOut{static_cast<uint16_t>(rows), static_cast<uint16_t>(d / 32), 0,
                                              static_cast<uint16_t>((rowStride_ - d) / 32)};
        AscendC::DataCopy(yGm_[RowOffset(head, s0)], out, rowsOut);
#else
        // BNSD: the chunk's rows are contiguous in GM, one block of rows * D bytes. Otherwise one block
        // per row (D bytes; DataCopyPad starts each block at a 32-B boundary of UB, so op_host asks
        // D % 32 == 0 there).
        const bool contiguous = td_->layout == FA_LAYOUT_BNSD;
        const AscendC::DataCopyExtParams rowsOut{static_cast<uint16_t>(contiguous ? 1 : rows), contiguous ? count : d,
                                                 0, static_cast<uint32_t>(contiguous ? 0 : rowStride_ - d), 0};
        AscendC::DataCopyPad(yGm_[RowOffset(head, s0)], out, rowsOut);
#endif
        outQue_.FreeTensor(out);
    }

    __aicore__ inline void QuantizeBlock(uint32_t head, uint32_t blk)
    {
        const uint32_t d = td_->headDim;
        const uint32_t b0 = blk * td_->blockSize;
        const uint32_t bEnd = Min(b0 + td_->blockSize, td_->seq);
        const uint32_t c = td_->chunkRows;
        float peak = 0.0f;
        for (uint32_t s0 = b0; s0 < bEnd; s0 += c) {
            const uint32_t rows = Min(c, bEnd - s0);
            LoadChunk(head, s0, rows);
            const float chunkPeak = ChunkPeak(rows * d);
            peak = chunkPeak > peak ? chunkPeak : peak;
        }
        peak = peak > SCALE_FLOOR ? peak : SCALE_FLOOR;
        if (bEnd - b0 <= c) {
            StoreChunk(head, b0, bEnd - b0, peak);  // the block is still in UB
            WriteScale(head, blk, peak);
        } else {
            QuantizeWithPeak(head, blk, peak);
        }
    }

    // Block blk of the head quantized with its known peak, chunk by chunk, and its scale written.
    __aicore__ inline void QuantizeWithPeak(uint32_t head, uint32_t blk, float peak)
    {
        const uint32_t b0 = blk * td_->blockSize;
        const uint32_t bEnd = Min(b0 + td_->blockSize, td_->seq);
        const uint32_t c = td_->chunkRows;
        for (uint32_t s0 = b0; s0 < bEnd; s0 += c) {
            const uint32_t rows = Min(c, bEnd - s0);
            LoadChunk(head, s0, rows);
            StoreChunk(head, s0, rows, peak);
        }
        WriteScale(head, blk, peak);
    }

    // scale[head, blk] = peak / 127.
    __aicore__ inline void WriteScale(uint32_t head, uint32_t blk, float peak)
    {
#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2002 || __NPU_ARCH__ == 1001)
        // No DataCopyPad on these archs: the scale by the scalar unit (as the coupled forward's LSE
        // tail, flash_attention_coupled_kernel.h WriteOutput), written back from dav-m200's data
        // cache (dav-c100 has no GM form of DataCacheCleanAndInvalid).
        scaleGm_.SetValue(static_cast<uint64_t>(head) * td_->numBlocks + blk, peak / INT8_MAX_VALUE);
#if __NPU_ARCH__ == 2002
        AscendC::DataCacheCleanAndInvalid<float, AscendC::CacheLine::ENTIRE_DATA_CACHE>(scaleGm_);
#endif
#else
        StoreScale(head, blk, peak);
#endif
    }

    // The block's scale to GM through UB (DataCopyPad: one float).
    __aicore__ inline void StoreScale(uint32_t head, uint32_t blk, float peak)
    {
        AscendC::LocalTensor<float> one = scaleQue_.AllocTensor<float>();
        one.SetValue(0, peak / INT8_MAX_VALUE);
        WaitForPipe<AscendC::HardEvent::S_MTE3>();  // the scalar unit's write lands before MTE3 reads it
        scaleQue_.EnQue(one);
        one = scaleQue_.DeQue<float>();
        const AscendC::DataCopyExtParams scaleOut{1, static_cast<uint32_t>(sizeof(float)), 0, 0, 0};
        AscendC::DataCopyPad(scaleGm_[static_cast<uint64_t>(head) * td_->numBlocks + blk], one, scaleOut);
        scaleQue_.FreeTensor(one);
    }

    const AttentionQuantTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;
    AscendC::GlobalTensor<T> xGm_;
    AscendC::GlobalTensor<int8_t> yGm_;
    AscendC::GlobalTensor<float> scaleGm_;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> inQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> scaleQue_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> valBuf_, absBuf_, meanBuf_, maxBuf_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> boundBuf_;  // foldPeaks: [numBlocks, 2, D] fp32 max x, max -x
    uint32_t rowStride_ = 0;  // elements between consecutive rows of a head in GM
};

}  // namespace attn_quant
