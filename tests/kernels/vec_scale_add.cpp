// vec_scale_add.cpp -- test kernel 1: z = (x + y) * scale over fp32 vectors, tiled,
// double-buffered (TQue depth 2), AIV only, split evenly over the cores.
// Per tile of `tile` elements: GM reads 2 * tile * 4 B, GM writes tile * 4 B,
// vector elements 2 * tile (Add + Muls); UB: 3 queues x 2 buffers x tile * 4 B.
#include "kernel_operator.h"
#include "test_kernels.h"

namespace {

constexpr int32_t BUFFER_NUM = 2;

class VecScaleAdd {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR y, GM_ADDR z, const VecScaleAddTiling &t) {
        tile_ = t.tile;
        tiles_ = t.tilesPerCore;
        scale_ = t.scale;
        const uint64_t perCore = uint64_t(t.tile) * t.tilesPerCore;
        const uint64_t start = perCore * AscendC::GetBlockIdx();
        xGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(x) + start, perCore);
        yGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(y) + start, perCore);
        zGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(z) + start, perCore);
        pipe_.InitBuffer(xQue_, BUFFER_NUM, tile_ * sizeof(float));
        pipe_.InitBuffer(yQue_, BUFFER_NUM, tile_ * sizeof(float));
        pipe_.InitBuffer(zQue_, BUFFER_NUM, tile_ * sizeof(float));
    }
    __aicore__ inline void Process() {
        for (uint32_t i = 0; i < tiles_; ++i) {
            CopyIn(i);
            Compute();
            CopyOut(i);
        }
    }

private:
    __aicore__ inline void CopyIn(uint32_t i) {
        AscendC::LocalTensor<float> x = xQue_.AllocTensor<float>();
        AscendC::LocalTensor<float> y = yQue_.AllocTensor<float>();
        AscendC::DataCopy(x, xGm_[uint64_t(i) * tile_], tile_);
        AscendC::DataCopy(y, yGm_[uint64_t(i) * tile_], tile_);
        xQue_.EnQue(x);
        yQue_.EnQue(y);
    }
    __aicore__ inline void Compute() {
        AscendC::LocalTensor<float> x = xQue_.DeQue<float>();
        AscendC::LocalTensor<float> y = yQue_.DeQue<float>();
        AscendC::LocalTensor<float> z = zQue_.AllocTensor<float>();
        AscendC::Add(z, x, y, static_cast<int32_t>(tile_));
        AscendC::Muls(z, z, scale_, static_cast<int32_t>(tile_));
        zQue_.EnQue(z);
        xQue_.FreeTensor(x);
        yQue_.FreeTensor(y);
    }
    __aicore__ inline void CopyOut(uint32_t i) {
        AscendC::LocalTensor<float> z = zQue_.DeQue<float>();
        AscendC::DataCopy(zGm_[uint64_t(i) * tile_], z, tile_);
        zQue_.FreeTensor(z);
    }

    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::TPosition::VECIN, BUFFER_NUM> xQue_, yQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, BUFFER_NUM> zQue_;
    AscendC::GlobalTensor<float> xGm_, yGm_, zGm_;
    uint32_t tile_ = 0, tiles_ = 0;
    float scale_ = 1.0f;
};

}  // namespace

extern "C" __global__ __aicore__ void vec_scale_add(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(VecScaleAddTiling);
    GET_TILING_DATA(t, tiling);
    VecScaleAdd op;
    op.Init(x, y, z, t);
    op.Process();
}
