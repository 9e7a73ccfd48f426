// philox_tile.cpp -- test kernel for op_kernel/common/philox_dropout.h: per core a slice of the rows of
// a [rows, width] score tile (rows [i0 + core * rowsPerCore, ...), columns [j0, j0 + width)):
// the 8-bit Philox4x32-10 draws in tile order, the keep mask as uint8 bytes (1 = kept; the
// forward's dropout_mask form), and P with dropout applied.
// AIV only. tests/ops/flash_attention/test_philox_dropout.py compares everything bit for bit with numpy.
#include "kernel_operator.h"
#include "philox_dropout.h"
#include "test_kernels.h"

namespace {

class PhiloxTile {
public:
    __aicore__ inline void Init(GM_ADDR p, GM_ADDR pOut, GM_ADDR draws, GM_ADDR bytes, const PhiloxTileTiling &t)
    {
        t_ = t;
        const uint32_t core = AscendC::GetBlockIdx();
        rowBegin_ = core * t.rowsPerCore;
        rowEnd_ = rowBegin_ + t.rowsPerCore < t.rows ? rowBegin_ + t.rowsPerCore : t.rows;
        const uint64_t elems = uint64_t(t.rows) * t.width;
        pGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(p), elems);
        pOutGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(pOut), elems);
        drawsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t *>(draws), elems);
        bytesGm_.SetGlobalBuffer(reinterpret_cast<__gm__ uint8_t *>(bytes), elems);
        keep_.Init(&pipe_, t.lanes);
        keep_.SetWidth(t.width);
        const uint32_t chunk = philox_dropout::ELEMENTS_PER_COUNTER * keep_.Lanes();
        pipe_.InitBuffer(pQue_, 1, chunk * sizeof(float));
        pipe_.InitBuffer(outQue_, 1, chunk * sizeof(float));
        pipe_.InitBuffer(drawsQue_, 1, chunk * sizeof(int32_t));
        pipe_.InitBuffer(bytesQue_, 1, chunk);
        stream_ = philox_dropout::MakeStream((uint64_t(t.key1) << 32) | t.key0,
                                             (uint64_t(t.ctr3) << 32) | t.ctr2, 0, t.threshold, t.invKeepProb);
    }
    __aicore__ inline void Process()
    {
        for (uint32_t r = rowBegin_; r < rowEnd_; r += keep_.ChunkRows()) {
            const uint32_t rows = rowEnd_ - r < keep_.ChunkRows() ? rowEnd_ - r : keep_.ChunkRows();
            const uint32_t n = rows * t_.width;
            const uint64_t at = uint64_t(r) * t_.width;

            AscendC::LocalTensor<int32_t> w = drawsQue_.AllocTensor<int32_t>();
            keep_.Draws(w, stream_, t_.i0 + r, t_.j0);
            drawsQue_.EnQue(w);
            w = drawsQue_.DeQue<int32_t>();
            AscendC::DataCopy(drawsGm_[at], w, n);
            drawsQue_.FreeTensor(w);

            AscendC::LocalTensor<float> p = pQue_.AllocTensor<float>();
            AscendC::DataCopy(p, pGm_[at], n);
            pQue_.EnQue(p);
            p = pQue_.DeQue<float>();
            AscendC::LocalTensor<float> o = outQue_.AllocTensor<float>();
            AscendC::DataCopy(o, p, n);
            pQue_.FreeTensor(p);
            AscendC::LocalTensor<uint8_t> b = bytesQue_.AllocTensor<uint8_t>();
            keep_.Apply(o, stream_, t_.i0 + r, t_.j0, rows, t_.width, &b);
            bytesQue_.EnQue(b);
            outQue_.EnQue(o);
            o = outQue_.DeQue<float>();
            AscendC::DataCopy(pOutGm_[at], o, n);
            outQue_.FreeTensor(o);
            b = bytesQue_.DeQue<uint8_t>();
            AscendC::DataCopyPad(bytesGm_[at], b, AscendC::DataCopyExtParams(1, n, 0, 0, 0));
            bytesQue_.FreeTensor(b);
        }
    }

private:
    AscendC::TPipe pipe_;
    philox_dropout::PhiloxKeepMask keep_;
    philox_dropout::DropoutStream stream_;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> pQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> outQue_, drawsQue_, bytesQue_;
    AscendC::GlobalTensor<float> pGm_, pOutGm_;
    AscendC::GlobalTensor<int32_t> drawsGm_;
    AscendC::GlobalTensor<uint8_t> bytesGm_;
    PhiloxTileTiling t_{};
    uint32_t rowBegin_ = 0, rowEnd_ = 0;
};

}  // namespace

extern "C" __global__ __aicore__ void philox_tile(GM_ADDR p, GM_ADDR pOut, GM_ADDR draws, GM_ADDR bytes,
                                                  GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(PhiloxTileTiling);
    GET_TILING_DATA(t, tiling);
    PhiloxTile op;
    op.Init(p, pOut, draws, bytes, t);
    op.Process();
}
