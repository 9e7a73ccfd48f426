"""Explicit attention masks in the kernel (op_kernel/attention_mask.h) through the mask_tile test
kernel: the per-block summary (visible / mixed / masked) equals numpy's classification, every
broadcast mask shape gives -inf exactly where the mask is 1 and the scores elsewhere, fully masked
tiles read neither scores nor mask, fully visible tiles never read the mask, and the mask stays at
its given shape on the device (its bytes are read once by the pre-pass, never B*N*Sq*Skv)."""
import sys
import pathlib

import numpy as np
import pytest

import simlib  # noqa: E402

VISIBLE, MIXED, MASKED = 0, 1, 2


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def classify(mask, block_m, block_n):
    """uint8 [mb, mn, qBlocks, kBlocks] of the summary, from the device mask [mb, mn, mq, mk]."""
    mb, mn, mq, mk = mask.shape
    qm = 1 if mq == 1 else block_m
    qb, kb = -(-mq // qm), -(-mk // block_n)
    out = np.empty((mb, mn, qb, kb), np.uint8)
    for q in range(qb):
        for k in range(kb):
            blk = mask[:, :, q * qm:(q + 1) * qm, k * block_n:(k + 1) * block_n]
            s = blk.sum(axis=(2, 3))
            out[:, :, q, k] = np.where(s == 0, VISIBLE, np.where(s == blk.shape[2] * blk.shape[3], MASKED, MIXED))
    return out


def run(sim, mask, B, N, block_m, block_n, mask_rows=8, cores=3, seed=0, sq=37):
    mb, mn, mq, skv = mask.shape
    sq = mq if mq > 1 else sq
    scores = np.random.default_rng(seed).normal(0, 1, (B, N, sq, skv)).astype(np.float32)
    t = np.array([B, N, sq, skv, mb, mn, mq, block_m, block_n, mask_rows], np.uint32)
    summary_bytes = classify(mask, block_m, block_n).size
    dm, ds = sim.device(np.ascontiguousarray(mask, np.uint8)), sim.device(scores)
    dout, dsum = sim.device(scores.nbytes), sim.device(max(32, summary_bytes))
    e = sim.err()
    rc = sim.k.aclfaSimTestMaskTile(dm, ds, dout, dsum, sim.ffi.from_buffer("uint32_t[]", t), cores, e, 4096)
    assert rc == 0, sim.ffi.string(e).decode()
    stats = sim.stats()
    out = sim.host(dout, scores.shape, np.float32)
    summary = sim.host(dsum, (summary_bytes,), np.uint8)
    return scores, out, summary, stats


def mask_of(shape, density, rng):
    return (rng.uniform(size=shape) < density).astype(np.uint8)


SHAPES = [
    # device mask shape, B, N
    ((1, 1, 70, 200), 2, 3),     # [Sq, Skv] shared
    ((2, 1, 70, 200), 2, 3),     # [B, 1, Sq, Skv]
    ((1, 3, 70, 200), 2, 3),     # [1, N, Sq, Skv]
    ((2, 3, 70, 200), 2, 3),     # [B, N, Sq, Skv]
    ((2, 1, 1, 200), 2, 3),      # [B, 1, 1, Skv] key padding
]


@pytest.mark.parametrize("shape,B,N", SHAPES, ids=["SqSkv", "B1SqSkv", "1NSqSkv", "BNSqSkv", "keypad"])
@pytest.mark.parametrize("block_m,block_n", [(32, 64), (16, 128)])
def test_mask_shapes_against_numpy(sim, shape, B, N, block_m, block_n):
    rng = np.random.default_rng(sum(shape) + block_n)
    mask = mask_of(shape, 0.3, rng)
    # Whole blocks of each class: a visible and a masked key block in every mask row.
    mask[..., :block_n] = 0
    mask[..., block_n:2 * block_n] = 1
    scores, out, summary, _ = run(sim, mask, B, N, block_m, block_n)
    np.testing.assert_array_equal(summary, classify(mask, block_m, block_n).ravel())
    full = np.broadcast_to(mask, (B, N, scores.shape[2], shape[3])).astype(bool)
    np.testing.assert_array_equal(out, np.where(full, np.float32(-np.inf), scores))


def test_skipped_blocks_read_nothing(sim):
    """GM reads = the mask once (pre-pass) + scores of the tiles that are not fully masked + mask
    tiles of the mixed ones + one summary byte per tile; a key-padding mask hiding half the keys
    halves the scores read."""
    B, N, sq, skv, bm, bn = 2, 2, 64, 256, 32, 64
    mask = np.zeros((B, 1, 1, skv), np.uint8)
    mask[..., skv // 2:] = 1            # the last two key blocks fully masked
    mask[0, 0, 0, 10] = 1               # one mixed block in batch 0
    tiles = B * N * (sq // bm) * (skv // bn)
    _, out, summary, stats = run(sim, mask, B, N, bm, bn, cores=2, sq=sq)
    summ = classify(mask, bm, bn)
    n_masked = sum(int(summ[b, 0, 0, k] == MASKED) for b in range(B) for k in range(skv // bn)) * N * (sq // bm)
    n_mixed = sum(int(summ[b, 0, 0, k] == MIXED) for b in range(B) for k in range(skv // bn)) * N * (sq // bm)
    assert n_masked == tiles // 2 and n_mixed == N * (sq // bm)
    want = mask.nbytes + (tiles - n_masked) * bm * bn * 4 + n_mixed * bn + tiles
    assert stats.total.gmReadBytes == want


def test_fully_masked_rows_are_all_minus_inf(sim):
    mask = np.zeros((1, 1, 40, 96), np.uint8)
    mask[0, 0, 5, :] = 1
    mask[0, 0, 7:9, :] = 1
    scores, out, _, _ = run(sim, mask, 1, 2, 16, 64, mask_rows=4, cores=1)
    assert np.all(out[:, :, [5, 7, 8], :] == -np.inf)
    np.testing.assert_array_equal(out[:, :, 9:, :], scores[:, :, 9:, :])
