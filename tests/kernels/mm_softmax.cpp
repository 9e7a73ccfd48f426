// mm_softmax.cpp -- test kernel 2: out = row softmax(A . B^T), MIX AIC:AIV 1:2.
// Each AIV computes its rows' scores with the Matmul API (IterateAll to its slice of the
// user workspace, fp32), then per row: DataCopy in, ReduceMax, Adds(-max), Exp,
// ReduceSum, Muls(1/sum), DataCopy out. Per row: 5n vector elements, 2 scalar reads (each after
// a V_S flag: the scalar unit reads UB the vector pipe wrote).
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "test_kernels.h"

namespace {

using AType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half>;
using BType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, half, true>;
using CType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;

class MmSoftmax {
public:
    AscendC::Matmul<AType, BType, CType> mm;

    __aicore__ inline void Init(GM_ADDR a, GM_ADDR b, GM_ADDR out, GM_ADDR user, const MmSoftmaxTiling &t) {
        t_ = t;
        const uint32_t aiv = static_cast<uint32_t>(AscendC::GetBlockIdx());
        row0_ = aiv * t.rowsPerAiv;
        rows_ = row0_ >= t.m ? 0 : (t.m - row0_ < t.rowsPerAiv ? t.m - row0_ : t.rowsPerAiv);
        aGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(a), uint64_t(t.m) * t.k);
        bGm_.SetGlobalBuffer(reinterpret_cast<__gm__ half *>(b), uint64_t(t.n) * t.k);
        outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out), uint64_t(t.m) * t.n);
        const uint64_t slice = uint64_t(t.rowsPerAiv) * t.n;
        wsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(user) + aiv * slice, slice);
        pipe_.InitBuffer(inQue_, 2, t.n * sizeof(float));
        pipe_.InitBuffer(outQue_, 2, t.n * sizeof(float));
        pipe_.InitBuffer(statBuf_, 64);
        pipe_.InitBuffer(workBuf_, t.n * sizeof(float));
    }
    __aicore__ inline void Process() {
        if (rows_ == 0) return;
        mm.SetOrgShape(t_.m, t_.n, t_.k);
        mm.SetTensorA(aGm_[uint64_t(row0_) * t_.k]);
        mm.SetTensorB(bGm_, true);
        mm.SetTail(rows_, t_.n, t_.k);
        mm.template IterateAll<false>(wsGm_);
        mm.WaitIterateAll();
        mm.End();
        AscendC::LocalTensor<float> stat = statBuf_.Get<float>();
        AscendC::LocalTensor<float> work = workBuf_.Get<float>();
        const int32_t n = static_cast<int32_t>(t_.n);
        for (uint32_t r = 0; r < rows_; ++r) {
            AscendC::LocalTensor<float> x = inQue_.AllocTensor<float>();
            AscendC::DataCopy(x, wsGm_[uint64_t(r) * t_.n], t_.n);
            inQue_.EnQue(x);
            x = inQue_.DeQue<float>();
            AscendC::LocalTensor<float> y = outQue_.AllocTensor<float>();
            AscendC::ReduceMax(stat, x, work, n);
            ScalarAfterVector();
            const float mx = stat.GetValue(0);
            AscendC::Adds(y, x, -mx, n);
            AscendC::Exp(y, y, n);
            AscendC::ReduceSum(stat, y, work, n);
            ScalarAfterVector();
            const float sum = stat.GetValue(0);
            AscendC::Muls(y, y, 1.0f / sum, n);
            inQue_.FreeTensor(x);
            outQue_.EnQue(y);
            y = outQue_.DeQue<float>();
            AscendC::DataCopy(outGm_[uint64_t(row0_ + r) * t_.n], y, t_.n);
            outQue_.FreeTensor(y);
        }
    }

private:
    // The scalar unit reads a vector result from UB only after the vector pipe wrote it.
    __aicore__ inline void ScalarAfterVector() {
        event_t id = static_cast<event_t>(GetTPipePtr()->FetchEventID(AscendC::HardEvent::V_S));
        AscendC::SetFlag<AscendC::HardEvent::V_S>(id);
        AscendC::WaitFlag<AscendC::HardEvent::V_S>(id);
    }

    MmSoftmaxTiling t_{};
    uint32_t row0_ = 0, rows_ = 0;
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::TPosition::VECIN, 2> inQue_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 2> outQue_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf_, workBuf_;
    AscendC::GlobalTensor<half> aGm_, bGm_;
    AscendC::GlobalTensor<float> outGm_, wsGm_;
};

}  // namespace

extern "C" __global__ __aicore__ void mm_softmax(GM_ADDR a, GM_ADDR b, GM_ADDR out, GM_ADDR workspace,
                                                 GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(MmSoftmaxTiling);
    GET_TILING_DATA(t, tiling);
    GM_ADDR user = AscendC::GetUserWorkspace(workspace);
    MmSoftmax op;
    REGIST_MATMUL_OBJ(GetTPipePtr(), GetSysWorkSpacePtr(), op.mm, &t.cube);
    op.Init(a, b, out, user, t);
    op.Process();
}
