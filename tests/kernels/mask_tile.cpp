// mask_tile.cpp -- test kernel for op_kernel/common/attention_mask.h on blockDim AIVs: the summary
// pre-pass (each core a share of the summary rows, then SyncAll), then every [blockM, blockN]
// score tile of a [B, N, Sq, Skv] fp32 tensor, tiles dealt round-robin to the cores: BLOCK_MASKED
// tiles are written as -inf without reading scores or mask, BLOCK_VISIBLE tiles pass through
// without reading the mask, BLOCK_MIXED tiles get the mask bias. tests/ops/flash_attention/test_attention_mask.py
// checks the outputs against numpy and the GM bytes read against the skipping rule.
#include "kernel_operator.h"
#include "attention_mask.h"
#include "test_kernels.h"

namespace {

class MaskTile {
public:
    __aicore__ inline void Init(GM_ADDR mask, GM_ADDR scores, GM_ADDR out, GM_ADDR summary, const MaskTileTiling &t)
    {
        t_ = t;
        geom_.mb = t.mb;
        geom_.mn = t.mn;
        geom_.mq = t.mq;
        geom_.mk = t.skv;
        geom_.blockM = t.blockM;
        geom_.blockN = t.blockN;
        const uint64_t elems = uint64_t(t.batch) * t.heads * t.sq * t.skv;
        scoresGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(scores), elems);
        outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), elems);
        summaryGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(summary), geom_.SummaryBytes());
        tiles_.Init(&pipe_, geom_, t.maskRows);
        tiles_.SetGlobal(mask);
        pipe_.InitBuffer(tileBuf_, t.blockM * t.blockN * sizeof(float));
    }
    __aicore__ inline void Process()
    {
        const uint32_t core = AscendC::GetBlockIdx(), cores = AscendC::GetBlockNum();
        const uint32_t rows = geom_.SummaryRows();
        const uint32_t per = (rows + cores - 1) / cores;
        const uint32_t first = core * per < rows ? core * per : rows;
        const uint32_t count = first + per < rows ? per : rows - first;
        tiles_.Summarize(summaryGm_, first, count);
        AscendC::SyncAll();

        const uint32_t qBlocks = (t_.sq + t_.blockM - 1) / t_.blockM, kBlocks = geom_.KeyBlocks();
        const uint32_t total = t_.batch * t_.heads * qBlocks * kBlocks;
        for (uint32_t tile = core; tile < total; tile += cores) {
            const uint32_t kb = tile % kBlocks, qb = tile / kBlocks % qBlocks;
            const uint32_t bn = tile / kBlocks / qBlocks, b = bn / t_.heads, n = bn % t_.heads;
            const uint32_t i0 = qb * t_.blockM, j0 = kb * t_.blockN;
            const uint32_t tileRows = t_.sq - i0 < t_.blockM ? t_.sq - i0 : t_.blockM;
            const uint32_t cols = t_.skv - j0 < t_.blockN ? t_.skv - j0 : t_.blockN;
            const uint8_t cls = summaryGm_.GetValue(uint64_t(geom_.SummaryRow(b, n, i0)) * kBlocks + kb);
            const uint64_t at = ((uint64_t(b) * t_.heads + n) * t_.sq + i0) * t_.skv + j0;
            AscendC::LocalTensor<float> s = tileBuf_.Get<float>();
            if (cls == attn_mask::BLOCK_MASKED) {
                AscendC::Duplicate(s, -__builtin_inff(), static_cast<int32_t>(tileRows * t_.blockN));
            } else {
                AscendC::DataCopyPad(s, scoresGm_[at],
                                     AscendC::DataCopyExtParams(static_cast<uint16_t>(tileRows), cols * 4,
                                                                (t_.skv - cols) * 4,
                                                                (t_.blockN - (cols + 7) / 8 * 8) / 8, 0),
                                     AscendC::DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
                Wait<AscendC::HardEvent::MTE2_V>();
                if (cls == attn_mask::BLOCK_MIXED) tiles_.AddBias(s, t_.blockN, b, n, i0, tileRows, j0, cols);
            }
            Wait<AscendC::HardEvent::V_MTE3>();
            AscendC::DataCopyPad(outGm_[at], s,
                                 AscendC::DataCopyExtParams(static_cast<uint16_t>(tileRows), cols * 4,
                                                            (t_.blockN - (cols + 7) / 8 * 8) / 8, (t_.skv - cols) * 4,
                                                            0));
            Wait<AscendC::HardEvent::MTE3_V>();
            Wait<AscendC::HardEvent::MTE3_MTE2>();
        }
    }

private:
    template <AscendC::HardEvent EVENT>
    __aicore__ static inline void Wait()
    {
        event_t id = static_cast<event_t>(GetTPipePtr()->FetchEventID(EVENT));
        AscendC::SetFlag<EVENT>(id);
        AscendC::WaitFlag<EVENT>(id);
    }

    AscendC::TPipe pipe_;
    attn_mask::MaskGeometry geom_;
    attn_mask::MaskTiles tiles_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> tileBuf_;
    AscendC::GlobalTensor<float> scoresGm_, outGm_;
    AscendC::GlobalTensor<uint8_t> summaryGm_;
    MaskTileTiling t_{};
};

}  // namespace

extern "C" __global__ __aicore__ void mask_tile(GM_ADDR mask, GM_ADDR scores, GM_ADDR out, GM_ADDR summary,
                                                GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(MaskTileTiling);
    GET_TILING_DATA(t, tiling);
    MaskTile op;
    op.Init(mask, scores, out, summary, t);
    op.Process();
}
