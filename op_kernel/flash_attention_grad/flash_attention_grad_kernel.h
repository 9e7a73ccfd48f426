// flash_attention_grad_kernel.h -- FlashAttention-2 backward for Atlas A2/A3 as a mixed
// AIC:AIV 1:2 kernel: dQ, dK, dV from Q, K, V, O, dO and the forward's LSE, recomputing the
// probabilities instead of storing them.
//
// Three phases, separated by SyncAll (all vector cores):
//   1. D = rowsum(dO * O) per query row (fp32, to the workspace); the dQ accumulator is
//      zeroed; deterministic mode also stores ||dO_r||_1 and each AIV's max |K|, |V| of its
//      share (the fixed-point scale's inputs); with an attention mask, each AIV classifies its
//      share of the mask's blocks (attention_mask.h) into the workspace summary.
//   2. Each AIV runs its units (one K/V block j of one kv head of one sequence,
//      flash_attention_grad_tiling.h): for each query head n of the kv head's group and each
//      panel of the query rows that see block j
//      (QueryBlocksSeeing: causal or windowed rows outside the band are never loaded; at most
//      panelRows rows, whole query blocks trimmed at the band's edges):
//        S    = Q_p . K_j^T,  dP = dO_p . V_j^T   (cube: one request each for the whole panel)
//        per query block i of the panel (the UB tile, blockM rows):
//          P    = exp(T + bias - LSE_i)           (vector; T = scale * S, or with softcap c
//                                                  c * tanh(scale * S / c); keys outside the band
//                                                  -> 0, MaskScores; bias: ALiBi's
//                                                  -slope * |i + diag - j| (AddAlibi) and the
//                                                  mask's 0 / -inf on BLOCK_MIXED blocks; with sinks
//                                                  the forward's LSE_i holds exp(sink) already)
//          dropout: Pd = P o Z / keep_prob, dP := dP o Z / keep_prob (Z regenerated, ApplyDropout)
//          dS   = scale * P * (dP - D_i)          (vector; P and dS leave UB in T; softcap:
//                                                  times 1 - (T / c)^2, kept per tile in fp16)
//        dV_j += Pd^T . dO_p,  dK_j += dS^T . Q_p (cube, A transposed: the panel's rows are the
//                                                  K dimension, summed in L0C; one fp32 write each)
//        dQ_p += dS . K_j                         (cube; atomic mode: added by the request's
//                                                  atomic add; deterministic: to the scratch,
//                                                  then scaled to int32 and added by the AIV)
//      dK_j and dV_j belong to the unit alone: cast and written when its walk ends. A
//      query block the mask hides entirely (BLOCK_MASKED) ends a panel and is skipped: nothing is
//      loaded or computed for it.
//   3. dQ = the accumulator (deterministic: divided by the row's scale), cast. With sinks
//      (FlashAttentionGradV3's dsinks output): dsinks[n] = -sum_(b, i) exp(sinks[n] - LSE_i) * D_i,
//      each head by one AIV in a fixed order (WriteDsinks).
// Panels amortize what every cube request pays (the request, the MTE2 and FixPipe latencies)
// over up to panelRows rows, and dK / dV leave L0C once per panel instead of once per query
// block (docs/backward.md).
// Deterministic mode: dQ is summed in int32 fixed point (flash_attention_grad_tiling.h): every
// part is rounded to an integer the same way wherever it is computed, and integer adds give the
// same sum in any order -- bit-identical across runs, host threads and core counts, with no core
// waiting for another and no order among the units. Atomic mode: fp32 adds in any order.
// Every per-row quantity (LSE, D) is a vector broadcast with Brcb: the scalar unit steers
// loops only and never touches score elements. The APIs beyond the forward's -- Matmul with A
// transposed and enAtomic, SyncAll<true> -- behave as docs/cann-facts.md#ascend-c-kernel-apis
// records.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "attention_band.h"
#include "attention_matmul.h"
#include "attention_mask.h"
#include "attention_row_ops.h"
#include "philox_dropout.h"
#include "flash_attention_grad_tiling.h"
#include "flash_attention_tiling.h"

namespace flash_attn_grad {

using attn_rows::CeilDiv;
using attn_rows::FP32_PER_BLOCK;
using attn_rows::FP32_PER_REPEAT;
using attn_rows::Min;

constexpr float NEG_INF = -__builtin_inff();
// LSE of a row that sees no key is -inf; clamped to this, exp(-inf - LSE) stays 0 instead of NaN.
constexpr float FP32_LOWEST = -3.40282346638528859811704183484516925e+38f;

using attn_rows::WaitForPipe;  // orders the pipe named second after the one named first

template <typename T>
class FlashAttentionGradKernel {
public:
    // The gradient requests have an object each, so that the three can be outstanding at once.
    attn_mm::RowsByColsT<T> scoreMm;  // S = Q.K^T, then dP = dO.V^T: [panel rows, n] fp32
    attn_mm::RowsTByB<T> dvMm;        // dV += P^T.dO: [n, D] fp32, K = panel rows
    attn_mm::RowsTByB<T> dkMm;        // dK += dS^T.Q: [n, D] fp32, K = panel rows
    attn_mm::RowsByB<T> dqMm;         // dQ += dS.K: [panel rows, D] fp32

    // actualSeqQlen / actualSeqKvlen: int64 cumulative end offsets (varlen), else unused (nullptr).
    // attenMask: uint8 [maskB, maskN, maskQ, Skv] when tiling->hasMask, else unused (nullptr).
    __aicore__ inline void Init(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut, GM_ADDR dout,
                                GM_ADDR softmaxLse, GM_ADDR attenMask, GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen,
                                GM_ADDR alibiSlopes, GM_ADDR sinks, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv,
                                GM_ADDR dsinks, GM_ADDR workspace, const FlashAttentionGradTilingData *tiling,
                                AscendC::TPipe *pipe);
    __aicore__ inline void Process();

private:
    // Phase 1 and 3, and the dK/dV write-out.
    __aicore__ inline void ComputeDelta();
    __aicore__ inline void SummarizeMask();
    __aicore__ inline void ProcessUnits();
    // Returns whether a panel computed anything (walkLo_ / walkHi_: the rows it walked).
    __aicore__ inline bool WalkUnit(uint32_t unit);
    // The unit this AIV runs at `position` (0, 1, ...) of its sequence: a contiguous range of
    // unitStart, or dealt pairs (unitsDealt). NONE: a position without a unit (the missing second
    // block of a pair); END: past the AIV's last.
    enum class UnitSlot { UNIT, NONE, END };
    __aicore__ inline UnitSlot UnitOfAiv(uint32_t position, uint32_t *unit) const;
    __aicore__ inline void WriteDq();
    // dsinks of the heads n = aiv_ (mod aivNum), from the LSE and D of all their rows.
    __aicore__ inline void WriteDsinks();
    // Phase 2.
    // Deterministic mode's inputs of the fixed-point scale: this AIV's max |K| and max |V| (phase
    // 1), then the maxima over all AIVs (phase 2, into maxK_ / maxV_).
    __aicore__ inline void StoreKvMaxima();
    __aicore__ inline void LoadKvMaxima();
    // One panel: rows [rowLo, rowHi) of query head n of the sequence (whole query blocks, the
    // first starting at the rows that see the K/V block rounded down to a multiple of 8).
    struct PanelRows {
        uint32_t n = 0, rowLo = 0, rowHi = 0;
    };
    // Where the walk of a block's panels is: query head g of the group, next query block i.
    struct PanelCursor {
        uint32_t g = 0, i = 0;
    };
    // Block j of kv head h of sequence b: every query head of the group, every panel, as a
    // software pipeline (see WalkBlock). Returns false when no panel computed anything (dK_j /
    // dV_j are zero).
    __aicore__ inline bool WalkBlock(uint32_t b, uint32_t h, uint32_t kvBlock);
    // The next panel of block kvBlock (rows [lo, hi) see it) after *cursor; false when none is left.
    __aicore__ inline bool NextPanel(uint32_t b, uint32_t h, uint32_t kvBlock, uint32_t lo, uint32_t hi,
                                     PanelCursor *cursor, PanelRows *panel) const;
    // S (grad = false) or dP (true) of a panel, requested without waiting (into the scratch).
    __aicore__ inline void RequestScores(uint32_t b, uint32_t h, uint32_t kvBlock, const PanelRows &panel,
                                         bool grad);
    // LSE and D of the panel's rows into lse_ / delta_, then P and dS from its S and dP, into P /
    // dS slot `slot` of the scratch.
    __aicore__ inline void PanelTiles(uint32_t b, uint32_t kvBlock, const PanelRows &panel, uint32_t slot);
    // dV_j, dK_j and dQ of a panel from P / dS slot `slot` (deterministic: the dQ part to part
    // slot `slot`), requested without waiting; `first`: no panel of the block has written dK_j /
    // dV_j yet.
    __aicore__ inline void RequestGrads(uint32_t b, uint32_t h, uint32_t kvBlock, const PanelRows &panel,
                                        uint32_t slot, bool first);
    // Waits for the outstanding dV, dK and dQ requests.
    __aicore__ inline void WaitGrads();
    // Deterministic: the panel's dQ part [rows, D] fp32 (part slot `slot` of the scratch) scaled,
    // rounded to int32 and added to the accumulator.
    __aicore__ inline void AddDqFixed(uint32_t b, const PanelRows &panel, const AscendC::GlobalTensor<float> &part);
    // The part slot `slot` of the scratch (a panel's dQ part, deterministic mode without pairs).
    __aicore__ inline AscendC::GlobalTensor<float> DqPart(uint32_t slot) const;
    // dqGroup: a closed pair's sum waits in pending_ and is added in fixed point at most panelRows
    // rows of one query head per step, between the next pair's cube requests; Flush adds the rest.
    struct PendingPair {
        uint32_t b = 0, h = 0, lo = 0, hi = 0, buf = 0, g = 0, r = 0;
        bool active = false;
    };
    __aicore__ inline void AddPendingStep();
    __aicore__ inline void FlushPending();
    __aicore__ inline AscendC::GlobalTensor<float> PairSum(uint32_t buf, uint32_t g, uint32_t row) const;
    // lse_[0:rows] = f_r of rows rowIndex.. (inverse: 1 / f_r), from their ||dO||_1 and D
    // (loaded here into lse_ / delta_; rows <= panelRows).
    __aicore__ inline void FixedScales(uint64_t rowIndex, uint32_t rows, bool inverse);
    // P and dS of the panel's rows [row0, row0 + rows) (one query block, at most blockM rows):
    // S, dP, LSE and D at row `from` of the panel (a multiple of 8), P and dS to row `to` of the
    // P / dS scratch in T.
    __aicore__ inline void Tile(uint32_t b, uint32_t n, uint32_t row0, uint32_t rows, uint32_t to, uint32_t from,
                                uint32_t col0, uint32_t cols, bool maskBias);
    // The summary class (attn_mask::BlockClass) of query block qBlock x kv block kvBlock of (b, n).
    __aicore__ inline uint8_t MaskClass(uint32_t b, uint32_t n, uint32_t qBlock, uint32_t kvBlock) const;
    // lse: the rows' LSE (clamped in place to >= FP32_LOWEST).
    __aicore__ inline void ComputeProbs(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0, uint32_t col0,
                                        uint32_t cols, bool maskBias, const AscendC::LocalTensor<float> &lse);
    // prob_ = T(P o Z / keep_prob) and grad_ = dP o Z / keep_prob for the tile's rows row0.. and
    // keys col0.. of head (b, n); score_ keeps P.
    __aicore__ inline void ApplyDropout(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0, uint32_t col0);
    // Keys of rows row0.. outside the band (and the block's padding columns) -> -inf.
    __aicore__ inline void ComputeDs(uint32_t rows, const AscendC::LocalTensor<float> &delta);
    // softcap: score_ = T = c * tanh(scale * S / c) and its derivative 1 - (T / c)^2 into the
    // tile's dS buffer as fp16 (read back by ComputeDs before dS overwrites it).
    __aicore__ inline void CapScores(uint32_t rows);
    // score_[r, c] -= slope[b, n] * |row0 + r + diag - col0 - c| (ALiBi, from indices in alibiBuf).
    __aicore__ inline void AddAlibi(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0, uint32_t col0);
    __aicore__ inline void WriteKvGrads(uint32_t b, uint32_t h, uint32_t col0, uint32_t cols, bool computed);
    __aicore__ inline void MaskScores(uint32_t rows, uint32_t row0, uint32_t col0, uint32_t cols);

    // [rows, D] tiles between GM (rows `stride` elements apart) and contiguous UB.
    template <typename U>
    __aicore__ inline void LoadRows(const AscendC::LocalTensor<U> &dst, const AscendC::GlobalTensor<U> &src,
                                    uint32_t rows, uint32_t stride);
    template <typename U>
    __aicore__ inline void StoreRows(const AscendC::GlobalTensor<U> &dst, const AscendC::LocalTensor<U> &src,
                                     uint32_t rows, uint32_t stride);
    // tile[r, :] -= rowValues[r] for a [rows, width] fp32 tile with row stride `stride`.
    __aicore__ inline void SubtractRows(const AscendC::LocalTensor<float> &tile,
                                        const AscendC::LocalTensor<float> &rowValues, uint32_t rows, uint32_t width,
                                        uint32_t stride);

    // One sequence: batch b of a dense layout, or varlen sequence b.
    struct Seq {
        uint32_t sq = 0, skv = 0;           // its query and key rows
        uint64_t qStart = 0, kvStart = 0;   // its first row in the token dimension (BSND, BSH, TND)
        int64_t diag = 0;                   // skv - sq
    };
    // Makes seq_ sequence b's (varlen: two int64 reads from each of actual_seq_qlen / kvlen).
    __aicore__ inline void LoadSeq(uint32_t b);
    // Query blocks [*first, *end) of seq_ holding a row that sees one of the keys [keyBegin,
    // keyEnd) (both 0 when none does). For kv blocks both ends are non-decreasing in the block.
    __aicore__ inline void QueryBlocksSeeing(uint32_t keyBegin, uint32_t keyEnd, uint32_t *first,
                                             uint32_t *end) const;
    // Offsets in seq_ (b must be the loaded sequence for the token layouts).
    __aicore__ inline uint64_t QueryOffset(uint32_t b, uint32_t n, uint32_t s) const;
    __aicore__ inline uint64_t KvOffset(uint32_t b, uint32_t h, uint32_t s) const;
    __aicore__ inline uint64_t LseIndex(uint32_t b, uint32_t n, uint32_t s) const;

    const FlashAttentionGradTilingData *td_ = nullptr;
    AscendC::TPipe *pipe_ = nullptr;

    AscendC::GlobalTensor<T> queryGm_, keyGm_, valueGm_, outGm_, doutGm_, dqGm_, dkGm_, dvGm_;
    AscendC::GlobalTensor<float> lseGm_;        // [B, N, Sq], varlen [N, Tq]
    AscendC::GlobalTensor<int64_t> seqQEndGm_;  // varlen: actual_seq_qlen [B], cumulative ends
    AscendC::GlobalTensor<int64_t> seqKvEndGm_;
    AscendC::GlobalTensor<float> deltaGm_;   // [B, N, Sq] fp32
    AscendC::GlobalTensor<float> dqAccGm_;   // the [B, N, Sq, D] accumulator: fp32 (atomic mode)
    AscendC::GlobalTensor<int32_t> dqFixedGm_;  // the same bytes as int32 fixed point (deterministic)
    AscendC::GlobalTensor<float> normGm_;    // deterministic: ||dO_r||_1 [B, N, Sq]
    AscendC::GlobalTensor<float> maxGm_;     // deterministic: max |K| [aivNum][8], then max |V| [aivNum][8]
    AscendC::GlobalTensor<float> dqPartGm_;  // deterministic: dS.K_j of a panel [2][P, D] fp32 (two slots)
    AscendC::GlobalTensor<float> dqPairGm_;  // dqGroup: two K/V block pairs' dQ sums [2][groupSize][seqQ][D] fp32
    AscendC::GlobalTensor<float> scoreGm_;   // this AIV's scratch: S [P, n] fp32 (P = panelRows)
    AscendC::GlobalTensor<float> gradGm_;    // dP [P, n] fp32
    AscendC::GlobalTensor<T> probGm_;        // P [2][P, n] T (two slots: a panel's and the next's)
    AscendC::GlobalTensor<T> dsGm_;          // dS * scale [2][P, n] T
    AscendC::GlobalTensor<float> dkAccGm_;   // dK_j [n, D] fp32
    AscendC::GlobalTensor<float> dvAccGm_;   // dV_j [n, D] fp32
    AscendC::GlobalTensor<uint8_t> maskSummaryGm_;  // hasMask: one BlockClass byte per summary block
    AscendC::GlobalTensor<float> alibiGm_;   // hasAlibi: slopes [B, N] fp32
    AscendC::GlobalTensor<float> sinksGm_;   // dsinksOut: sink logits [N] fp32
    AscendC::GlobalTensor<float> dsinksGm_;  // dsinksOut: their gradient [N] fp32

    attn_mask::MaskGeometry maskGeom_;
    attn_mask::MaskTiles mask_;            // hasMask only
    philox_dropout::PhiloxKeepMask keep_;  // dropout only

    AscendC::TBuf<AscendC::TPosition::VECCALC> scoreBuf_, gradBuf_, probBuf_, dsBuf_, lseBuf_, deltaBuf_, brcbBuf_,
        foldBuf_;
    AscendC::LocalTensor<float> score_;  // [m, n] fp32: S then P; row phases [rowChunk, D]
    AscendC::LocalTensor<float> grad_;   // [m, n] fp32: dP then dS
    AscendC::LocalTensor<T> prob_;       // [m, n] T
    AscendC::LocalTensor<T> ds_;         // [m, n] T
    AscendC::LocalTensor<float> lse_, delta_, brcb_, fold_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> alibiBuf_;  // hasAlibi only
    AscendC::LocalTensor<float> colIndex_;  // [align64(n)] fp32: 0, 1, 2, ... (read 64 at a time)
    AscendC::LocalTensor<float> rowIndex_;  // [m] fp32: 0, 1, 2, ...
    AscendC::LocalTensor<float> rowValue_;  // [m] fp32: a tile's row0 + r + diag - col0

    uint32_t aiv_ = 0;
    uint32_t walkLo_ = 0, walkHi_ = 0;  // the rows the last WalkBlock walked (each head of the group)
    bool pairWrites_ = true;             // dqGroup: this block's dQ parts write the pair sum (else add)
    uint32_t pairBuf_ = 0;               // dqGroup: the pair sum the cube fills now (0 / 1)
    PendingPair pending_;                // dqGroup: the closed pair's sum still to add
    float maxK_ = 0, maxV_ = 0;  // deterministic: max |K|, max |V| over the whole inputs
    uint32_t rowStrideQ_ = 0, rowStrideKv_ = 0;  // elements between consecutive sequence rows
    Seq seq_;
    uint32_t seqIndex_ = 0xFFFFFFFFu;  // the sequence seq_ holds
};

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Init(GM_ADDR query, GM_ADDR key, GM_ADDR value,
                                                         GM_ADDR attentionOut, GM_ADDR dout, GM_ADDR softmaxLse,
                                                         GM_ADDR attenMask, GM_ADDR actualSeqQlen,
                                                         GM_ADDR actualSeqKvlen, GM_ADDR alibiSlopes, GM_ADDR sinks,
                                                         GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR dsinks,
                                                         GM_ADDR workspace,
                                                         const FlashAttentionGradTilingData *tiling,
                                                         AscendC::TPipe *pipe)
{
    td_ = tiling;
    pipe_ = pipe;
    const uint32_t m = td_->blockM;
    const uint32_t n = td_->blockN;
    const uint32_t d = td_->headDim;
    // Rows of every query head (the LSE's and dQ's), and the padded [B, N, Sq] rows of D.
    const uint64_t qRows = td_->varlen != 0 ? td_->totalQ * td_->numHeads
                                            : static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ;
    const uint64_t deltaRows = static_cast<uint64_t>(td_->batch) * td_->numHeads * td_->seqQ;
    const uint64_t kvElems = (td_->varlen != 0 ? td_->totalKv : static_cast<uint64_t>(td_->batch) * td_->seqKv) *
                             td_->numKvHeads * d;
    if (td_->varlen != 0) {
        seqQEndGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqQlen), td_->batch);
        seqKvEndGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t *>(actualSeqKvlen), td_->batch);
    }
    queryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(query), qRows * d);
    keyGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(key), kvElems);
    valueGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(value), kvElems);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(attentionOut), qRows * d);
    doutGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dout), qRows * d);
    dqGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dq), qRows * d);
    dkGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dk), kvElems);
    dvGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(dv), kvElems);
    lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(softmaxLse), qRows);

    aiv_ = AscendC::GetBlockIdx();
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    deltaGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDeltaOffset), deltaRows);
    dqAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsDqOffset), deltaRows * d);
    dqFixedGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(user + td_->wsDqOffset), deltaRows * d);
    if (td_->deterministic != 0) {
        normGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsNormOffset), deltaRows);
        maxGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user + td_->wsMaxOffset),
                               2 * td_->aivNum * FP32_PER_BLOCK);
    }
    GM_ADDR slice = user + td_->wsScratchOffset + aiv_ * td_->wsScratchBytes;
    const uint32_t panel = td_->panelRows;
    scoreGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsScoreOffset), panel * n);
    gradGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsGradOffset), panel * n);
    probGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsProbOffset), 2 * panel * n);
    dsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T *>(slice + td_->wsDsOffset), 2 * panel * n);
    dkAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDkOffset), n * d);
    dvAccGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDvOffset), n * d);
    if (td_->deterministic != 0) {
        dqPartGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDqPartOffset), 2 * panel * d);
    }
    if (td_->dqGroup != 0) {
        dqPairGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(slice + td_->wsDqGroupOffset),
                                  2ull * td_->groupSize * td_->seqQ * d);
    }

    // UB, in the order and sizes op_host budgets (flash_attention_grad_tiling.h).
    const uint32_t rowVectorBytes = (panel * sizeof(float) + 31) / 32 * 32;  // a panel's rows
    pipe_->InitBuffer(scoreBuf_, m * n * sizeof(float));
    pipe_->InitBuffer(gradBuf_, m * n * sizeof(float));
    pipe_->InitBuffer(probBuf_, m * n * sizeof(T));
    pipe_->InitBuffer(dsBuf_, m * n * sizeof(T));
    pipe_->InitBuffer(lseBuf_, rowVectorBytes);
    pipe_->InitBuffer(deltaBuf_, rowVectorBytes);
    pipe_->InitBuffer(brcbBuf_, m * FP32_PER_BLOCK * sizeof(float));
    pipe_->InitBuffer(foldBuf_, m * FP32_PER_REPEAT * sizeof(float));
    score_ = scoreBuf_.Get<float>();
    grad_ = gradBuf_.Get<float>();
    prob_ = probBuf_.Get<T>();
    ds_ = dsBuf_.Get<T>();
    lse_ = lseBuf_.Get<float>();
    delta_ = deltaBuf_.Get<float>();
    brcb_ = brcbBuf_.Get<float>();
    fold_ = foldBuf_.Get<float>();
    if (td_->hasMask != 0) {
        maskGeom_.mb = td_->maskB;
        maskGeom_.mn = td_->maskN;
        maskGeom_.mq = td_->maskQ;
        maskGeom_.mk = td_->seqKv;
        maskGeom_.blockM = m;
        maskGeom_.blockN = n;
        mask_.Init(pipe_, maskGeom_, td_->maskRows);
        mask_.SetGlobal(attenMask);
        maskSummaryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(user + td_->wsMaskSummaryOffset),
                                       maskGeom_.SummaryBytes());
    }
    if (td_->dropout != 0) {
        keep_.Init(pipe_, td_->philoxLanes);
        keep_.SetWidth(n);
    }
    if (td_->hasAlibi != 0) {
        // The policy's "alibiBuf" line: column indices padded to whole 64-column repeats, then rows.
        const uint32_t colSlots = CeilDiv(n, FP32_PER_REPEAT) * FP32_PER_REPEAT;
        pipe_->InitBuffer(alibiBuf_, (colSlots + 2 * m) * sizeof(float));
        colIndex_ = alibiBuf_.Get<float>();
        rowIndex_ = colIndex_[colSlots];
        rowValue_ = colIndex_[colSlots + m];
        AscendC::CreateVecIndex(colIndex_, 0.0f, colSlots);
        AscendC::CreateVecIndex(rowIndex_, 0.0f, m);
        alibiGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(alibiSlopes),
                                 static_cast<uint64_t>(td_->batch) * td_->numHeads);
    }
    if (td_->dsinksOut != 0) {
        sinksGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(sinks), td_->numHeads);
        dsinksGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(dsinks), td_->numHeads);
    }

    const bool bnsd = td_->layout == FA_LAYOUT_BNSD;
    rowStrideQ_ = bnsd ? d : td_->numHeads * d;
    rowStrideKv_ = bnsd ? d : td_->numKvHeads * d;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::LoadSeq(uint32_t b)
{
    if (b == seqIndex_) {
        return;
    }
    seqIndex_ = b;
    if (td_->varlen != 0) {
        const int64_t qBegin = b == 0 ? 0 : seqQEndGm_.GetValue(b - 1);
        const int64_t kvBegin = b == 0 ? 0 : seqKvEndGm_.GetValue(b - 1);
        seq_.qStart = static_cast<uint64_t>(qBegin);
        seq_.kvStart = static_cast<uint64_t>(kvBegin);
        seq_.sq = static_cast<uint32_t>(seqQEndGm_.GetValue(b) - qBegin);
        seq_.skv = static_cast<uint32_t>(seqKvEndGm_.GetValue(b) - kvBegin);
    } else {
        seq_.qStart = static_cast<uint64_t>(b) * td_->seqQ;
        seq_.kvStart = static_cast<uint64_t>(b) * td_->seqKv;
        seq_.sq = td_->seqQ;
        seq_.skv = td_->seqKv;
    }
    seq_.diag = attn_band::Diagonal(seq_.sq, seq_.skv);
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::QueryOffset(uint32_t b, uint32_t n, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s) * d;
    }
    return ((seq_.qStart + s) * td_->numHeads + n) * d;  // BSND, BSH, TND
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::KvOffset(uint32_t b, uint32_t h, uint32_t s) const
{
    const uint64_t d = td_->headDim;
    if (td_->layout == FA_LAYOUT_BNSD) {
        return ((static_cast<uint64_t>(b) * td_->numKvHeads + h) * td_->seqKv + s) * d;
    }
    return ((seq_.kvStart + s) * td_->numKvHeads + h) * d;
}

template <typename T>
__aicore__ inline uint64_t FlashAttentionGradKernel<T>::LseIndex(uint32_t b, uint32_t n, uint32_t s) const
{
    if (td_->varlen != 0) {
        return static_cast<uint64_t>(n) * td_->totalQ + seq_.qStart + s;  // [N, Tq]
    }
    return (static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s;
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::QueryBlocksSeeing(uint32_t keyBegin, uint32_t keyEnd,
                                                                      uint32_t *first, uint32_t *end) const
{
    // Key k is seen by rows [k - diag - nextTokens, k - diag + preTokens]; as preTokens +
    // nextTokens >= 0 the rows of consecutive keys overlap or touch, so keys [keyBegin, keyEnd)
    // are seen by rows [keyBegin - diag - next, keyEnd - 1 - diag + pre], clamped to [0, sq).
    *first = 0;
    *end = 0;
    int64_t rowLo = 0, rowHi = 0;
    if (!attn_band::SeeingRows(keyBegin, Min(keyEnd, seq_.skv), seq_.diag, seq_.sq, td_->preTokens,
                               td_->nextTokens, &rowLo, &rowHi)) {
        return;
    }
    *first = static_cast<uint32_t>(rowLo) / td_->blockM;
    *end = CeilDiv(static_cast<uint32_t>(rowHi), td_->blockM);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Process()
{
    ComputeDelta();
    if (td_->deterministic != 0) {
        StoreKvMaxima();
    }
    if (td_->hasMask != 0) {
        SummarizeMask();
    }
    AscendC::SyncAll();  // D, the zeroed dQ accumulator, the mask summary complete before any core uses them
    if (td_->deterministic != 0) {
        LoadKvMaxima();
    }
    ProcessUnits();
    AscendC::SyncAll();  // every dQ contribution has landed
    WriteDq();
    if (td_->dsinksOut != 0) {
        WriteDsinks();
    }
    scoreMm.End();
    dvMm.End();
    dkMm.End();
    dqMm.End();
}

// ---- phase 1: D = rowsum(dO * O) ---------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeDelta()
{
    const uint32_t d = td_->headDim;
    const uint32_t chunk = td_->rowChunk;
    const uint32_t chunksPerHead = CeilDiv(td_->seqQ, chunk);
    const uint32_t items = td_->batch * td_->numHeads * chunksPerHead;
    for (uint32_t item = aiv_; item < items; item += td_->aivNum) {
        const uint32_t headIndex = item / chunksPerHead;  // b * numHeads + n
        const uint32_t row0 = (item % chunksPerHead) * chunk;
        LoadSeq(headIndex / td_->numHeads);
        if (row0 >= seq_.sq) {
            continue;  // varlen: past this sequence's rows
        }
        const uint32_t rows = Min(chunk, seq_.sq - row0);
        const uint64_t offset = QueryOffset(headIndex / td_->numHeads, headIndex % td_->numHeads, row0);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        LoadRows(prob_, doutGm_[offset], rows, rowStrideQ_);
        LoadRows(ds_, outGm_[offset], rows, rowStrideQ_);
        WaitForPipe<AscendC::HardEvent::MTE2_V>();
        AscendC::Cast(score_, prob_, AscendC::RoundMode::CAST_NONE, rows * d);
        const uint64_t rowIndex = static_cast<uint64_t>(headIndex) * td_->seqQ + row0;
        AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
        if (td_->deterministic != 0) {
            AscendC::Abs(grad_, score_, rows * d);  // ||dO_r||_1, an input of the row's fixed-point scale
            attn_rows::ReduceRows<attn_rows::Reduce::SUM>(lse_, grad_, fold_, rows, d, d);
            WaitForPipe<AscendC::HardEvent::V_MTE3>();
            AscendC::DataCopyPad(normGm_[rowIndex], lse_, params);
        }
        AscendC::Cast(grad_, ds_, AscendC::RoundMode::CAST_NONE, rows * d);
        AscendC::Mul(score_, score_, grad_, rows * d);  // dO * O, [rows, D] fp32
        attn_rows::ReduceRows<attn_rows::Reduce::SUM>(delta_, score_, fold_, rows, d, d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopyPad(deltaGm_[rowIndex], delta_, params);
        // The dQ accumulator starts at 0 (rows no kv block sees stay 0): these rows, in BNSD order.
        // 0.0f is all zero bits, so this also zeroes the int32 accumulator.
        AscendC::Duplicate(score_, 0.0f, rows * d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopy(dqAccGm_[rowIndex * d], score_, rows * d);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::SummarizeMask()
{
    // An equal share of the summary rows per AIV (attention_mask.h: one DataCopyPad per row).
    const uint32_t rows = maskGeom_.SummaryRows();
    const uint32_t perAiv = CeilDiv(rows, td_->aivNum);
    const uint32_t first = Min(aiv_ * perAiv, rows);
    mask_.Summarize(maskSummaryGm_, first, Min(perAiv, rows - first));
}

// ---- phase 2: the units ------------------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ProcessUnits()
{
    // This AIV's units (UnitOfAiv: a range of unitStart, or dealt pairs); no unit waits for another's.
    // dqGroup: units Gt .. Gt + G - 1 of a kv head (G = dqGroupBlocks, 2 or 4: a "pair"; a range
    // starts on a multiple of G) put their dQ parts into the pair sum -- the pair's first
    // computing block writes it, the others add in order -- and the sum is added in fixed point
    // once, over the rows the first block walked (the rows that see block Gt + k see Gt: the
    // policy's condition).
    const uint32_t groupBlocks = td_->dqGroup != 0 ? td_->dqGroupBlocks : 1;
    bool open = false;  // the pair sum holds the parts of the pair's first blocks
    uint32_t pairLo = 0, pairHi = 0;
    for (uint32_t position = 0;; ++position) {
        uint32_t unit = 0;
        const UnitSlot slot = UnitOfAiv(position, &unit);
        if (slot == UnitSlot::END) {
            break;
        }
        if (slot == UnitSlot::NONE) {
            continue;
        }
        const uint32_t j = unit % td_->numKvBlocks;
        const bool second = open && j % groupBlocks != 0;  // adds to the pair sum
        pairWrites_ = !second || pairLo == pairHi;  // nothing in the sum yet: write, not add
        const bool computed = WalkUnit(unit);
        if (td_->dqGroup == 0) {
            continue;
        }
        if (computed && pairWrites_) {
            pairLo = walkLo_;
            pairHi = walkHi_;
        } else if (!second) {
            pairLo = pairHi = 0;
        }
        uint32_t nextUnit = 0;
        open = (j + 1) % groupBlocks != 0 && j + 1 < td_->numKvBlocks &&
               UnitOfAiv(position + 1, &nextUnit) == UnitSlot::UNIT;  // this AIV runs the pair's next block next
        if (!open && pairHi > pairLo) {
            // The pair is closed: the one before it is added by now (its buffer is written next),
            // this one is added between the next pair's requests.
            FlushPending();
            const uint32_t kvHeadIndex = unit / td_->numKvBlocks;
            pending_.b = kvHeadIndex / td_->numKvHeads;
            pending_.h = kvHeadIndex % td_->numKvHeads;
            pending_.lo = pending_.r = pairLo;
            pending_.hi = pairHi;
            pending_.buf = pairBuf_;
            pending_.g = 0;
            pending_.active = true;
            pairBuf_ ^= 1u;
        }
        if (!open) {
            pairLo = pairHi = 0;
        }
    }
    FlushPending();
}

template <typename T>
__aicore__ inline typename FlashAttentionGradKernel<T>::UnitSlot
FlashAttentionGradKernel<T>::UnitOfAiv(uint32_t position, uint32_t *unit) const
{
    if (td_->unitsDealt == 0) {
        *unit = td_->unitStart[aiv_] + position;  // a contiguous range
        return *unit < td_->unitStart[aiv_ + 1] ? UnitSlot::UNIT : UnitSlot::END;
    }
    // Dealt pairs (flash_attention_grad_tiling.h unitsDealt; a pair is G = dqGroupBlocks blocks):
    // this AIV's pair of round q is s = q * aivNum + (q even ? aiv : aivNum - 1 - aiv), pair
    // x = s / H of kv head s % H; positions Gq .. Gq + G - 1 are its blocks Gx .. Gx + G - 1.
    const uint32_t nkb = td_->numKvBlocks;
    const uint32_t heads = td_->totalUnits / nkb;
    const uint32_t g = td_->dqGroupBlocks;
    const uint32_t q = position / g;
    const uint32_t aivs = td_->aivNum;
    const uint64_t s = static_cast<uint64_t>(q) * aivs + ((q & 1u) == 0 ? aiv_ : aivs - 1 - aiv_);
    if (s >= static_cast<uint64_t>(heads) * CeilDiv(nkb, g)) {
        return UnitSlot::END;
    }
    const uint32_t j = static_cast<uint32_t>(s / heads) * g + position % g;
    if (j >= nkb) {
        return UnitSlot::NONE;  // past a head's last block: its last pair is shorter
    }
    *unit = static_cast<uint32_t>(s % heads) * nkb + j;
    return UnitSlot::UNIT;
}

template <typename T>
__aicore__ inline bool FlashAttentionGradKernel<T>::WalkUnit(uint32_t unit)
{
    const uint32_t kvHeadIndex = unit / td_->numKvBlocks;
    const uint32_t b = kvHeadIndex / td_->numKvHeads;
    const uint32_t h = kvHeadIndex % td_->numKvHeads;
    const uint32_t j = unit % td_->numKvBlocks;
    const uint32_t col0 = j * td_->blockN;
    LoadSeq(b);
    if (col0 >= seq_.skv) {
        return false;  // varlen: past this sequence's keys, an empty unit
    }
    const bool computed = WalkBlock(b, h, j);
    WriteKvGrads(b, h, col0, Min(td_->blockN, seq_.skv - col0), computed);
    return computed;
}

template <typename T>
__aicore__ inline bool FlashAttentionGradKernel<T>::WalkBlock(uint32_t b, uint32_t h, uint32_t kvBlock)
{
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seq_.skv - col0);
    // Rows [rowLo, rowHi) see a key of the block (every one of them at least one: pre + next >= 0).
    // The walk starts at rowLo rounded down to a multiple of 8, so that every tile's LSE and D
    // start on a 32-B block of UB; the rows added see no key of the block (P = 0, they add 0).
    int64_t rowLo = 0, rowHi = 0;
    if (!attn_band::SeeingRows(col0, col0 + cols, seq_.diag, seq_.sq, td_->preTokens, td_->nextTokens, &rowLo,
                               &rowHi)) {
        return false;
    }
    const uint32_t lo = static_cast<uint32_t>(rowLo) / FP32_PER_BLOCK * FP32_PER_BLOCK;
    const uint32_t hi = static_cast<uint32_t>(rowHi);
    walkLo_ = lo;
    walkHi_ = hi;
    PanelCursor cursor;
    PanelRows cur, next, prev;
    bool hasCur = NextPanel(b, h, kvBlock, lo, hi, &cursor, &cur);
    if (!hasCur) {
        return false;
    }
    // Software pipeline over the panels. The cube serves this AIV's requests in the order they
    // are sent, so requesting panel p+1's S and dP before panel p's dV, dK and dQ lets the vector
    // core recompute P and dS of p+1 while the cube computes p's three gradients (scoreMm has
    // one request outstanding at a time: S, then dP). P / dS have two slots: panel p+1 writes
    // one while p's requests read the other.
    RequestScores(b, h, kvBlock, cur, false);
    scoreMm.WaitIterateAll();
    RequestScores(b, h, kvBlock, cur, true);
    scoreMm.WaitIterateAll();
    bool first = true;
    uint32_t slot = 0;
    while (hasCur) {
        PanelTiles(b, kvBlock, cur, slot);
        WaitForPipe<AscendC::HardEvent::MTE3_S>();  // P and dS in GM, S and dP read, before the requests
        const bool hasNext = NextPanel(b, h, kvBlock, lo, hi, &cursor, &next);
        if (hasNext) {
            RequestScores(b, h, kvBlock, next, false);
        }
        if (!first) {
            WaitGrads();  // the previous panel's requests ran on the cube while PanelTiles ran here
        }
        if (hasNext) {
            scoreMm.WaitIterateAll();
            RequestScores(b, h, kvBlock, next, true);
        }
        RequestGrads(b, h, kvBlock, cur, slot, first);
        if (!first && td_->deterministic != 0 && td_->dqGroup == 0) {
            AddDqFixed(b, prev, DqPart(slot ^ 1u));  // while the cube computes dP of the next panel and this one's gradients
        } else if (td_->dqGroup != 0) {
            AddPendingStep();  // the previous pair's sum, while the cube computes this panel's requests
        }
        if (hasNext) {
            scoreMm.WaitIterateAll();  // dP of the next panel, ahead of this panel's gradients on the cube
        }
        first = false;
        prev = cur;
        cur = next;
        hasCur = hasNext;
        slot ^= 1u;
    }
    WaitGrads();
    if (td_->deterministic != 0 && td_->dqGroup == 0) {
        AddDqFixed(b, prev, DqPart(slot ^ 1u));
    }
    return true;
}

template <typename T>
__aicore__ inline bool FlashAttentionGradKernel<T>::NextPanel(uint32_t b, uint32_t h, uint32_t kvBlock, uint32_t lo,
                                                              uint32_t hi, PanelCursor *cursor, PanelRows *panel) const
{
    // Panels: runs of at most panelRows / blockM query blocks the mask does not hide entirely,
    // query head by query head.
    const uint32_t bm = td_->blockM;
    const uint32_t qEnd = CeilDiv(hi, bm);
    const uint32_t panelBlocks = td_->panelRows / bm;
    if (cursor->g == 0 && cursor->i == 0) {
        cursor->i = lo / bm;
    }
    while (cursor->g < td_->groupSize) {
        const uint32_t n = h * td_->groupSize + cursor->g;
        uint32_t i = cursor->i;
        while (i < qEnd && MaskClass(b, n, i, kvBlock) == attn_mask::BLOCK_MASKED) {
            ++i;  // P = 0 on every pair: nothing to add to dK_j, dV_j or dQ_i
        }
        if (i < qEnd) {
            uint32_t e = i + 1;
            while (e < qEnd && e - i < panelBlocks && MaskClass(b, n, e, kvBlock) != attn_mask::BLOCK_MASKED) {
                ++e;
            }
            panel->n = n;
            panel->rowLo = i * bm > lo ? i * bm : lo;
            panel->rowHi = Min(e * bm, hi);
            cursor->i = e;
            return true;
        }
        ++cursor->g;
        cursor->i = lo / bm;
    }
    return false;
}

template <typename T>
__aicore__ inline uint8_t FlashAttentionGradKernel<T>::MaskClass(uint32_t b, uint32_t n, uint32_t qBlock,
                                                                 uint32_t kvBlock) const
{
    if (td_->hasMask == 0) {
        return attn_mask::BLOCK_VISIBLE;
    }
    const uint64_t row = maskGeom_.SummaryRow(b, n, qBlock * td_->blockM);
    return maskSummaryGm_.GetValue(row * maskGeom_.KeyBlocks() + kvBlock);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::RequestScores(uint32_t b, uint32_t h, uint32_t kvBlock,
                                                                  const PanelRows &panel, bool grad)
{
    // A = Q / dO rows [rows, D], B^T = K / V rows [cols, D], C [rows, cols] with row stride blockN
    // in this AIV's scratch.
    const uint32_t bn = td_->blockN;
    const uint32_t col0 = kvBlock * bn;
    const uint32_t cols = Min(bn, seq_.skv - col0);
    const uint32_t rows = panel.rowHi - panel.rowLo;
    const uint64_t qOffset = QueryOffset(b, panel.n, panel.rowLo);
    const uint64_t kvOffset = KvOffset(b, h, col0);
    scoreMm.SetOrgShape(rows, bn, rowStrideQ_, rowStrideKv_, bn);
    scoreMm.SetTail(rows, cols, td_->headDim);
    scoreMm.SetTensorA(grad ? doutGm_[qOffset] : queryGm_[qOffset]);
    scoreMm.SetTensorB(grad ? valueGm_[kvOffset] : keyGm_[kvOffset], true);
    scoreMm.template IterateAll<false>(grad ? gradGm_ : scoreGm_, 0, false, true);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::PanelTiles(uint32_t b, uint32_t kvBlock, const PanelRows &panel,
                                                               uint32_t slot)
{
    // The panel's LSE and D (one copy each), then one query block (the UB tile) at a time.
    const uint32_t bm = td_->blockM;
    const uint32_t col0 = kvBlock * td_->blockN;
    const uint32_t cols = Min(td_->blockN, seq_.skv - col0);
    const uint32_t rows = panel.rowHi - panel.rowLo;
    const uint64_t rowIndex = (static_cast<uint64_t>(b) * td_->numHeads + panel.n) * td_->seqQ + panel.rowLo;
    AscendC::DataCopyExtParams rowParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPadExtParams<float> noPad{false, 0, 0, 0.0f};
    WaitForPipe<AscendC::HardEvent::V_MTE2>();
    AscendC::DataCopyPad(lse_, lseGm_[LseIndex(b, panel.n, panel.rowLo)], rowParams, noPad);
    AscendC::DataCopyPad(delta_, deltaGm_[rowIndex], rowParams, noPad);
    for (uint32_t r0 = panel.rowLo; r0 < panel.rowHi;) {
        const uint32_t r1 = Min((r0 / bm + 1) * bm, panel.rowHi);
        Tile(b, panel.n, r0, r1 - r0, slot * td_->panelRows + r0 - panel.rowLo, r0 - panel.rowLo, col0, cols,
             MaskClass(b, panel.n, r0 / bm, kvBlock) == attn_mask::BLOCK_MIXED);
        r0 = r1;
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::RequestGrads(uint32_t b, uint32_t h, uint32_t kvBlock,
                                                                 const PanelRows &panel, uint32_t slot, bool first)
{
    const uint32_t d = td_->headDim;
    const uint32_t bn = td_->blockN;
    const uint32_t col0 = kvBlock * bn;
    const uint32_t cols = Min(bn, seq_.skv - col0);
    const uint32_t rows = panel.rowHi - panel.rowLo;
    const uint64_t qOffset = QueryOffset(b, panel.n, panel.rowLo);
    const uint64_t kvOffset = KvOffset(b, h, col0);
    const uint64_t at = static_cast<uint64_t>(slot) * td_->panelRows * bn;  // the P / dS slot
    // dV_j += P^T . dO_p and dK_j += dS^T . Q_p: A^T stored [rows, blockN] (row stride blockN),
    // B = dO / Q rows [rows, D], C [cols, D] fp32; K = the panel's rows, summed in L0C inside the
    // request. The block's first panel writes, later ones add.
    dvMm.SetOrgShape(bn, rowStrideQ_, rows, rows, d);
    dvMm.SetTail(cols, d, rows);
    dvMm.SetTensorA(probGm_[at], true);
    dvMm.SetTensorB(doutGm_[qOffset]);
    dvMm.template IterateAll<false>(dvAccGm_, first ? 0 : 1, false, true);
    dkMm.SetOrgShape(bn, rowStrideQ_, rows, rows, d);
    dkMm.SetTail(cols, d, rows);
    dkMm.SetTensorA(dsGm_[at], true);
    dkMm.SetTensorB(queryGm_[qOffset]);
    dkMm.template IterateAll<false>(dkAccGm_, first ? 0 : 1, false, true);
    // dQ_p += dS . K_j: A = dS [rows, cols] (row stride blockN), B = K rows [cols, D], C [rows, D]
    // (BNSD rows of head (b, n)): atomic mode adds it with the request; deterministic mode takes
    // it to the scratch and FinishGrads adds it in fixed point.
    dqMm.SetOrgShape(rows, rowStrideKv_, bn, bn, d);
    dqMm.SetTail(rows, d, cols);
    dqMm.SetTensorA(dsGm_[at]);
    dqMm.SetTensorB(keyGm_[kvOffset]);
    if (td_->dqGroup != 0) {
        // The pair sum's rows of this query head (a block's panels cover its rows once each).
        const uint64_t g = panel.n - h * td_->groupSize;
        dqMm.template IterateAll<false>(PairSum(pairBuf_, static_cast<uint32_t>(g), panel.rowLo), pairWrites_ ? 0 : 1,
                                        false, true);
    } else if (td_->deterministic != 0) {
        dqMm.template IterateAll<false>(dqPartGm_[static_cast<uint64_t>(slot) * td_->panelRows * d], 0, false, true);
    } else {
        const uint64_t rowIndex = (static_cast<uint64_t>(b) * td_->numHeads + panel.n) * td_->seqQ + panel.rowLo;
        dqMm.template IterateAll<false>(dqAccGm_[rowIndex * d], 1, false, true);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WaitGrads()
{
    dvMm.WaitIterateAll();
    dkMm.WaitIterateAll();
    dqMm.WaitIterateAll();
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::Tile(uint32_t b, uint32_t n, uint32_t row0, uint32_t rows,
                                                         uint32_t to, uint32_t from, uint32_t col0, uint32_t cols,
                                                         bool maskBias)
{
    // The previous tile's P / dS stores (MTE3) overlap these loads; V waits for both.
    const uint32_t bn = td_->blockN;
    WaitForPipe<AscendC::HardEvent::V_MTE2>();
    AscendC::DataCopy(score_, scoreGm_[from * bn], rows * bn);
    AscendC::DataCopy(grad_, gradGm_[from * bn], rows * bn);
    WaitForPipe<AscendC::HardEvent::MTE2_V>();
    WaitForPipe<AscendC::HardEvent::MTE3_V>();  // prob_ and ds_ are free
    ComputeProbs(b, n, rows, row0, col0, cols, maskBias, lse_[from]);
    if (td_->dropout != 0) {
        ApplyDropout(b, n, rows, row0, col0);
    }
    ComputeDs(rows, delta_[from]);
    WaitForPipe<AscendC::HardEvent::V_MTE3>();
    AscendC::DataCopy(probGm_[to * bn], prob_, rows * bn);
    AscendC::DataCopy(dsGm_[to * bn], ds_, rows * bn);
}

template <typename T>
__aicore__ inline AscendC::GlobalTensor<float> FlashAttentionGradKernel<T>::DqPart(uint32_t slot) const
{
    return dqPartGm_[static_cast<uint64_t>(slot) * td_->panelRows * td_->headDim];
}

template <typename T>
__aicore__ inline AscendC::GlobalTensor<float> FlashAttentionGradKernel<T>::PairSum(uint32_t buf, uint32_t g,
                                                                                     uint32_t row) const
{
    const uint64_t rows = static_cast<uint64_t>(td_->groupSize) * td_->seqQ;
    return dqPairGm_[((buf * rows) + static_cast<uint64_t>(g) * td_->seqQ + row) * td_->headDim];
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::AddPendingStep()
{
    if (!pending_.active) {
        return;
    }
    PanelRows rows;
    rows.n = pending_.h * td_->groupSize + pending_.g;
    rows.rowLo = pending_.r;
    rows.rowHi = Min(pending_.r + td_->panelRows, pending_.hi);
    AddDqFixed(pending_.b, rows, PairSum(pending_.buf, pending_.g, pending_.r));
    pending_.r = rows.rowHi;
    if (pending_.r >= pending_.hi) {
        pending_.r = pending_.lo;
        pending_.active = ++pending_.g < td_->groupSize;
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::FlushPending()
{
    while (pending_.active) {
        AddPendingStep();
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::AddDqFixed(uint32_t b, const PanelRows &panel,
                                                               const AscendC::GlobalTensor<float> &part)
{
    // f_r of all the panel's rows at once, then the part in chunks of a multiple of 8 rows (so
    // each chunk's f_r start on a 32-B block); a chunk's store (MTE3) overlaps the next one's load.
    // (rowChunk < 8 -- small blocks, large D: f_r per chunk instead, from the start of lse_.)
    const uint32_t d = td_->headDim;
    const bool perChunk = td_->rowChunk < FP32_PER_BLOCK;
    const uint32_t chunk = perChunk ? td_->rowChunk : td_->rowChunk / FP32_PER_BLOCK * FP32_PER_BLOCK;
    const uint32_t rows = panel.rowHi - panel.rowLo;
    const uint64_t rowIndex = (static_cast<uint64_t>(b) * td_->numHeads + panel.n) * td_->seqQ + panel.rowLo;
    const AscendC::LocalTensor<int32_t> fixed = grad_.ReinterpretCast<int32_t>();
    WaitForPipe<AscendC::HardEvent::V_MTE2>();
    if (!perChunk) {
        FixedScales(rowIndex, rows, false);
    }
    for (uint32_t r = 0; r < rows; r += chunk) {
        const uint32_t n = Min(chunk, rows - r);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        AscendC::DataCopy(score_, part[r * d], n * d);
        if (perChunk) {
            FixedScales(rowIndex + r, n, false);  // waits for its loads, so for the part's too
        }
        WaitForPipe<AscendC::HardEvent::MTE2_V>();
        attn_rows::BroadcastRows(brcb_, perChunk ? lse_ : lse_[r], n);
        attn_rows::ApplyRows<attn_rows::Op::MUL>(score_, brcb_, n, d, d);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();  // the previous chunk has left `fixed`
        AscendC::Cast(fixed, score_, AscendC::RoundMode::CAST_RINT, n * d);  // |value| <= 2^26: exact range
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::SetAtomicAdd<int32_t>();
        AscendC::DataCopy(dqFixedGm_[(rowIndex + r) * d], fixed, n * d);
        AscendC::SetAtomicNone();
    }
    WaitForPipe<AscendC::HardEvent::MTE3_MTE2>();  // `fixed` (grad_) has left before the next load into it
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::FixedScales(uint64_t rowIndex, uint32_t rows, bool inverse)
{
    // bound_r = scale * max|K| * (||dO_r||_1 * max|V| * invKeepProb + |D_r|), at least the
    // smallest normal float (a row with no gradient has parts of 0); f_r = 2^FAG_DQ_FIXED_BITS /
    // bound_r. The same instructions on the same inputs on every core: the same bits.
    AscendC::DataCopyExtParams rowParams{1, static_cast<uint32_t>(rows * sizeof(float)), 0, 0, 0};
    AscendC::DataCopyPadExtParams<float> noPad{false, 0, 0, 0.0f};
    AscendC::DataCopyPad(lse_, normGm_[rowIndex], rowParams, noPad);
    AscendC::DataCopyPad(delta_, deltaGm_[rowIndex], rowParams, noPad);
    WaitForPipe<AscendC::HardEvent::MTE2_V>();
    constexpr float FIXED_ONE = static_cast<float>(1u << FAG_DQ_FIXED_BITS);
    constexpr float SMALLEST_NORMAL = 1.17549435082228750797e-38f;
    AscendC::Abs(delta_, delta_, rows);
    AscendC::Muls(lse_, lse_, maxV_ * td_->invKeepProb, rows);
    AscendC::Add(lse_, lse_, delta_, rows);
    AscendC::Muls(lse_, lse_, td_->scaleValue * maxK_, rows);
    AscendC::Maxs(lse_, lse_, SMALLEST_NORMAL, rows);  // bound_r
    if (inverse) {
        AscendC::Muls(lse_, lse_, 1.0f / FIXED_ONE, rows);  // 1 / f_r (a power of 2: exact)
    } else {
        AscendC::Duplicate(delta_, FIXED_ONE, rows);
        AscendC::Div(lse_, delta_, lse_, rows);  // f_r
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::StoreKvMaxima()
{
    // max |K| and max |V| over this AIV's share of their rows (all kv heads and sequences),
    // rowChunk rows at a time, kept column-wise in grad_ and reduced at the end; each written as
    // 8 copies (one 32-B block) to this AIV's slot.
    const uint32_t d = td_->headDim;
    const uint64_t kvRows = (td_->varlen != 0 ? td_->totalKv : static_cast<uint64_t>(td_->batch) * td_->seqKv) *
                            td_->numKvHeads;
    const uint64_t perAiv = (kvRows + td_->aivNum - 1) / td_->aivNum;
    const uint64_t begin = Min(static_cast<uint64_t>(aiv_) * perAiv, kvRows);
    const uint64_t end = Min(begin + perAiv, kvRows);
    const AscendC::GlobalTensor<T> *sources[2] = {&keyGm_, &valueGm_};
    for (uint32_t which = 0; which < 2; ++which) {
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
        AscendC::Duplicate(grad_, 0.0f, td_->rowChunk * d);
        for (uint64_t row = begin; row < end; row += td_->rowChunk) {
            const uint32_t rows = static_cast<uint32_t>(Min(static_cast<uint64_t>(td_->rowChunk), end - row));
            WaitForPipe<AscendC::HardEvent::V_MTE2>();
            AscendC::DataCopy(prob_, (*sources[which])[row * d], rows * d);
            WaitForPipe<AscendC::HardEvent::MTE2_V>();
            AscendC::Cast(score_, prob_, AscendC::RoundMode::CAST_NONE, rows * d);
            AscendC::Abs(score_, score_, rows * d);
            AscendC::Max(grad_, grad_, score_, rows * d);
        }
        AscendC::ReduceMax(fold_, grad_, score_, td_->rowChunk * d);
        attn_rows::BroadcastRows(brcb_, fold_, 1);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopy(maxGm_[(which * td_->aivNum + aiv_) * FP32_PER_BLOCK], brcb_, FP32_PER_BLOCK);
    }
    WaitForPipe<AscendC::HardEvent::MTE3_V>();
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::LoadKvMaxima()
{
    // The maxima over every AIV's slot (max is exact in any grouping), read once per AIV. The
    // slots (aivNum x 8 <= 1024 floats) land in fold_ ([m, 64] fp32, m >= 16: 1024 floats at
    // least); score_ and grad_ ([m, n] fp32) may be smaller with 16 x 16 blocks.
    const uint32_t slots = td_->aivNum * FP32_PER_BLOCK;
    float *const targets[2] = {&maxK_, &maxV_};
    for (uint32_t which = 0; which < 2; ++which) {
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        AscendC::DataCopy(fold_, maxGm_[which * slots], slots);
        WaitForPipe<AscendC::HardEvent::MTE2_V>();
        AscendC::ReduceMax(grad_, fold_, score_, slots);
        WaitForPipe<AscendC::HardEvent::V_S>();
        *targets[which] = grad_.GetValue(0);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeProbs(uint32_t b, uint32_t n, uint32_t rows,
                                                                 uint32_t row0, uint32_t col0, uint32_t cols,
                                                                 bool maskBias, const AscendC::LocalTensor<float> &lse)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    AscendC::Maxs(lse, lse, FP32_LOWEST, rows);  // rows that see no key: -inf -> lowest finite
    if (td_->softcap > 0.0f) {
        CapScores(rows);  // T = c * tanh(scale * S / c), and T's derivative for ComputeDs
    } else {
        AscendC::Muls(score_, score_, td_->scaleValue, elems);
    }
    if (td_->hasAlibi != 0) {
        AddAlibi(b, n, rows, row0, col0);  // after the cap, before the masks (docs/attention_options.md)
    }
    MaskScores(rows, row0, col0, cols);
    if (maskBias) {
        mask_.AddBias(score_, bn, b, n, row0, rows, col0, cols);  // masked pairs -> -inf
    }
    SubtractRows(score_, lse, rows, bn, bn);
    AscendC::Exp(score_, score_, elems);  // P = exp(scale * S - LSE), masked -> 0
    // prob_ feeds dV += P^T . dO; with dropout ApplyDropout writes it as P o Z / keep_prob.
    if (td_->dropout == 0) {
        AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, elems);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ApplyDropout(uint32_t b, uint32_t n, uint32_t rows,
                                                                 uint32_t row0, uint32_t col0)
{
    // The forward's keep mask of these positions (philox_dropout.h's key scheme: head b * N + n,
    // query row0 + r and key col0 + c of the sequence; col0 is a multiple of blockN, so of 16),
    // generated once per chunk of rows and applied to P (into fold_, then prob_) and to dP.
    const uint32_t bn = td_->blockN;
    const philox_dropout::DropoutStream stream = philox_dropout::MakeStream(
        td_->seed, td_->offset, static_cast<uint64_t>(b) * td_->numHeads + n, td_->keepThreshold, td_->invKeepProb);
    const uint32_t chunkRows = keep_.ChunkRows();
    for (uint32_t r = 0; r < rows; r += chunkRows) {
        const uint32_t count = Min(chunkRows, rows - r) * bn;  // <= 16 x philoxLanes <= foldBuf's m * 64
        keep_.KeepBits(stream, row0 + r, col0);
        const AscendC::LocalTensor<uint8_t> &bits = keep_.KeepBitsTensor();
        AscendC::Muls(fold_, score_[r * bn], td_->invKeepProb, static_cast<int32_t>(count));
        AscendC::Select(fold_, bits, fold_, 0.0f, AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, count);
        AscendC::Cast(prob_[r * bn], fold_, AscendC::RoundMode::CAST_RINT, count);
        const AscendC::LocalTensor<float> dp = grad_[r * bn];
        AscendC::Muls(dp, dp, td_->invKeepProb, static_cast<int32_t>(count));
        AscendC::Select(dp, bits, dp, 0.0f, AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, count);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::ComputeDs(uint32_t rows, const AscendC::LocalTensor<float> &delta)
{
    const uint32_t bn = td_->blockN;
    const uint32_t elems = rows * bn;
    // With dropout dP is first multiplied by Z / keep_prob (the same keep mask as P's): dS =
    // P o (dP o Z / keep_prob - D), D = rowsum(dO o O) as computed.
    SubtractRows(grad_, delta, rows, bn, bn);  // dP - D
    AscendC::Mul(grad_, grad_, score_, elems);            // dS = P * (dP - D)
    AscendC::Muls(grad_, grad_, td_->scaleValue, elems);  // the scale of dQ and dK, applied once here
    if (td_->softcap > 0.0f) {
        // dS *= 1 - (T / c)^2 (CapScores kept it in ds_ as fp16), through fold_ [m, 64] fp32.
        const AscendC::LocalTensor<half> derivative = ds_.template ReinterpretCast<half>();
        const uint32_t chunk = td_->blockM * FP32_PER_REPEAT;
        for (uint32_t e = 0; e < elems; e += chunk) {
            const uint32_t count = Min(chunk, elems - e);
            AscendC::Cast(fold_, derivative[e], AscendC::RoundMode::CAST_NONE, count);
            AscendC::Mul(grad_[e], grad_[e], fold_, count);
        }
    }
    AscendC::Cast(ds_, grad_, AscendC::RoundMode::CAST_RINT, elems);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::CapScores(uint32_t rows)
{
    // attn_rows::SoftCap (the forward's, brcb_ as its 32-B constant), then 1 - (T / c)^2 per chunk
    // of fold_: in [0, 1], kept in fp16 (relative rounding 2^-11, below the T-dtype rounding of dS
    // it multiplies). ds_ is free here: the previous tile's dS store has left (Tile's MTE3_V wait).
    const uint32_t elems = rows * td_->blockN;
    const float cap = td_->softcap;
    attn_rows::SoftCap(score_, brcb_, elems, td_->scaleValue, cap);
    const AscendC::LocalTensor<half> derivative = ds_.template ReinterpretCast<half>();
    const uint32_t chunk = td_->blockM * FP32_PER_REPEAT;
    for (uint32_t e = 0; e < elems; e += chunk) {
        const uint32_t count = Min(chunk, elems - e);
        AscendC::Mul(fold_, score_[e], score_[e], count);
        AscendC::Muls(fold_, fold_, -1.0f / (cap * cap), count);
        AscendC::Adds(fold_, fold_, 1.0f, count);
        AscendC::Cast(derivative[e], fold_, AscendC::RoundMode::CAST_RINT, count);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::AddAlibi(uint32_t b, uint32_t n, uint32_t rows, uint32_t row0,
                                                             uint32_t col0)
{
    // Per 64-column chunk of the tile: fold_[r, c] = (c0 + c) - (row0 + r + diag - col0) in one
    // Sub (the column indices read with repeat stride 0, the row values broadcast by Brcb), its
    // absolute value times -slope, added to the chunk's columns of every row. Integers below 2^24
    // are exact in fp32, so the bias is -slope * |i + diag - j| rounded once. One scalar read of
    // the slope per tile.
    const uint32_t bn = td_->blockN;
    const float slope = alibiGm_.GetValue(static_cast<uint64_t>(b) * td_->numHeads + n);
    AscendC::Adds(rowValue_, rowIndex_, static_cast<float>(static_cast<int64_t>(row0) + seq_.diag - col0),
                  static_cast<int32_t>(rows));
    attn_rows::BroadcastRows(brcb_, rowValue_, rows);
    const uint8_t tileRep = static_cast<uint8_t>(bn / FP32_PER_BLOCK);
    const AscendC::BinaryRepeatParams indexParams(1, 1, 0, 8, 0, 1);  // fold_, colIndex_, brcb_
    const AscendC::BinaryRepeatParams addParams(1, 1, 1, tileRep, tileRep, 8);  // score_, score_, fold_
    for (uint32_t c0 = 0; c0 < bn; c0 += FP32_PER_REPEAT) {
        const uint64_t width = Min(FP32_PER_REPEAT, bn - c0);
        AscendC::Sub(fold_, colIndex_[c0], brcb_, FP32_PER_REPEAT, static_cast<uint8_t>(rows), indexParams);
        AscendC::Abs(fold_, fold_, static_cast<int32_t>(rows * FP32_PER_REPEAT));
        AscendC::Muls(fold_, fold_, -slope, static_cast<int32_t>(rows * FP32_PER_REPEAT));
        AscendC::Add(score_[c0], score_[c0], fold_, width, static_cast<uint8_t>(rows), addParams);
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WriteDsinks()
{
    // Head n: the products exp(sink - LSE_i) * D_i of all its rows (sequence by sequence), added
    // element-wise into acc = fold_ in chunks of a fixed size (blockM x min(blockN, 64), a
    // function of the blocks only), then one ReduceSum: the same order on every core count.
    const uint32_t chunk = td_->blockM * Min(td_->blockN, FP32_PER_REPEAT);
    AscendC::DataCopyPadExtParams<float> noPad{false, 0, 0, 0.0f};
    for (uint32_t n = aiv_; n < td_->numHeads; n += td_->aivNum) {
        const float sink = sinksGm_.GetValue(n);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
        AscendC::Duplicate(fold_, 0.0f, static_cast<int32_t>(chunk));
        for (uint32_t b = 0; b < td_->batch; ++b) {
            LoadSeq(b);
            for (uint32_t s0 = 0; s0 < seq_.sq; s0 += chunk) {
                const uint32_t count = Min(chunk, seq_.sq - s0);
                AscendC::DataCopyExtParams params{1, static_cast<uint32_t>(count * sizeof(float)), 0, 0, 0};
                WaitForPipe<AscendC::HardEvent::V_MTE2>();
                AscendC::DataCopyPad(score_, lseGm_[LseIndex(b, n, s0)], params, noPad);
                AscendC::DataCopyPad(grad_, deltaGm_[(static_cast<uint64_t>(b) * td_->numHeads + n) * td_->seqQ + s0],
                                     params, noPad);
                WaitForPipe<AscendC::HardEvent::MTE2_V>();
                AscendC::Muls(score_, score_, -1.0f, static_cast<int32_t>(count));
                AscendC::Adds(score_, score_, sink, static_cast<int32_t>(count));
                AscendC::Exp(score_, score_, static_cast<int32_t>(count));  // P_sink,i = exp(sink - LSE_i)
                AscendC::Mul(score_, score_, grad_, static_cast<int32_t>(count));
                AscendC::Add(fold_, fold_, score_, static_cast<int32_t>(count));
            }
        }
        AscendC::ReduceSum(brcb_, fold_, score_, static_cast<int32_t>(chunk));
        AscendC::Muls(brcb_, brcb_, -1.0f, 1);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        AscendC::DataCopyPad(dsinksGm_[n], brcb_, AscendC::DataCopyExtParams{1, sizeof(float), 0, 0, 0});
    }
    WaitForPipe<AscendC::HardEvent::MTE3_V>();
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::MaskScores(uint32_t rows, uint32_t row0, uint32_t col0,
                                                               uint32_t cols)
{
    const uint32_t n = td_->blockN;
    // Row r = row0 + r' sees the block's columns [lo(r), hi(r)): its band [r + diag - pre,
    // r + diag + next] minus col0, within the `cols` real columns. lo and hi grow by one per row,
    // so the block needs no mask when its first row's hi and its last row's lo allow all n.
    const int64_t loFirst = attn_band::KeyBegin(row0, seq_.diag, td_->preTokens) - col0;
    const int64_t hiFirst = attn_band::KeyEnd(row0, seq_.diag, td_->nextTokens) - col0;
    if (cols == n && loFirst + static_cast<int64_t>(rows) - 1 <= 0 && hiFirst >= static_cast<int64_t>(n)) {
        return;  // every column of every row visible: no mask work
    }
    for (uint32_t r = 0; r < rows; ++r) {
        int64_t lo = loFirst + r, hi = hiFirst + r;
        lo = lo < 0 ? 0 : (lo > cols ? cols : lo);
        hi = hi > cols ? cols : (hi < lo ? lo : hi);
        if (lo > 0) {
            attn_rows::FillColumns(score_, r * n, 0, static_cast<uint32_t>(lo), NEG_INF);
        }
        if (hi < static_cast<int64_t>(n)) {
            attn_rows::FillColumns(score_, r * n, static_cast<uint32_t>(hi), n, NEG_INF);
        }
    }
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WriteKvGrads(uint32_t b, uint32_t h, uint32_t col0, uint32_t cols,
                                                                 bool computed)
{
    // dK_j and dV_j [cols, D] fp32 -> T, rowChunk rows at a time; zeros when no query row sees the block.
    const uint32_t d = td_->headDim;
    for (uint32_t r = 0; r < cols; r += td_->rowChunk) {
        const uint32_t n = Min(td_->rowChunk, cols - r);
        WaitForPipe<AscendC::HardEvent::V_MTE2>();
        if (computed) {
            AscendC::DataCopy(score_, dkAccGm_[r * d], n * d);
            AscendC::DataCopy(grad_, dvAccGm_[r * d], n * d);
            WaitForPipe<AscendC::HardEvent::MTE2_V>();
        } else {
            AscendC::Duplicate(score_, 0.0f, n * d);
            AscendC::Duplicate(grad_, 0.0f, n * d);
        }
        AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, n * d);
        AscendC::Cast(ds_, grad_, AscendC::RoundMode::CAST_RINT, n * d);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        StoreRows(dkGm_[KvOffset(b, h, col0 + r)], prob_, n, rowStrideKv_);
        StoreRows(dvGm_[KvOffset(b, h, col0 + r)], ds_, n, rowStrideKv_);
        WaitForPipe<AscendC::HardEvent::MTE3_V>();
    }
}

// ---- phase 3: dQ --------------------------------------------------------------------------------

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::WriteDq()
{
    const uint32_t d = td_->headDim;
    const uint32_t items = td_->batch * td_->numHeads * td_->numQBlocks;
    for (uint32_t item = aiv_; item < items; item += td_->aivNum) {
        const uint32_t headIndex = item / td_->numQBlocks;  // b * numHeads + n
        const uint32_t b = headIndex / td_->numHeads;
        const uint32_t n = headIndex % td_->numHeads;
        const uint32_t blockRow0 = (item % td_->numQBlocks) * td_->blockM;
        LoadSeq(b);
        if (blockRow0 >= seq_.sq) {
            continue;  // varlen: past this sequence's rows
        }
        const uint32_t blockRows = Min(td_->blockM, seq_.sq - blockRow0);
        for (uint32_t r = 0; r < blockRows; r += td_->rowChunk) {
            const uint32_t rows = Min(td_->rowChunk, blockRows - r);
            const uint32_t row0 = blockRow0 + r;
            const uint64_t rowIndex = static_cast<uint64_t>(headIndex) * td_->seqQ + row0;
            WaitForPipe<AscendC::HardEvent::V_MTE2>();
            if (td_->deterministic != 0) {
                const AscendC::LocalTensor<int32_t> fixed = grad_.ReinterpretCast<int32_t>();
                AscendC::DataCopy(fixed, dqFixedGm_[rowIndex * d], rows * d);
                FixedScales(rowIndex, rows, true);  // waits for its loads, so for the sum's too
                AscendC::Cast(score_, fixed, AscendC::RoundMode::CAST_NONE, rows * d);
                attn_rows::BroadcastRows(brcb_, lse_, rows);
                attn_rows::ApplyRows<attn_rows::Op::MUL>(score_, brcb_, rows, d, d);  // sum / f_r
            } else {
                AscendC::DataCopy(score_, dqAccGm_[rowIndex * d], rows * d);
                WaitForPipe<AscendC::HardEvent::MTE2_V>();
            }
            AscendC::Cast(prob_, score_, AscendC::RoundMode::CAST_RINT, rows * d);
            WaitForPipe<AscendC::HardEvent::V_MTE3>();
            StoreRows(dqGm_[QueryOffset(b, n, row0)], prob_, rows, rowStrideQ_);
            WaitForPipe<AscendC::HardEvent::MTE3_V>();
        }
    }
}

// ---- helpers ------------------------------------------------------------------------------------

template <typename T>
template <typename U>
__aicore__ inline void FlashAttentionGradKernel<T>::LoadRows(const AscendC::LocalTensor<U> &dst,
                                                             const AscendC::GlobalTensor<U> &src, uint32_t rows,
                                                             uint32_t stride)
{
    const uint32_t d = td_->headDim;
    if (stride == d) {
        AscendC::DataCopy(dst, src, rows * d);
        return;
    }
    // BSND / BSH: consecutive sequence rows are `stride` elements apart; D * sizeof(U) is whole
    // 32-B blocks, so the rows land contiguous in UB.
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(d * sizeof(U)),
                                      static_cast<uint32_t>((stride - d) * sizeof(U)), 0, 0};
    AscendC::DataCopyPad(dst, src, params, AscendC::DataCopyPadExtParams<U>{false, 0, 0, static_cast<U>(0)});
}

template <typename T>
template <typename U>
__aicore__ inline void FlashAttentionGradKernel<T>::StoreRows(const AscendC::GlobalTensor<U> &dst,
                                                              const AscendC::LocalTensor<U> &src, uint32_t rows,
                                                              uint32_t stride)
{
    const uint32_t d = td_->headDim;
    if (stride == d) {
        AscendC::DataCopy(dst, src, rows * d);
        return;
    }
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), static_cast<uint32_t>(d * sizeof(U)), 0,
                                      static_cast<uint32_t>((stride - d) * sizeof(U)), 0};
    AscendC::DataCopyPad(dst, src, params);
}

template <typename T>
__aicore__ inline void FlashAttentionGradKernel<T>::SubtractRows(const AscendC::LocalTensor<float> &tile,
                                                                 const AscendC::LocalTensor<float> &rowValues,
                                                                 uint32_t rows, uint32_t width, uint32_t stride)
{
    attn_rows::BroadcastRows(brcb_, rowValues, rows);
    attn_rows::ApplyRows<attn_rows::Op::SUB>(tile, brcb_, rows, width, stride);
}

// ---- entry ----------------------------------------------------------------------------------

// One run of the kernel for dtype T, as the ops' kernel entries (flash_attention_grad.cpp,
// flash_attention_grad_v2.cpp) call it for their tiling keys.
template <typename T>
__aicore__ inline void RunFlashAttentionGrad(GM_ADDR query, GM_ADDR key, GM_ADDR value, GM_ADDR attentionOut,
                                             GM_ADDR dout, GM_ADDR softmaxLse, GM_ADDR attenMask,
                                             GM_ADDR actualSeqQlen, GM_ADDR actualSeqKvlen, GM_ADDR alibiSlopes,
                                             GM_ADDR sinks, GM_ADDR dq, GM_ADDR dk, GM_ADDR dv, GM_ADDR dsinks,
                                             GM_ADDR workspace, const FlashAttentionGradTilingData *tilingData)
{
    AscendC::TPipe pipe;
    FlashAttentionGradKernel<T> op;
    // The AIC serves the AIVs' matmul requests from here on and does not run the code below.
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), op.scoreMm, &tilingData->scoreTiling, op.dvMm,
                      &tilingData->kvGradTiling, op.dkMm, &tilingData->kvGradTiling, op.dqMm, &tilingData->dqTiling);
    op.Init(query, key, value, attentionOut, dout, softmaxLse, attenMask, actualSeqQlen, actualSeqKvlen, alibiSlopes,
            sinks, dq, dk, dv, dsinks, workspace, tilingData, &pipe);
    op.Process();
}

}  // namespace flash_attn_grad
