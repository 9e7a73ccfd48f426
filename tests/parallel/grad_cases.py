"""The random inputs and the check of the sequence-parallel gradient tests (ring, Ulysses, USP).
Imported by their child interpreters, which run from the repository root and put tests/parallel on
sys.path (`sys.path.insert(0, "tests/parallel")`)."""
import ml_dtypes
import numpy as np

from acl_fa.reference.accuracy import check_gradients
from acl_fa.spec.layouts import shape_of

HEAD_DIM = 32


def grad_case(rng, layout: str, n: int, nkv: int, s: int, dtype: str):
    """(q, k, v, dout, heads, dt) of one case, B = 1, D = HEAD_DIM, standard normal in dtype;
    heads: num_heads / num_kv_heads for BSH (where the layout cannot tell them), else empty."""
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    q = rng.standard_normal(shape_of(layout, 1, n, s, HEAD_DIM)).astype(dt)
    k, v = (rng.standard_normal(shape_of(layout, 1, nkv, s, HEAD_DIM)).astype(dt) for _ in range(2))
    dout = rng.standard_normal(q.shape).astype(dt)
    heads = dict(num_heads=n, num_kv_heads=nkv) if layout == "BSH" else {}
    return q, k, v, dout, heads, dt


def check_case(grads, q, k, v, dout, causal: bool, layout: str, n: int, nkv: int, dtype: str) -> list:
    """(dq, dk, dv) shaped and typed like q, k, v and within the 2x-naive rule of the float64
    backward (every head); returns the checks."""
    for g, x in zip(grads, (q, k, v)):
        assert g.shape == x.shape and g.dtype == x.dtype, (g.shape, g.dtype, x.shape, x.dtype)
    checks = check_gradients(grads, (q, k, v, dout), causal=causal, scale=1 / np.sqrt(HEAD_DIM), layout=layout,
                             num_heads=n, num_kv_heads=nkv, dtype_name=dtype)
    assert all(c.ok for c in checks), (causal, layout, n, nkv, dtype, checks)
    return checks


def expect_refusal(call, error, words: str):
    """call() must raise `error` with `words` in its message (bad input refused before device work)."""
    try:
        call()
    except error as exc:
        assert words in str(exc), (words, str(exc))
        return
    raise SystemExit(f"no error for {words}")
