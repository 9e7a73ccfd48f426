// flash_attention_decode_kernel.h -- attention of a few query tokens against a paged K/V cache
// ("flash-decoding") for Atlas A2/A3 as a mixed AIC:AIV 1:2 kernel.
//
// Work is cut by keys, not by query heads (flash_attention_decode_tiling.h): each AIV takes an
// equal range of key chunks over all (batch, kv head) groups, computed at run time from the
// sequences' lengths. For each piece of a group it owns, an AIV packs the group's query rows
// (query heads of the kv head x query tokens: the matmul M dimension, so K/V are read once)
// and streams the piece's chunks through the cube, each chunk found through block_table:
//   S_j   = Q . K_j^T                (cube, double-buffered GM workspace slot)
//   S_j  *= scale; mask              (vector; only chunks crossing a row's causal/window limit
//                                     or the sequence end)
//   m_new = max(m, rowmax(S_j));  alpha = exp(m - m_new)
//   P_j   = exp(S_j - m_new);  l = alpha * l + rowsum(P_j)
//   acc   = alpha * acc + P_j . V_j
// and O = acc / l, LSE = m + ln(l). P_j . V_j is requested asynchronously and added one chunk
// later (acc = alpha_j * acc + P_j . V_j once the cube has it), so that every AIV keeps a QK and a
// P.V queued on its cube while it softmaxes: S, P, P.V and alpha have two slots, by chunk parity.
// The cube is shared by the AIC's two AIVs; it serves their requests one at a time, so a chunk
// costs the cube its two jobs and the vector units overlap them.
// m starts at -FLT_MAX, not -inf, so a row whose keys are all
// masked in a piece keeps l = 0 and gets O = 0, LSE = -inf (no inf - inf). A group cut into
// pieces writes partial (O, LSE) per piece; after SyncAll the partials are merged
//   O = sum_j exp(LSE_j - M) O_j / sum_j exp(LSE_j - M),  LSE = M + ln(sum_j exp(LSE_j - M))
// with M = max_j LSE_j, in piece order. SyncAll<true> (vector cores only) needs every block of
// the launch resident: the tiling sets batch schedule mode (docs/decode.md).
// FlashAttentionDecodeV2's score modifiers (docs/decode.md, "Score modifiers in decode"): softcap
// replaces S *= scale by S = softcap * tanh(scale * S / softcap); ALiBi then adds
// -slope[b, head] * |s + L - Sq - j| to each visible score (from the slopes and the indices, no
// stored bias); a sink logit joins each row's denominator exactly once -- in the finish of a
// group that is one piece, else in the merge (never in a piece's partial LSE):
//   M = max(m, sink), l' = l exp(m - M) + exp(sink - M), O = acc exp(m - M) / l', LSE = M + ln l'.
// FlashAttentionDecodeV3's int8 cache (KV = int8_t; docs/int8.md "Int8 KV cache (decode)"):
//   K = Kq * sk (per channel, sk [D] of the kv head):  Q . K^T = (Q * sk) . Kq^T, so the packed Q
//     rows are multiplied by sk once per piece and the cube multiplies them with Kq as T;
//   V = Vq * sv (per token, sv [cols] of the chunk):   P . V = (P * sv) . Vq, so each P row is
//     multiplied by the chunk's sv after its row sum (l counts P, not P * sv).
// Kq and Vq (|x| <= 127: exact in half and bf16) are cast to T on the vector units, a chunk per
// pass of dequantRows keys, into the AIV's kDeq / vDeq workspace tiles (chunk parity) the cube
// reads: the cache itself is read once, as int8.
#pragma once

#include <cfloat>

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_band.h"
#include "attention_matmul.h"
#include "attention_row_ops.h"
#include "flash_attention_decode_tiling.h"

namespace flash_attn_decode {

constexpr uint32_t STAT_SLOTS = 7;   // per-row fp32 vectors in statBuf (see StatSlot)
constexpr uint32_t AIV_PER_AIC = 2;  // KERNEL_TYPE_MIX_AIC_1_2
constexpr float NEG_INF = -__builtin_inff();

__aicore__ inline uint32_t Align32Bytes(uint32_t bytes) { return (bytes + 31) / 32 * 32; }
__aicore__ inline int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

using attn_rows::WaitForPipe;  // orders the pipe named second after the one named first

// The keys one sequence's rows can see and the chunks ("units") that hold them.
struct KeyRange {
    uint32_t seqLen = 0;     // L: keys in the cache for this sequence
    uint32_t start = 0;      // V2's cache_leftpad[b]: keys [0, start) are invisible (0 without it)
    uint32_t firstUnit = 0;  // chunk index of the first visible key
    uint32_t units = 0;      // chunks from there to the last visible key
};

// One group (b, kv head, row group) while walking all groups in order: its units and which parts
// own them.
struct GroupSpan {
    uint32_t b = 0, h = 0, rg = 0, group = 0;
    KeyRange keys;
    uint64_t unitStart = 0;  // first unit of the group in the global order
    uint32_t firstPart = 0, lastPart = 0;  // equal-ranges schedule: the parts holding its units
    uint32_t pieces = 1;     // pieces the group is cut into (each on one part)
    uint32_t slotBase = 0;   // first partial slot (groups with >= 2 pieces)
    uint64_t pieceBase = 0;  // explicit splits: global number of the group's first piece
};

// KV: the cache's element type, T (FlashAttentionDecode, V2) or int8_t (FlashAttentionDecodeV3).
template <typename T, typename KV = T>
class FlashAttentionDecodeKernel {
public:
    attn_mm::RowsByColsT<T> qkMm;  // S = Q . K^T, [rows, cols] fp32
    attn_mm::RowsByB<T> pvMm;      // P . V, [rows, D] fp32

    // alibiSlopes / sinks: FlashAttentionDecodeV2's optional inputs (nullptr when absent or V1);
    // keyAntiquantScale / valueAntiquantScale: V3's (nullptr before V3).
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR blockTable,
                                GM_ADDR actualSeqLengthsKv, GM_ADDR alibiSlopes, GM_ADDR sinks,
                                GM_ADDR cacheLeftpad, GM_ADDR keyAntiquantScale, GM_ADDR valueAntiquantScale,
                                GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                GM_ADDR workspace, const FlashAttentionDecodeTilingData *tiling,
                                AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    // ALPHA_A + s: alpha of the chunk in slot s (kept until its P.V is added, one chunk later).
    enum StatSlot : uint32_t { ROW_MAX_A = 0, ROW_MAX_B, ROW_SUM, BLOCK_MAX, BLOCK_SUM, ALPHA_A, ALPHA_B };

    __aicore__ inline KeyRange KeysOf(uint32_t b);
    __aicore__ inline uint64_t PartStart(uint32_t part) const;
    __aicore__ inline uint32_t PartOfUnit(uint64_t unit) const;
    __aicore__ inline void NextGroup(GroupSpan *span);

    __aicore__ inline void PlaceGroup(GroupSpan *span) const;
    __aicore__ inline void RunPiece(const GroupSpan &span, uint32_t piece, uint32_t unitBegin, uint32_t unitEnd);
    __aicore__ inline void RowGroupStart(const GroupSpan &span, uint32_t *head0, uint32_t *token0) const;
    __aicore__ inline void PackQuery(const GroupSpan &span);
    __aicore__ inline void ChunkOf(uint32_t b, uint32_t h, const KeyRange &keys, uint32_t unit, uint64_t *kvOffset,
                                   uint32_t *key0, uint32_t *cols);
    __aicore__ inline void IssueScores(uint32_t slot, uint64_t kvOffset, uint32_t cols);
    __aicore__ inline void SoftmaxChunk(uint32_t slot, uint32_t seqLen, uint32_t key0, uint32_t cols,
                                        AscendC::LocalTensor<float> &rowMax, AscendC::LocalTensor<float> &newMax);
    __aicore__ inline void MaskScores(AscendC::LocalTensor<float> &scores, uint32_t seqLen, uint32_t key0,
                                      uint32_t cols);
    __aicore__ inline void LoadRowMods(const GroupSpan &span);
    __aicore__ inline void AddAlibi(AscendC::LocalTensor<float> &scores, uint32_t seqLen, uint32_t key0);
    __aicore__ inline void FoldSink(AscendC::LocalTensor<float> &rowMax, AscendC::LocalTensor<float> &sinkMax);
    __aicore__ inline void IssueValues(uint32_t slot, uint64_t kvOffset, uint32_t cols);
    __aicore__ inline void DequantChunk(AscendC::GlobalTensor<T> &dst, AscendC::GlobalTensor<KV> &src, uint32_t b,
                                        uint32_t h, uint32_t key0, uint32_t cols);
    __aicore__ inline void ScaleQueryRows(AscendC::LocalTensor<T> &rows, uint32_t h);
    __aicore__ inline void LoadValueScales(uint32_t b, uint32_t h, uint32_t key0, uint32_t cols);
    __aicore__ inline uint32_t BlockRun(uint32_t b, uint32_t pos, uint32_t end, uint32_t *block) const;
    __aicore__ inline void AccumulateValues(uint32_t slot);
    __aicore__ inline void FinishRows(AscendC::LocalTensor<float> &rowMax, AscendC::LocalTensor<float> &lse);
    __aicore__ inline void WriteOutput(const GroupSpan &span, AscendC::LocalTensor<float> &lse);
    __aicore__ inline void WritePartial(uint32_t slot, AscendC::LocalTensor<float> &lse);
    __aicore__ inline void Combine(const GroupSpan &span);

    const FlashAttentionDecodeTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;

    static constexpr bool INT8_KV = AscendC::IsSameType<KV, int8_t>::value;

    AscendC::GlobalTensor<T> queryGm_, outGm_;
    AscendC::GlobalTensor<KV> keyGm_, valueGm_;
    AscendC::GlobalTensor<int32_t> blockTableGm_, seqLensGm_;
    AscendC::GlobalTensor<float> lseGm_;
    AscendC::GlobalTensor<T> qPackGm_;          // [rows, D] this AIV's packed query rows
    AscendC::GlobalTensor<float> scoreGm_[2];   // [rows, blockN] each
    AscendC::GlobalTensor<T> probGm_[2];        // [rows, blockN] each
    AscendC::GlobalTensor<float> pvGm_[2];      // [rows, D] each
    AscendC::GlobalTensor<float> partialOGm_;   // [maxSlots, rows, D]
    AscendC::GlobalTensor<float> partialLseGm_; // [maxSlots, lseStride]

    AscendC::TQue<AscendC::TPosition::VECIN, 1> scoreQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> probQue_;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pvQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> lseQue_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_, statBuf_, foldBuf_, brcbBuf_, modBuf_;
    AscendC::LocalTensor<float> acc_, stat_, fold_, brcb_;
    // V2 (modBuf_): ramp_[c] = c [n]; dist_, bias_ [n] rows; rowSlope_, rowSink_ [m] per row.
    AscendC::LocalTensor<float> ramp_, dist_, bias_, rowSlope_, rowSink_;
    AscendC::GlobalTensor<float> slopesGm_;  // alibi_slopes [B, N]
    AscendC::GlobalTensor<float> sinksGm_;   // sinks [N]
    AscendC::GlobalTensor<int32_t> leftpadGm_;  // cache_leftpad [B]
    // V3 (int8 cache): the scales and the dequantized chunk tiles the cube reads.
    AscendC::GlobalTensor<float> kScaleGm_;   // key_antiquant_scale [Nkv, D]
    AscendC::GlobalTensor<float> vScaleGm_;   // value_antiquant_scale [numBlocks, Nkv, blockSize]
    AscendC::GlobalTensor<T> kDeqGm_[2];      // [blockN, D] each
    AscendC::GlobalTensor<T> vDeqGm_[2];      // [blockN, D] each
    AscendC::TQue<AscendC::TPosition::VECIN, 2> kvInQue_;    // [dequantRows, D] int8
    AscendC::TQue<AscendC::TPosition::VECOUT, 2> kvOutQue_;  // [dequantRows, D] T
    AscendC::TBuf<AscendC::TPosition::VECCALC> kvWideBuf_, scaleBuf_;
    AscendC::LocalTensor<float> kScale_;      // [D] the piece's kv head's channel scales
    AscendC::LocalTensor<float> vScale_;      // [blockN] the chunk's token scales

    uint32_t part_ = 0;                // this AIV's block index = its part
    uint64_t totalUnits_ = 0;          // units of all groups
    uint32_t kvRowStride_ = 0;         // elements between consecutive keys of one kv head: Nkv * D
    uint32_t statStride_ = 0;          // elements between StatSlot vectors
    uint32_t token0_ = 0;              // the running piece's first query token (its row group's)
    uint32_t head0_ = 0;               // the running piece's first query head (its row group's)
    uint32_t kvStart_ = 0;             // the running piece's sequence's first visible key (leftpad)
};

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                           GM_ADDR blockTable, GM_ADDR actualSeqLengthsKv,
                                                           GM_ADDR alibiSlopes, GM_ADDR sinks, GM_ADDR cacheLeftpad,
                                                           GM_ADDR keyAntiquantScale, GM_ADDR valueAntiquantScale,
                                                           GM_ADDR attentionOut, GM_ADDR softmaxLse,
                                                           GM_ADDR workspace,
                                                           const FlashAttentionDecodeTilingData *tiling,
                                                           AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->rows;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;

    const uint64_t qElems = static_cast<uint64_t>(td_->batch) * td_->seqQ * td_->numHeads * d;
    const uint64_t cacheElems = static_cast<uint64_t>(td_->numBlocks) * td_->blockSize * td_->numKvHeads * d;
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(query), qElems);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ KV *>(key), cacheElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ KV *>(value), cacheElems);
    blockTableGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(blockTable),
                                  static_cast<uint64_t>(td_->batch) * td_->maxBlocksPerSeq);
    seqLensGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(actualSeqLengthsKv), td_->batch);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse),
                           static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ);

    part_ = AscendC::GetBlockIdx();
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    GM_ADDR slice = user + part_ * td_->wsBytesPerAiv;
    qPackGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsQOffset), m * d);
    scoreGm_[0].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset), m * n);
    scoreGm_[1].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset) + m * n, m * n);
    probGm_[0].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset), m * n);
    probGm_[1].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset) + m * n, m * n);
    pvGm_[0].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset), m * d);
    pvGm_[1].SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsPvOffset) + m * d, m * d);
    if (td_->maxSlots > 0) {  // no partials without splitKv
        partialOGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsPartialOOffset),
                                    static_cast<uint64_t>(td_->maxSlots) * m * d);
        partialLseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsPartialLseOffset),
                                      static_cast<uint64_t>(td_->maxSlots) * td_->lseStride);
    }

    // UB, in the order and sizes op_host budgets (flash_attention_decode_tiling.h).
    statStride_ = Align32Bytes(m * sizeof(float)) / sizeof(float);
    pipe_->InitBuffer(scoreQue_, 1, m * n * sizeof(float));
    pipe_->InitBuffer(probQue_, 1, m * n * sizeof(T));
    pipe_->InitBuffer(pvQue_, 1, m * d * sizeof(float));
    pipe_->InitBuffer(outQue_, 1, m * d * sizeof(T));
    pipe_->InitBuffer(accBuf_, m * d * sizeof(float));
    pipe_->InitBuffer(statBuf_, STAT_SLOTS * statStride_ * sizeof(float));
    pipe_->InitBuffer(lseQue_, 1, statStride_ * sizeof(float));
    pipe_->InitBuffer(foldBuf_, m * attn_rows::FP32_PER_REPEAT * sizeof(float));
    pipe_->InitBuffer(brcbBuf_, td_->lseStride * attn_rows::FP32_PER_BLOCK * sizeof(float));
    acc_ = accBuf_.Get<float>();
    stat_ = statBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
    if (td_->hasAlibi != 0 || td_->hasSinks != 0) {
        pipe_->InitBuffer(modBuf_, (3 * n + 2 * statStride_) * sizeof(float));
        AscendC::LocalTensor<float> mod = modBuf_.Get<float>();
        ramp_ = mod;
        dist_ = mod[n];
        bias_ = mod[2 * n];
        rowSlope_ = mod[3 * n];
        rowSink_ = mod[3 * n + statStride_];
        AscendC::CreateVecIndex(ramp_, 0.0f, n);  // ramp[c] = c: a chunk's column index
    }
    if (td_->hasAlibi != 0) {
        slopesGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(alibiSlopes),
                                  static_cast<uint64_t>(td_->batch) * td_->numHeads);
    }
    if (td_->hasSinks != 0) {
        sinksGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(sinks), td_->numHeads);
    }
    if (td_->hasLeftpad != 0) {
        leftpadGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(cacheLeftpad), td_->batch);
    }

    kvRowStride_ = td_->numKvHeads * d;
    if constexpr (INT8_KV) {
        kScaleGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(keyAntiquantScale),
                                  static_cast<uint64_t>(td_->numKvHeads) * d);
        vScaleGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(valueAntiquantScale),
                                  static_cast<uint64_t>(td_->numBlocks) * td_->numKvHeads * td_->blockSize);
        for (uint32_t s = 0; s < 2; ++s) {
            kDeqGm_[s].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsKDeqOffset) + s * n * d, n * d);
            vDeqGm_[s].SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsVDeqOffset) + s * n * d, n * d);
        }
        const uint32_t r = td_->dequantRows;
        pipe_->InitBuffer(kvInQue_, 2, r * d * sizeof(int8_t));
        pipe_->InitBuffer(kvOutQue_, 2, r * d * sizeof(T));
        if constexpr (!AscendC::IsSameType<T, half>::value) {
            pipe_->InitBuffer(kvWideBuf_, r * d * sizeof(float));  // bf16: int8 -> half -> fp32 -> bf16
        }
        pipe_->InitBuffer(scaleBuf_, (d + n) * sizeof(float));
        kScale_ = scaleBuf_.Get<float>();
        vScale_ = kScale_[d];
        kvRowStride_ = d;  // the cube reads the dequantized [blockN, D] tiles, rows D apart
    }
}

// ---- the work split (every AIV computes the same one from the lengths) ----------------------

template <typename T, typename KV>
__aicore__ inline KeyRange FlashAttentionDecodeKernel<T, KV>::KeysOf(uint32_t b)
{
    KeyRange r;
    r.seqLen = static_cast<uint32_t>(seqLensGm_.GetValue(b));
    r.start = td_->hasLeftpad != 0 ? static_cast<uint32_t>(leftpadGm_.GetValue(b)) : 0;
    // Keys of [0, L) from row 0's first visible one to the last row's last (attention_band.h).
    const int64_t len = r.seqLen, sq = td_->seqQ, diag = attn_band::Diagonal(sq, len);
    const int64_t hi = Clamp(attn_band::KeyEnd(sq - 1, diag, td_->nextTokens), 0, len);
    // Left padding only hides keys [0, start): the diagonal counts from the sequence's end.
    const int64_t lo = Clamp(attn_band::KeyBegin(0, diag, td_->preTokens), static_cast<int64_t>(r.start), len);
    if (lo >= hi) {
        return r;
    }
    const uint32_t bs = td_->blockSize, bn = td_->blockN, cpb = td_->chunksPerBlock;
    uint64_t first = (static_cast<uint64_t>(lo) / bs) * cpb + (static_cast<uint64_t>(lo) % bs) / bn;
    uint64_t last = (static_cast<uint64_t>(hi - 1) / bs) * cpb + (static_cast<uint64_t>(hi - 1) % bs) / bn;
    if constexpr (INT8_KV) {  // units of blockN keys of the sequence, across cache blocks
        first = static_cast<uint64_t>(lo) / bn;
        last = static_cast<uint64_t>(hi - 1) / bn;
    }
    r.firstUnit = static_cast<uint32_t>(first);
    r.units = static_cast<uint32_t>(last - first + 1);
    return r;
}

template <typename T, typename KV>
__aicore__ inline uint64_t FlashAttentionDecodeKernel<T, KV>::PartStart(uint32_t part) const
{
    return totalUnits_ * part / td_->numParts;
}

template <typename T, typename KV>
__aicore__ inline uint32_t FlashAttentionDecodeKernel<T, KV>::PartOfUnit(uint64_t unit) const
{
    // The largest part whose start is <= unit: start(a) <= u  <=>  a < (u + 1) * P / U.
    const uint64_t p = td_->numParts;
    const uint64_t a = ((unit + 1) * p + totalUnits_ - 1) / totalUnits_ - 1;
    return static_cast<uint32_t>(a < p ? a : p - 1);
}

// How the group at `span` (its keys known) is cut: its pieces and, on the equal-ranges schedule,
// the parts holding its units (a group without keys: one empty piece, on part g % numParts).
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::PlaceGroup(GroupSpan *span) const
{
    const uint32_t n = span->keys.units;
    if (td_->splitsPerGroup >= 2) {
        span->pieces = n < td_->splitsPerGroup ? (n == 0 ? 1 : n) : td_->splitsPerGroup;
        return;
    }
    span->firstPart = n == 0 ? span->group % td_->numParts : PartOfUnit(span->unitStart);
    span->lastPart = (n == 0 || td_->splitKv == 0) ? span->firstPart : PartOfUnit(span->unitStart + n - 1);
    // Fewer units than parts: a part holds at most one unit and some hold none; the group's pieces
    // are its units (the parts between first and last that hold none take no piece).
    const bool sparse = n > 0 && td_->splitKv != 0 && totalUnits_ < td_->numParts;
    span->pieces = sparse ? n : span->lastPart - span->firstPart + 1;
}

// Advances `span` to the next group (b, h, rg), in order g = (b * Nkv + h) * rowGroups + rg.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::NextGroup(GroupSpan *span)
{
    span->unitStart += span->keys.units;
    span->pieceBase += span->pieces;
    if (span->pieces >= 2) {
        span->slotBase += span->pieces;
    }
    if (++span->rg == td_->rowGroups) {
        span->rg = 0;
        if (++span->h == td_->numKvHeads) {
            span->h = 0;
            ++span->b;
        }
    }
    ++span->group;
}

// The first query head and token of the span's row group (flash_attention_decode_tiling.h).
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::RowGroupStart(const GroupSpan &span, uint32_t *head0,
                                                                    uint32_t *token0) const
{
    const uint32_t tokenGroups = td_->seqQ / td_->rowGroupTokens;
    *head0 = span.h * td_->groupSize + (span.rg / tokenGroups) * td_->rowGroupHeads;
    *token0 = (span.rg % tokenGroups) * td_->rowGroupTokens;
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::Process()
{
    // Pass 1: all units.
    totalUnits_ = 0;
    for (uint32_t b = 0; b < td_->batch; ++b) {
        totalUnits_ += static_cast<uint64_t>(KeysOf(b).units) * td_->numKvHeads * td_->rowGroups;
    }
    const uint32_t numGroups = td_->batch * td_->numKvHeads * td_->rowGroups;
    // Pass 2: the pieces this AIV owns. A group without keys is one empty piece (output 0, LSE -inf).
    GroupSpan span;
    for (uint32_t g = 0; g < numGroups; ++g) {
        if (span.h == 0 && span.rg == 0) {
            span.keys = KeysOf(span.b);
        }
        PlaceGroup(&span);
        const uint32_t n = span.keys.units;
        if (td_->splitsPerGroup >= 2) {
            for (uint32_t j = 0; j < span.pieces; ++j) {
                if ((span.pieceBase + j) % td_->numParts == part_) {
                    RunPiece(span, j, static_cast<uint32_t>(static_cast<uint64_t>(n) * j / span.pieces),
                             static_cast<uint32_t>(static_cast<uint64_t>(n) * (j + 1) / span.pieces));
                }
            }
        } else if (part_ >= span.firstPart && part_ <= span.lastPart) {
            uint32_t begin = 0, end = n, piece = part_ - span.firstPart;
            if (td_->splitKv != 0 && n > 0) {
                const uint64_t s = PartStart(part_), e = PartStart(part_ + 1);
                begin = static_cast<uint32_t>((s > span.unitStart ? s : span.unitStart) - span.unitStart);
                end = static_cast<uint32_t>((e < span.unitStart + n ? e : span.unitStart + n) - span.unitStart);
                if (totalUnits_ < td_->numParts) {
                    piece = begin;  // one unit per part (PlaceGroup): the piece is the unit
                }
            }
            if (end > begin || n == 0 || td_->splitKv == 0) {  // a part without units has no piece
                RunPiece(span, piece, begin, end);
            }
        }
        NextGroup(&span);
    }
    qkMm.End();
    pvMm.End();
    if (td_->splitKv == 0) {
        return;
    }
    AscendC::SyncAll();  // every partial of every group is in GM
    GroupSpan merge;
    for (uint32_t g = 0; g < numGroups; ++g) {
        if (merge.h == 0 && merge.rg == 0) {
            merge.keys = KeysOf(merge.b);
        }
        PlaceGroup(&merge);
        if (merge.pieces >= 2 && g % td_->numParts == part_) {
            Combine(merge);
        }
        NextGroup(&merge);
    }
}

// ---- one piece: chunks [unitBegin, unitEnd) of a group ---------------------------------------

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::RunPiece(const GroupSpan &span, uint32_t piece,
                                                               uint32_t unitBegin, uint32_t unitEnd)
{
    const uint32_t m = td_->rows;
    PackQuery(span);
    LoadRowMods(span);

    AscendC::LocalTensor<float> rowMax = stat_[ROW_MAX_A * statStride_];
    AscendC::LocalTensor<float> newMax = stat_[ROW_MAX_B * statStride_];
    AscendC::Duplicate(rowMax, -FLT_MAX, m);
    AscendC::Duplicate(stat_[ROW_SUM * statStride_], 0.0f, m);
    AscendC::Duplicate(acc_, 0.0f, m * td_->headDim);

    uint64_t kvOffset = 0, nextOffset = 0;
    uint32_t key0 = 0, cols = 0, nextKey0 = 0, nextCols = 0;
    if (unitEnd > unitBegin) {
        // qk: A = packed Q [m, D], B^T = K rows [cols, D] (row stride Nkv * D), C [m, cols] (stride blockN).
        qkMm.SetOrgShape(m, td_->blockN, td_->headDim, kvRowStride_, td_->blockN);
        qkMm.SetTensorA(qPackGm_);
        // pv: A = P [m, cols] (stride blockN), B = V rows [cols, D] (stride Nkv * D), C [m, D].
        pvMm.SetOrgShape(m, kvRowStride_, td_->blockN, td_->blockN, td_->headDim);
        ChunkOf(span.b, span.h, span.keys, span.keys.firstUnit + unitBegin, &nextOffset, &nextKey0, &nextCols);
        if constexpr (INT8_KV) {
            DequantChunk(kDeqGm_[0], keyGm_, span.b, span.h, nextKey0, nextCols);
        }
        IssueScores(0, nextOffset, nextCols);
    }
    for (uint32_t u = unitBegin; u < unitEnd; ++u) {
        kvOffset = nextOffset;
        key0 = nextKey0;
        cols = nextCols;
        const uint32_t slot = (u - unitBegin) % 2;
        const bool more = u + 1 < unitEnd;
        if (more) {
            ChunkOf(span.b, span.h, span.keys, span.keys.firstUnit + u + 1, &nextOffset, &nextKey0,
                    &nextCols);
            if constexpr (INT8_KV) {  // K_{u+1} as T while the cube computes S_u (its tile's last
                DequantChunk(kDeqGm_[1 - slot], keyGm_, span.b, span.h, nextKey0, nextCols);  // reader, S_{u-1}, is done)
            }
        }
        qkMm.WaitIterateAll();
        if (more) {  // the cube computes the next chunk's scores while the vector units work
            IssueScores(1 - slot, nextOffset, nextCols);
        }
        kvStart_ = span.keys.start;
        if constexpr (INT8_KV) {
            LoadValueScales(span.b, span.h, key0, cols);
        }
        SoftmaxChunk(slot, span.keys.seqLen, key0, cols, rowMax, newMax);  // P_u in GM, alpha_u in its slot
        if constexpr (INT8_KV) {  // V_u as T while the cube computes P_{u-1} . V_{u-1} (its tile's last
            DequantChunk(vDeqGm_[slot], valueGm_, span.b, span.h, key0, cols);  // reader, P_{u-2} . V_{u-2}, is done)
        }
        if (u > unitBegin) {
            pvMm.WaitIterateAll();  // P_{u-1} . V_{u-1} ran on the cube during this softmax
        }
        IssueValues(slot, kvOffset, cols);
        if (u > unitBegin) {
            AccumulateValues(1 - slot);  // on the vector units while the cube computes P_u . V_u
        }
        AscendC::LocalTensor<float> swap = rowMax;
        rowMax = newMax;
        newMax = swap;
    }
    if (unitEnd > unitBegin) {
        pvMm.WaitIterateAll();
        AccumulateValues((unitEnd - 1 - unitBegin) % 2);
    }

    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    if (td_->hasSinks != 0 && span.pieces == 1) {  // the sink joins once: here, or in the merge
        AscendC::LocalTensor<float> sinkMax = stat_[BLOCK_MAX * statStride_];
        FoldSink(rowMax, sinkMax);
        rowMax = sinkMax;
    }
    FinishRows(rowMax, lse);
    if (span.pieces == 1) {
        WriteOutput(span, lse);
    } else {
        WritePartial(span.slotBase + piece, lse);
    }
}

// The row group's query rows r = gq * ts + sl (query head head0 + gq, token token0 + sl, ts =
// rowGroupTokens) into qPackGm_.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::PackQuery(const GroupSpan &span)
{
    const uint32_t d = td_->headDim, sq = td_->seqQ, heads = td_->numHeads, ts = td_->rowGroupTokens;
    RowGroupStart(span, &head0_, &token0_);
    const uint32_t head0 = head0_;
    AscendC::LocalTensor<T> rows = outQue_.AllocTensor<T>();
    // Query [B, Sq, N, D]: one head's tokens are N * D elements apart.
    const AscendC::DataCopyExtParams params{static_cast<uint16_t>(ts), static_cast<uint32_t>(d * sizeof(T)),
                                            static_cast<uint32_t>((heads - 1) * d * sizeof(T)), 0, 0};
    const AscendC::DataCopyPadExtParams<T> noPad{false, 0, 0, static_cast<T>(0)};
    const uint64_t first = ((static_cast<uint64_t>(span.b) * sq + token0_) * heads + head0) * d;
    if (ts == 1) {  // the row group's heads are adjacent in q: one copy (each copy pays the MTE2 latency)
        const AscendC::DataCopyExtParams run{1, static_cast<uint32_t>(td_->rows * d * sizeof(T)), 0, 0, 0};
        AscendC::DataCopyPad(rows, queryGm_[first], run, noPad);
    } else {
        for (uint32_t gq = 0; gq < td_->rowGroupHeads; ++gq) {
            AscendC::DataCopyPad(rows[gq * ts * d], queryGm_[first + gq * d], params, noPad);
        }
    }
    if constexpr (INT8_KV) {
        ScaleQueryRows(rows, span.h);
    }
    WaitForPipe<AscendC::HardEvent::MTE2_MTE3>();
    AscendC::DataCopy(qPackGm_, rows, td_->rows * d);
    outQue_.FreeTensor(rows);
    WaitForPipe<AscendC::HardEvent::MTE3_S>();  // packed Q is in GM before the cube reads it
}

// Chunk `unit` of sequence b: its keys [key0, key0 + cols) and their element offset in the cache
// for kv head h. Never past the sequence's length, never before its first visible key (leftpad).
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::ChunkOf(uint32_t b, uint32_t h, const KeyRange &keys,
                                                              uint32_t unit, uint64_t *kvOffset, uint32_t *key0,
                                                              uint32_t *cols)
{
    const uint32_t bs = td_->blockSize, bn = td_->blockN;
    if constexpr (INT8_KV) {
        // Keys [unit * bn, (unit + 1) * bn) of the sequence, in as many cache blocks as they cross
        // (DequantChunk gathers them). Left padding: the chunk starts at the first visible key
        // rounded down to 8 keys (its token scales then start 32-B aligned in UB); the up to 7
        // padding keys read are masked and their scales zeroed (LoadValueScales), within the
        // same cache block (blocks are 16-key multiples).
        const uint32_t begin = unit * bn;
        const uint32_t start = keys.start > begin ? keys.start / 8 * 8 : begin;
        *key0 = start > begin ? start : begin;
        *cols = attn_rows::Min(begin + bn, keys.seqLen) - *key0;
        *kvOffset = 0;  // per cache block: DequantChunk, LoadValueScales
        (void)b;
        (void)h;
        return;
    }
    const uint32_t page = unit / td_->chunksPerBlock;
    uint32_t inPage = (unit % td_->chunksPerBlock) * bn;
    const uint32_t block = static_cast<uint32_t>(
        blockTableGm_.GetValue(static_cast<uint64_t>(b) * td_->maxBlocksPerSeq + page));
    const uint32_t end = attn_rows::Min(inPage + bn, bs);  // the chunk's end within its block
    if (page * bs + inPage < keys.start) {            // left padding: the chunk starts at the first key
        inPage = keys.start - page * bs;              // (the padding, which may hold anything, is never read)
    }
    *key0 = page * bs + inPage;
    *cols = attn_rows::Min(end - inPage, keys.seqLen - *key0);
    *kvOffset = ((static_cast<uint64_t>(block) * bs + inPage) * td_->numKvHeads + h) * td_->headDim;
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::IssueScores(uint32_t slot, uint64_t kvOffset, uint32_t cols)
{
    if constexpr (INT8_KV) {
        qkMm.SetTensorB(kDeqGm_[slot], true);  // dequantized by DequantChunk
    } else {
        qkMm.SetTensorB(keyGm_[kvOffset], true);
    }
    qkMm.SetTail(td_->rows, cols, td_->headDim);
    qkMm.template IterateAll<false>(scoreGm_[slot], 0, false, true);
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::SoftmaxChunk(uint32_t slot, uint32_t seqLen, uint32_t key0,
                                                                   uint32_t cols,
                                                                   AscendC::LocalTensor<float> &rowMax,
                                                                   AscendC::LocalTensor<float> &newMax)
{
    using attn_rows::Reduce;
    using attn_rows::Op;
    const uint32_t m = td_->rows, n = td_->blockN;
    const uint32_t elems = m * n;  // columns >= cols are masked below

    AscendC::LocalTensor<float> scores = scoreQue_.AllocTensor<float>();
    AscendC::DataCopy(scores, scoreGm_[slot], elems);
    scoreQue_.EnQue(scores);
    scores = scoreQue_.DeQue<float>();

    if (td_->softcap > 0.0f) {
        attn_rows::SoftCap(scores, brcb_, elems, td_->scaleValue, td_->softcap);  // brcb_ is idle here
    } else {
        AscendC::Muls(scores, scores, td_->scaleValue, elems);
    }
    if (td_->hasAlibi != 0) {
        AddAlibi(scores, seqLen, key0);
    }
    MaskScores(scores, seqLen, key0, cols);

    AscendC::LocalTensor<float> blockMax = stat_[BLOCK_MAX * statStride_];
    AscendC::LocalTensor<float> blockSum = stat_[BLOCK_SUM * statStride_];
    AscendC::LocalTensor<float> rowSum = stat_[ROW_SUM * statStride_];
    AscendC::LocalTensor<float> alpha = stat_[(ALPHA_A + slot) * statStride_];

    attn_rows::ReduceRows<Reduce::MAX>(blockMax, scores, fold_, m, n, n);
    AscendC::Max(newMax, rowMax, blockMax, m);     // m_new = max(m_old, rowmax(S)) >= -FLT_MAX
    AscendC::Sub(alpha, rowMax, newMax, m);
    AscendC::Exp(alpha, alpha, m);                 // alpha = exp(m_old - m_new)
    attn_rows::BroadcastRows(brcb_, newMax, m);
    attn_rows::ApplyRows<Op::SUB>(scores, brcb_, m, n, n);
    AscendC::Exp(scores, scores, elems);           // P = exp(S - m_new), masked entries -> 0
    attn_rows::ReduceRows<Reduce::SUM>(blockSum, scores, fold_, m, n, n);
    AscendC::Mul(rowSum, rowSum, alpha, m);
    AscendC::Add(rowSum, rowSum, blockSum, m);     // l = alpha * l + rowsum(P)
    if constexpr (INT8_KV) {  // P . (Vq * sv) = (P * sv) . Vq: each row times the chunk's token scales
        for (uint32_t r = 0; r < m; ++r) {
            AscendC::Mul(scores[r * n], scores[r * n], vScale_, cols);
        }
    }

    AscendC::LocalTensor<T> prob = probQue_.AllocTensor<T>();
    AscendC::Cast(prob, scores, AscendC::RoundMode::CAST_RINT, elems);
    scoreQue_.FreeTensor(scores);
    probQue_.EnQue(prob);
    prob = probQue_.DeQue<T>();
    // Slot `slot` of P was last read by the P.V of two chunks ago, waited for before this call.
    AscendC::DataCopy(probGm_[slot], prob, elems);
    probQue_.FreeTensor(prob);
    WaitForPipe<AscendC::HardEvent::MTE3_S>();     // P is in GM before the cube is asked to read it
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::MaskScores(AscendC::LocalTensor<float> &scores,
                                                                 uint32_t seqLen, uint32_t key0, uint32_t cols)
{
    // Row r (token s = token0 + r % rowGroupTokens) sees keys j with s + diag - preTokens <= j <=
    // s + diag + nextTokens, diag = L - Sq (bottom-right aligned). In chunk columns c = j - key0, of
    // which [0, cols) exist. The no-mask test below uses tokens 0 and Sq - 1: every row group's
    // tokens lie between them.
    const uint32_t n = td_->blockN, sq = td_->seqQ;
    const int64_t diag = attn_band::Diagonal(sq, seqLen);
    const int64_t pre = td_->preTokens, next = td_->nextTokens;
    const int64_t lowestLimitMax = attn_band::KeyBegin(sq - 1, diag, pre) - key0;  // last row's first visible column
    const int64_t highLimitMin = attn_band::KeyEnd(0, diag, next) - key0;          // first row's end of visible columns
    if (cols == n && lowestLimitMax <= 0 && highLimitMin >= static_cast<int64_t>(cols) && key0 >= kvStart_) {
        return;  // every row sees the whole chunk: no mask work
    }
    const int64_t start = static_cast<int64_t>(kvStart_) - key0;  // leftpad: columns before it are hidden
    for (uint32_t r = 0; r < td_->rows; ++r) {
        const int64_t s = token0_ + r % td_->rowGroupTokens;
        const int64_t begin = attn_band::KeyBegin(s, diag, pre) - key0;
        const uint32_t low = static_cast<uint32_t>(Clamp(begin > start ? begin : start, 0, n));
        uint32_t high = static_cast<uint32_t>(Clamp(attn_band::KeyEnd(s, diag, next) - key0, 0, cols));
        if (high < low) {
            high = low;
        }
        attn_rows::FillColumns(scores, r * n, 0, low, NEG_INF);
        attn_rows::FillColumns(scores, r * n, high, n, NEG_INF);
    }
}

// The row group's per-row ALiBi slope and sink (row r = gq * ts + sl: query head head0 + gq),
// read from GM once per piece or merge: one scalar read per head, one write per row.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::LoadRowMods(const GroupSpan &span)
{
    if (td_->hasAlibi == 0 && td_->hasSinks == 0) {
        return;
    }
    uint32_t head0 = 0, token0 = 0;
    RowGroupStart(span, &head0, &token0);
    const uint32_t ts = td_->rowGroupTokens;
    WaitForPipe<AscendC::HardEvent::V_S>();  // the vector units are done with the previous rows' values
    for (uint32_t gq = 0; gq < td_->rowGroupHeads; ++gq) {
        const float slope = td_->hasAlibi != 0
            ? slopesGm_.GetValue(static_cast<uint64_t>(span.b) * td_->numHeads + head0 + gq) : 0.0f;
        const float sink = td_->hasSinks != 0 ? sinksGm_.GetValue(head0 + gq) : 0.0f;
        for (uint32_t sl = 0; sl < ts; ++sl) {
            rowSlope_.SetValue(gq * ts + sl, slope);
            rowSink_.SetValue(gq * ts + sl, sink);
        }
    }
    WaitForPipe<AscendC::HardEvent::S_V>();
}

// scores[r, c] -= slope_r * |s_r + L - Sq - (key0 + c)| over all blockN columns (those past the
// chunk's keys are masked afterwards): per token one distance row |c - (s + diag - key0)|, then per
// row a scaled add. Scalar reads: one slope per row per chunk (not per score).
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::AddAlibi(AscendC::LocalTensor<float> &scores, uint32_t seqLen,
                                                               uint32_t key0)
{
    const uint32_t n = td_->blockN, ts = td_->rowGroupTokens;
    const int64_t diag = attn_band::Diagonal(td_->seqQ, seqLen);
    for (uint32_t sl = 0; sl < ts; ++sl) {
        const int64_t offset = static_cast<int64_t>(token0_ + sl) + diag - key0;  // the diagonal's column
        AscendC::Adds(dist_, ramp_, static_cast<float>(-offset), n);
        AscendC::Abs(dist_, dist_, n);
        for (uint32_t gq = 0; gq < td_->rowGroupHeads; ++gq) {
            const uint32_t r = gq * ts + sl;
            AscendC::Muls(bias_, dist_, -rowSlope_.GetValue(r), n);
            AscendC::Add(scores[r * n], scores[r * n], bias_, n);
        }
    }
}

// Folds the row's sink into its statistics before FinishRows (a group that is one piece):
// sinkMax = M = max(m, sink); l = l exp(m - M) + exp(sink - M); acc *= exp(m - M). A row that saw
// no key (m = -FLT_MAX, l = 0) gets l = 1, acc = 0: O = 0, LSE = sink.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::FoldSink(AscendC::LocalTensor<float> &rowMax,
                                                               AscendC::LocalTensor<float> &sinkMax)
{
    const uint32_t m = td_->rows, d = td_->headDim;
    AscendC::LocalTensor<float> rowSum = stat_[ROW_SUM * statStride_];
    AscendC::LocalTensor<float> alpha = stat_[ALPHA_A * statStride_];
    AscendC::LocalTensor<float> sinkWeight = stat_[BLOCK_SUM * statStride_];
    AscendC::Max(sinkMax, rowMax, rowSink_, m);
    AscendC::Sub(alpha, rowMax, sinkMax, m);
    AscendC::Exp(alpha, alpha, m);                 // exp(m - M)
    AscendC::Sub(sinkWeight, rowSink_, sinkMax, m);
    AscendC::Exp(sinkWeight, sinkWeight, m);       // exp(sink - M)
    AscendC::Mul(rowSum, rowSum, alpha, m);
    AscendC::Add(rowSum, rowSum, sinkWeight, m);
    attn_rows::BroadcastRows(brcb_, alpha, m);
    attn_rows::ApplyRows<attn_rows::Op::MUL>(acc_, brcb_, m, d, d);
}

// P . V of the chunk in `slot` on the cube, asynchronously, into pv slot `slot`. That slot was last
// read by AccumulateValues of two chunks ago, whose MTE2 read precedes (on MTE2 -> V -> MTE3) the
// P write this request waited for.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::IssueValues(uint32_t slot, uint64_t kvOffset, uint32_t cols)
{
    pvMm.SetTensorA(probGm_[slot]);
    if constexpr (INT8_KV) {
        pvMm.SetTensorB(vDeqGm_[slot]);  // dequantized by DequantChunk; its scale is in P
    } else {
        pvMm.SetTensorB(valueGm_[kvOffset]);
    }
    pvMm.SetTail(td_->rows, td_->headDim, cols);
    pvMm.template IterateAll<false>(pvGm_[slot], 0, false, true);
}

// V3: the keys [pos, end) of sequence b that lie in pos's cache block: returns their count and
// sets *block to the block's index (block_table[b][pos / blockSize]).
template <typename T, typename KV>
__aicore__ inline uint32_t FlashAttentionDecodeKernel<T, KV>::BlockRun(uint32_t b, uint32_t pos, uint32_t end,
                                                                       uint32_t *block) const
{
    const uint32_t bs = td_->blockSize;
    *block = static_cast<uint32_t>(blockTableGm_.GetValue(static_cast<uint64_t>(b) * td_->maxBlocksPerSeq + pos / bs));
    return attn_rows::Min(bs - pos % bs, end - pos);
}

// V3: keys [key0, key0 + cols) of sequence b, kv head h (D int8 each, Nkv * D apart inside a cache
// block) into `dst` [cols, D] T, block run by block run, dequantRows keys per pass (two buffers
// each way: the copy in of one pass overlaps the cast of the one before). |x| <= 127 is exact in
// half and bf16; the scales are applied elsewhere (K's in Q, V's in P), so this is a cast only.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::DequantChunk(AscendC::GlobalTensor<T> &dst,
                                                                       AscendC::GlobalTensor<KV> &src, uint32_t b,
                                                                       uint32_t h, uint32_t key0, uint32_t cols)
{
    const uint32_t d = td_->headDim, r = td_->dequantRows, nkv = td_->numKvHeads;
    const AscendC::DataCopyPadExtParams<KV> noPad{false, 0, 0, static_cast<KV>(0)};
    for (uint32_t c = 0; c < cols;) {
        uint32_t block = 0;
        const uint32_t pos = key0 + c, run = BlockRun(b, pos, key0 + cols, &block);
        const uint64_t base = ((static_cast<uint64_t>(block) * td_->blockSize + pos % td_->blockSize) * nkv + h) * d;
        for (uint32_t k0 = 0; k0 < run; k0 += r) {
            const uint32_t keys = attn_rows::Min(r, run - k0);
            const uint32_t count = keys * d;
            AscendC::LocalTensor<KV> in = kvInQue_.template AllocTensor<KV>();
            const AscendC::DataCopyExtParams params{static_cast<uint16_t>(keys), d, (nkv - 1) * d, 0, 0};  // bytes
            AscendC::DataCopyPad(in, src[base + static_cast<uint64_t>(k0) * nkv * d], params, noPad);
            kvInQue_.EnQue(in);
            in = kvInQue_.template DeQue<KV>();
            AscendC::LocalTensor<T> out = kvOutQue_.template AllocTensor<T>();
            if constexpr (AscendC::IsSameType<T, half>::value) {
                AscendC::Cast(out, in, AscendC::RoundMode::CAST_NONE, count);
            } else {  // no int8 -> bf16 Cast: via half (exact) and fp32 (exact), then to bf16 (exact)
                AscendC::LocalTensor<half> narrow = out.template ReinterpretCast<half>();
                AscendC::LocalTensor<float> wide = kvWideBuf_.Get<float>();
                AscendC::Cast(narrow, in, AscendC::RoundMode::CAST_NONE, count);
                AscendC::Cast(wide, narrow, AscendC::RoundMode::CAST_NONE, count);
                AscendC::Cast(out, wide, AscendC::RoundMode::CAST_RINT, count);
            }
            kvInQue_.FreeTensor(in);
            kvOutQue_.EnQue(out);
            out = kvOutQue_.template DeQue<T>();
            AscendC::DataCopy(dst[static_cast<uint64_t>(c + k0) * d], out, count);
            kvOutQue_.FreeTensor(out);
        }
        c += run;
    }
    WaitForPipe<AscendC::HardEvent::MTE3_S>();  // the tile is in GM before the cube is asked to read it
}

// V3: the packed Q rows [rows, D] (T, in UB) times kv head h's channel scales: (Q * sk) . Kq^T =
// Q . (Kq * sk)^T. In fp32 (acc_ is idle until the piece starts), rounded back to T once.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::ScaleQueryRows(AscendC::LocalTensor<T> &rows, uint32_t h)
{
    const uint32_t m = td_->rows, d = td_->headDim;
    WaitForPipe<AscendC::HardEvent::V_MTE2>();  // kScale_ of the piece before is no longer read
    AscendC::DataCopy(kScale_, kScaleGm_[static_cast<uint64_t>(h) * d], d);
    WaitForPipe<AscendC::HardEvent::MTE2_V>();  // the rows and the scales are in UB
    AscendC::Cast(acc_, rows, AscendC::RoundMode::CAST_NONE, m * d);
    for (uint32_t r = 0; r < m; ++r) {
        AscendC::Mul(acc_[r * d], acc_[r * d], kScale_, d);
    }
    AscendC::Cast(rows, acc_, AscendC::RoundMode::CAST_RINT, m * d);
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
}

// V3: the chunk's per-token V scales into vScale_ [cols]: value_antiquant_scale [numBlocks, Nkv,
// blockSize] holds a kv head's tokens of one block contiguously, so one copy per block run (each
// run's column is a multiple of 8 keys: 32-B aligned in UB, ChunkOf). Columns before the first
// visible key (left padding) get scale 0: their P is 0 and their stored scales may be anything.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::LoadValueScales(uint32_t b, uint32_t h, uint32_t key0,
                                                                          uint32_t cols)
{
    const uint32_t nkv = td_->numKvHeads, bs = td_->blockSize;
    const AscendC::DataCopyPadExtParams<float> noPad{false, 0, 0, 0.0f};
    WaitForPipe<AscendC::HardEvent::V_MTE2>();  // the chunk before's scales are no longer read
    for (uint32_t c = 0; c < cols;) {
        uint32_t block = 0;
        const uint32_t pos = key0 + c, run = BlockRun(b, pos, key0 + cols, &block);
        const AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(run * sizeof(float)), 0, 0, 0};
        AscendC::DataCopyPad(vScale_[c], vScaleGm_[(static_cast<uint64_t>(block) * nkv + h) * bs + pos % bs], params,
                             noPad);
        c += run;
    }
    WaitForPipe<AscendC::HardEvent::MTE2_V>();
    if (key0 < kvStart_) {
        AscendC::Duplicate(vScale_, 0.0f, kvStart_ - key0);
    }
}

// acc = alpha * acc + P . V of the chunk in `slot` (its P.V waited for by the caller).
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::AccumulateValues(uint32_t slot)
{
    const uint32_t m = td_->rows, d = td_->headDim;
    AscendC::LocalTensor<float> pv = pvQue_.AllocTensor<float>();
    AscendC::DataCopy(pv, pvGm_[slot], m * d);
    pvQue_.EnQue(pv);
    pv = pvQue_.DeQue<float>();
    attn_rows::BroadcastRows(brcb_, stat_[(ALPHA_A + slot) * statStride_], m);
    attn_rows::ApplyRows<attn_rows::Op::MUL>(acc_, brcb_, m, d, d);  // acc *= alpha
    AscendC::Add(acc_, acc_, pv, m * d);                              // acc += P . V
    pvQue_.FreeTensor(pv);
}

// acc_ = acc / l and lse = m + ln(l); rows without a visible key (l = 0) get O = 0, LSE = -inf.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::FinishRows(AscendC::LocalTensor<float> &rowMax,
                                                                 AscendC::LocalTensor<float> &lse)
{
    const uint32_t m = td_->rows, d = td_->headDim;
    AscendC::LocalTensor<float> rowSum = stat_[ROW_SUM * statStride_];
    AscendC::LocalTensor<float> safeSum = stat_[BLOCK_SUM * statStride_];
    AscendC::Maxs(safeSum, rowSum, FLT_MIN, m);  // l >= 1 whenever a key is visible
    attn_rows::BroadcastRows(brcb_, safeSum, m);
    attn_rows::ApplyRows<attn_rows::Op::DIV>(acc_, brcb_, m, d, d);
    AscendC::Ln(lse, rowSum, m);
    AscendC::Add(lse, lse, rowMax, m);
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::WriteOutput(const GroupSpan &span,
                                                                  AscendC::LocalTensor<float> &lse)
{
    const uint32_t m = td_->rows, d = td_->headDim, sq = td_->seqQ, heads = td_->numHeads, ts = td_->rowGroupTokens;
    uint32_t head0 = 0, token0 = 0;
    RowGroupStart(span, &head0, &token0);
    AscendC::LocalTensor<T> out = outQue_.AllocTensor<T>();
    AscendC::Cast(out, acc_, AscendC::RoundMode::CAST_RINT, m * d);
    outQue_.EnQue(out);
    out = outQue_.DeQue<T>();
    // attention_out [B, Sq, N, D]: rows gq * ts + sl go to (b, token0 + sl, head0 + gq).
    const AscendC::DataCopyExtParams params{static_cast<uint16_t>(ts), static_cast<uint32_t>(d * sizeof(T)), 0,
                                            static_cast<uint32_t>((heads - 1) * d * sizeof(T)), 0};
    const uint64_t first = ((static_cast<uint64_t>(span.b) * sq + token0) * heads + head0) * d;
    if (ts == 1) {  // the row group's heads are adjacent in attention_out: one copy
        const AscendC::DataCopyExtParams run{1, static_cast<uint32_t>(m * d * sizeof(T)), 0, 0, 0};
        AscendC::DataCopyPad(outGm_[first], out, run);
    } else {
        for (uint32_t gq = 0; gq < td_->rowGroupHeads; ++gq) {
            AscendC::DataCopyPad(outGm_[first + gq * d], out[gq * ts * d], params);
        }
    }
    outQue_.FreeTensor(out);

    // softmax_lse [B, N, Sq]: the row group's rows are contiguous there in the same order (its
    // heads hold all Sq tokens, or it is one head's tokens token0 .. token0 + ts).
    lseQue_.EnQue(lse);
    lse = lseQue_.DeQue<float>();
    const AscendC::DataCopyExtParams lseParams{1, static_cast<uint32_t>(m * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPad(lseGm_[(static_cast<uint64_t>(span.b) * heads + head0) * sq + token0], lse, lseParams);
    lseQue_.FreeTensor(lse);
}

template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::WritePartial(uint32_t slot, AscendC::LocalTensor<float> &lse)
{
    const uint32_t m = td_->rows, d = td_->headDim;
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    AscendC::DataCopy(partialOGm_[static_cast<uint64_t>(slot) * m * d], acc_, m * d);
    lseQue_.EnQue(lse);
    lse = lseQue_.DeQue<float>();
    AscendC::DataCopy(partialLseGm_[static_cast<uint64_t>(slot) * td_->lseStride], lse, td_->lseStride);
    lseQue_.FreeTensor(lse);
    WaitForPipe<AscendC::HardEvent::MTE3_V>();  // acc_ is reused by the next piece
}

// Merges the pieces of a group cut between parts, in piece order. Every MTE2 copy pays the MTE2
// latency, so the pieces' partials are read in batches, not one copy each: their LSEs (slots
// lseStride floats apart) into the P tile, which holds lseBatch of them, and their O's (slots
// m * d floats apart) into the S tile, which holds oBatch = blockN / d of them (both tiles are idle
// after the pieces); with blockN < d, one at a time into the P.V tile. lseBatch >= n / 16 >= oBatch (lseStride = align8(m) <= 8 m,
// T is 2 bytes, d >= 16), so the LSEs of an O batch always fit.
template <typename T, typename KV>
__aicore__ inline void FlashAttentionDecodeKernel<T, KV>::Combine(const GroupSpan &span)
{
    const uint32_t m = td_->rows, d = td_->headDim, stride = td_->lseStride, pieces = span.pieces;
    const uint32_t tileFloats = m * td_->blockN * static_cast<uint32_t>(sizeof(T)) / sizeof(float);
    const uint32_t lseBatch = tileFloats / stride > 0 ? tileFloats / stride : 1;
    const uint32_t oBatch = td_->blockN >= d ? td_->blockN / d : 1;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> &oTile = td_->blockN >= d ? scoreQue_ : pvQue_;
    const bool lseResident = pieces <= lseBatch;  // one read of all LSEs serves both passes
    AscendC::LocalTensor<float> maxLse = stat_[ROW_MAX_A * statStride_];
    AscendC::LocalTensor<float> weight = stat_[ALPHA_A * statStride_];
    AscendC::LocalTensor<float> weightSum = stat_[ROW_SUM * statStride_];
    AscendC::LocalTensor<T> lseTile = probQue_.AllocTensor<T>();
    AscendC::LocalTensor<float> lses = lseTile.template ReinterpretCast<float>();

    AscendC::Duplicate(maxLse, NEG_INF, m);
    for (uint32_t j0 = 0; j0 < pieces; j0 += lseBatch) {
        const uint32_t count = attn_rows::Min(lseBatch, pieces - j0);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();  // the batch before is read
        AscendC::DataCopy(lses, partialLseGm_[static_cast<uint64_t>(span.slotBase + j0) * stride], count * stride);
        WaitForPipe<AscendC::HardEvent::MTE2_V>();
        for (uint32_t j = 0; j < count; ++j) {
            AscendC::Max(maxLse, maxLse, lses[j * stride], m);
        }
    }
    AscendC::Maxs(maxLse, maxLse, -FLT_MAX, m);  // rows no piece saw: exp(-inf - finite) = 0
    if (td_->hasSinks != 0) {
        LoadRowMods(span);
        AscendC::Max(maxLse, maxLse, rowSink_, m);  // M = max(max_j LSE_j, sink)
    }
    AscendC::Duplicate(weightSum, 0.0f, m);
    AscendC::Duplicate(acc_, 0.0f, m * d);
    for (uint32_t j0 = 0; j0 < pieces; j0 += oBatch) {
        const uint32_t count = attn_rows::Min(oBatch, pieces - j0);
        if (!lseResident) {
            WaitForPipe<AscendC::HardEvent::V_MTE2>();
            AscendC::DataCopy(lses, partialLseGm_[static_cast<uint64_t>(span.slotBase + j0) * stride],
                              count * stride);
        }
        AscendC::LocalTensor<float> partials = oTile.AllocTensor<float>();
        AscendC::DataCopy(partials, partialOGm_[static_cast<uint64_t>(span.slotBase + j0) * m * d], count * m * d);
        oTile.EnQue(partials);
        partials = oTile.DeQue<float>();  // (after the LSE copy too: MTE2 runs in order)
        for (uint32_t j = 0; j < count; ++j) {
            AscendC::LocalTensor<float> partial = partials[j * m * d];
            AscendC::Sub(weight, lses[(lseResident ? j0 + j : j) * stride], maxLse, m);
            AscendC::Exp(weight, weight, m);                 // w_j = exp(LSE_j - M)
            AscendC::Add(weightSum, weightSum, weight, m);
            attn_rows::BroadcastRows(brcb_, weight, m);
            attn_rows::ApplyRows<attn_rows::Op::MUL>(partial, brcb_, m, d, d);
            AscendC::Add(acc_, acc_, partial, m * d);        // acc += w_j * O_j
        }
        oTile.FreeTensor(partials);
    }
    probQue_.FreeTensor(lseTile);
    if (td_->hasSinks != 0) {  // the sink's exp(sink - M) joins the denominator once, with no value
        AscendC::LocalTensor<float> sinkWeight = stat_[BLOCK_MAX * statStride_];
        AscendC::Sub(sinkWeight, rowSink_, maxLse, m);
        AscendC::Exp(sinkWeight, sinkWeight, m);
        AscendC::Add(weightSum, weightSum, sinkWeight, m);
    }
    AscendC::LocalTensor<float> lse = lseQue_.AllocTensor<float>();
    AscendC::Ln(lse, weightSum, m);
    AscendC::Add(lse, lse, maxLse, m);                   // LSE = M + ln(sum w_j); -inf when no key
    AscendC::LocalTensor<float> safeSum = stat_[BLOCK_SUM * statStride_];
    AscendC::Maxs(safeSum, weightSum, FLT_MIN, m);
    attn_rows::BroadcastRows(brcb_, safeSum, m);
    attn_rows::ApplyRows<attn_rows::Op::DIV>(acc_, brcb_, m, d, d);
    WriteOutput(span, lse);
}

}  // namespace flash_attn_decode
