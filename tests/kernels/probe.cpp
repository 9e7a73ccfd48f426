// probe.cpp -- one Ascend C API, or one broken rule, per launch (op codes below), on a
// single AIV: in[n] fp32 is loaded with DataCopyPad, the op runs, out is written with
// DataCopyPad. tests/sim/test_sim_kernels.py compares each op with numpy;
// tests/sim/test_sim_rules.py expects each PROBE_BAD_* to fail with its rule's message.
#include "kernel_operator.h"
#include "test_kernels.h"

namespace {

enum ProbeOp : int32_t {
    PROBE_EXP = 0,         // out[i] = exp(in[i])
    PROBE_LN,              // out[i] = ln(in[i])
    PROBE_MAX_REV,         // out[i] = max(in[i], in[n-1-i])
    PROBE_DIV_REV,         // out[i] = in[i] / in[n-1-i]
    PROBE_CAST_F16,        // out[i] = float(half(in[i]))  (CAST_RINT)
    PROBE_CAST_BF16,       // out[i] = float(bf16(in[i]))  (CAST_RINT)
    PROBE_REDUCE_MAX,      // out[0] = max(in)
    PROBE_REDUCE_SUM,      // out[0] = sum(in)
    PROBE_WHOLE_MAX,       // rows of 64: out[r] = max(in[64r : 64r+64]), n = 64 * rows
    PROBE_WHOLE_SUM,       // rows of 64: out[r] = sum(...)
    PROBE_BRCB,            // out[8i + j] = in[i], n multiple of 8
    PROBE_SELECT_GT,       // out[i] = in[i] > param ? in[i] : param  (Compare + Select), n multiple of 64
    PROBE_PAD,             // out[i] = in[i] for the first n, then param up to the 32-byte block
    PROBE_DUP_MAXS,        // out[i] = max(in[i], param) via Duplicate + Max and Maxs (checked equal)
    PROBE_CAST_ROUND_F16,  // out[i] = float(half(in[i])) with CAST_ROUND (ties away from zero)
    PROBE_INT_ARITH,       // in = [a | b] int bit patterns, n / 2 words each: out = a op b (IntArithProbe)
    PROBE_SHIFT,           // in = int bit patterns: out = in shifted (ShiftProbe), n words
    PROBE_CAST_I16,        // out[i] = float(int16(in[i])), param: 1 CAST_RINT .. 5 CAST_TRUNC (RoundMode's value)
    PROBE_ABS,             // out[i] = |in[i]|
    PROBE_UB_UNWRITTEN,    // out = the n words of y, which no instruction wrote: the UB poison (all bits set)
    PROBE_BAD_UB_CAPACITY = 100,
    PROBE_BAD_COPY_LENGTH,
    PROBE_BAD_UB_ALIGN,
    PROBE_BAD_DEQUE_EMPTY,
    PROBE_BAD_QUEUE_DEPTH,
    PROBE_BAD_DOUBLE_FREE,
    PROBE_BAD_WAIT_UNSET,
    PROBE_BAD_SET_NEVER_WAITED,
    PROBE_BAD_GM_BOUNDS,
    PROBE_BAD_HOST_POINTER,
    PROBE_BAD_INDEX,
    PROBE_BAD_KERNEL_TYPE,
    PROBE_BAD_RACE_NO_FLAG,  // PROBE_EXP without the V_MTE3 SetFlag/WaitFlag pair (a race only the trace sees)
    PROBE_BAD_INT_OVERFLOW,  // int32 Muls past 2^31 (no documented wraparound)
    PROBE_BAD_SHIFT_AMOUNT,  // ShiftRight of uint32_t by 33
    PROBE_BAD_COMPARES_INT,  // Compares int32_t with CMPMODE::GE (A2/A3: EQ only)
    PROBE_BAD_GATHER_OFFSET, // Gather byte offset past src
    PROBE_BAD_CAST_I16_MODE, // Cast float -> int16_t with CAST_NONE (the pair takes RINT / FLOOR / CEIL / ROUND / TRUNC)
    PROBE_AICORE_EXP = 200,  // PROBE_EXP declared as KERNEL_TYPE_AICORE (the coupled chips' type)
};

uint32_t Align8(uint32_t n) { return (n + 7) / 8 * 8; }

// The integer count forms: a = x[0, h), b = x[h, 2h) (h words, a multiple of 8) as T; code =
// op (0 Add, 1 Sub, 2 Mul, 3 Adds, 4 Muls; the scalar is b[0]) + 8 for int16_t + 16 for in place
// on the first source (dst = a) or + 32 on the second (dst = b). Returns dst's h words.
template <typename T>
AscendC::LocalTensor<float> IntArithProbe(const AscendC::LocalTensor<float> &x, const AscendC::LocalTensor<float> &tmp,
                                          int32_t code, uint32_t h) {
    using namespace AscendC;
    const int32_t cnt = static_cast<int32_t>(h * 4 / sizeof(T));
    const LocalTensor<T> a = x.ReinterpretCast<T>(), b = x[h].ReinterpretCast<T>();
    const LocalTensor<T> dst = (code / 16) % 2 != 0 ? a : (code / 32) % 2 != 0 ? b : tmp.ReinterpretCast<T>();
    const T s = b.GetValue(0);
    switch (code % 8) {
        case 0: Add(dst, a, b, cnt); break;
        case 1: Sub(dst, a, b, cnt); break;
        case 2: Mul(dst, a, b, cnt); break;
        case 3: Adds(dst, a, s, cnt); break;
        default: Muls(dst, a, s, cnt); break;
    }
    return dst.template ReinterpretCast<float>();
}

// ShiftLeft / ShiftRight of x's n words viewed as T into y: code = amount (0..32) + 64 when left
// + 128 * (0 int32_t, 1 uint32_t, 2 int16_t, 3 uint16_t).
template <typename T>
void ShiftProbe(const AscendC::LocalTensor<float> &y, const AscendC::LocalTensor<float> &x, int32_t code, uint32_t n) {
    const int32_t cnt = static_cast<int32_t>(n * 4 / sizeof(T));
    const T amount = static_cast<T>(code % 64);
    const AscendC::LocalTensor<T> dst = y.ReinterpretCast<T>(), src = x.ReinterpretCast<T>();
    if ((code / 64) % 2 != 0) {
        AscendC::ShiftLeft(dst, src, amount, cnt);
    } else {
        AscendC::ShiftRight(dst, src, amount, cnt);
    }
}

void Run(const ProbeTiling &t, GM_ADDR in, GM_ADDR out) {
    using namespace AscendC;
    TPipe pipe;
    const uint32_t n = t.n, na = Align8(n);
    GlobalTensor<float> inGm, outGm;
    inGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(in), n);
    outGm.SetGlobalBuffer(reinterpret_cast<__gm__ float *>(out));  // bounded by its allocation
    TBuf<TPosition::VECCALC> xb, yb, tb;
    pipe.InitBuffer(xb, na * 4);
    pipe.InitBuffer(yb, na * 4 + 64);
    pipe.InitBuffer(tb, na * 4 + 64);
    LocalTensor<float> x = xb.Get<float>(), y = yb.Get<float>(), tmp = tb.Get<float>();
    DataCopyExtParams inP(1, n * 4, 0, 0, 0);
    DataCopyPad(x, inGm, inP, DataCopyPadExtParams<float>(true, 0, static_cast<uint8_t>(na - n), t.param));
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
    const int32_t cnt = static_cast<int32_t>(n);
    uint32_t outN = n;
    switch (t.op) {
        case PROBE_EXP: Exp(y, x, cnt); break;
        case PROBE_LN: Ln(y, x, cnt); break;
        case PROBE_MAX_REV:
        case PROBE_DIV_REV:
            for (uint32_t i = 0; i < n; ++i) tmp.SetValue(i, x.GetValue(n - 1 - i));
            if (t.op == PROBE_MAX_REV) Max(y, x, tmp, cnt); else Div(y, x, tmp, cnt);
            break;
        case PROBE_CAST_F16:
        case PROBE_CAST_ROUND_F16: {
            LocalTensor<half> h = tmp.ReinterpretCast<half>();
            Cast(h, x, t.op == PROBE_CAST_F16 ? RoundMode::CAST_RINT : RoundMode::CAST_ROUND, n);
            Cast(y, h, RoundMode::CAST_NONE, n);
            break;
        }
        case PROBE_CAST_BF16: {
            LocalTensor<bfloat16_t> h = tmp.ReinterpretCast<bfloat16_t>();
            Cast(h, x, RoundMode::CAST_RINT, n);
            Cast(y, h, RoundMode::CAST_NONE, n);
            break;
        }
        case PROBE_REDUCE_MAX: ReduceMax(y, x, tmp, cnt); outN = 1; break;
        case PROBE_REDUCE_SUM: ReduceSum(y, x, tmp, cnt); outN = 1; break;
        case PROBE_WHOLE_MAX:
            WholeReduceMax(y, x, 64, cnt / 64, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);
            outN = n / 64;
            break;
        case PROBE_WHOLE_SUM: WholeReduceSum(y, x, 64, cnt / 64, 1, 1, 8); outN = n / 64; break;
        case PROBE_BRCB: {
            TBuf<TPosition::VECCALC> bb;
            pipe.InitBuffer(bb, n * 8 * 4);
            LocalTensor<float> b = bb.Get<float>();
            Brcb(b, x, static_cast<uint8_t>(n / 8), BrcbRepeatParams(1, 8));
            SetFlag<HardEvent::V_MTE3>(0);
            WaitFlag<HardEvent::V_MTE3>(0);
            DataCopyPad(outGm, b, DataCopyExtParams(1, n * 8 * 4, 0, 0, 0));
            return;
        }
        case PROBE_SELECT_GT: {
            TBuf<TPosition::VECCALC> mb;
            pipe.InitBuffer(mb, n / 8 + 32);
            LocalTensor<uint8_t> mask = mb.Get<uint8_t>();
            Duplicate(tmp, t.param, cnt);
            Compare(mask, x, tmp, CMPMODE::GT, n);
            Select(y, mask, x, t.param, SELMODE::VSEL_TENSOR_SCALAR_MODE, n);
            break;
        }
        case PROBE_PAD: DataCopy(y, x, na); outN = na; break;
        case PROBE_INT_ARITH: {
            const int32_t code = static_cast<int32_t>(t.param);
            outN = n / 2;
            const LocalTensor<float> r = (code / 8) % 2 != 0 ? IntArithProbe<int16_t>(x, tmp, code, outN)
                                                             : IntArithProbe<int32_t>(x, tmp, code, outN);
            DataCopy(y, r, outN);
            break;
        }
        case PROBE_SHIFT: {
            const int32_t code = static_cast<int32_t>(t.param);
            switch (code / 128) {
                case 0: ShiftProbe<int32_t>(y, x, code, na); break;
                case 1: ShiftProbe<uint32_t>(y, x, code, na); break;
                case 2: ShiftProbe<int16_t>(y, x, code, na); break;
                default: ShiftProbe<uint16_t>(y, x, code, na); break;
            }
            break;
        }
        case PROBE_DUP_MAXS:
            Duplicate(tmp, t.param, cnt);
            Max(y, x, tmp, cnt);
            Maxs(tmp, x, t.param, cnt);
            for (uint32_t i = 0; i < n; ++i) {
                if (tmp.GetValue(i) != y.GetValue(i)) y.SetValue(i, -12345.0f);
            }
            break;
        // ---- broken rules ----
        case PROBE_CAST_I16: {
            // float -> int16_t -> float through tmp; an input outside int16_t is the Cast's violation
            LocalTensor<int16_t> q = tmp.ReinterpretCast<int16_t>();
            Cast(q, x, static_cast<RoundMode>(static_cast<int32_t>(t.param)), na);
            Cast(y, q, RoundMode::CAST_NONE, na);
            break;
        }
        case PROBE_ABS: Abs(y, x, cnt); break;
        case PROBE_UB_UNWRITTEN: break;
        case PROBE_BAD_CAST_I16_MODE: Cast(tmp.ReinterpretCast<int16_t>(), x, RoundMode::CAST_NONE, na); break;
        case PROBE_BAD_UB_CAPACITY: {
            TBuf<TPosition::VECCALC> big;
            pipe.InitBuffer(big, 200 * 1024);
            break;
        }
        case PROBE_BAD_COPY_LENGTH: DataCopy(y, inGm, 7); break;
        case PROBE_BAD_UB_ALIGN: Exp(y[1], x, 8); break;
        case PROBE_BAD_DEQUE_EMPTY: {
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 1, 256);
            q.DeQue<float>();
            break;
        }
        case PROBE_BAD_QUEUE_DEPTH: {
            TQue<TPosition::VECIN, 1> q;
            pipe.InitBuffer(q, 2, 256);
            LocalTensor<float> a = q.AllocTensor<float>(), b = q.AllocTensor<float>();
            q.EnQue(a);
            q.EnQue(b);
            break;
        }
        case PROBE_BAD_DOUBLE_FREE: {
            TQue<TPosition::VECOUT, 1> q;
            pipe.InitBuffer(q, 1, 256);
            LocalTensor<float> a = q.AllocTensor<float>();
            q.FreeTensor(a);
            q.FreeTensor(a);
            break;
        }
        case PROBE_BAD_WAIT_UNSET: WaitFlag<HardEvent::V_MTE3>(1); break;
        case PROBE_BAD_SET_NEVER_WAITED: SetFlag<HardEvent::V_MTE3>(2); break;
        case PROBE_BAD_GM_BOUNDS: DataCopy(y, inGm[8], na); break;
        case PROBE_BAD_HOST_POINTER: {
            static float host[64];
            GlobalTensor<float> h;
            h.SetGlobalBuffer(host, 64);
            break;
        }
        case PROBE_BAD_INDEX: x.GetValue(na); break;
        case PROBE_BAD_RACE_NO_FLAG:
            Exp(y, x, cnt);
            DataCopyPad(outGm, y, DataCopyExtParams(1, n * 4, 0, 0, 0));  // MTE3 may read y before V wrote it
            return;
        case PROBE_BAD_INT_OVERFLOW: {
            LocalTensor<int32_t> xi = x.ReinterpretCast<int32_t>();
            Duplicate(xi, 65535, 8);
            Muls(xi, xi, 65535, 8);
            break;
        }
        case PROBE_BAD_SHIFT_AMOUNT: {
            LocalTensor<uint32_t> xu = x.ReinterpretCast<uint32_t>();
            ShiftRight(xu, xu, 33u, 8);
            break;
        }
        case PROBE_BAD_COMPARES_INT: {
            LocalTensor<int32_t> xi = x.ReinterpretCast<int32_t>();
            Compares(tmp.ReinterpretCast<uint8_t>(), xi, 0, CMPMODE::GE, 64);
            break;
        }
        case PROBE_BAD_GATHER_OFFSET: {
            // param 0: every offset one past src; 1: offsets 4 i with element 5 misaligned (6)
            // and element 6 past src; 2: offsets 4 i from srcBaseAddr 2 (every one misaligned).
            LocalTensor<uint32_t> off = tmp.ReinterpretCast<uint32_t>();
            const int32_t mode = static_cast<int32_t>(t.param);
            if (mode == 0) {
                Duplicate(off.ReinterpretCast<int32_t>(), static_cast<int32_t>(na * 4), 8);
            } else {
                CreateVecIndex(off.ReinterpretCast<int32_t>(), 0, 8);
                Muls(off.ReinterpretCast<int32_t>(), off.ReinterpretCast<int32_t>(), 4, 8);
                if (mode == 1) {
                    off.SetValue(5, 6u);
                    off.SetValue(6, na * 4);
                }
            }
            Gather(y, x, off, mode == 2 ? 2u : 0u, 8);
            break;
        }
        default: break;
    }
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopyPad(outGm, y, DataCopyExtParams(1, outN * 4, 0, 0, 0));
}

}  // namespace

extern "C" __global__ __aicore__ void probe(GM_ADDR in, GM_ADDR out, GM_ADDR tiling) {
    REGISTER_TILING_DEFAULT(ProbeTiling);
    GET_TILING_DATA(t, tiling);
    if (t.op == PROBE_BAD_KERNEL_TYPE) {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    } else if (t.op == PROBE_AICORE_EXP) {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AICORE);
        t.op = PROBE_EXP;
    } else {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    }
    Run(t, in, out);
}
