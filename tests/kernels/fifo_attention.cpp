// fifo_attention.cpp -- bench kernel for the timing model's validation (bench/model_validation.py):
// a non-causal FlashAttention forward with the data path of the PTO-DSL FlashAttention
// (hw-native-sys/pto-isa kernels/python/flash_atten, docs/timing_model.md "Validation"), written
// here with the Ascend C APIs the simulator models. MIX AIC:AIV 1:2, one head, D = 128, fp16 in:
//   - work items are (128-row query block, key chunk): kvSplit chunks per block, each of whole
//     tileN-key tiles; AIC g takes a contiguous range of items;
//   - per tile j of an item the cube computes S_j = Q . K_j^T for all 128 rows (fp32, into a GM
//     slot), the two AIVs turn their 64 rows of S_j into P_j (fp16, into a GM slot), and the cube
//     computes P_j . V_j (fp32, into a GM slot), which the AIVs add into their O rows in UB;
//   - the cube runs ahead: while the AIVs softmax tile j, QK of tiles j+1 .. j+preload is
//     requested (preload Matmul objects, one request outstanding each), so S has preload + 1
//     slots per group; P and P.V have two.
// Sub-block 0 (the issuer) sends every Matmul request of the group (the 128-row jobs); the pair
// meets once per tile with a mode-1 cross-core flag. Step j (issuer and partner alike): each AIV
// softmaxes its rows of S_j into P_j (alpha_j = exp(m_old - m_new), l = alpha_j l + rowsum P_j);
// the issuer waits P_{j-1} . V_{j-1} and QK_{j+1}; MEET_P (both halves of P_j are in GM, so are
// P_{j-1} . V_{j-1} and S_{j+1}, and both AIVs finished reading S_j); the issuer requests
// P_j . V_j and QK_{j+1+P} (into S_j's slot); each AIV adds P_{j-1} . V_{j-1}:
// acc = alpha_{j-1} acc + PV_{j-1}. An item starts with QK_0 .. QK_P requested and S_0 met.
// Output: O_c = acc / l fp32 [kvSplit, Sq, D] and lse_c = m + ln(l) fp32 [kvSplit, Sq] per key
// chunk c (kvSplit = 1: the attention itself; more: the partials a combine launch would merge).
// Not the PTO kernel's code: its structure and sizes only.
#include "attention_row_ops.h"
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

namespace {

using attn_rows::ApplyRowValues;
using attn_rows::Op;
using attn_rows::Reduce;
using attn_rows::ReduceRows;
using attn_rows::WaitForPipe;

using GmHalf = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
using GmHalfT = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half, true>;
using GmFloat = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;
using QkMatmul = AscendC::Matmul<GmHalf, GmHalfT, GmFloat>;  // [128, tileN] = Q . K^T
using PvMatmul = AscendC::Matmul<GmHalf, GmHalf, GmFloat>;   // [128, D] = P . V

constexpr uint32_t BLOCK_ROWS = 128;  // query rows per item (both AIVs)
constexpr uint32_t HALF_ROWS = 64;    // rows per AIV
constexpr uint32_t MAX_PRELOAD = 3;   // QK Matmul objects (the simulator takes 4 objects in all)
// Mode-1 flag ids: the Matmul API's client/server waits take 0..7 for four objects (docs/cann-facts.md).
constexpr uint16_t MEET_S = 8;
constexpr uint16_t MEET_P = 9;
constexpr uint16_t MEET_V = 10;

class FifoAttention {
public:
    QkMatmul qk0, qk1, qk2;
    PvMatmul pv;

    __aicore__ inline void Init(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR out, GM_ADDR lse, GM_ADDR user,
                                const FifoAttentionTiling &t) {
        t_ = t;
        const uint32_t aiv = static_cast<uint32_t>(AscendC::GetBlockIdx());
        group_ = aiv / 2;
        issuer_ = AscendC::GetSubBlockIdx() == 0;
        rowOffset_ = issuer_ ? 0 : HALF_ROWS;
        const uint64_t d = t.headDim, n = t.tileN;
        qGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(q), uint64_t(t.sq) * d);
        kGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(k), uint64_t(t.skv) * d);
        vGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(v), uint64_t(t.skv) * d);
        outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), uint64_t(t.kvSplit) * t.sq * d);
        lseGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(lse), uint64_t(t.kvSplit) * t.sq);
        // The group's FIFO slots: S [preload + 1][128, n] fp32, P [2][128, n] fp16, P.V [2][128, D] fp32.
        const uint64_t sElems = (t.preload + 1) * BLOCK_ROWS * n, pElems = 2 * BLOCK_ROWS * n;
        const uint64_t groupBytes = sElems * 4 + pElems * 2 + 2 * BLOCK_ROWS * d * 4;
        GM_ADDR base = user + group_ * groupBytes;
        sGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(base), sElems);
        pGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(base + sElems * 4), pElems);
        pvGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(base + sElems * 4 + pElems * 2), 2 * BLOCK_ROWS * d);
        // Row strides: Q and K^T rows headDim, S rows tileN; P rows tileN, V and P.V rows headDim.
        for (QkMatmul *mm : {&qk0, &qk1, &qk2}) mm->SetOrgShape(t.sq, t.tileN, t.headDim);
        pv.SetOrgShape(BLOCK_ROWS, t.headDim, t.tileN);
        const uint32_t c = t.chunkRows;
        pipe_.InitBuffer(sQue_, 2, c * t.tileN * sizeof(float));
        pipe_.InitBuffer(pQue_, 2, c * t.tileN * sizeof(half));
        pipe_.InitBuffer(pvQue_, 2, c * t.headDim * sizeof(float));
        pipe_.InitBuffer(accBuf_, HALF_ROWS * t.headDim * sizeof(float));
        pipe_.InitBuffer(rowBuf_, 6 * HALF_ROWS * sizeof(float));  // m, l, alpha[2], row max / sum, temp
        pipe_.InitBuffer(foldBuf_, c * 64 * sizeof(float));
        pipe_.InitBuffer(brcbBuf_, c * 8 * sizeof(float));
    }

    __aicore__ inline void Process() {
        const uint32_t items = t_.sq / BLOCK_ROWS * t_.kvSplit;
        const uint32_t groups = static_cast<uint32_t>(AscendC::GetBlockNum());
        const uint32_t first = items * group_ / groups, last = items * (group_ + 1) / groups;
        for (uint32_t item = first; item < last; ++item) ProcessItem(item);
    }

private:
    __aicore__ inline void ProcessItem(uint32_t item) {
        const uint32_t tiles = t_.skv / t_.tileN / t_.kvSplit;
        const uint32_t chunk = item % t_.kvSplit;
        const uint32_t ahead = t_.preload;
        row0_ = item / t_.kvSplit * BLOCK_ROWS;
        tile0_ = chunk * tiles;
        WaitForPipe<AscendC::HardEvent::MTE3_V>();  // the previous item's O left acc and the row state
        AscendC::LocalTensor<float> rows = rowBuf_.Get<float>();
        AscendC::Duplicate(rows, -__builtin_inff(), HALF_ROWS);  // m
        AscendC::Duplicate(rows[HALF_ROWS], 0.0f, HALF_ROWS);    // l
        AscendC::Duplicate(accBuf_.Get<float>(), 0.0f, HALF_ROWS * t_.headDim);
        if (issuer_) {
            for (uint32_t j = 0; j < ahead && j < tiles; ++j) IssueScores(j);
            WaitScores(0);
        }
        Meet<PIPE_MTE2>(MEET_S);
        if (issuer_ && ahead < tiles) IssueScores(ahead);
        for (uint32_t j = 0; j < tiles; ++j) {
            for (uint32_t r = 0; r < HALF_ROWS; r += t_.chunkRows) SoftmaxChunk(j, r);
            if (issuer_) {
                if (j > 0) pv.WaitIterateAll();
                if (j + 1 < tiles) WaitScores(j + 1);
            }
            // P_j is in GM (both halves), P_{j-1} . V_{j-1} and S_{j+1} are, S_j's slot is read.
            Meet<PIPE_MTE3>(MEET_P);
            if (issuer_) {
                IssueValues(j);
                if (j + 1 + ahead < tiles) IssueScores(j + 1 + ahead);  // into S_j's slot
            }
            if (j > 0) Accumulate(j - 1);
        }
        if (issuer_) pv.WaitIterateAll();
        Meet<PIPE_MTE2>(MEET_V);
        Accumulate(tiles - 1);
        step_ += tiles;
        WriteOutput(chunk);
    }

    template <pipe_t pipe>
    __aicore__ inline void Meet(uint16_t flagId) {
        AscendC::CrossCoreSetFlag<1, pipe>(flagId);
        AscendC::CrossCoreWaitFlag<1>(flagId);
    }

    // Slots and Matmul objects go by the group's running tile count, so items chain without a drain.
    __aicore__ inline uint32_t SSlot(uint32_t j) const { return (step_ + j) % (t_.preload + 1); }
    __aicore__ inline QkMatmul &QkObject(uint32_t j) {
        const uint32_t i = (step_ + j) % t_.preload;
        return i == 0 ? qk0 : (i == 1 ? qk1 : qk2);
    }

    __aicore__ inline void IssueScores(uint32_t j) {
        QkMatmul &mm = QkObject(j);
        mm.SetTensorA(qGm_[uint64_t(row0_) * t_.headDim]);
        mm.SetTensorB(kGm_[uint64_t(tile0_ + j) * t_.tileN * t_.headDim], true);
        mm.SetTail(BLOCK_ROWS, t_.tileN, t_.headDim);
        mm.template IterateAll<false>(sGm_[uint64_t(SSlot(j)) * BLOCK_ROWS * t_.tileN], 0, false, true);
    }
    __aicore__ inline void WaitScores(uint32_t j) { QkObject(j).WaitIterateAll(); }

    __aicore__ inline void IssueValues(uint32_t j) {
        const uint32_t slot = (step_ + j) % 2;
        pv.SetTensorA(pGm_[uint64_t(slot) * BLOCK_ROWS * t_.tileN]);
        pv.SetTensorB(vGm_[uint64_t(tile0_ + j) * t_.tileN * t_.headDim]);
        pv.SetTail(BLOCK_ROWS, t_.headDim, t_.tileN);
        pv.template IterateAll<false>(pvGm_[uint64_t(slot) * BLOCK_ROWS * t_.headDim], 0, false, true);
    }

    // Rows [r, r + c) of this AIV's half of S_j -> P_j; m, l and alpha_j of those rows.
    __aicore__ inline void SoftmaxChunk(uint32_t j, uint32_t r) {
        const uint32_t c = t_.chunkRows, n = t_.tileN;
        const uint64_t sRow = uint64_t(SSlot(j)) * BLOCK_ROWS + rowOffset_ + r;
        AscendC::LocalTensor<float> s = sQue_.AllocTensor<float>();
        AscendC::DataCopy(s, sGm_[sRow * n], c * n);
        sQue_.EnQue(s);
        s = sQue_.DeQue<float>();
        AscendC::LocalTensor<float> rows = rowBuf_.Get<float>();
        AscendC::LocalTensor<float> m = rows[r], l = rows[HALF_ROWS + r];
        AscendC::LocalTensor<float> alpha = rows[(2 + (step_ + j) % 2) * HALF_ROWS + r];
        AscendC::LocalTensor<float> red = rows[4 * HALF_ROWS], tmp = rows[5 * HALF_ROWS];
        AscendC::LocalTensor<float> fold = foldBuf_.Get<float>(), brcb = brcbBuf_.Get<float>();
        AscendC::Muls(s, s, t_.scale, c * n);
        ReduceRows<Reduce::MAX>(red, s, fold, c, n, n);
        AscendC::Max(tmp, red, m, c);        // m_new
        AscendC::Sub(alpha, m, tmp, c);
        AscendC::Exp(alpha, alpha, c);       // alpha_j = exp(m_old - m_new)
        AscendC::Adds(m, tmp, 0.0f, c);
        ApplyRowValues<Op::SUB>(s, brcb, m, c, n, n);
        AscendC::Exp(s, s, c * n);
        ReduceRows<Reduce::SUM>(red, s, fold, c, n, n);
        AscendC::Mul(l, l, alpha, c);
        AscendC::Add(l, l, red, c);
        AscendC::LocalTensor<half> p = pQue_.AllocTensor<half>();
        AscendC::Cast(p, s, AscendC::RoundMode::CAST_RINT, c * n);
        sQue_.FreeTensor(s);
        pQue_.EnQue(p);
        p = pQue_.DeQue<half>();
        const uint64_t pRow = uint64_t((step_ + j) % 2) * BLOCK_ROWS + rowOffset_ + r;
        AscendC::DataCopy(pGm_[pRow * n], p, c * n);
        pQue_.FreeTensor(p);
    }

    // acc = alpha_j acc + (P_j . V_j) over this AIV's rows.
    __aicore__ inline void Accumulate(uint32_t j) {
        const uint32_t c = t_.chunkRows, d = t_.headDim;
        AscendC::LocalTensor<float> acc = accBuf_.Get<float>(), rows = rowBuf_.Get<float>();
        for (uint32_t r = 0; r < HALF_ROWS; r += c) {
            AscendC::LocalTensor<float> x = pvQue_.AllocTensor<float>();
            const uint64_t pvRow = uint64_t((step_ + j) % 2) * BLOCK_ROWS + rowOffset_ + r;
            AscendC::DataCopy(x, pvGm_[pvRow * d], c * d);
            pvQue_.EnQue(x);
            x = pvQue_.DeQue<float>();
            ApplyRowValues<Op::MUL>(acc[r * d], brcbBuf_.Get<float>(), rows[(2 + (step_ + j) % 2) * HALF_ROWS + r], c,
                                    d, d);
            AscendC::Add(acc[r * d], acc[r * d], x, c * d);
            pvQue_.FreeTensor(x);
        }
    }

    // O = acc / l and lse = m + ln(l) of this AIV's rows, for key chunk `chunk`.
    __aicore__ inline void WriteOutput(uint32_t chunk) {
        const uint32_t d = t_.headDim;
        AscendC::LocalTensor<float> acc = accBuf_.Get<float>(), rows = rowBuf_.Get<float>();
        AscendC::LocalTensor<float> l = rows[HALF_ROWS], lse = rows[4 * HALF_ROWS];
        for (uint32_t r = 0; r < HALF_ROWS; r += t_.chunkRows) {
            ApplyRowValues<Op::DIV>(acc[r * d], brcbBuf_.Get<float>(), l[r], t_.chunkRows, d, d);
        }
        AscendC::Ln(lse, l, HALF_ROWS);
        AscendC::Add(lse, lse, rows, HALF_ROWS);
        WaitForPipe<AscendC::HardEvent::V_MTE3>();
        const uint64_t row = uint64_t(chunk) * t_.sq + row0_ + rowOffset_;
        AscendC::DataCopy(outGm_[row * d], acc, HALF_ROWS * d);
        AscendC::DataCopy(lseGm_[row], lse, HALF_ROWS);
    }

    FifoAttentionTiling t_{};
    uint32_t group_ = 0, rowOffset_ = 0, row0_ = 0, tile0_ = 0, step_ = 0;
    bool issuer_ = false;
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::TPosition::VECIN, 2> sQue_, pvQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 2> pQue_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf_, rowBuf_, foldBuf_, brcbBuf_;
    AscendC::GlobalTensor<half> qGm_, kGm_, vGm_, pGm_;
    AscendC::GlobalTensor<float> outGm_, lseGm_, sGm_, pvGm_;
};

}  // namespace

extern "C" __global__ __aicore__ void fifo_attention(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR out, GM_ADDR lse,
                                                     GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(FifoAttentionTiling);
    GET_TILING_DATA(t, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    FifoAttention op;
    AscendC::TPipe *pipe = GetTPipePtr();
    REGIST_MATMUL_OBJ(pipe, GetSysWorkSpacePtr(), op.qk0, &t.qkCube, op.qk1, &t.qkCube, op.qk2, &t.qkCube, op.pv,
                      &t.pvCube);
    op.Init(q, k, v, out, lse, user, t);
    op.Process();
}
