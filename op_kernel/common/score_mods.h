// score_mods.h -- FlashAttentionV5's score modifiers on a score tile in UB (docs/attention_options.md
// "Score modifiers" for the semantics, "Score modifiers in the forward (FlashAttentionV5)" for the
// method). For query row i and key j of sequence b, query head h (diag = Skv - Sq):
//   S_ij = cap(scale * q_i . k_j) - slope[b, h] * |i + diag - j| + F[b, h, i, j]
// and exp(sink[h]) joins the row's softmax denominator. The kernel's OnlineSoftmax applies the
// cap and the band (-inf) first, then calls ScoreMods::AddBias through its bias hook, before the
// row max; the sink starts the row state (OnlineSoftmax::Reset: m = sink, l = 1).
//
// ALiBi is computed from the slope and the indices, never stored as an S x S bias. For a tile of
// rows [row0, row0 + rows) and keys [col0, col0 + cols), with d0 = row0 + diag - col0 the distance
// of its first element, element (r, c) has distance d0 + r - c, so
//   - every element left of (or on) the diagonal (d0 >= cols - 1, every causal tile):
//     bias = -slope * ((cols - 1) - c) - slope * (d0 - cols + 1 + r): one key ramp for the tile,
//     subtracted from every row (block stride 0), and one value per row (Brcb)
//   - every element right of it (d0 + rows - 1 <= 0): bias = -slope * c - slope * (-d0 - r)
//   - the tiles the diagonal crosses: bias = -slope * |c - (d0 + r)| per row (four instructions a
//     row; only the tiles of the diagonal). With a band that shows no key right of the diagonal
//     (causal) and 2-byte inputs, these take the left form too, about the tile's last visible key
//     (the cancellation bounded by slope * (rows - 1), far below float16 / bfloat16 rounding).
// Both terms are the slope times a non-negative integer (exact in fp32), so the bias is formed
// without cancellation. The integer ramps 0, 1, 2, ... of keys and rows are made once per launch
// (CreateVecIndex); the key ramp slope * c once per item; so a tile costs two passes over its
// elements (plus [n] and [rows] work): two more than the plain softmax's seven or so.
//
// The float mask (atten_bias, the input dtype T, [bb, bn, bq, Skv], bb in {1, B}, bn in {1, N},
// bq in {1, Sq}; a dimension of size 1 is broadcast and read once) is read tile by tile, only the
// tile's rows and keys, cast to fp32 and added (-inf hides a key). It is never expanded.
// Buffers (UB, c = the score tile's rows, n = blockN, t = sizeof(T); op_host's policy budgets the
// same bytes: tiling_policy.cpp AlibiUbBytes / FloatBiasUbBytes):
//   alibi  key ramp, slope * key ramp, scratch row: 3 x [align16(n)] fp32; row ramp and row
//          values 2 x [align8(c)] fp32; Brcb rows [c, 8] fp32
//   bias   [R, align16(n)] T as loaded (none for T = float) and [R, align16(n)] fp32, R = biasRows
#pragma once

#include "kernel_operator.h"

#include "attention_row_ops.h"
#include "flash_attention_tiling.h"

namespace score_mods {

using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;

constexpr uint32_t KEY_ALIGN = 16;  // key ramps and bias rows hold align16(n) columns

__aicore__ inline uint32_t AlignUp(uint32_t a, uint32_t b) { return (a + b - 1) / b * b; }

// The GM inputs of the modifiers (null when absent).
struct ScoreModsGm {
    GM_ADDR alibiSlopes = nullptr;  // float32 [B, N]
    GM_ADDR sinks = nullptr;        // float32 [N]
    GM_ADDR attenBias = nullptr;    // T [bb, bn, bq, Skv]
};

template <AscendC::HardEvent EVENT>
__aicore__ inline void WaitFor()
{
    event_t id = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
    AscendC::SetFlag<EVENT>(id);
    AscendC::WaitFlag<EVENT>(id);
}

// scores[r, 0:width] (OP) src[0:width] for r < rows: one source row for every tile row (src1
// block stride 1, repeat stride 0), one instruction per 64 columns; OP is true for Add, false for
// Sub. srcRep: the source's row stride in 32-B blocks (0: the same row for all).
template <bool ADD>
__aicore__ inline void CombineRows(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t rows,
                                   const AscendC::LocalTensor<float> &src, uint32_t width, uint8_t srcRep)
{
    const uint8_t rep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams params(1, 1, 1, rep, rep, srcRep);
    for (uint32_t c = 0; c < width; c += FP32_PER_REPEAT) {
        const uint64_t w = attn_rows::Min(FP32_PER_REPEAT, width - c);
        const AscendC::LocalTensor<float> dst = scores[c];
        if constexpr (ADD) {
            AscendC::Add(dst, dst, src[c], w, static_cast<uint8_t>(rows), params);
        } else {
            AscendC::Sub(dst, dst, src[c], w, static_cast<uint8_t>(rows), params);
        }
    }
}

// ALiBi on score tiles (see the header comment).
class AlibiRamps {
public:
    __aicore__ static inline uint32_t UbBytes(uint32_t c, uint32_t n)
    {
        const uint32_t cols = AlignUp(n, KEY_ALIGN) * sizeof(float), rows = AlignUp(c, FP32_PER_BLOCK) * sizeof(float);
        return 3 * cols + 2 * rows + c * FP32_PER_BLOCK * sizeof(float);
    }

    // leftOnly: no visible key lies right of the diagonal (next_tokens <= 0) and the inputs are 2-byte,
    // whose rounding dwarfs the bounded cancellation of the crossing tiles' two-pass form.
    __aicore__ inline void Init(AscendC::TPipe *pipe, uint32_t c, uint32_t n, GM_ADDR slopes, uint64_t count,
                                bool leftOnly)
    {
        leftOnly_ = leftOnly;
        cols_ = AlignUp(n, KEY_ALIGN);
        rowsCap_ = AlignUp(c, FP32_PER_BLOCK);
        pipe->InitBuffer(buf_, UbBytes(c, n));
        AscendC::LocalTensor<float> all = buf_.Get<float>();
        keyRamp_ = all;
        slopeRamp_ = all[cols_];
        scratch_ = all[2 * cols_];
        rowRamp_ = all[3 * cols_];
        rowValues_ = all[3 * cols_ + rowsCap_];
        brcb_ = all[3 * cols_ + 2 * rowsCap_];
        AscendC::CreateVecIndex(keyRamp_, 0.0f, cols_);   // 0, 1, 2, ...: keys of a tile
        AscendC::CreateVecIndex(rowRamp_, 0.0f, rowsCap_);  // 0, 1, 2, ...: rows of a tile
        slopesGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slopes), count);
    }

    // The slope of (sequence b, head h) of a problem with `heads` query heads; the key ramp
    // slope * c for its tiles.
    __aicore__ inline void StartItem(uint32_t b, uint32_t h, uint32_t heads, int64_t diag)
    {
        slope_ = slopesGm_.GetValue(static_cast<uint64_t>(b) * heads + h);
        diag_ = diag;
        AscendC::Muls(slopeRamp_, keyRamp_, slope_, static_cast<int32_t>(cols_));
    }

    // scores [rows, stride] fp32 of query rows [row0, row0 + rows) and keys [col0, col0 + cols)
    // += -slope * |i + diag - j| (columns [cols, stride) hold -inf and stay so). Each bias is the sum
    // of two products of the slope with non-negative integers (exact in fp32) that add up to the
    // distance, so no intermediate is larger than the bias itself (no cancellation near the
    // diagonal, where the probabilities are largest).
    __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t row0,
                                   uint32_t rows, uint32_t col0, uint32_t cols)
    {
        const int64_t d0 = static_cast<int64_t>(row0) + diag_ - static_cast<int64_t>(col0);
        const int32_t width = static_cast<int32_t>(stride);
        if (d0 >= static_cast<int64_t>(cols) - 1 || leftOnly_) {
            // Left of the diagonal: distance = (d0 + r - k) + (k - c) with k = cols - 1, both >= 0 on
            // the tile's keys. leftOnly_ (the band shows no key right of the diagonal, 2-byte inputs):
            // every visible key is left of it, so a tile the diagonal crosses takes the same two
            // passes with k = the tile's last visible key, min(cols - 1, d0 + rows - 1): k - c >= 0,
            // and d0 + r - k >= -(rows - 1) (the keys right of the diagonal are -inf already).
            // scratch = slope * (k - c); row values slope * (d0 - k + r).
            const int64_t last = d0 + static_cast<int64_t>(rows) - 1;
            int64_t k = static_cast<int64_t>(cols) - 1;
            k = last < k ? (last < 0 ? 0 : last) : k;
            AscendC::Adds(scratch_, keyRamp_, -static_cast<float>(k), width);   // c - k, exact
            AscendC::Muls(scratch_, scratch_, -slope_, width);
            CombineRows<false>(scores, stride, rows, scratch_, stride, 0);
            SubtractRowTerms(scores, stride, rows, d0 - k);
            return;
        }
        if (d0 + static_cast<int64_t>(rows) - 1 <= 0) {
            // Right of it: distance = c + (-d0 - r), both >= 0. slope * c is the item's ramp.
            CombineRows<false>(scores, stride, rows, slopeRamp_, stride, 0);
            SubtractRowTerms(scores, stride, rows, -d0, true);
            return;
        }
        // The diagonal crosses the tile: row by row, slope * |c - (d0 + r)| from the exact integer
        // distance (four instructions a row; only the tiles of the diagonal).
        for (uint32_t r = 0; r < rows; ++r) {
            const AscendC::LocalTensor<float> row = scores[r * stride];
            AscendC::Adds(scratch_, keyRamp_, -static_cast<float>(d0 + static_cast<int64_t>(r)), width);
            AscendC::Abs(scratch_, scratch_, width);
            AscendC::Muls(scratch_, scratch_, slope_, width);
            AscendC::Sub(row, row, scratch_, width);
        }
    }

    // The row terms of the last AddBias, to subtract from its rows (OnlineSoftmax::ScoresToProbs takes
    // them into its row max: no pass over the tile); false when that AddBias applied all of its bias.
    __aicore__ inline bool RowShift(AscendC::LocalTensor<float> *shift)
    {
        if (!pending_) return false;
        pending_ = false;
        *shift = rowValues_;
        return true;
    }

private:
    // rowValues_[r] = slope * (e + r) (descending: slope * (e - r)) for r < rows, the integer e + r
    // exact in fp32 before the one product: the row terms the scores [rows, stride] still lack
    // (to subtract), handed over by RowShift.
    __aicore__ inline void SubtractRowTerms(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t rows,
                                            int64_t e, bool descending = false)
    {
        const int32_t n = static_cast<int32_t>(rows);
        if (descending) {
            AscendC::Muls(rowValues_, rowRamp_, -1.0f, n);
            AscendC::Adds(rowValues_, rowValues_, static_cast<float>(e), n);
        } else {
            AscendC::Adds(rowValues_, rowRamp_, static_cast<float>(e), n);
        }
        AscendC::Muls(rowValues_, rowValues_, slope_, n);
        pending_ = true;  // RowShift hands them to the softmax, which folds them into its row max
        (void)scores;
        (void)stride;
    }

    AscendC::TBuf<AscendC::TPosition::VECCALC> buf_;
    AscendC::LocalTensor<float> keyRamp_, slopeRamp_, scratch_, rowRamp_, rowValues_, brcb_;
    AscendC::GlobalTensor<float> slopesGm_;
    uint32_t cols_ = 0, rowsCap_ = 0;
    bool leftOnly_ = false;
    bool pending_ = false;  // rowValues_ hold the last tile's row terms (RowShift)
    float slope_ = 0.0f;
    int64_t diag_ = 0;
};

// The float mask's tiles (see the header comment).
template <typename T>
class FloatBiasTiles {
public:
    static constexpr bool FP32 = AscendC::IsSameType<T, float>::value;

    __aicore__ static inline uint32_t UbBytes(uint32_t rows, uint32_t n)
    {
        const uint32_t elems = rows * AlignUp(n, KEY_ALIGN);
        return (FP32 ? 0 : AlignUp(elems * sizeof(T), 32)) + elems * sizeof(float);
    }

    __aicore__ inline void Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *td, GM_ADDR bias)
    {
        td_ = td;
        rows_ = td->biasRows;
        const uint32_t elems = rows_ * AlignUp(td->blockN, KEY_ALIGN);
        pipe->InitBuffer(buf_, UbBytes(rows_, td->blockN));
        AscendC::LocalTensor<uint8_t> all = buf_.Get<uint8_t>();
        const uint32_t rawBytes = FP32 ? 0 : AlignUp(elems * sizeof(T), 32);
        raw_ = all.ReinterpretCast<T>();
        f32_ = all[rawBytes].ReinterpretCast<float>();
        biasGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(bias),
                                static_cast<uint64_t>(td->biasB) * td->biasN * td->biasQ * td->seqKv);
    }

    // scores [rows, stride] fp32 of (b, h), query rows [i0, i0 + rows), keys [j0, j0 + cols)
    // += the mask's elements (broadcast dims read once).
    __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t b, uint32_t h,
                                   uint32_t i0, uint32_t rows, uint32_t j0, uint32_t cols)
    {
        if (td_->biasQ == 1) {  // one row for every query: loaded once, added with a 0 row stride
            Load(RowIndex(b, h, 0), 1, j0, cols);
            CombineRows<true>(scores, stride, rows, f32_, cols, 0);
            return;
        }
        for (uint32_t r = 0; r < rows; r += rows_) {
            const uint32_t rr = attn_rows::Min(rows_, rows - r);
            const uint32_t pitch = Load(RowIndex(b, h, i0 + r), rr, j0, cols);
            CombineRows<true>(scores[r * stride], stride, rr, f32_, cols, static_cast<uint8_t>(pitch / FP32_PER_BLOCK));
        }
    }

private:
    // The mask row of (b, h, query i) with broadcast dims.
    __aicore__ inline uint64_t RowIndex(uint32_t b, uint32_t h, uint32_t i) const
    {
        const uint32_t bb = td_->biasB == 1 ? 0 : b, hh = td_->biasN == 1 ? 0 : h, ii = td_->biasQ == 1 ? 0 : i;
        return (static_cast<uint64_t>(bb) * td_->biasN + hh) * td_->biasQ + ii;
    }

    // f32_[r, 0:cols] = mask row (row0 + r) at keys [col0, col0 + cols), rows of the returned
    // pitch (elements: align32(cols * sizeof(T)) / sizeof(T), a multiple of 8).
    __aicore__ inline uint32_t Load(uint64_t row0, uint32_t rows, uint32_t col0, uint32_t cols)
    {
        constexpr uint32_t perBlock = 32 / sizeof(T);
        const uint32_t pitch = AlignUp(cols, perBlock);
        const AscendC::DataCopyExtParams p(static_cast<uint16_t>(rows), static_cast<uint32_t>(cols * sizeof(T)),
                                           static_cast<uint32_t>((td_->seqKv - cols) * sizeof(T)), 0, 0);
        const AscendC::DataCopyPadExtParams<T> pad(true, 0, static_cast<uint8_t>(pitch - cols), static_cast<T>(0.0f));
        WaitFor<AscendC::HardEvent::V_MTE2>();  // the previous tile's vector reads of raw_ / f32_ are done
        if constexpr (FP32) {
            AscendC::DataCopyPad(f32_, biasGm_[row0 * td_->seqKv + col0], p, pad);
            WaitFor<AscendC::HardEvent::MTE2_V>();
        } else {
            AscendC::DataCopyPad(raw_, biasGm_[row0 * td_->seqKv + col0], p, pad);
            WaitFor<AscendC::HardEvent::MTE2_V>();
            AscendC::Cast(f32_, raw_, AscendC::RoundMode::CAST_NONE, static_cast<int32_t>(rows * pitch));
        }
        return pitch;
    }

    const FlashAttentionTilingData *td_ = nullptr;
    uint32_t rows_ = 0;
    AscendC::TBuf<AscendC::TPosition::VECCALC> buf_;
    AscendC::LocalTensor<T> raw_;
    AscendC::LocalTensor<float> f32_;
    AscendC::GlobalTensor<T> biasGm_;
};

// Every modifier of a launch: Init once (after the kernel's own buffers), StartItem per work
// item, AddBias per score tile (through OnlineSoftmax's bias hook), Sink for the row state.
template <typename T>
class ScoreMods {
public:
    __aicore__ inline void Init(AscendC::TPipe *pipe, const FlashAttentionTilingData *td, const ScoreModsGm &gm)
    {
        td_ = td;
        if (td->hasAlibi != 0) {
            alibi_.Init(pipe, td->chunkRows, td->blockN, gm.alibiSlopes, static_cast<uint64_t>(td->batch) * td->numHeads,
                        td->nextTokens <= 0 && !AscendC::IsSameType<T, float>::value);
        }
        if (td->hasSinks != 0) {
            sinksGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(gm.sinks), td->numHeads);
        }
        if (td->hasBias != 0) {
            bias_.Init(pipe, td, gm.attenBias);
        }
    }

    // Something to add to the score tiles (ALiBi or a float mask).
    __aicore__ inline bool AddsBias() const { return td_ != nullptr && (td_->hasAlibi != 0 || td_->hasBias != 0); }

    // Item of sequence b, query head h, with seqQ queries and seqKv keys.
    __aicore__ inline void StartItem(uint32_t b, uint32_t h, uint32_t seqQ, uint32_t seqKv)
    {
        b_ = b;
        h_ = h;
        if (td_ == nullptr) return;
        if (td_->hasAlibi != 0) {
            alibi_.StartItem(b, h, td_->numHeads, static_cast<int64_t>(seqKv) - static_cast<int64_t>(seqQ));
        }
        sink_ = td_->hasSinks != 0 ? sinksGm_.GetValue(h) : -__builtin_inff();
    }

    // The item's sink logit, -inf without sinks (OnlineSoftmax::Reset's starting row max).
    __aicore__ inline float Sink() const { return sink_; }

    __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t row0,
                                   uint32_t rows, uint32_t col0, uint32_t cols)
    {
        if (td_->hasAlibi != 0) alibi_.AddBias(scores, stride, row0, rows, col0, cols);
        if (td_->hasBias != 0) bias_.AddBias(scores, stride, b_, h_, row0, rows, col0, cols);
    }

    // ALiBi's row terms the last AddBias left out of the tile (see AlibiRamps::RowShift).
    __aicore__ inline bool RowShift(AscendC::LocalTensor<float> *shift)
    {
        return td_->hasAlibi != 0 && alibi_.RowShift(shift);
    }

private:
    const FlashAttentionTilingData *td_ = nullptr;
    AlibiRamps alibi_;
    FloatBiasTiles<T> bias_;
    AscendC::GlobalTensor<float> sinksGm_;
    uint32_t b_ = 0, h_ = 0;
    float sink_ = -__builtin_inff();
};

}  // namespace score_mods
