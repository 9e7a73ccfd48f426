// attention_mask.h -- explicit attention masks in the attention kernels.
//
// The device mask is uint8 [mb, mn, mq, mk] with 1 = masked out (FlashAttentionScore's
// convention), mb in {1, B}, mn in {1, N}, mq in {1, Sq}, mk = Skv: a dimension of size 1 is
// broadcast, so a key-padding mask is [B, 1, 1, Skv] and a shared mask [1, 1, Sq, Skv]. It is
// never expanded; the kernel reads only the rows and columns of the tile it needs.
//
// Block skipping: a summary of one byte per (mask batch, mask head, query block, key block) --
// BLOCK_VISIBLE (no element masked), BLOCK_MASKED (every element masked) or BLOCK_MIXED -- is
// computed once per call by the AIVs (SummarizeMask, each a share of the summary rows, into the
// workspace; the caller then SyncAll()s). The kernel neither loads nor computes BLOCK_MASKED blocks
// and does not read the mask for BLOCK_VISIBLE ones; only BLOCK_MIXED blocks load their mask tile
// and add its bias (0 or -inf) to the scores. Query blocks are blockM rows (one when mq == 1), key
// blocks blockN keys: the kernel's work-item rows and K/V block.
//
// Mask values must be 0 or 1 (the Python layer and the aclnn bool form give exactly that).
#pragma once

#include "kernel_operator.h"

namespace attn_mask {

enum BlockClass : uint8_t { BLOCK_VISIBLE = 0, BLOCK_MIXED = 1, BLOCK_MASKED = 2 };

constexpr uint32_t U8_PER_BLOCK = 32;    // one 32-B UB block of uint8
constexpr uint32_t FP32_PER_REPEAT = 64;
constexpr uint32_t FP32_PER_BLOCK = 8;
constexpr uint32_t HALF_PER_REPEAT = 128;

__aicore__ inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__aicore__ inline uint32_t AlignUp(uint32_t a, uint32_t b) { return CeilDiv(a, b) * b; }
__aicore__ inline uint32_t MinU(uint32_t a, uint32_t b) { return a < b ? a : b; }

// Shape of the device mask and of its summary blocks.
struct MaskGeometry {
    uint32_t mb = 1, mn = 1, mq = 1, mk = 0;  // device mask dims
    uint32_t blockM = 0, blockN = 0;          // summary block: query rows x keys

    __aicore__ inline uint32_t QueryBlocks() const { return mq == 1 ? 1 : CeilDiv(mq, blockM); }
    __aicore__ inline uint32_t KeyBlocks() const { return CeilDiv(mk, blockN); }
    // Summary rows (one per mask batch, mask head and query block), KeyBlocks() bytes each.
    __aicore__ inline uint32_t SummaryRows() const { return mb * mn * QueryBlocks(); }
    __aicore__ inline uint64_t SummaryBytes() const { return uint64_t(SummaryRows()) * KeyBlocks(); }
    // The mask row of (batch b, query head n, query position i) for broadcast dims.
    __aicore__ inline uint32_t MaskRowIndex(uint32_t b, uint32_t n, uint32_t i) const
    {
        const uint32_t bb = mb == 1 ? 0 : b, nn = mn == 1 ? 0 : n, ii = mq == 1 ? 0 : i;
        return (bb * mn + nn) * mq + ii;
    }
    // The summary row of (b, n) and query position i.
    __aicore__ inline uint32_t SummaryRow(uint32_t b, uint32_t n, uint32_t i) const
    {
        const uint32_t bb = mb == 1 ? 0 : b, nn = mn == 1 ? 0 : n, qb = mq == 1 ? 0 : i / blockM;
        return (bb * mn + nn) * QueryBlocks() + qb;
    }
};

// Mask tiles in UB: the pre-pass classification and the bias of a mixed block. Buffers (UB,
// R = capacity rows of up to P = align32(blockN) keys):
//   maskU8  [R, P] uint8, rows 32-B aligned (DataCopyPad)
//   maskF16 [R, P] half
//   bias    [R, P] fp32: 0 (visible) or -inf (masked); also the fp32 copy for the pre-pass sums
//   bits    [R, P] bits of "visible"
//   sums    one 32-B block for ReduceSum
class MaskTiles {
public:
    __aicore__ static inline uint32_t UbBytes(uint32_t rows, uint32_t blockN)
    {
        const uint32_t elems = rows * AlignUp(blockN, U8_PER_BLOCK);
        return AlignUp(elems, U8_PER_BLOCK) + 2 * elems + 4 * elems + AlignUp(CeilDiv(elems, 8), U8_PER_BLOCK) + 32;
    }

    // rows: tile rows handled per pass, a multiple of 4 ([rows, P] halves are whole 256-B repeats).
    __aicore__ inline void Init(AscendC::TPipe *pipe, const MaskGeometry &geom, uint32_t rows)
    {
        geom_ = geom;
        rows_ = rows;
        const uint32_t elems = rows * AlignUp(geom.blockN, U8_PER_BLOCK);
        pipe->InitBuffer(buf_, UbBytes(rows, geom.blockN));
        AscendC::LocalTensor<uint8_t> all = buf_.Get<uint8_t>();
        uint32_t at = 0;
        maskU8_ = all[at];
        at += AlignUp(elems, U8_PER_BLOCK);
        maskF16_ = all[at].ReinterpretCast<half>();
        at += 2 * elems;
        bias_ = all[at].ReinterpretCast<float>();
        at += 4 * elems;
        bits_ = all[at];
        at += AlignUp(CeilDiv(elems, 8), U8_PER_BLOCK);
        sums_ = all[at].ReinterpretCast<float>();
    }

    __aicore__ inline void SetGlobal(GM_ADDR mask)
    {
        maskGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(mask),
                                uint64_t(geom_.mb) * geom_.mn * geom_.mq * geom_.mk);
    }

    // Pre-pass: summary rows [first, first + count) into summaryGm (uint8 [SummaryRows(),
    // KeyBlocks()]); each summary row goes out with one DataCopyPad. The caller SyncAll()s before
    // any core reads the summary.
    __aicore__ inline void Summarize(const AscendC::GlobalTensor<uint8_t> &summaryGm, uint32_t first, uint32_t count)
    {
        const uint32_t kBlocks = geom_.KeyBlocks();
        const uint32_t qRows = geom_.mq == 1 ? 1 : geom_.blockM;
        for (uint32_t s = first; s < first + count; ++s) {
            const uint32_t bn = s / geom_.QueryBlocks(), qb = s % geom_.QueryBlocks();
            const uint32_t row0 = qb * qRows;
            const uint32_t rows = MinU(qRows, geom_.mq - row0);
            for (uint32_t kb = 0; kb < kBlocks; ++kb) {
                const uint32_t col0 = kb * geom_.blockN, cols = MinU(geom_.blockN, geom_.mk - col0);
                uint64_t masked = 0;
                for (uint32_t r = 0; r < rows; r += rows_) {
                    masked += CountMasked(uint64_t(bn) * geom_.mq + row0 + r, MinU(rows_, rows - r), col0, cols);
                }
                const uint64_t all = uint64_t(rows) * cols;
                classes_[kb % CLASS_SLOTS] = masked == 0 ? BLOCK_VISIBLE : (masked == all ? BLOCK_MASKED : BLOCK_MIXED);
                if (kb % CLASS_SLOTS == CLASS_SLOTS - 1 || kb + 1 == kBlocks) {
                    FlushClasses(summaryGm, uint64_t(s) * kBlocks + kb - kb % CLASS_SLOTS, kb % CLASS_SLOTS + 1);
                }
            }
        }
    }

    // Adds the mask bias (0 or -inf) of rows [i0, i0 + rows) and keys [j0, j0 + cols) of (b, n) to
    // scores [rows, stride] fp32 (stride a multiple of 8, at least cols). For mixed blocks only.
    __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t b, uint32_t n,
                                   uint32_t i0, uint32_t rows, uint32_t j0, uint32_t cols)
    {
        if (geom_.mq == 1) {  // one mask row for every tile row: load once, add with a 0 row stride
            LoadBias(geom_.MaskRowIndex(b, n, 0), 1, j0, cols);
            AddRows(scores, stride, 0, rows, cols, 0);
            return;
        }
        for (uint32_t r = 0; r < rows; r += rows_) {
            const uint32_t rr = MinU(rows_, rows - r);
            const uint32_t pitch = LoadBias(geom_.MaskRowIndex(b, n, i0 + r), rr, j0, cols);
            AddRows(scores, stride, r, rr, cols, static_cast<uint8_t>(pitch / FP32_PER_BLOCK));
        }
    }

private:
    static constexpr uint32_t CLASS_SLOTS = 32;  // summary bytes collected before one GM write

    // maskU8_[r, 0:cols] = mask row (row0 + r) at keys [col0, col0 + cols), zero-padded to
    // rows of align32(cols) bytes (the returned pitch).
    __aicore__ inline uint32_t Load(uint64_t row0, uint32_t rows, uint32_t col0, uint32_t cols)
    {
        const uint32_t pitch = AlignUp(cols, U8_PER_BLOCK);
        const AscendC::DataCopyExtParams p(static_cast<uint16_t>(rows), cols, geom_.mk - cols, 0, 0);
        AscendC::DataCopyPad(maskU8_, maskGm_[row0 * geom_.mk + col0], p,
                             AscendC::DataCopyPadExtParams<uint8_t>(true, 0, static_cast<uint8_t>(pitch - cols), 0));
        WaitFor<AscendC::HardEvent::MTE2_V>();
        return pitch;
    }

    // Masked elements of a [rows, cols] piece (pads are 0): sum of the mask in fp32 (exact below 2^24).
    __aicore__ inline uint64_t CountMasked(uint64_t row0, uint32_t rows, uint32_t col0, uint32_t cols)
    {
        const uint32_t n = rows * Load(row0, rows, col0, cols);
        AscendC::Cast(maskF16_, maskU8_, AscendC::RoundMode::CAST_NONE, n);
        AscendC::Cast(bias_, maskF16_, AscendC::RoundMode::CAST_NONE, n);
        AscendC::ReduceSum(sums_, bias_, maskF16_.ReinterpretCast<float>(), static_cast<int32_t>(n));
        WaitFor<AscendC::HardEvent::V_S>();
        const uint64_t masked = static_cast<uint64_t>(sums_.GetValue(0));
        WaitFor<AscendC::HardEvent::S_V>();  // the next pass overwrites sums_ and bias_
        return masked;
    }

    // bias_[r, 0:cols] = 0 where the mask row (row0 + r) is 0, -inf where it is 1; rows of the
    // returned pitch (align32(cols) elements).
    __aicore__ inline uint32_t LoadBias(uint32_t row0, uint32_t rows, uint32_t col0, uint32_t cols)
    {
        const uint32_t pitch = Load(row0, rows, col0, cols);
        const uint32_t n = rows * pitch;
        const uint32_t whole = AlignUp(n, HALF_PER_REPEAT);  // Compares: whole 256-B repeats
        AscendC::Cast(maskF16_, maskU8_, AscendC::RoundMode::CAST_NONE, whole);
        AscendC::Compares(bits_, maskF16_, static_cast<half>(0.0f), AscendC::CMPMODE::EQ, whole);
        AscendC::Duplicate(bias_, 0.0f, static_cast<int32_t>(n));
        AscendC::Select(bias_, bits_, bias_, -__builtin_inff(), AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
        return pitch;
    }

    // scores[r0 + r, 0:cols] += bias_[r, 0:cols] for r < rows; biasRep: bias_ row stride in 32-B blocks
    // (0: one bias row for all). One instruction per 64 columns, one repeat per row.
    __aicore__ inline void AddRows(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t r0,
                                   uint32_t rows, uint32_t cols, uint8_t biasRep)
    {
        const uint8_t rep = static_cast<uint8_t>(stride / FP32_PER_BLOCK);
        const AscendC::BinaryRepeatParams params(1, 1, 1, rep, rep, biasRep);
        for (uint32_t c = 0; c < cols; c += FP32_PER_REPEAT) {
            const AscendC::LocalTensor<float> dst = scores[r0 * stride + c];
            AscendC::Add(dst, dst, bias_[c], MinU(FP32_PER_REPEAT, cols - c), static_cast<uint8_t>(rows), params);
        }
    }

    __aicore__ inline void FlushClasses(const AscendC::GlobalTensor<uint8_t> &summaryGm, uint64_t at, uint32_t count)
    {
        AscendC::LocalTensor<uint8_t> out = bits_;
        WaitFor<AscendC::HardEvent::V_S>();
        for (uint32_t k = 0; k < count; ++k) out.SetValue(k, classes_[k]);
        WaitFor<AscendC::HardEvent::S_MTE3>();
        AscendC::DataCopyPad(summaryGm[at], out, AscendC::DataCopyExtParams(1, count, 0, 0, 0));
        WaitFor<AscendC::HardEvent::MTE3_S>();  // the next flush rewrites `out` from the scalar unit
    }

    template <AscendC::HardEvent EVENT>
    __aicore__ static inline void WaitFor()
    {
        event_t id = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
        AscendC::SetFlag<EVENT>(id);
        AscendC::WaitFlag<EVENT>(id);
    }

    MaskGeometry geom_;
    uint32_t rows_ = 0;
    AscendC::TBuf<AscendC::TPosition::VECCALC> buf_;
    AscendC::LocalTensor<uint8_t> maskU8_, bits_;
    AscendC::LocalTensor<half> maskF16_;
    AscendC::LocalTensor<float> bias_, sums_;
    AscendC::GlobalTensor<uint8_t> maskGm_;
    uint8_t classes_[CLASS_SLOTS] = {};
};

}  // namespace attn_mask
