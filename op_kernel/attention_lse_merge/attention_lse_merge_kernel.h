// attention_lse_merge_kernel.h -- merges two partial attention results of the same query rows by
// their LSE (attention_lse_merge_tiling.h has the math, the work split and the UB map). A
// vector-only kernel: AIVs on Atlas A2/A3, the AI Cores' vector units on 310P and 910A.
//
// Per tile of `rows` rows (a multiple of 8 except the last core's tail) a core
//   copies in    out_a, out_b [rows, D] and lse_a, lse_b [rows]             (MTE2)
//   computes     m = max(lse_a, lse_b, -FLT_MAX); w_x = exp(lse_x - m); s = w_a + w_b
//                softmax_lse = m + ln(s); c_x = w_x / max(s, FLT_MIN)
//                attention_out = c_a out_a + c_b out_b, in fp32, cast to the output dtype  (V)
//   copies out   attention_out, softmax_lse                                  (MTE3)
// through double-buffered queues, so the copies of one tile overlap the vector work of another.
// Every row is read and written by the core that owns it, each tile read before it is written:
// attention_out / softmax_lse may be the memory of out_a / lse_a (an in-place running merge).
//
// Fixed point (A = int16_t, op AttentionLseMergeInt16, Atlas A2/A3 only): out_a is a running
// result in int16 units of its row bound B / 32767, B = bound_a (float32 per row, >= max |out_a|);
// per tile a core also
//   copies in    bound_a [rows]
//   computes     B' = max(B, max_d |out_b|); out_a as float = int16 * B / 32767 (folded into c_a);
//                the merge as above in fp32; then as int16 round(merged * 32767 / B') when O is
//                int16_t, else cast to O (the final conversion)
//   copies out   bound_out = B'
// A merged row is a convex combination of rows bounded by B' (c_a + c_b = 1), so |merged| <= B'
// up to a few fp32 roundings: merged * 32767 / B' stays within 32767 + 0.01 and its rounding in
// int16_t (docs/lse_merge.md, "The int16 running result").
//
// Whole 32-B blocks only (these architectures' DataCopy; 310P and 910A have no DataCopyPad):
// O rows are D * sizeof(T) bytes with D a multiple of 16, and LSE rows move in blocks of 8 from
// 32-B aligned offsets (cores own whole blocks). The last core's rows % 8 tail LSE values are
// read and written by the scalar unit.
#pragma once

#include "kernel_operator.h"

#include "attention_lse_merge_tiling.h"
#include "attention_row_ops.h"

namespace lse_merge {

using attn_rows::WaitForPipe;
constexpr uint32_t BUFFER_NUM = 2;                        // double buffering of every queue
constexpr uint32_t STAT_SLOTS = 4;                        // m, w_a, w_b, s
constexpr float MAX_FLOOR = -3.40282346638528859812e+38f;  // -FLT_MAX: m stays finite for a row of two -inf
constexpr float SUM_FLOOR = 1.17549435082228750797e-38f;   // FLT_MIN: c_x = 0 / FLT_MIN = 0 for such a row
constexpr float FIXED16_UNITS = 32767.0f;                  // int16 units per row bound
// 2^-96: the smallest row bound the int16 scale divides by (32767 / 2^-96 is a finite float); a row
// with a smaller bound (all zeros: the empty start) stays in range, in coarser units.
constexpr float BOUND_FLOOR = 1.26217744835361888866e-29f;
constexpr uint32_t FIXED16_STAT_SLOTS = 6;  // m, w_a, w_b, s, the row max of |out_b|, the int16 scale

template <typename T>
constexpr bool IS_FP32 = false;
template <>
constexpr bool IS_FP32<float> = true;
template <typename T>
constexpr bool IS_FIXED16 = false;
template <>
constexpr bool IS_FIXED16<int16_t> = true;

// A: out_a's dtype (float or B's; int16_t: fixed point with row bounds), B: out_b's, O:
// attention_out's (float or B's; with A int16_t, int16_t or B's).
template <typename A, typename B, typename O>
class AttentionLseMergeKernel {
public:
    // boundA / boundOut: the row bounds of the fixed-point form (A int16_t), else unused.
    __aicore__ inline void Init(GM_ADDR outA, GM_ADDR lseA, GM_ADDR outB, GM_ADDR lseB, GM_ADDR attentionOut,
                                GM_ADDR softmaxLse, const AttentionLseMergeTilingData *tiling, AscendC::TPipe *pipe,
                                GM_ADDR boundA = nullptr, GM_ADDR boundOut = nullptr);
    __aicore__ inline void Process();

private:
    __aicore__ inline void CopyIn(uint64_t row0, uint32_t rows);
    __aicore__ inline void Compute(uint32_t rows);
    __aicore__ inline void CopyOut(uint64_t row0, uint32_t rows);
    // GM lse[row0 .. row0 + rows) -> UB dst: whole blocks by DataCopy, the rest by the scalar unit.
    __aicore__ inline void LoadLse(const AscendC::LocalTensor<float> &dst, const AscendC::GlobalTensor<float> &src,
                                   uint64_t row0, uint32_t rows);
    // UB src[0 .. rows) -> GM dst[row0 ..): whole blocks by DataCopy, the rest by the scalar unit.
    __aicore__ inline void StoreRows(AscendC::GlobalTensor<float> &dst, const AscendC::LocalTensor<float> &src,
                                     uint64_t row0, uint32_t rows);
    // fa = out_a (int16 units) scaled into the merge, lseOut[t..] = the new bounds, c_a (wA) folded
    // with B / 32767; fb as fp32. See the fixed-point lines of the header comment.
    __aicore__ inline void FixedBounds(const AscendC::LocalTensor<float> &bounds, const AscendC::LocalTensor<float> &boundA,
                                       const AscendC::LocalTensor<float> &fb, uint32_t rows, uint32_t vecRows);
    // The merged fp32 rows in fa as int16 units of the new bounds, into out.
    __aicore__ inline void ToFixed(const AscendC::LocalTensor<O> &out, const AscendC::LocalTensor<float> &fa,
                                   const AscendC::LocalTensor<float> &bounds, uint32_t rows, uint32_t vecRows);
    // A tile of out_x as fp32: the queue's tensor itself, or cast into work.
    template <typename T>
    __aicore__ inline AscendC::LocalTensor<float> AsFloat(const AscendC::LocalTensor<T> &in,
                                                          AscendC::TBuf<AscendC::TPosition::VECCALC> &work,
                                                          uint32_t count);

    const AttentionLseMergeTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;
    AscendC::GlobalTensor<A> outAGm_;
    AscendC::GlobalTensor<B> outBGm_;
    AscendC::GlobalTensor<O> outGm_;
    AscendC::GlobalTensor<float> lseAGm_, lseBGm_, lseGm_;
    AscendC::GlobalTensor<float> boundAGm_, boundGm_;  // fixed point only

    AscendC::TQue<AscendC::TPosition::VECIN, BUFFER_NUM> inA_, inB_, lseIn_;
    AscendC::TQue<AscendC::TPosition::VECOUT, BUFFER_NUM> outQue_, lseOut_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> workA_, workB_, statBuf_, brcbBuf_, foldBuf_;
    AscendC::LocalTensor<float> stat_, brcb_, fold_;

    uint64_t rowBegin_ = 0, rowEnd_ = 0;  // this core's rows
};

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::Init(GM_ADDR outA, GM_ADDR lseA, GM_ADDR outB, GM_ADDR lseB,
                                                              GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                                              const AttentionLseMergeTilingData *tiling,
                                                              AscendC::TPipe *pipe, GM_ADDR boundA, GM_ADDR boundOut)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint64_t rows = td_->rows;
    const uint32_t d = td_->headDim;
    const uint32_t t = td_->tileRows;
    outAGm_.SetGlobalBuffer(reinterpret_cast<__gm__ A *>(outA), rows * d);
    outBGm_.SetGlobalBuffer(reinterpret_cast<__gm__ B *>(outB), rows * d);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ O *>(attentionOut), rows * d);
    lseAGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(lseA), rows);
    lseBGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(lseB), rows);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse), rows);
    if constexpr (IS_FIXED16<A>) {
        boundAGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(boundA), rows);
        boundGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(boundOut), rows);
    }

    // Equal ranges of 8-row blocks (attention_lse_merge_tiling.h).
    const uint64_t blocks = (rows + ALM_ROW_BLOCK - 1) / ALM_ROW_BLOCK;
    const uint64_t core = AscendC::GetBlockIdx();
    const uint64_t firstBlock = core * blocks / td_->usedCoreNum;
    const uint64_t endBlock = (core + 1) * blocks / td_->usedCoreNum;
    rowBegin_ = firstBlock * ALM_ROW_BLOCK;
    rowEnd_ = endBlock * ALM_ROW_BLOCK < rows ? endBlock * ALM_ROW_BLOCK : rows;

    // UB, in the order and sizes op_host budgets.
    pipe_->InitBuffer(inA_, BUFFER_NUM, t * d * sizeof(A));
    pipe_->InitBuffer(inB_, BUFFER_NUM, t * d * sizeof(B));
    pipe_->InitBuffer(lseIn_, BUFFER_NUM, (IS_FIXED16<A> ? 3 : 2) * t * sizeof(float));
    pipe_->InitBuffer(outQue_, BUFFER_NUM, t * d * sizeof(O));
    pipe_->InitBuffer(lseOut_, BUFFER_NUM, (IS_FIXED16<A> ? 2 : 1) * t * sizeof(float));
    if constexpr (!IS_FP32<A>) {
        pipe_->InitBuffer(workA_, t * d * sizeof(float));
    }
    if constexpr (!IS_FP32<B>) {
        pipe_->InitBuffer(workB_, t * d * sizeof(float));
    }
    pipe_->InitBuffer(statBuf_, (IS_FIXED16<A> ? FIXED16_STAT_SLOTS : STAT_SLOTS) * t * sizeof(float));
    pipe_->InitBuffer(brcbBuf_, t * attn_rows::FP32_PER_BLOCK * sizeof(float));
    stat_ = statBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
    if constexpr (IS_FIXED16<A>) {
        pipe_->InitBuffer(foldBuf_, t * attn_rows::FP32_PER_REPEAT * sizeof(float));
        fold_ = foldBuf_.Get<float>();
    }
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::Process()
{
    if (AscendC::GetBlockIdx() >= td_->usedCoreNum) {
        return;
    }
    for (uint64_t row0 = rowBegin_; row0 < rowEnd_; row0 += td_->tileRows) {
        const uint64_t left = rowEnd_ - row0;
        const uint32_t rows = left < td_->tileRows ? static_cast<uint32_t>(left) : td_->tileRows;
        CopyIn(row0, rows);
        Compute(rows);
        CopyOut(row0, rows);
    }
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::LoadLse(const AscendC::LocalTensor<float> &dst,
                                                                 const AscendC::GlobalTensor<float> &src,
                                                                 uint64_t row0, uint32_t rows)
{
    const uint32_t whole = rows / ALM_ROW_BLOCK * ALM_ROW_BLOCK;
    if (whole > 0) {
        AscendC::DataCopy(dst, src[row0], whole);
    }
    for (uint32_t r = whole; r < rows; ++r) {
        dst.SetValue(r, src.GetValue(row0 + r));
    }
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::CopyIn(uint64_t row0, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    const uint32_t t = td_->tileRows;
    AscendC::LocalTensor<A> a = inA_.AllocTensor<A>();
    AscendC::LocalTensor<B> b = inB_.AllocTensor<B>();
    AscendC::LocalTensor<float> lse = lseIn_.AllocTensor<float>();
    AscendC::DataCopy(a, outAGm_[row0 * d], rows * d);
    AscendC::DataCopy(b, outBGm_[row0 * d], rows * d);
    const bool tail = rows % ALM_ROW_BLOCK != 0;
    if (tail) {
        // The scalar unit writes this buffer below: the vector unit's use of it two tiles ago is done.
        WaitForPipe<AscendC::HardEvent::V_S>();
    }
    LoadLse(lse, lseAGm_, row0, rows);
    LoadLse(lse[t], lseBGm_, row0, rows);
    if constexpr (IS_FIXED16<A>) {
        LoadLse(lse[2 * t], boundAGm_, row0, rows);
    }
    if (tail) {
        WaitForPipe<AscendC::HardEvent::S_V>();  // the scalar unit's UB writes land before Compute reads them
    }
    inA_.EnQue(a);
    inB_.EnQue(b);
    lseIn_.EnQue(lse);
}

template <typename A, typename B, typename O>
template <typename T>
__aicore__ inline AscendC::LocalTensor<float> AttentionLseMergeKernel<A, B, O>::AsFloat(
    const AscendC::LocalTensor<T> &in, AscendC::TBuf<AscendC::TPosition::VECCALC> &work, uint32_t count)
{
    if constexpr (IS_FP32<T>) {
        return in;
    } else {
        AscendC::LocalTensor<float> f = work.template Get<float>();
        AscendC::Cast(f, in, AscendC::RoundMode::CAST_NONE, count);  // exact: every half / bfloat16 / int16 is a float
        return f;
    }
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::Compute(uint32_t rows)
{
    const uint32_t d = td_->headDim;
    const uint32_t t = td_->tileRows;
    const uint32_t count = rows * d;
    // Per-row vectors over whole blocks (rows rounded up to 8; the extra lanes are never stored).
    const uint32_t vecRows = (rows + ALM_ROW_BLOCK - 1) / ALM_ROW_BLOCK * ALM_ROW_BLOCK;
    AscendC::LocalTensor<A> a = inA_.DeQue<A>();
    AscendC::LocalTensor<B> b = inB_.DeQue<B>();
    AscendC::LocalTensor<float> lse = lseIn_.DeQue<float>();
    AscendC::LocalTensor<float> lseA = lse, lseB = lse[t];
    AscendC::LocalTensor<float> m = stat_, wA = stat_[t], wB = stat_[2 * t], s = stat_[3 * t];

    AscendC::Max(m, lseA, lseB, vecRows);
    attn_rows::MaxsOnArch(m, m, MAX_FLOOR, vecRows, brcb_);  // dav-c100 has no Maxs
    AscendC::Sub(wA, lseA, m, vecRows);
    AscendC::Exp(wA, wA, vecRows);  // w_a = exp(lse_a - m): 1 for the larger LSE, 0 for -inf
    AscendC::Sub(wB, lseB, m, vecRows);
    AscendC::Exp(wB, wB, vecRows);
    AscendC::Add(s, wA, wB, vecRows);  // s in [1, 2] when either LSE is finite, else 0

    AscendC::LocalTensor<float> lseOut = lseOut_.AllocTensor<float>();
    AscendC::Ln(lseOut, s, vecRows);
    AscendC::Add(lseOut, lseOut, m, vecRows);  // m + ln(s): -inf where s = 0

    attn_rows::MaxsOnArch(s, s, SUM_FLOOR, vecRows, brcb_);
    AscendC::Div(wA, wA, s, vecRows);  // c_a
    AscendC::Div(wB, wB, s, vecRows);  // c_b
    AscendC::LocalTensor<float> fb = AsFloat(b, workB_, count);
    if constexpr (IS_FIXED16<A>) {
        FixedBounds(lseOut[t], lse[2 * t], fb, rows, vecRows);  // before workA_ takes out_a
    }
    lseIn_.FreeTensor(lse);
    AscendC::LocalTensor<float> fa = AsFloat(a, workA_, count);
    attn_rows::ApplyRowValues<attn_rows::Op::MUL>(fa, brcb_, wA, rows, d, d);
    attn_rows::ApplyRowValues<attn_rows::Op::MUL>(fb, brcb_, wB, rows, d, d);

    AscendC::LocalTensor<O> out = outQue_.AllocTensor<O>();
    if constexpr (IS_FP32<O>) {
        AscendC::Add(out, fa, fb, count);
    } else if constexpr (IS_FIXED16<O>) {
        AscendC::Add(fa, fa, fb, count);
        ToFixed(out, fa, lseOut[t], rows, vecRows);
    } else {
        AscendC::Add(fa, fa, fb, count);
        // float -> half takes CAST_NONE (nearest even) on every architecture, CAST_RINT on A2/A3 only;
        // float -> bfloat16_t (A2/A3) takes CAST_RINT (asc-devkit Cast.md).
        constexpr AscendC::RoundMode TO_O =
            AscendC::IsSameType<O, half>::value ? AscendC::RoundMode::CAST_NONE : AscendC::RoundMode::CAST_RINT;
        AscendC::Cast(out, fa, TO_O, count);
    }
    lseOut_.EnQue(lseOut);
    inA_.FreeTensor(a);
    inB_.FreeTensor(b);
    outQue_.EnQue(out);
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::FixedBounds(const AscendC::LocalTensor<float> &bounds,
                                                                     const AscendC::LocalTensor<float> &boundA,
                                                                     const AscendC::LocalTensor<float> &fb,
                                                                     uint32_t rows, uint32_t vecRows)
{
    const uint32_t d = td_->headDim;
    const uint32_t t = td_->tileRows;
    AscendC::LocalTensor<float> absB = workA_.Get<float>();
    AscendC::LocalTensor<float> rowMax = stat_[4 * t], wA = stat_[t];
    AscendC::Abs(absB, fb, rows * d);
    attn_rows::ReduceRows<attn_rows::Reduce::MAX>(rowMax, absB, fold_, rows, d, d);
    AscendC::Max(bounds, boundA, rowMax, vecRows);  // B' = max(B, max_d |out_b|)
    AscendC::Mul(wA, wA, boundA, vecRows);
    AscendC::Muls(wA, wA, 1.0f / FIXED16_UNITS, vecRows);  // c_a * B / 32767: the weight of one int16 unit
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::ToFixed(const AscendC::LocalTensor<O> &out,
                                                                 const AscendC::LocalTensor<float> &fa,
                                                                 const AscendC::LocalTensor<float> &bounds,
                                                                 uint32_t rows, uint32_t vecRows)
{
    const uint32_t d = td_->headDim;
    const uint32_t t = td_->tileRows;
    AscendC::LocalTensor<float> scale = stat_[5 * t], units = stat_[4 * t];
    AscendC::Maxs(scale, bounds, BOUND_FLOOR, vecRows);
    AscendC::Duplicate(units, FIXED16_UNITS, vecRows);
    AscendC::Div(scale, units, scale, vecRows);  // 32767 / max(B', 2^-96)
    attn_rows::ApplyRowValues<attn_rows::Op::MUL>(fa, brcb_, scale, rows, d, d);
    AscendC::Cast(out, fa, AscendC::RoundMode::CAST_RINT, rows * d);  // |fa| <= 32767.01: in range
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::CopyOut(uint64_t row0, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<O> out = outQue_.DeQue<O>();
    AscendC::DataCopy(outGm_[row0 * d], out, rows * d);
    outQue_.FreeTensor(out);

    AscendC::LocalTensor<float> lse = lseOut_.DeQue<float>();
    StoreRows(lseGm_, lse, row0, rows);
    if constexpr (IS_FIXED16<A>) {
        StoreRows(boundGm_, lse[td_->tileRows], row0, rows);
    }
    lseOut_.FreeTensor(lse);
}

template <typename A, typename B, typename O>
__aicore__ inline void AttentionLseMergeKernel<A, B, O>::StoreRows(AscendC::GlobalTensor<float> &dst,
                                                                   const AscendC::LocalTensor<float> &src,
                                                                   uint64_t row0, uint32_t rows)
{
    const uint32_t whole = rows / ALM_ROW_BLOCK * ALM_ROW_BLOCK;
    if (whole > 0) {
        AscendC::DataCopy(dst[row0], src, whole);
    }
    if (whole < rows) {
        // The last rows % 8 values (only on the last core): a whole block would write past the end.
        WaitForPipe<AscendC::HardEvent::V_S>();
        for (uint32_t r = whole; r < rows; ++r) {
            dst.SetValue(row0 + r, src.GetValue(r));
        }
#if defined(__NPU_ARCH__) && __NPU_ARCH__ != 1001
        // Scalar GM writes stay in the data cache until written back (dav-c100 has no GM form).
        AscendC::DataCacheCleanAndInvalid<float, AscendC::CacheLine::ENTIRE_DATA_CACHE>(dst);
#endif
    }
}

}  // namespace lse_merge
