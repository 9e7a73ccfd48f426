"""The in-kernel dropout (op_kernel/philox_dropout.h) through the philox_tile test kernel: the
Philox4x32-10 words it generates on the vector unit, its keep mask (uint8, the dropout_mask output
form) and the dropped-out P equal the independent numpy Philox (acl_fa/philox.py, checked against
Random123's known-answer vectors in tests/test_philox.py) bit for bit, for tile origins, widths,
chunk sizes, core counts, seeds and streams that cross the 16-bit limb and 32-bit word boundaries."""
import sys
import pathlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent / "kernels"))
import simlib  # noqa: E402

from acl_fa.philox import dropout_threshold, keep_mask, philox4x32  # noqa: E402


def tile_words(seed, stream, i0, j0, rows, width):
    """x(i, j) for the tile rows [i0, i0 + rows), columns [j0, j0 + width): uint32 [rows, width]."""
    i = np.arange(i0, i0 + rows, dtype=np.uint64)[:, None]
    j = np.arange(j0, j0 + width, dtype=np.uint64)[None, :]
    ctr = np.zeros((rows, width, 4), np.uint64)
    ctr[..., 0] = j >> np.uint64(2)
    ctr[..., 1] = i
    ctr[..., 2] = stream & 0xFFFFFFFF
    ctr[..., 3] = stream >> 32
    words = philox4x32(ctr, (seed & 0xFFFFFFFF, seed >> 32))
    return words[np.arange(rows)[:, None], np.arange(width)[None, :], (j & np.uint64(3)).astype(np.int64)]


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def run_tile(sim, seed, stream, i0, j0, rows, width, lanes, keep_prob, cores=1):
    thr = dropout_threshold(keep_prob)
    inv = np.float32(1.0) / np.float32(keep_prob)
    p = np.random.default_rng(seed % 1000).uniform(0.0, 1.0, (rows, width)).astype(np.float32)
    out, words, keep_bytes = sim.philox_tile(p, seed, stream, i0, j0, lanes, thr, inv, cores)
    return p, out, words, keep_bytes, thr, inv


CASES = [
    # seed, stream, i0, j0, rows, width, lanes, keep_prob, cores
    (0, 0, 0, 0, 4, 64, 64, 0.9, 1),
    (0x243F6A8885A308D3, 7, 129, 256, 8, 128, 64, 0.5, 1),           # chunks of 2 rows
    (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 65535, 262140, 6, 64, 64, 0.8, 2),  # limb carries at i, j
    (12345, (1 << 32) + 3, 70000, 4 * 70000, 5, 128, 256, 0.1, 3),   # partial last chunk, 3 cores
    (1 << 40, 1 << 63, 0, 1 << 20, 16, 192, 96, 0.99, 1),            # width not a power of two
]


@pytest.mark.parametrize("seed,stream,i0,j0,rows,width,lanes,keep_prob,cores", CASES)
def test_kernel_philox_words_keep_mask_and_dropout(sim, seed, stream, i0, j0, rows, width, lanes, keep_prob, cores):
    p, out, words, keep_bytes, thr, inv = run_tile(sim, seed, stream, i0, j0, rows, width, lanes, keep_prob, cores)
    want = tile_words(seed, stream, i0, j0, rows, width)
    np.testing.assert_array_equal(words, want)
    keep = keep_mask(seed, stream, 0, 0, 1, i0 + rows, j0 + width, keep_prob, rows=slice(i0, i0 + rows))[:, j0:]
    np.testing.assert_array_equal(keep, want >= np.uint32(thr))
    np.testing.assert_array_equal(keep_bytes, keep.astype(np.uint8))
    np.testing.assert_array_equal(out, np.where(keep, p * inv, np.float32(0)))


def test_keep_rate_and_threshold_edges(sim):
    # keep_prob 1 keeps everything (threshold 0); the words equal to the threshold are kept.
    _, out, words, keep_bytes, thr, _ = run_tile(sim, 99, 5, 0, 0, 16, 128, 512, 1.0)
    assert thr == 0 and np.all(keep_bytes == 1)
    _, _, words, keep_bytes, thr, _ = run_tile(sim, 99, 5, 0, 0, 64, 128, 512, 0.75)
    keep = keep_bytes.astype(bool)
    assert abs(keep.mean() - 0.75) < 0.02
    assert np.array_equal(keep, words >= np.uint32(thr))
