"""acl_fa/spec/philox.py against Random123's published known-answer vectors, and the dropout keep
mask's key scheme (docs/attention_options.md#dropout)."""
import numpy as np
import pytest

from acl_fa.spec.philox import dropout_threshold, keep_mask, philox4x32, philox_bytes, quantized_keep_prob

# (rounds, counter words, key words, expected output words), hex as published.
# The first three: Random123 tests/kat_vectors, "philox4x32 10" lines (DEShawResearch/random123).
# The others: the kat_vectors of the Random123 manual's examples (girving/random123-manual,
# examples/kat_vectors), including 7-round lines, which check the round count is honoured.
KAT = [
    (10, "00000000 00000000 00000000 00000000", "00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    (10, "ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    (10, "243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1"),
    (10, "00000001 00000000 00000000 00000000", "00000001 00000000", "ac08141b dfc5ccbe 79c07a47 a7f66093"),
    (10, "00000000 00000000 00000000 80000000", "00000000 00000001", "0436a39b 31be9efa 6abd0c76 e7a68f83"),
    (10, "243f6a88 85a308d3 13198a2e 03707344", "00000000 80000000", "63675d2c 422d7c4d 3145d30d 3bce33a4"),
    (10, "452821e6 38d01377 be5466cf 34e90c6c", "00000000 ffffffff", "72ce44b3 b44f9b78 49af0267 726813ac"),
    (7, "00000001 00000000 00000000 00000000", "00000001 00000000", "6b3257c3 820c5486 4de08b66 8771d665"),
    (7, "a4093822 299f31d0 082efa98 ec4e6c89", "00000000 00000001", "13818be6 633e77bb 6d135b5b a3b20aa0"),
]


def _words(text):
    return [int(w, 16) for w in text.split()]


@pytest.mark.parametrize("rounds,counter,key,expected", KAT, ids=[f"r{r}-{c[:8]}-{k[:8]}" for r, c, k, _ in KAT])
def test_known_answer_vectors(rounds, counter, key, expected):
    got = philox4x32(np.array(_words(counter)), _words(key), rounds=rounds)
    assert [f"{w:08x}" for w in got] == expected.split()


def test_vectorized_over_counters_equals_one_at_a_time():
    counters = np.array([_words(c) for _, c, _, _ in KAT[:3]] * 2, dtype=np.uint64).reshape(2, 3, 4)
    key = (0x12345678, 0x9ABCDEF0)
    whole = philox4x32(counters, key)
    assert whole.shape == (2, 3, 4) and whole.dtype == np.uint32
    for idx in np.ndindex(2, 3):
        assert (whole[idx] == philox4x32(counters[idx], key)).all()


def test_philox_bytes_are_the_little_endian_image_of_the_words():
    words = philox4x32(np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), (9, 10))
    assert (philox_bytes(words) == words.astype("<u4").view(np.uint8).reshape(2, 16)).all()
    assert list(philox_bytes(np.array([0x04030201, 0x08070605, 0x0C0B0A09, 0x100F0E0D], np.uint32))) == list(
        range(1, 17))


@pytest.mark.parametrize("keep_prob,threshold", [
    (1.0, 0),
    (0.5, 128),
    (0.9, 26),        # (1 - float32 0.9) * 256 = 25.6000...: 230 of 256 draws keep
    (0.8, 51),        # 51.19999 rounds down
    (0.75, 64),
    (1 - 0.5 / 256, 1),  # exactly half a level: rounds half up
    (0.001, 256),     # 255.744: keeps no draw
    (0.0, 256),
])
def test_dropout_threshold(keep_prob, threshold):
    assert dropout_threshold(keep_prob) == threshold
    assert quantized_keep_prob(keep_prob) == (256 - threshold) / 256
    assert abs(quantized_keep_prob(keep_prob) - float(np.float32(keep_prob))) <= 1 / 512


def test_keep_mask_follows_the_key_scheme():
    seed, offset, b, n, heads, sq, skv = 0x0123456789ABCDEF, 2**64 - 3, 1, 2, 3, 5, 37
    mask = keep_mask(seed, offset, b, n, heads, sq, skv, 0.8)
    stream = (offset + b * heads + n) % 2**64  # wraps past 2^64
    thr = dropout_threshold(0.8)
    for i in range(sq):
        for j in range(skv):
            word = philox4x32(np.array([j >> 4, i, stream & 0xFFFFFFFF, stream >> 32]),
                              (seed & 0xFFFFFFFF, seed >> 32))[(j >> 2) & 3]
            draw = (int(word) >> (8 * (j & 3))) & 0xFF
            assert mask[i, j] == (draw >= thr)


def test_keep_mask_rows_and_cols():
    full = keep_mask(7, 0, 0, 0, 1, 64, 200, 0.75)
    assert (keep_mask(7, 0, 0, 0, 1, 64, 200, 0.75, rows=slice(10, 30)) == full[10:30]).all()
    for cols in (slice(5, 6), slice(3, 130), slice(16, 32), slice(8, 12), slice(197, 200), slice(50, 50)):
        assert (keep_mask(7, 0, 0, 0, 1, 64, 200, 0.75, rows=slice(1, 9), cols=cols) == full[1:9, cols]).all()
    assert keep_mask(7, 0, 0, 0, 1, 8, 9, 1.0).all()
    assert not keep_mask(7, 0, 0, 0, 1, 8, 40, 0.0005).any()  # threshold 256
    # different heads and offsets draw different masks; the same key draws the same
    assert (keep_mask(7, 0, 0, 1, 2, 64, 200, 0.75) != full).any()
    assert (keep_mask(7, 1, 0, 0, 2, 64, 200, 0.75) == keep_mask(7, 0, 0, 1, 2, 64, 200, 0.75)).all()


@pytest.mark.parametrize("keep_prob", [0.9, 0.8, 0.5, 0.3])
def test_keep_rate_is_the_quantized_keep_prob(keep_prob):
    # 2^20 draws: the rate's standard deviation is <= 0.5 / 1024, so the 5-sigma bound 0.0025 fails
    # a threshold one level off (its rate is 1/256 = 0.0039 away).
    mask = keep_mask(2024, 11, 0, 0, 1, 1024, 1024, keep_prob)
    assert abs(mask.mean() - quantized_keep_prob(keep_prob)) < 0.0025
