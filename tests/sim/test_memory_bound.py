"""No modeled time beats a physical bound (docs/timing_model.md "Memory bound").

Every op's traced launch is checked: its modeled time is at least
  - the bytes it must read from HBM over the chip's HBM bandwidth -- counted here from the op's
    arguments (the inputs the launch reads in full and does not write), not from the engine, and
  - all its GM bytes over the chip's L2 rate (the engine's GM byte count),
and the engine's compulsory-byte count covers those inputs. The decode step at a long cache is the
case that used to break the first bound: its pipeline model served the KV cache at the L2 rate.
"""
from __future__ import annotations

import numpy as np
import pytest

from acl_fa.plan import timing
from acl_fa.plan.roofline import chip_peaks
from acl_fa.runtime.sim_stats import last_launch

F16 = np.float16
RNG = np.random.default_rng(7)


def _normal(*shape, dtype=F16):
    return RNG.standard_normal(shape).astype(dtype)


def _check(session, run, must_read: int, kernel: str):
    """Runs `run()` traced; its modeled time must be >= must_read bytes at the HBM rate and >= its
    GM bytes at the L2 rate. Returns the model."""
    with timing.op_trace(session.backend):
        run()
        model = timing.last_model(session.backend)
    assert last_launch(session.backend)["kernel"] == kernel  # the launch the model is of
    peaks = chip_peaks(model.chip)
    costs = timing.pipe_costs(session.backend)
    hbm_s, l2_s = must_read / peaks.hbm_bytes_per_s, model.gm_bytes / (costs["gmBytesPerCycle"] * peaks.clock_hz)
    assert model.compulsory_hbm_bytes >= must_read, (model.compulsory_hbm_bytes, must_read)
    assert model.seconds >= hbm_s * (1 - 1e-9), f"modeled {model.seconds * 1e6:.2f} us < HBM bound {hbm_s * 1e6:.2f} us"
    assert model.seconds >= l2_s * (1 - 1e-9), f"modeled {model.seconds * 1e6:.2f} us < L2 bound {l2_s * 1e6:.2f} us"
    assert model.cycles == max(model.pipeline_cycles, model.l2_bound_cycles, model.hbm_bound_cycles)
    return model


def _nbytes(*arrays) -> int:
    return sum(a.nbytes for a in arrays)


def test_forward(session):
    q, k, v = _normal(1, 2, 256, 64), _normal(1, 2, 512, 64), _normal(1, 2, 512, 64)
    _check(session, lambda: session.flash_attention(q, k, v, causal=True), _nbytes(q, k, v), "flash_attention")


@pytest.mark.parametrize("options", [dict(window=(200, 0)), dict(dropout_p=0.2, seed=3), dict(attn_mask="bool")],
                         ids=["window", "dropout", "mask"])
def test_forward_v2_options(session, options):
    q, k, v = _normal(1, 2, 128, 64), _normal(1, 2, 256, 64), _normal(1, 2, 256, 64)
    if options.get("attn_mask") == "bool":
        mask = RNG.random((1, 1, 128, 256)) < 0.3
        mask[..., 0] = False  # every row sees a key
        options = dict(attn_mask=mask)
    _check(session, lambda: session.flash_attention(q, k, v, **options), _nbytes(q, k, v), "flash_attention_v2")


def test_forward_v3_softcap(session):
    q, k, v = _normal(1, 2, 128, 64), _normal(1, 2, 256, 64), _normal(1, 2, 256, 64)
    _check(session, lambda: session.flash_attention(q, k, v, softcap=5.0), _nbytes(q, k, v), "flash_attention_v3")


def test_backward(session):
    q, k, v = _normal(1, 2, 128, 64), _normal(1, 2, 256, 64), _normal(1, 2, 256, 64)
    out, lse = session.flash_attention(q, k, v, return_lse=True)
    dout = _normal(*out.shape)
    _check(session, lambda: session.flash_attention_backward(dout, q, k, v, out, lse),
           _nbytes(q, k, v, out, dout), "flash_attention_grad")


def test_varlen(session):
    cu = np.array([0, 100, 356], np.int32)
    q, k, v = _normal(356, 2, 64), _normal(356, 2, 64), _normal(356, 2, 64)
    _check(session, lambda: session.flash_attention_varlen(q, k, v, cu, cu, causal=True), _nbytes(q, k, v),
           "flash_attention_v2")


@pytest.mark.parametrize("block_size", [None, 128], ids=["contiguous", "paged"])
def test_decode_long_cache(session, block_size):
    """One token of 32 heads against 16384 cached tokens of 8 kv heads (64 MiB of K/V): the
    launch must take at least that cache over the HBM rate. Contiguous, the pipeline alone
    models it faster (it serves the cache at the L2 rate), so the bound sets the time."""
    batch, seq_kv, kv_heads, d = 1, 16384, 8, 128
    q = _normal(batch, 1, 32, d)
    if block_size is None:
        k_cache, v_cache, table = _normal(batch, seq_kv, kv_heads, d), _normal(batch, seq_kv, kv_heads, d), None
    else:
        blocks = seq_kv // block_size
        k_cache, v_cache = _normal(blocks, block_size, kv_heads, d), _normal(blocks, block_size, kv_heads, d)
        table = RNG.permutation(blocks).astype(np.int32).reshape(batch, blocks)
    lengths = np.full(batch, seq_kv, np.int32)
    model = _check(session, lambda: session.flash_attention_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lengths, block_table=table), _nbytes(q, k_cache, v_cache),
        "flash_attention_decode")
    if block_size is None:  # the paged kernel's pipeline is slower than the bound by itself
        assert model.bound == "hbm" and model.pipeline_cycles < model.hbm_bound_cycles


def test_lse_merge(session):
    out_a, out_b = _normal(2, 4, 300, 64, dtype=np.float32), _normal(2, 4, 300, 64, dtype=np.float32)
    lse_a, lse_b = _normal(2, 4, 300, dtype=np.float32), _normal(2, 4, 300, dtype=np.float32)
    _check(session, lambda: session.merge_attention_partials(out_a, lse_a, out_b, lse_b),
           _nbytes(out_a, lse_a, out_b, lse_b), "attention_lse_merge")


def test_bound_counts_inputs_once_and_excludes_workspace(session):
    """The compulsory bytes of a forward launch are its q, k, v (read many times, counted once) and
    not its workspace (written, then read back): at most the inputs plus the outputs beyond L2."""
    q, k, v = _normal(1, 1, 512, 64), _normal(1, 1, 512, 64), _normal(1, 1, 512, 64)
    model = _check(session, lambda: session.flash_attention(q, k, v), _nbytes(q, k, v), "flash_attention")
    assert model.compulsory_hbm_bytes == _nbytes(q, k, v)
    assert model.gm_bytes > 2 * model.compulsory_hbm_bytes  # K/V re-read per block, S/P through GM
