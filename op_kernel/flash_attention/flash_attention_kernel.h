// flash_attention_kernel.h -- FlashAttention-2 forward for Atlas A2/A3 (arch 2201) as a mixed
// AIC:AIV 1:2 kernel. The coupled-core chips run flash_attention_coupled_kernel.h instead.
//
// Per work item (b, n, query block of blockM rows) the cube computes one QK and one P.V per K/V
// block for all the item's rows, so a K/V block is loaded once per item; the two AIVs of the
// group each softmax half of the rows. Sub-block 0 (the issuer) sends the Matmul requests for
// the whole item; the AIVs hand S, P and P.V over in the group's GM workspace:
//   S_j   = Q . K_j^T                (cube, Matmul API, fp32 (or T) to a double-buffered GM workspace slot;
//                                     QK of block j+1 runs on the cube while block j is softmaxed)
//   S_j  *= scale; mask              (vector; only on blocks the band's edges or the Skv tail cross)
//   m_new = max(m, rowmax(S_j));  alpha = exp(m - m_new)
//   P_j   = exp(S_j - m_new);  l = alpha * l + rowsum(P_j)          (fp32)
//   acc   = alpha_j * acc + P_j . V_j  (cube for P.V, vector for the update)
// and finally O = acc / l, LSE = m + ln(l) (the vector half is flash_attention_rows.h).
// Software pipeline per item, step j: the issuer waits S_j; both AIVs meet (PAIR_SCORES); the
// issuer issues QK_{j+1}; each AIV softmaxes its rows of S_j and writes P_j over those rows of
// S_j's slot (see "P in S's rows" below); the issuer waits P_{j-1} . V_{j-1}; both meet
// (PAIR_PROBS: both halves of P_j are in GM and P_{j-1} . V_{j-1} is); the issuer issues
// P_j . V_j and each AIV adds its rows of P_{j-1} . V_{j-1} with alpha_{j-1}. So the cube
// computes P_{j-1} . V_{j-1} and S_{j+1} while the vector units softmax block j, and each Matmul
// object has at most one request outstanding.
// P in S's rows: the group's workspace has S and P.V slots but no P slot. Row r of P_j starts at
// the first byte of row r of S_j, so P is [blockM, blockN] T with a row stride of blockN *
// sizeof(S) / sizeof(T) elements (probStride_: 2 * blockN for half / bfloat16 with fp32 S;
// blockN for float, or with S in T, where P overwrites S exactly), the P.V Matmul's A with that
// org row length (orgKa). A chunk's S rows are read (MTE2) before the previous chunk's P rows are
// written (MTE3) -- other rows -- and its own P rows after its own read, as the first bullet says.
// Invariant (why writing P over S is race-free):
//   - an AIV writes only P rows it owns, and only after its own MTE2 read of the same rows of S
//     (same chunk: the S tile's DeQue precedes the vector work whose result MTE3 writes); row r
//     of P lies inside row r of S, so the partner's rows are other bytes;
//   - P.V_j reads P_j after PAIR_PROBS, which each AIV sets behind its MTE3 writes;
//   - the next write into the slot is the next S of the same parity (S_{j+2}, or after skipped
//     blocks the next computed block of that parity), by QK on the group's AIC, which the issuer
//     requests after P_j . V_j. The AIC serves one AIV's Matmul requests, of both objects, in the
//     order they were sent, each IterateAll issued completely before the next message is taken
//     (the KFC server loop), and the QK job's FixPipe writes wait, through its MTE2 -> MTE1 flag,
//     for every earlier MTE2 instruction of the AIC, P.V_j's loads of P_j among them
//     (docs/cann-facts.md, "Matmul requests in order"). Solo (soloRows), each AIV issues its own
//     requests into its own rows, and the same holds per AIV.
// The meetings are mode-1 cross-core flags (both AIVs of the group set, then both wait; docs/
// cann-facts.md): every AIV takes every decision below from the item and the block (never from
// its half), so both run the same sequence of meetings. Only the
// K/V blocks holding a key the item's band (pre_tokens / next_tokens; causal is next_tokens 0)
// lets some row see are loaded and computed (flash_attention_items.h), and the cube's QK and P.V
// of the last one stop at the item's last visible key (the causal diagonal's block computes only
// its visible columns and the AIVs read only those; the UB columns past them are outside every
// row's band and MaskScores overwrites them with -inf, so P is 0 there); a varlen batch (TND)
// gives each sequence its own lengths and packed rows.
// Narrow bands (tiling soloRows = 1, op_host NarrowBandBlocks): the union of the two halves'
// bands would make the shared QK compute many keys only one half sees, so each AIV is its own
// issuer for its own rows and band (its own Matmul requests into its rows of the group's slots)
// and the pair never meets; P is in GM before its P.V request by an MTE3 -> S wait instead.
// FlashAttentionV2's options (docs/dropout_and_mask.md): with an atten_mask the AIVs first
// classify its blocks (attention_mask.h, then SyncAll); blocks it hides completely for the
// item's query block are neither loaded nor computed, mixed ones add its bias before the row
// max. With dropout, P is dropped
// out (philox_dropout.h) after l took the undropped P and before P.V; the keep mask goes to
// dropout_mask when that output is given. All row-wise statistics are vectors in
// UB, broadcast with Brcb: the scalar unit only steers loops and never touches score elements.
// Row chunks: an AIV keeps the row state (m, l, alpha) and acc [rows, D] fp32 of all its rows
// resident, but moves S and P through UB c = chunkRows rows at a time (op_host picks the largest
// multiple of 8 whose tiles fit), and P.V and O likewise in chunks of the rows their buffer holds;
// the per-row math is the same, so UB no longer bounds blockM x blockN by whole [m, n] tiles.
// S and P have two UB buffers each: chunk k + 1's S is requested (MTE2) before chunk k's vector
// work is issued and chunks alternate P buffers, so a chunk's load and the previous chunk's P
// store run while the vector unit works; the invariant below is per row and unchanged by it.
// A tile is only as wide as the columns QK wrote (TileWidth: BlockCols rounded up to 16, or to
// 128 for the half softmax), so a block the band's end or the Skv tail cuts is moved and
// softmaxed at that width, not blockN.
// High-performance precision (FlashAttentionV4 inner_precise 1, tiling key bit 8; S = T): the QK
// Matmul writes S in T (FixPipe rounds it), with a row stride of blockN elements of T, and P goes
// over it exactly (probStride_ = blockN); each AIV casts its rows to fp32 in UB (workQue_) and
// the rest is the same -- except, with half inputs, for a chunk that needs no per-element work
// besides the softmax and the band's visibility (NarrowChunk): that one is masked and softmaxed
// in half as it arrives (SoftmaxChunkNarrow, OnlineSoftmax::ScoresToProbsNarrow), Exp writing P
// straight into probQue.
// The S slots are [blockM, blockN] S each (T here: half the default's workspace for them).
// T is half, bfloat16_t or float (float: fp32 operands on the cube, P handed over in fp32).
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_mask.h"
#include "attention_matmul.h"
#include "flash_attention_gm.h"
#include "flash_attention_items.h"
#include "flash_attention_rows.h"
#include "flash_attention_tiling.h"
#include "philox_dropout.h"
#include "score_mods.h"

namespace flash_attn {

constexpr uint32_t AIV_PER_AIC = 2;
// Columns of a score tile in UB are a multiple of this: 16 fp32 are two 32-B blocks of S and 16
// T (half / bfloat16) one 32-B block of P, so both DataCopy row lengths stay whole blocks.
constexpr uint32_t VISIBLE_COL_ALIGN = 16;
// Buffers of scoreQue (op_host's UB budget counts them: tiling_policy.cpp kScoreBuffers): the
// next chunk's S (or P.V rows) moves GM -> UB on MTE2 while the vector unit works on this one.
constexpr uint8_t SCORE_BUFFERS = 2;
// probQue_ queues (op_host: kProbBuffers), one [c, n] T buffer each.
constexpr uint32_t PROB_BUFFERS = 2;  // KERNEL_TYPE_MIX_AIC_1_2: AIV block idx / 2 = its AIC's block idx

// Mode-1 cross-core flag ids of the AIV pair's meetings. On arch 2201 the Matmul API's
// client/server waits use ids instIdx * 2 + sub-block (0..3 for this kernel's two objects) and
// 15 (KFC_SYNC_ID), SyncAll 11..14; kernels may use 0..10 (docs/cann-facts.md).
constexpr uint16_t PAIR_SCORES = 4;  // S_j is in GM (issuer) -- every AIV may read its rows
constexpr uint16_t PAIR_PROBS = 5;   // both halves of P_j are in GM, P_prev . V_prev too
constexpr uint16_t PAIR_VALUES = 6;  // P_prev . V_prev is in GM (an item's last block, or a parity clash)

// S: the type of S in the workspace -- float (the default, high precision), or T (float16 /
// bfloat16: the high-performance precision, FlashAttentionV4 inner_precise 1: FixPipe rounds S to
// T on its way out of L0C, which halves S's GM bytes; each AIV casts its rows back to fp32 in UB
// and runs the same fp32 softmax, so the result is that of S rounded to T).
template <typename T, typename S = float>
class FlashAttentionKernel {
public:
    attn_mm::RowsByColsTo<T, S> qkMm;  // S = Q . K^T, [rows, cols] in S
    attn_mm::RowsByB<T> pvMm;      // P . V, [rows, D] fp32

    // actualSeqQlen / actualSeqKvlen: the varlen cumulative ends (int64 GM), unused otherwise;
    // attenMask (uint8, 1 = masked out) and dropoutMask (uint8 out, 1 = kept): null when absent.
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                GM_ADDR actualSeqKvlen, GM_ADDR attentionOut, GM_ADDR softmaxLse, GM_ADDR dropoutMask,
                                GM_ADDR workspace, const FlashAttentionTilingData *tiling, AscendC::TPipe *pipe);
    __aicore__ inline void Process();
    // FlashAttentionV5's score modifiers (score_mods.h), after Init; none when not called.
    __aicore__ inline void InitScoreMods(const score_mods::ScoreModsGm &gm) { mods_.Init(pipe_, td_, gm); }

private:
    static constexpr bool FP32_IO = AscendC::IsSameType<T, float>::value;  // P and O need no Cast
    static constexpr bool NARROW_S = !AscendC::IsSameType<S, float>::value;  // S in T: cast to fp32 in UB
    // S in half: the softmax of a fully visible chunk runs in half (SoftmaxChunkNarrow). bfloat16
    // keeps the fp32 softmax: no vector arithmetic takes bfloat16_t on dav-c220 (asc-devkit
    // Add.md / Exp.md / Muls.md, A2/A3 dtypes: half, float, int16_t, int32_t).
    static constexpr bool HALF_SOFTMAX = NARROW_S && AscendC::IsSameType<S, half>::value;

    // The explicit mask's bias on the current item's BLOCK_MIXED blocks (OnlineSoftmax::ScoresToProbs),
    // and the score modifiers' (ALiBi, float mask) when mods is set.
    struct ItemMaskBias {
        attn_mask::MaskTiles *tiles;  // null: the block is not BLOCK_MIXED
        uint32_t b, n;
        score_mods::ScoreMods<T> *mods = nullptr;
        __aicore__ inline void AddBias(const AscendC::LocalTensor<float> &scores, uint32_t stride, uint32_t row0,
                                       uint32_t rows, uint32_t col0, uint32_t cols)
        {
            if (tiles != nullptr) tiles->AddBias(scores, stride, b, n, row0, rows, col0, cols);
            if (mods != nullptr) mods->AddBias(scores, stride, row0, rows, col0, cols);
        }
        __aicore__ inline bool RowShift(AscendC::LocalTensor<float> *shift)
        {
            return mods != nullptr && mods->RowShift(shift);
        }
    };

    __aicore__ inline void SummarizeMask();
    __aicore__ inline void ProcessItem(uint32_t item);
    // The first K/V block in [kvBlock, kvEnd) the mask does not hide completely (kvEnd: none).
    __aicore__ inline uint32_t NextComputedBlock(uint32_t kvBlock, uint32_t kvEnd) const;
    __aicore__ inline uint32_t BlockClass(uint32_t kvBlock) const;
    // P [rows, blockN] fp32 of K/V block kvBlock: dropped out in place, the keep mask to dropoutGm_.
    __aicore__ inline void DropOut(const AscendC::LocalTensor<float> &probs, uint32_t kvBlock, uint32_t rows,
                                   uint32_t row0);
    __aicore__ inline void WriteKeepMask(const philox_dropout::DropoutStream &stream, uint32_t kvBlock, uint32_t rows,
                                         uint32_t row0);
    // Both AIVs of the group set flagId once `pipe` finished the work before it and wait for
    // each other (mode 1); what the issuer waited for before it is then visible to both.
    template <pipe_t pipe>
    __aicore__ inline void MeetPair(uint16_t flagId);
    __aicore__ inline void IssueScores(uint32_t kvBlock, uint32_t mmRows);
    __aicore__ inline void SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0);
    __aicore__ inline void IssueValues(uint32_t kvBlock, uint32_t mmRows);
    // The issuer waits P_kvBlock . V_kvBlock, both meet, each adds its rows.
    __aicore__ inline void FinishValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void AccumulateValues(uint32_t kvBlock, uint32_t rows);
    __aicore__ inline void WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset);
    // This AIV's rows [r0, r0 + rows) of S_kvBlock, [rows, TileWidth] fp32, GM -> scoreQue (enqueued).
    __aicore__ inline void LoadScores(uint32_t kvBlock, uint32_t r0, uint32_t rows);
    // Softmax of those rows once dequeued into `scores` (freed here); P goes over those rows of S.
    // Whether the chunks of block kvBlock take the half softmax (HALF_SOFTMAX only).
    __aicore__ inline bool NarrowChunk(uint32_t kvBlock) const;
    // The half softmax of a chunk's staged S [rows, TileWidth] half (freed here; row0 its first
    // query row in the sequence); P goes out as in SoftmaxChunk.
    __aicore__ inline void SoftmaxChunkNarrow(AscendC::LocalTensor<S> &staged, uint32_t kvBlock, uint32_t r0,
                                              uint32_t rows, uint32_t row0);
    // P [rows, w] T of this AIV's rows from r0 (probQue_'s current turn, freed here) over those rows of S in GM.
    __aicore__ inline void StoreProbs(AscendC::LocalTensor<T> &prob, uint32_t kvBlock, uint32_t r0, uint32_t rows);
    __aicore__ inline void SoftmaxChunk(AscendC::LocalTensor<float> &scores, uint32_t kvBlock, uint32_t r0,
                                        uint32_t rows, uint32_t row0);
    // The columns of block kvBlock's score tile in UB: the columns QK wrote (BlockCols) rounded up
    // to 16 -- whole 32-B blocks of S, and of P in T -- so a block the band's end or the Skv tail
    // cuts is read, softmaxed and written back only as wide as the cube computed it. P.V reads no
    // column past BlockCols; the columns [BlockCols, width) hold no visible key (the item's last
    // visible key is below BlockCols for every row) and MaskScores sets them to -inf, so P is 0
    // there. Dropout keeps whole blockN-wide rows (its keep mask is laid out per blockN-wide row).
    // The queue of the fp32 tile SoftmaxChunk works on (and frees).
    __aicore__ inline AscendC::TQue<AscendC::TPosition::VECIN, 1> &TileQue()
    {
        if constexpr (NARROW_S) {
            return workQue_;
        } else {
            return scoreQue_;
        }
    }
    __aicore__ inline uint32_t TileWidth(uint32_t kvBlock) const
    {
        const uint32_t n = td_->blockN;
        // The half softmax works in whole 128-column repeats: with S in half and blockN a multiple
        // of them, a cut block is read in them (the extra columns lie past every row's band end,
        // so MaskScores sets them to -inf like the rest of the cut).
        const uint32_t align =
            HALF_SOFTMAX && n % attn_rows::B16_PER_REPEAT == 0 ? attn_rows::B16_PER_REPEAT : VISIBLE_COL_ALIGN;
        return td_->philoxLanes != 0 ? n : Min(n, CeilDiv(BlockCols(kvBlock), align) * align);
    }
    // Keys of block kvBlock the cube computes (QK's columns of S, P.V's reduction length): the
    // block, cut at the item's last visible key. The AIVs read exactly these columns of S.
    __aicore__ inline uint32_t BlockCols(uint32_t kvBlock) const
    {
        return Min(td_->blockN, keyEnd_ - kvBlock * td_->blockN);
    }

    const FlashAttentionTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;
    OnlineSoftmax softmax_;
    ItemMap items_;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_;
    AscendC::GlobalTensor<float> lseGm_;
    // The group's workspace slots, shared by its two AIVs; block j uses slot j % 2 of each. An
    // AIV reads and writes the rows [slotRow_, slotRow_ + rows) of the tiles.
    AscendC::GlobalTensor<S> scoreGm_[2];      // [blockM, blockN] S
    AscendC::GlobalTensor<T> probGm_[2];       // [blockM, blockN] T, row stride probStride_: a T view of scoreGm_
    AscendC::GlobalTensor<float> pvGm_[2];     // [blockM, headDim] fp32
    uint32_t probStride_ = 0;                  // elements between P rows: one S row, blockN * sizeof(S) / sizeof(T)

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;   // SCORE_BUFFERS x [c, n] S
    // NARROW_S only: [c, n] fp32, the chunk's S cast from scoreQue's T tile, softmaxed in place
    // (and, with n >= d, the P.V rows' landing instead of scoreQue). Its bytes and scoreQue's two
    // [c, n] T tiles are those of the default's two [c, n] fp32 tiles, so op_host's budget holds.
    AscendC::TQue<AscendC::TPosition::VECIN, 1> workQue_;
    // [c, n] T each (not for T = float). Chunks alternate between the two, so a chunk's P is cast
    // while the previous chunk's P still moves to GM on MTE3.
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> probQue_[PROB_BUFFERS];
    uint32_t probTurn_ = 0;  // the probQue_ of the next chunk
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pvQue_;      // [c, d] fp32 (only when n < d)
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;    // [c, d] T (only when n < d or T = float)
    // Where P.V and O rows go through UB. With n >= d, P.V [c', d] fp32 fits scoreQue's [c, n]
    // fp32 and O [c', d] T probQue's [c, n] T (c' = c * n / d rows, pvRows_ / outRows_); neither
    // tile is held while the other is: an AIV
    // reads P_{j-1} . V_{j-1} after its softmax of block j freed S_j (and before it loads S_{j+1}),
    // and writes O after its last P went out. So they take those queues' buffers and no UB of
    // their own, which is what admits blocks such as 96 x 512 (op_host UbLines).
    AscendC::TQue<AscendC::TPosition::VECIN, 1> *pvIn_ = &pvQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> *outOut_ = &outQue_;
    uint32_t pvRows_ = 0, outRows_ = 0;  // rows of P.V / O per pass through pvIn_ / outOut_ (multiples of 8)
    // The softmax's row reductions fold into P's buffer ([c, n] T holds [c, 64] fp32 when
    // n * sizeof(T) >= 256): it is allocated before ScoresToProbs and the cast to P, on the same
    // vector pipe after the last reduction, overwrites the fold. Admits 128 x 384.
    bool foldInProb_ = false;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue_;    // [m] fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_;      // [m, d] fp32

    AscendC::LocalTensor<float> acc_;

    // V2 options (unused when off: hasMask 0, philoxLanes 0).
    attn_mask::MaskGeometry maskGeom_;
    attn_mask::MaskTiles maskTiles_;
    AscendC::GlobalTensor<uint8_t> summaryGm_;  // [SummaryRows, KeyBlocks] BlockClass bytes
    score_mods::ScoreMods<T> mods_;  // FlashAttentionV5 (InitScoreMods); inactive otherwise
    philox_dropout::PhiloxKeepMask keep_;
    AscendC::GlobalTensor<uint8_t> dropoutGm_;  // [B, N, Sq, Skv] uint8, 1 = kept (when given)
    AscendC::TBuf<AscendC::TPosition::VECCALC> keepBuf_;  // a chunk's keep bytes [16 L] and as half, rows [c, align32(n)]
    AscendC::LocalTensor<uint8_t> keepBytes_, keepRows_;
    AscendC::LocalTensor<half> keepHalf_;

    // Current item (this AIV's share of it).
    uint32_t core_ = 0, subBlock_ = 0;
    bool issuer_ = false;                        // sub-block 0: sends the group's Matmul requests
    uint32_t halfRow_ = 0;                       // this AIV's first row within the item
    // This AIV's first row in the group's S / P / P.V slots: halfRow_ when shared; solo, a fixed
    // half (subBlock * subBlockM), since the two AIVs then reach their items at their own pace
    // and halves of items of different lengths would overlap. mmRow_: the Matmul jobs' first row
    // there (0 shared, slotRow_ solo).
    uint32_t slotRow_ = 0;
    uint32_t mmRow_ = 0;
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    uint64_t queryOffset_ = 0, kvOffset_ = 0;    // element offsets of (b, n, row0) and (b, h, 0)
    uint64_t itemQueryOffset_ = 0;               // element offset of the Matmul jobs' first query row
    uint32_t seqKv_ = 0;                         // keys of the current item's sequence
    uint32_t keyEnd_ = 0;                        // one past the item's last visible key (<= seqKv_)
    uint32_t seq_ = 0, head_ = 0;                // the item's sequence (batch index) and query head
    uint64_t summaryRow_ = 0;                    // the item's first summary byte (mask)
};

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                     GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                                     GM_ADDR actualSeqKvlen, GM_ADDR attentionOut,
                                                     GM_ADDR softmaxLse, GM_ADDR dropoutMask, GM_ADDR workspace,
                                                     const FlashAttentionTilingData *tiling,
                                                     AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->subBlockM;
    const uint32_t c = td_->chunkRows;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;

    BindForwardGm<T>(td_, query, key, value, attentionOut, softmaxLse, queryGm_, keyGm_, valueGm_, outGm_, lseGm_);
    items_.Init(td_, actualSeqQlen, actualSeqKvlen);

    // UB, in the order and sizes op_host budgets (flash_attention_tiling.h); before the workspace
    // slices, so that blocks too large for UB stop every AIV here, ahead of any GM range.
    const bool shareTiles = n >= d;
    pipe_->InitBuffer(scoreQue_, SCORE_BUFFERS, c * n * sizeof(S));
    if constexpr (NARROW_S) {
        pipe_->InitBuffer(workQue_, 1, c * n * sizeof(float));
    }
    if constexpr (!FP32_IO) {
        for (uint32_t i = 0; i < PROB_BUFFERS; ++i) {
            pipe_->InitBuffer(probQue_[i], 1, c * n * sizeof(T));
        }
    }
    if (shareTiles) {
        pvIn_ = NARROW_S ? &workQue_ : &scoreQue_;
    } else {
        pipe_->InitBuffer(pvQue_, 1, c * d * sizeof(float));
    }
    if (shareTiles && !FP32_IO) {
        outOut_ = &probQue_[0];
    } else {
        pipe_->InitBuffer(outQue_, 1, c * d * sizeof(T));
    }
    // A shared [c, n] tile holds c * n / d rows of D; whole 8-row groups keep the state rows of
    // every pass 32-B aligned.
    const uint32_t sharedRows = Min(m, c * n / d / FP32_PER_BLOCK * FP32_PER_BLOCK);
    pvRows_ = shareTiles ? sharedRows : c;
    outRows_ = shareTiles && !FP32_IO ? sharedRows : c;
    pipe_->InitBuffer(accBuf_, m * d * sizeof(float));
    foldInProb_ = !FP32_IO && n * sizeof(T) >= FP32_PER_REPEAT * sizeof(float);
    softmax_.Init(pipe_, td_, m, c, !foldInProb_, true);
    pipe_->InitBuffer(lseQue_, 1, Align32Bytes(m * sizeof(float)));
    acc_ = accBuf_.Get<float>();
    if (td_->hasMask != 0) {
        maskGeom_.mb = td_->maskB;
        maskGeom_.mn = td_->maskN;
        maskGeom_.mq = td_->maskQ;
        maskGeom_.mk = td_->seqKv;
        maskGeom_.blockM = td_->blockM;
        maskGeom_.blockN = n;
        maskTiles_.Init(pipe_, maskGeom_, td_->maskRows);
        maskTiles_.SetGlobal(attenMask);
    }
    if (td_->philoxLanes != 0) {
        keep_.Init(pipe_, td_->philoxLanes);
    }
    if (td_->hasDropoutMask != 0) {
        // A chunk covers at most 16 philoxLanes elements (PhiloxKeepMask::Init's capacity).
        const uint32_t chunk = 16 * td_->philoxLanes;
        pipe_->InitBuffer(keepBuf_, chunk * (sizeof(uint8_t) + sizeof(half)) + c * Align32Bytes(n));
        AscendC::LocalTensor<uint8_t> all = keepBuf_.Get<uint8_t>();
        keepBytes_ = all;
        keepHalf_ = all[chunk].ReinterpretCast<half>();
        keepRows_ = all[chunk * (sizeof(uint8_t) + sizeof(half))];
        dropoutGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(dropoutMask),
                                   static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ * td_->seqKv);
    }

    // The group's slice of the user workspace (slots of blockM rows).
    const uint32_t aiv = AscendC::GetBlockIdx();
    core_ = aiv / AIV_PER_AIC;
    subBlock_ = AscendC::GetSubBlockIdx();
    issuer_ = subBlock_ == 0 || td_->soloRows != 0;
    const uint32_t mi = td_->blockM;
    GM_ADDR slice = AscendC::GetUserWorkspace(workspace) + static_cast<uint64_t>(core_) * td_->wsBytesPerCore;
    probStride_ = n * sizeof(S) / sizeof(T);
    for (uint32_t slot = 0; slot < 2; ++slot) {
        // Slots of [blockM, blockN] S each (op_host sizes the region 2 x that: T for the
        // high-performance precision, whose S is T, else fp32).
        __gm__ S *scores = reinterpret_cast<__gm__ S *>(slice + td_->wsScoreOffset + slot * mi * n * sizeof(S));
        scoreGm_[slot].SetGlobalBuffer(scores, mi * n);
        probGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(scores), mi * probStride_);  // P in S's rows
        pvGm_[slot].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset) + slot * mi * d,
                                    mi * d);
    }
    if (td_->hasMask != 0) {
        summaryGm_.SetGlobalBuffer(
            reinterpret_cast<__gm__ uint8_t *>(AscendC::GetUserWorkspace(workspace) + td_->wsMaskSummaryOffset),
            maskGeom_.SummaryBytes());
    }

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::Process()
{
    if (td_->hasMask != 0) {
        SummarizeMask();  // every AIV of the launch, before any reads the summary
    }
    if (core_ >= td_->usedCoreNum) {
        return;
    }
    for (uint32_t item = td_->coreItemStart[core_]; item < td_->coreItemStart[core_ + 1]; ++item) {
        ProcessItem(item);
    }
    qkMm.End();
    pvMm.End();
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::SummarizeMask()
{
    // Each AIV classifies a contiguous share of the summary rows; SyncAll<true> (vector cores
    // only) then makes the whole summary visible to every AIV.
    const uint32_t aivs = AscendC::GetBlockNum() * AIV_PER_AIC;
    const uint32_t aiv = AscendC::GetBlockIdx();
    const uint32_t rows = maskGeom_.SummaryRows();
    const uint32_t per = CeilDiv(rows, aivs);
    const uint32_t first = Min(aiv * per, rows);
    maskTiles_.Summarize(summaryGm_, first, Min(per, rows - first));
    AscendC::SyncAll();
}

template <typename T, typename S>
__aicore__ inline uint32_t FlashAttentionKernel<T, S>::BlockClass(uint32_t kvBlock) const
{
    if (td_->hasMask == 0) {
        return attn_mask::BLOCK_VISIBLE;
    }
    return summaryGm_.GetValue(summaryRow_ + kvBlock);
}

template <typename T, typename S>
__aicore__ inline uint32_t FlashAttentionKernel<T, S>::NextComputedBlock(uint32_t kvBlock, uint32_t kvEnd) const
{
    while (kvBlock < kvEnd && BlockClass(kvBlock) == attn_mask::BLOCK_MASKED) {
        ++kvBlock;
    }
    return kvBlock;
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::ProcessItem(uint32_t item)
{
    ItemPlace place;
    items_.Locate(item, &place);

    // Rows of this item, split between the two AIVs: sub-block 0 takes ceil(itemRows / 2). An AIV
    // with no rows (an item of one row) still meets its partner at every step.
    const uint32_t itemRow0 = place.qBlock * td_->blockM;
    const uint32_t itemRows = Min(td_->blockM, place.seqQ - itemRow0);
    const uint32_t firstHalf = (itemRows + 1) / 2;
    halfRow_ = subBlock_ == 0 ? 0 : firstHalf;
    const uint32_t row0 = itemRow0 + halfRow_;
    const uint32_t rows = subBlock_ == 0 ? firstHalf : itemRows - firstHalf;
    const bool solo = td_->soloRows != 0;
    if (solo && rows == 0) {
        return;  // no partner waits for a solo AIV
    }
    // The rows of the cube's jobs: the item's (shared), or this AIV's own (solo).
    const uint32_t mmRows = solo ? rows : itemRows;
    slotRow_ = solo ? subBlock_ * td_->subBlockM : halfRow_;
    mmRow_ = solo ? slotRow_ : 0;
    const uint32_t mmRow0 = itemRow0 + (solo ? halfRow_ : 0);  // sequence row of the jobs' first row

    // Only the K/V blocks holding a key some row of the jobs sees under the band: shared, the
    // same blocks for both AIVs (a half's rows that see none of a block's keys get P = 0 there).
    uint32_t keyFirst = 0, keyEnd = 0;
    VisibleKeys(td_, place.seqQ, place.seqKv, mmRow0, mmRows, &keyFirst, &keyEnd);
    const uint32_t kvBegin = keyFirst / td_->blockN;
    const uint32_t kvEnd = keyEnd == 0 ? kvBegin : CeilDiv(keyEnd, td_->blockN);

    seqKv_ = place.seqKv;
    keyEnd_ = keyEnd;
    seq_ = place.seq;
    head_ = place.head;
    if (td_->hasMask != 0) {
        // One summary row per query block of blockM rows: both AIVs read the item's.
        summaryRow_ = static_cast<uint64_t>(maskGeom_.SummaryRow(seq_, head_, itemRow0)) * maskGeom_.KeyBlocks();
    }
    itemQueryOffset_ = items_.QueryOffset(place, mmRow0);
    queryOffset_ = items_.QueryOffset(place, row0);
    kvOffset_ = items_.KvOffset(place, 0);
    mods_.StartItem(place.seq, place.head, place.seqQ, place.seqKv);
    if (rows != 0) {
        softmax_.Reset(acc_, rows, place.seqQ, place.seqKv, mods_.Sink());
    }

    // Blocks the mask hides completely are skipped: the next issued block is the next computed one.
    uint32_t j = NextComputedBlock(kvBegin, kvEnd);
    if (j < kvEnd && issuer_) {
        // qk: A = Q rows [mmRows, D] (row stride rowStrideQ_), B^T = K rows [cols, D] (row stride
        // rowStrideKv_), C = S [mmRows, cols] with row stride blockN.
        qkMm.SetOrgShape(mmRows, td_->blockN, rowStrideQ_, rowStrideKv_, td_->blockN);
        qkMm.SetTensorA(queryGm_[itemQueryOffset_]);
        // pv: A = P [mmRows, cols] (row stride probStride_: P lives in S's rows), B = V rows
        // [cols, D] (row stride rowStrideKv_), C = [mmRows, D] with row stride D.
        pvMm.SetOrgShape(mmRows, rowStrideKv_, probStride_, place.seqKv, td_->headDim);
        IssueScores(j, mmRows);
    }
    // Workspace and alpha slots are per block parity (j % 2). Without skipped blocks consecutive
    // computed blocks alternate and the pipeline overlaps fully; after a skip the next computed
    // block may share the current one's parity, and then the step waits where it would overwrite
    // a slot still in use (S of the next block issued after this softmax; the previous P.V added
    // before it). Slot reuse across the AIVs: a slot is rewritten only after a meeting at which
    // the partner had set its flag behind its last read of it (its S and P.V reads precede, on its
    // MTE2 -> V -> MTE3 chain, the P writes its PAIR_PROBS set waits for).
    bool pending = false;  // P_prev . V_prev issued, not yet added
    uint32_t prev = 0;
    while (j < kvEnd) {
        if (issuer_) {
            qkMm.WaitIterateAll();
        }
        MeetPair<PIPE_MTE2>(PAIR_SCORES);
        const uint32_t next = NextComputedBlock(j + 1, kvEnd);
        const bool overlapNext = next < kvEnd && next % 2 != j % 2;
        if (overlapNext && issuer_) {
            IssueScores(next, mmRows);  // the cube computes the next S while the vector units work on S_j
        }
        if (pending && prev % 2 == j % 2) {
            FinishValues(prev, rows);
            pending = false;
        }
        if (rows != 0) {
            SoftmaxBlock(j, rows, row0);
        }
        if (pending && issuer_) {
            pvMm.WaitIterateAll();  // P_prev . V_prev ran on the cube during the softmax
        }
        MeetPair<PIPE_MTE3>(PAIR_PROBS);
        if (issuer_) {
            IssueValues(j, mmRows);
        }
        if (pending && rows != 0) {
            AccumulateValues(prev, rows);
        }
        if (next < kvEnd && !overlapNext && issuer_) {
            IssueScores(next, mmRows);
        }
        prev = j;
        pending = true;
        j = next;
    }
    if (pending) {
        FinishValues(prev, rows);
    }
    if (rows != 0) {
        WriteOutput(rows, queryOffset_, place.lseRow0 + row0);
    }
}

template <typename T, typename S>
template <pipe_t pipe>
__aicore__ inline void FlashAttentionKernel<T, S>::MeetPair(uint16_t flagId)
{
    if (td_->soloRows != 0) {
        if constexpr (pipe == PIPE_MTE3) {
            WaitForPipe<AscendC::HardEvent::MTE3_S>();  // this AIV's P is in GM before its P.V request
        }
        return;
    }
    AscendC::CrossCoreSetFlag<1, pipe>(flagId);
    AscendC::CrossCoreWaitFlag<1>(flagId);
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::IssueScores(uint32_t kvBlock, uint32_t mmRows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = BlockCols(kvBlock);  // no key past the item's band
    qkMm.SetTensorB(keyGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_], true);
    qkMm.SetTail(mmRows, cols, td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[kvBlock % 2][mmRow_ * td_->blockN], 0, false, true);
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::SoftmaxBlock(uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    softmax_.StartBlock();
    // Chunk k + 1's S is requested (MTE2, into scoreQue's other buffer) before chunk k's vector
    // work is issued, so the load runs while the vector unit softmaxes chunk k.
    const uint32_t c = td_->chunkRows;
    LoadScores(kvBlock, 0, Min(c, rows));
    for (uint32_t r0 = 0; r0 < rows; r0 += c) {
        const uint32_t chunk = Min(c, rows - r0);
        AscendC::LocalTensor<S> staged = scoreQue_.DeQue<S>();
        if (r0 + c < rows) {
            LoadScores(kvBlock, r0 + c, Min(c, rows - r0 - c));
        }
        if constexpr (HALF_SOFTMAX) {
            if (NarrowChunk(kvBlock)) {
                SoftmaxChunkNarrow(staged, kvBlock, r0, chunk, row0 + r0);
                continue;
            }
        }
        if constexpr (NARROW_S) {
            // S in T -> fp32 (exact), the softmax's tile; scoreQue's buffer is free for the next load.
            AscendC::LocalTensor<float> scores = workQue_.AllocTensor<float>();
            AscendC::Cast(scores, staged, AscendC::RoundMode::CAST_NONE, chunk * TileWidth(kvBlock));
            scoreQue_.FreeTensor(staged);
            SoftmaxChunk(scores, kvBlock, r0, chunk, row0 + r0);
        } else {
            SoftmaxChunk(staged, kvBlock, r0, chunk, row0 + r0);
        }
    }
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::LoadScores(uint32_t kvBlock, uint32_t r0, uint32_t rows)
{
    const uint32_t n = td_->blockN;
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t at = (slotRow_ + r0) * n;  // these rows of the item's S tile (row stride n elements of S)
    constexpr uint32_t perBlock = 32 / sizeof(S);
    AscendC::LocalTensor<S> scores = scoreQue_.AllocTensor<S>();
    if (w == n) {
        AscendC::DataCopy(scores, scoreGm_[kvBlock % 2][at], rows * w);
    } else {
        const uint16_t gapBlocks = static_cast<uint16_t>((n - w) / perBlock);  // GM side only
        const AscendC::DataCopyParams params{static_cast<uint16_t>(rows), static_cast<uint16_t>(w / perBlock),
                                             gapBlocks, 0};
        AscendC::DataCopy(scores, scoreGm_[kvBlock % 2][at], params);
    }
    scoreQue_.EnQue(scores);
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::SoftmaxChunk(AscendC::LocalTensor<float> &scores, uint32_t kvBlock,
                                                             uint32_t r0, uint32_t rows, uint32_t row0)
{
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t elems = rows * w;  // [rows, w]
    const uint32_t probAt = (slotRow_ + r0) * probStride_;  // these rows of P, at the bytes of their S rows

    AscendC::LocalTensor<T> prob;
    if constexpr (!FP32_IO) {
        prob = probQue_[probTurn_].AllocTensor<T>();
        if (foldInProb_) {
            softmax_.UseFold(prob.template ReinterpretCast<float>());
        }
    }
    const bool mixed = BlockClass(kvBlock) == attn_mask::BLOCK_MIXED;
    if (mixed || mods_.AddsBias()) {
        ItemMaskBias bias{mixed ? &maskTiles_ : nullptr, seq_, head_, mods_.AddsBias() ? &mods_ : nullptr};
        softmax_.ScoresToProbs(scores, w, kvBlock, rows, row0, r0, &bias);
    } else {
        softmax_.ScoresToProbs(scores, w, kvBlock, rows, row0, r0);
    }
    // P [rows, blockN] fp32 is final here (l and the LSE already hold its undropped sums): the
    // one point where it may still change before P.V.
    if (td_->philoxLanes != 0) {
        DropOut(scores, kvBlock, rows, row0);
    }

    // P goes over the S rows this chunk read (the invariant in the header comment): [rows, w]
    // rows into the first w * sizeof(T) bytes of their S rows, the rest of each S row skipped
    // (units of 32-B blocks).
    const uint16_t gapBlocks = static_cast<uint16_t>((probStride_ - w) * sizeof(T) / 32);
    const AscendC::DataCopyParams probParams{static_cast<uint16_t>(rows), static_cast<uint16_t>(w * sizeof(T) / 32),
                                             0, gapBlocks};
    if constexpr (FP32_IO) {
        // P is already the cube's operand type: the fp32 tile goes to GM as it is (no probQue),
        // in place of S (probAt == at).
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        if (w == td_->blockN) {
            AscendC::DataCopy(probGm_[kvBlock % 2][probAt], scores, elems);
        } else {
            AscendC::DataCopy(probGm_[kvBlock % 2][probAt], scores, probParams);
        }
        WaitForPipe<AscendC::HardEvent::MTE3_V>();  // a later chunk's S lands in this buffer
        TileQue().FreeTensor(scores);
    } else {
        AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, elems);
        TileQue().FreeTensor(scores);
        StoreProbs(prob, kvBlock, r0, rows);
    }
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::StoreProbs(AscendC::LocalTensor<T> &prob, uint32_t kvBlock,
                                                           uint32_t r0, uint32_t rows)
{
    const uint32_t w = TileWidth(kvBlock);
    const uint32_t probAt = (slotRow_ + r0) * probStride_;  // these rows of P, at the bytes of their S rows
    const uint16_t gapBlocks = static_cast<uint16_t>((probStride_ - w) * sizeof(T) / 32);
    const AscendC::DataCopyParams probParams{static_cast<uint16_t>(rows), static_cast<uint16_t>(w * sizeof(T) / 32),
                                             0, gapBlocks};
    probQue_[probTurn_].EnQue(prob);
    prob = probQue_[probTurn_].DeQue<T>();
    AscendC::DataCopy(probGm_[kvBlock % 2][probAt], prob, probParams);
    probQue_[probTurn_].FreeTensor(prob);
    probTurn_ = (probTurn_ + 1) % PROB_BUFFERS;
}

// The half softmax takes the chunks of a block that need no per-element work besides the softmax
// and the band's visibility: no soft-capping, no dropout, no explicit mask bias on the block,
// whole 128-column repeats of half (TileWidth rounds a cut block up to them), scale > 0, and P's
// buffer free to fold in (foldInProb_: the fp32 row sum then folds in the staged S tile, which is
// dead by then). The band's edges and the Skv tail are masked in half (ScoresToProbsNarrow), so
// the blocks on the causal diagonal take it too. Other blocks take the fp32 softmax of the cast
// S, as before; both keep the same fp32 row state.
template <typename T, typename S>
__aicore__ inline bool FlashAttentionKernel<T, S>::NarrowChunk(uint32_t kvBlock) const
{
    const uint32_t w = TileWidth(kvBlock);
    return foldInProb_ && td_->softcap <= 0.0f && td_->scaleValue > 0.0f && td_->philoxLanes == 0 &&
           !mods_.AddsBias() &&  // ALiBi and a float mask add to the scaled scores: the fp32 path
           w % attn_rows::B16_PER_REPEAT == 0 && BlockClass(kvBlock) != attn_mask::BLOCK_MIXED;
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::SoftmaxChunkNarrow(AscendC::LocalTensor<S> &staged, uint32_t kvBlock,
                                                                   uint32_t r0, uint32_t rows, uint32_t row0)
{
    const uint32_t w = TileWidth(kvBlock);
    AscendC::LocalTensor<T> prob = probQue_[probTurn_].AllocTensor<T>();
    AscendC::LocalTensor<float> wide = workQue_.AllocTensor<float>();
    // staged holds [c, n] S = [c, n / 2] fp32 bytes >= the [c, 64] fp32 fold (w >= 128).
    softmax_.UseFold(staged.template ReinterpretCast<float>());
    softmax_.ScoresToProbsNarrow(staged, prob, wide, w, kvBlock, rows, row0, r0);
    workQue_.FreeTensor(wide);
    scoreQue_.FreeTensor(staged);
    StoreProbs(prob, kvBlock, r0, rows);
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::DropOut(const AscendC::LocalTensor<float> &probs, uint32_t kvBlock,
                                                        uint32_t rows, uint32_t row0)
{
    // Stream of (sequence, query head); counters from the positions in the sequence.
    const uint64_t headIndex = static_cast<uint64_t>(seq_) * td_->numHeads + head_;
    const philox_dropout::DropoutStream stream = philox_dropout::MakeStream(
        td_->seed, td_->offset, headIndex, td_->keepThreshold, td_->invKeepProb);
    const uint32_t col0 = kvBlock * td_->blockN;  // a multiple of 16
    keep_.Apply(probs, stream, row0, col0, rows, td_->blockN);
    if (td_->hasDropoutMask != 0) {
        WriteKeepMask(stream, kvBlock, rows, row0);
    }
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::WriteKeepMask(const philox_dropout::DropoutStream &stream,
                                                              uint32_t kvBlock, uint32_t rows, uint32_t row0)
{
    // The testing aid regenerates the keep mask chunk by chunk (Apply's chunks of ChunkRows()
    // rows): the bytes of a chunk [chunk, blockN] have rows of blockN bytes, not 32-B aligned when
    // blockN % 32 == 16, which DataCopyPad's UB side needs, so they are re-laid out through half
    // (rows of 2 blockN bytes) into keepRows_ [rows, align32(blockN)].
    const uint32_t n = td_->blockN;
    const uint32_t pitch = Align32Bytes(n);
    const uint32_t col0 = kvBlock * n;
    const uint32_t cols = Min(n, seqKv_ - col0);
    for (uint32_t r0 = 0; r0 < rows; r0 += keep_.ChunkRows()) {
        const uint32_t chunk = Min(keep_.ChunkRows(), rows - r0);
        keep_.KeepBits(stream, row0 + r0, col0);
        keep_.KeepBytes(keepBytes_, chunk * n);
        AscendC::Cast(keepHalf_, keepBytes_, AscendC::RoundMode::CAST_NONE, chunk * n);
        for (uint32_t r = 0; r < chunk; ++r) {
            AscendC::Cast(keepRows_[(r0 + r) * pitch], keepHalf_[r * n], AscendC::RoundMode::CAST_NONE, n);
        }
    }
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    const uint64_t at = ((static_cast<uint64_t>(seq_) * td_->numHeads + head_) * td_->seqQ + row0) * td_->seqKv + col0;
    const AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), cols, (pitch - Align32Bytes(cols)) / 32,
                                            td_->seqKv - cols, 0};
    AscendC::DataCopyPad(dropoutGm_[at], keepRows_, params);
    WaitForPipe<AscendC::HardEvent::MTE3_V>();  // the next block rewrites keepRows_
}

// P_j . V_j for the item's rows on the cube into pv slot j % 2, asynchronously (issuer, after
// PAIR_PROBS(j): both halves of P_j are in GM, in S_j's rows). The slot's next writer is the QK
// of the next block of that parity, requested after this one (the header's invariant); the pv
// slot was last read by both AIVs' AccumulateValues of that block, before their PAIR_PROBS(j) sets.
template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::IssueValues(uint32_t kvBlock, uint32_t mmRows)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = BlockCols(kvBlock);  // P is 0 in the columns past them
    pvMm.SetTensorA(probGm_[kvBlock % 2][mmRow_ * probStride_]);
    pvMm.SetTensorB(valueGm_[kvOffset_ + static_cast<uint64_t>(col0) * rowStrideKv_]);
    pvMm.SetTail(mmRows, td_->headDim, cols);
    pvMm.template IterateAll<false>(pvGm_[kvBlock % 2][mmRow_ * td_->headDim], 0, false, true);
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::FinishValues(uint32_t kvBlock, uint32_t rows)
{
    if (issuer_) {
        pvMm.WaitIterateAll();
    }
    MeetPair<PIPE_MTE2>(PAIR_VALUES);
    if (rows != 0) {
        AccumulateValues(kvBlock, rows);
    }
}

// acc = alpha_j * acc + P_j . V_j for this AIV's rows once P_j . V_j is in GM (the issuer waited
// for it before the meeting that precedes this call).
template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::AccumulateValues(uint32_t kvBlock, uint32_t rows)
{
    const uint32_t d = td_->headDim;
    for (uint32_t r0 = 0; r0 < rows; r0 += pvRows_) {
        const uint32_t chunk = Min(pvRows_, rows - r0);
        AscendC::LocalTensor<float> pv = pvIn_->AllocTensor<float>();
        AscendC::DataCopy(pv, pvGm_[kvBlock % 2][(slotRow_ + r0) * d], chunk * d);
        pvIn_->EnQue(pv);
        pv = pvIn_->DeQue<float>();
        softmax_.Accumulate(acc_[r0 * d], pv, chunk, kvBlock, r0);
        pvIn_->FreeTensor(pv);
    }
}

template <typename T, typename S>
__aicore__ inline void FlashAttentionKernel<T, S>::WriteOutput(uint32_t rows, uint64_t outOffset, uint64_t lseOffset)
{
    const uint32_t d = td_->headDim;
    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    softmax_.Finish(acc_, lse, rows);

    // BSND / BSH / TND: consecutive sequence rows are numHeads * D elements apart in GM.
    const uint32_t rowStride = td_->layout == FA_LAYOUT_BNSD ? d : td_->numHeads * d;
    for (uint32_t r0 = 0; r0 < rows; r0 += outRows_) {
        const uint32_t chunk = Min(outRows_, rows - r0);
        AscendC::LocalTensor<T> out = outOut_->AllocTensor<T>();
        if constexpr (FP32_IO) {
            AscendC::DataCopy(out, acc_[r0 * d], chunk * d);
        } else {
            AscendC::Cast(out, acc_[r0 * d], AscendC::RoundMode::CAST_RINT, chunk * d);
        }
        outOut_->EnQue(out);
        out = outOut_->DeQue<T>();
        const uint64_t at = outOffset + static_cast<uint64_t>(r0) * rowStride;
        if (td_->layout == FA_LAYOUT_BNSD) {
            AscendC::DataCopy(outGm_[at], out, chunk * d);
        } else {
            const uint32_t gapBytes = (td_->numHeads - 1) * d * sizeof(T);
            AscendC::DataCopyExtParams params{static_cast<uint16_t>(chunk), static_cast<uint32_t>(d * sizeof(T)),
                                              0, gapBytes, 0};
            AscendC::DataCopyPad(outGm_[at], out, params);
        }
        outOut_->FreeTensor(out);
    }

    lseQue_.EnQue(lse);
    lse = lseQue_.DeQue<float>();
    AscendC::DataCopyExtParams lseParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPad(lseGm_[lseOffset], lse, lseParams);
    lseQue_.FreeTensor(lse);
}

}  // namespace flash_attn
