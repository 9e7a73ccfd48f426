"""Philox4x32-10 in numpy, and the dropout keep mask the kernels draw from it.

An independent host implementation of the counter-based generator of Salmon et al., "Parallel
Random Numbers: As Easy as 1, 2, 3" (SC'11), with Random123's constants and key schedule,
vectorized over counters with uint64 products of uint32 words. It is checked against Random123's
published known-answer vectors (tests/spec/test_philox.py; sources in docs/attention_options.md), and
the reference attention (acl_fa/reference/attention.py) draws its dropout from it, so the kernels' keep
masks are compared bit for bit with this file, never with themselves.

Key scheme of the dropout (docs/attention_options.md#dropout): one Philox call decides 16
elements with 8-bit draws, as flash-attn's CUDA kernels do.
    key     = (seed mod 2^32, seed >> 32)
    counter = (j >> 4, i, low and high words of (offset + b*N + n) mod 2^64)
    u(i, j) = byte (j & 15) of philox(counter, key), the output words little endian:
              (word[(j >> 2) & 3] >> (8 * (j & 3))) & 0xFF
    keep(i, j) iff u >= dropout_threshold(keep_prob)            (threshold in [0, 256])
The keep probability is thereby quantized to multiples of 1/256 (quantized_keep_prob); kept
values are still scaled by 1/keep_prob, so E[dropout(P)] = P * quantized / keep_prob, a relative
bias of at most 1/(512 keep_prob) (docs/attention_options.md#dropout).
"""

from __future__ import annotations

import numpy as np

__all__ = ["philox4x32", "philox_bytes", "dropout_threshold", "quantized_keep_prob", "keep_mask",
          "ELEMENTS_PER_COUNTER", "M0", "M1", "W0", "W1", "ROUNDS"]

# Random123 philox.h: PHILOX_M4x32_0/1 (round multipliers) and PHILOX_W32_0/1 (Weyl key bumps).
M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9
W1 = 0xBB67AE85
ROUNDS = 10
ELEMENTS_PER_COUNTER = 16  # 8-bit draws per 128-bit Philox output
DRAW_LEVELS = 256          # values of one 8-bit draw

_U32 = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)


def _mulhilo(m: int, x: np.ndarray) -> tuple:
    """(high, low) 32-bit words of the 64-bit product m * x, x uint64 holding uint32 values."""
    product = np.uint64(m) * x
    return product >> _SHIFT, product & _U32


def philox4x32(counter, key, rounds: int = ROUNDS) -> np.ndarray:
    """Philox4x32-`rounds` of every counter under one key.

    counter: integer array [..., 4] of uint32 words (c0, c1, c2, c3); key: (k0, k1) uint32.
    Returns uint32 [..., 4], the output words in Random123's order."""
    c = np.asarray(counter, dtype=np.uint64)
    if c.shape[-1:] != (4,):
        raise ValueError(f"counter must end in a dimension of 4 words, got shape {c.shape}")
    c0, c1, c2, c3 = (c[..., w] & _U32 for w in range(4))
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for r in range(rounds):
        if r:  # Random123 bumps the key before every round but the first
            k0 = (k0 + W0) & 0xFFFFFFFF
            k1 = (k1 + W1) & 0xFFFFFFFF
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def philox_bytes(words: np.ndarray) -> np.ndarray:
    """The 16 bytes of each 128-bit Philox output, uint32 [..., 4] -> uint8 [..., 16]: byte 4w + k is
    bits [8k, 8k + 8) of word w (the words' little-endian memory image, flash-attn's uint4 -> uint8[16])."""
    w = np.ascontiguousarray(words, dtype=np.uint32)
    shifts = np.arange(4, dtype=np.uint32) * np.uint32(8)
    return ((w[..., :, None] >> shifts) & np.uint32(0xFF)).astype(np.uint8).reshape(*w.shape[:-1], 16)


def dropout_threshold(keep_prob: float) -> int:
    """The 8-bit draw an element needs to be kept (keep iff draw >= threshold), in [0, 256]:
    floor((1 - keep_prob) * 256 + 1/2) in double from the float32 keep_prob (round half up), as
    op_host computes it for the tiling. keep_prob 1 gives 0 (every draw keeps); 256 keeps nothing."""
    p = 1.0 - float(np.float32(keep_prob))
    return int(np.floor(p * DRAW_LEVELS + 0.5))


def quantized_keep_prob(keep_prob: float) -> float:
    """The probability an element is actually kept: (256 - dropout_threshold(keep_prob)) / 256, within
    1/512 of keep_prob (kept values are scaled by 1/keep_prob, not by this)."""
    return (DRAW_LEVELS - dropout_threshold(keep_prob)) / DRAW_LEVELS


def keep_mask(seed: int, offset: int, b: int, n: int, N: int, Sq: int, Skv: int, keep_prob: float,
              rows=None, cols=None) -> np.ndarray:
    """The dropout keep mask of query head n of batch b (varlen: sequence b): bool [Sq, Skv],
    True = kept, or only the query rows `rows` and key columns `cols` (slices of range(Sq) and
    range(Skv)) so callers can go in chunks and skip keys outside a band.

    seed, offset: uint64; N: query heads. Element (i, j) is kept iff byte j & 15 (philox_bytes) of
    philox4x32((j >> 4, i, lo, hi), (seed lo, seed hi)) >= dropout_threshold(keep_prob), where
    (hi:lo) = (offset + b*N + n) mod 2^64."""
    rows = slice(0, Sq) if rows is None else rows
    start, stop, _ = (slice(0, Skv) if cols is None else cols).indices(Skv)
    stop = max(start, stop)
    row_ids = np.arange(Sq, dtype=np.uint64)[rows]
    stream = (int(offset) + int(b) * int(N) + int(n)) % (1 << 64)
    per = ELEMENTS_PER_COUNTER
    first, groups = start // per, -(-stop // per) - start // per
    counter = np.empty((row_ids.size, groups, 4), dtype=np.uint64)
    counter[..., 0] = np.arange(first, first + groups, dtype=np.uint64)[None, :]
    counter[..., 1] = row_ids[:, None]
    counter[..., 2] = stream & 0xFFFFFFFF
    counter[..., 3] = stream >> 32
    seed = int(seed)
    draws = philox_bytes(philox4x32(counter, (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)))
    draws = draws.reshape(row_ids.size, groups * per)[:, start - per * first:stop - per * first]
    return draws.astype(np.int32) >= dropout_threshold(keep_prob)
