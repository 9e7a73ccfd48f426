// flash_attention_items.h -- where a forward work item's rows live and which keys they see,
// shared by the kernel paths of every architecture (flash_attention_kernel.h,
// flash_attention_coupled_kernel.h).
//
// An item is (sequence b, head n, query block) as flash_attention_tiling.h numbers it. For a
// fixed-length batch every sequence has Sq queries and Skv keys; for a varlen batch (layout
// TND) sequence b spans query tokens [qEnd(b-1), qEnd(b)) and key tokens [kvEnd(b-1), kvEnd(b))
// of the packed T axis, qEnd / kvEnd being the int64 cumulative ends of actual_seq_qlen /
// actual_seq_kvlen in GM (FlashAttentionScore's convention: no leading 0).
#pragma once

#include "kernel_operator.h"

#include "attention_band.h"
#include "attention_row_ops.h"
#include "flash_attention_tiling.h"

namespace flash_attn {

// One item's place: its sequence, head and query block, that sequence's lengths and where its
// rows start in GM.
struct ItemPlace {
    uint32_t seq = 0, head = 0, kvHead = 0, qBlock = 0;
    uint32_t seqQ = 0, seqKv = 0;  // this sequence's query and key counts
    uint64_t qTok0 = 0, kvTok0 = 0;  // first token of the sequence on the packed axis (BSND, BSH, TND)
    uint64_t lseRow0 = 0;            // LSE index of (seq, head, row 0): [B, N, Sq] or TND's [N, Tq]
};

// Keys [first, end) visible to query rows [row0, row0 + rows) of a sequence with seqQ queries
// and seqKv keys under the band (preTokens, nextTokens) of the tiling: the union of the rows'
// intervals, contiguous because preTokens + nextTokens >= 0 (op_host checks). Empty
// (first == end) when no row sees a key.
__aicore__ inline void VisibleKeys(const FlashAttentionTilingData *td, uint32_t seqQ, uint32_t seqKv, uint32_t row0,
                                   uint32_t rows, uint32_t *first, uint32_t *end)
{
    int64_t lo = 0, hi = 0;
    attn_band::VisibleKeys(row0, static_cast<int64_t>(row0) + rows, attn_band::Diagonal(seqQ, seqKv), seqKv,
                           td->preTokens, td->nextTokens, &lo, &hi);
    *first = static_cast<uint32_t>(lo);
    *end = static_cast<uint32_t>(hi);
}

// A whole item's rows and the K/V blocks its band lets it see: query rows [row0, row0 + rows)
// of its sequence, K/V blocks [kvBegin, kvEnd) of blockN keys (none when kvEnd == kvBegin), the
// last visible key keyEnd - 1 (VisibleKeys).
struct ItemSpan {
    uint32_t row0 = 0, rows = 0;
    uint32_t kvBegin = 0, kvEnd = 0;
    uint32_t keyEnd = 0;
};
__aicore__ inline ItemSpan SpanOfItem(const FlashAttentionTilingData *td, const ItemPlace &place)
{
    ItemSpan span;
    span.row0 = place.qBlock * td->blockM;
    span.rows = attn_rows::Min(td->blockM, place.seqQ - span.row0);
    uint32_t keyFirst = 0;
    VisibleKeys(td, place.seqQ, place.seqKv, span.row0, span.rows, &keyFirst, &span.keyEnd);
    span.kvBegin = keyFirst / td->blockN;
    span.kvEnd = span.keyEnd == 0 ? span.kvBegin : attn_rows::CeilDiv(span.keyEnd, td->blockN);
    return span;
}

// Item number -> ItemPlace. Items of one core ascend, so the varlen walk over the sequences
// resumes where the previous item's left off (two scalar GM reads per sequence passed).
class ItemMap {
public:
    __aicore__ inline void Init(const FlashAttentionTilingData *tiling, GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen)
    {
        td_ = tiling;
        if (td_->varlen != 0) {
            qEnds_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqQlen), td_->batch);
            kvEnds_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqKvlen), td_->batch);
            LoadSequence(0);
        }
    }

    __aicore__ inline void Locate(uint32_t item, ItemPlace *place)
    {
        uint32_t nq = td_->numQBlocks;
        uint32_t local = item;
        if (td_->varlen != 0) {
            while (item >= seqItem0_ + td_->numHeads * SeqQBlocks() && seq_ + 1 < td_->batch) {
                seqItem0_ += td_->numHeads * SeqQBlocks();
                LoadSequence(seq_ + 1);
            }
            nq = SeqQBlocks();
            local = item - seqItem0_;
            place->seq = seq_;
            place->head = local / nq;
            place->seqQ = seqQ_;
            place->seqKv = seqKv_;
            place->qTok0 = qTok0_;
            place->kvTok0 = kvTok0_;
            place->lseRow0 = static_cast<uint64_t>(place->head) * td_->tokensQ + qTok0_;  // LSE [N, Tq]
        } else {
            const uint32_t headIndex = item / nq;  // b * numHeads + n
            place->seq = headIndex / td_->numHeads;
            place->head = headIndex % td_->numHeads;
            place->seqQ = td_->seqQ;
            place->seqKv = td_->seqKv;
            place->qTok0 = static_cast<uint64_t>(place->seq) * td_->seqQ;
            place->kvTok0 = static_cast<uint64_t>(place->seq) * td_->seqKv;
            place->lseRow0 = static_cast<uint64_t>(headIndex) * td_->seqQ;  // LSE [B, N, Sq]
        }
        const uint32_t pos = local % nq;
        place->qBlock = td_->qZigzag == 0 ? pos : (pos % 2 == 0 ? pos / 2 : nq - 1 - pos / 2);
        place->kvHead = place->head / td_->groupSize;
    }

    // Element offsets of query row s of (seq, head) and of key row s of (seq, kvHead).
    __aicore__ inline uint64_t QueryOffset(const ItemPlace &place, uint32_t s) const
    {
        const uint64_t d = td_->headDim;
        if (td_->layout == FA_LAYOUT_BNSD) {
            return ((static_cast<uint64_t>(place.seq) * td_->numHeads + place.head) * td_->seqQ + s) * d;
        }
        return ((place.qTok0 + s) * td_->numHeads + place.head) * d;  // BSND, BSH, TND
    }
    __aicore__ inline uint64_t KvOffset(const ItemPlace &place, uint32_t s) const
    {
        const uint64_t d = td_->headDim;
        if (td_->layout == FA_LAYOUT_BNSD) {
            return ((static_cast<uint64_t>(place.seq) * td_->numKvHeads + place.kvHead) * td_->seqKv + s) * d;
        }
        return ((place.kvTok0 + s) * td_->numKvHeads + place.kvHead) * d;
    }

private:
    __aicore__ inline uint32_t SeqQBlocks() const { return attn_rows::CeilDiv(seqQ_, td_->blockM); }

    __aicore__ inline void LoadSequence(uint32_t seq)
    {
        qTok0_ = seq == 0 ? 0 : static_cast<uint64_t>(qEnds_.GetValue(seq - 1));
        kvTok0_ = seq == 0 ? 0 : static_cast<uint64_t>(kvEnds_.GetValue(seq - 1));
        seqQ_ = static_cast<uint32_t>(static_cast<uint64_t>(qEnds_.GetValue(seq)) - qTok0_);
        seqKv_ = static_cast<uint32_t>(static_cast<uint64_t>(kvEnds_.GetValue(seq)) - kvTok0_);
        seq_ = seq;
    }

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::GlobalTensor<int64_t> qEnds_, kvEnds_;  // varlen: cumulative ends, [batch] int64
    uint32_t seq_ = 0, seqItem0_ = 0;                // current sequence and its first item
    uint32_t seqQ_ = 0, seqKv_ = 0;
    uint64_t qTok0_ = 0, kvTok0_ = 0;
};

}  // namespace flash_attn
