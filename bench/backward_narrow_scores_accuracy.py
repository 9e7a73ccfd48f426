"""Would S or dP leaving the cube in the input dtype (fp16 / bf16 instead of fp32) keep the
backward within the project's accuracy rule? (issue #29: cutting the backward's GM bytes per
visible pair; S and dP cross GM in fp32 twice each, 16 of its ~47 B per pair.)

    python bench/backward_narrow_scores_accuracy.py

A numpy model of the kernel's arithmetic, one head at a time: inputs in the dtype, fp32 work, P
and dS rounded to the dtype (as the kernel and the naive backward do), D from the rounded O, and
optionally S = Q K^T and / or dP = dO V^T rounded to the dtype before the vector core uses them.
Prints each gradient's max error against the float64 reference divided by the naive same-dtype
backward's (acl_fa.reference: the rule allows 2x, plus one unit roundoff at the gradient's
magnitude). Causal, random normal inputs, LSE from the float64 forward.
"""
import ml_dtypes
import numpy as np

from acl_fa.reference.attention import attention_reference, attention_reference_backward


def modeled_backward(dout, q, k, v, out, lse, dtype, narrow_s, narrow_dp):
    """(dq, dk, dv) float32 of the kernel's arithmetic with S / dP optionally in `dtype`."""
    f32 = np.float32
    _, _, s_len, d = q.shape
    scale = f32(1 / np.sqrt(d))
    grads = [np.zeros(x.shape, f32) for x in (q, k, v)]
    visible = np.tri(s_len, dtype=bool)
    for b in range(q.shape[0]):
        for n in range(q.shape[1]):
            qh, kh, vh, doh, oh = (x[b, n].astype(f32) for x in (q, k, v, dout, out))
            s = qh @ kh.T
            if narrow_s:
                s = s.astype(dtype).astype(f32)
            s = np.where(visible, s * scale, -np.inf)
            p = np.exp(s - lse[b, n][:, None].astype(f32))
            dp = doh @ vh.T
            if narrow_dp:
                dp = dp.astype(dtype).astype(f32)
            delta = (doh * oh).sum(1, keepdims=True)
            ds = (p * (dp - delta) * scale).astype(dtype).astype(f32)
            grads[0][b, n] = ds @ kh
            grads[1][b, n] = ds.T @ qh
            grads[2][b, n] = p.astype(dtype).astype(f32).T @ doh
    return grads


def main():
    rng = np.random.default_rng(0)
    for name, dtype in (("float16", np.dtype(np.float16)), ("bfloat16", np.dtype(ml_dtypes.bfloat16))):
        for d, s_len in ((64, 512), (128, 1024)):
            q, k, v, dout = (rng.standard_normal((1, 2, s_len, d)).astype(dtype) for _ in range(4))
            out, lse = attention_reference(q, k, v, causal=True)
            out = out.astype(dtype)
            want = attention_reference_backward(dout, q, k, v, causal=True)
            naive = attention_reference_backward(dout, q, k, v, causal=True, work_dtype=np.float32, round_to=dtype)
            naive_err = [np.abs(a.astype(dtype).astype(np.float64) - w).max() for a, w in zip(naive, want)]
            for narrow_s, narrow_dp in ((False, False), (True, False), (False, True), (True, True)):
                got = modeled_backward(dout, q, k, v, out, lse, dtype, narrow_s, narrow_dp)
                ratios = [np.abs(a.astype(dtype).astype(np.float64) - w).max() / e
                          for a, w, e in zip(got, want, naive_err)]
                print(f"{name} D{d} S{s_len} S in {'T   ' if narrow_s else 'fp32'} dP in {'T   ' if narrow_dp else 'fp32'}"
                      f": error / naive error  dq {ratios[0]:.2f}  dk {ratios[1]:.2f}  dv {ratios[2]:.2f}")


if __name__ == "__main__":
    main()
