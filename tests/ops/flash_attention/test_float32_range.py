"""Finite inputs whose scores or output sums would leave float32 inside the kernel are refused
before any device work, with the bound that breaks; ordinary inputs are not inspected at all."""
import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.ops.problem import max_magnitude
from acl_fa.runtime.errors import InvalidArgumentError
from acl_fa.runtime.session import live_counts

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32])
def test_max_magnitude_matches_numpy(dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 5, 7)) * 50).astype(dtype)
    x[1, 2, 3] = -250  # the largest magnitude is negative
    assert max_magnitude(x) == float(np.abs(x.astype(np.float64)).max()) == 250.0
    assert max_magnitude(x[:, ::2, 1:]) == float(np.abs(x[:, ::2, 1:].astype(np.float64)).max())
    x[0, 0, 0] = np.inf
    assert max_magnitude(x) == float("inf")
    assert max_magnitude(np.zeros((0, 4), dtype)) == 0.0


def _qkv(dtype, scale_v=1.0):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 32, 16)).astype(dtype) for _ in range(3))
    return q, k, (v.astype(np.float32) * scale_v).astype(dtype)


@pytest.mark.parametrize("dtype, scale, v_scale, message", [
    (np.float16, 1e38, 1.0, "allows scores up to"),   # before: all-NaN output
    (np.float16, 1e39, 1.0, "allows scores up to"),
    (BF16, 1e38, 1.0, "allows scores up to"),
    (BF16, None, 1e37, "output sum"),                  # bf16 V near 3e38: before, inf in the output
    (np.float32, None, 3e37, "output sum"),
])
def test_overflowing_inputs_are_refused_before_device_work(backend, dtype, scale, v_scale, message):
    q, k, v = _qkv(dtype, v_scale)
    before = live_counts(backend) if backend.name == "sim" else None
    with pytest.raises(InvalidArgumentError, match=message):
        acl_fa.flash_attention(q, k, v, scale=scale)
    # The backward takes no float32 at all: that refusal comes first, also before device work.
    with pytest.raises(InvalidArgumentError, match=message if dtype is not np.float32 else "takes float16 or bfloat16"):
        acl_fa.flash_attention_backward(q, q, k, v, q, np.zeros((1, 1, 32), np.float32), scale=scale)
    if before is not None:
        assert live_counts(backend) == before


def test_large_but_safe_scale_still_runs():
    q, k, v = _qkv(np.float16)
    q = (q.astype(np.float32) * 1e-20).astype(np.float32)  # tiny q: scale x D x |q| x |k| stays small
    k = k.astype(np.float32)
    out = acl_fa.flash_attention(q, k, v.astype(np.float32), scale=1e20)
    ref, _ = acl_fa.attention_reference(q, k, v.astype(np.float32), scale=1e20)
    assert np.isfinite(out).all() and np.abs(out - ref).max() < 1e-3
