"""The kernel engine's Ascend C APIs against numpy (probe kernel, sizes with tails), and
the two test kernels: results and counters equal to the analytic counts."""
import sys
import pathlib

import numpy as np
import pytest

import simlib  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # bf16 reference unavailable
    ml_dtypes = None


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("n", [8, 37, 1000, 4097])
def test_exp_ln(sim, n):
    x = rng(n).uniform(-20, 20, n).astype(np.float32)
    x[0] = -np.inf
    rc, msg, out = sim.probe(0, x)
    assert rc == 0, msg
    np.testing.assert_allclose(out[:n], np.exp(x), rtol=1e-6)
    assert out[0] == 0.0  # exp(-inf) = 0
    pos = np.abs(x) + 0.5
    rc, msg, out = sim.probe(1, pos)
    np.testing.assert_allclose(out[:n], np.log(pos), rtol=1e-6)


PROBE_EXP, PROBE_UB_UNWRITTEN = 0, 19


def test_ub_a_core_never_wrote_holds_the_poison(sim):
    """Every core finds its UB all 0xFF bytes (docs/simulator.md), also where the core run just
    before on the same host thread wrote, and past what it wrote (the engine refills only the
    bytes earlier cores could have written)."""
    x = rng(5).uniform(-1, 1, 4096).astype(np.float32)
    for written, read in [(4096, 4096), (64, 4096), (4096, 64), (4096, 1000)]:
        rc, msg, out = sim.probe(PROBE_EXP, x[:written])
        assert rc == 0, msg
        assert np.isfinite(out[:written]).all()
        rc, msg, out = sim.probe(PROBE_UB_UNWRITTEN, x[:read])
        assert rc == 0, msg
        assert (out[:read].view(np.uint32) == 0xFFFFFFFF).all(), (written, read)


def ulps_apart(a, b):
    """Distance in representable float32 values (both finite or equal)."""
    def order(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(order(a) - order(b))


def test_exp_is_within_one_ulp_with_its_edges(sim):
    """fp32 Exp (vectorized in the engine) within 1 ulp of e^x correctly rounded, over the whole
    argument range including subnormal results; +-inf, NaN, overflow past
    88.7228 and zero below -103.973 as IEEE exp gives them."""
    x = np.concatenate([np.linspace(-104.0, 89.0, 40001, dtype=np.float32),
                        rng(3).uniform(-1, 1, 4000).astype(np.float32),
                        np.float32([-87.3365, -95.5, -103.9720, -103.9721, 88.7228, 88.7229, 1e-30, -1e-30])])
    got = np.empty_like(x)
    for start in range(0, x.size, 4093):  # chunks of 4093: whole vectors and a tail of 5 lanes
        rc, msg, out = sim.probe(0, x[start:start + 4093])
        assert rc == 0, msg
        got[start:start + 4093] = out[:x[start:start + 4093].size]
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want)
    assert ulps_apart(got[finite], want[finite]).max() <= 1
    assert np.array_equal(got[~finite], want[~finite])          # overflow to +inf
    special = np.float32([-np.inf, np.inf, np.nan, 0.0, -0.0, 100.0, -200.0, 1.0])
    rc, msg, out = sim.probe(0, special)
    assert rc == 0, msg
    assert out[0] == 0.0 and out[1] == np.inf and np.isnan(out[2]) and out[3] == 1.0 and out[4] == 1.0
    assert out[5] == np.inf and out[6] == 0.0 and out[7] == np.float32(np.e)


@pytest.mark.parametrize("n", [5, 64, 333])
def test_max_div(sim, n):
    x = rng(n).uniform(1, 5, n).astype(np.float32)
    _, _, out = sim.probe(2, x)
    np.testing.assert_array_equal(out[:n], np.maximum(x, x[::-1]))
    _, _, out = sim.probe(3, x)
    np.testing.assert_array_equal(out[:n], x / x[::-1])


@pytest.mark.parametrize("n", [16, 1001])
def test_cast_round_to_nearest_even(sim, n):
    x = rng(n).normal(0, 100, n).astype(np.float32)
    x[:4] = [np.float32(1 + 2**-11), np.float32(1 + 3 * 2**-11), 65520.0, -0.0]  # ties and overflow
    _, _, out = sim.probe(4, x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out[:n], x.astype(np.float16).astype(np.float32))
    _, _, out = sim.probe(14, x)  # CAST_ROUND: ties away from zero
    assert out[0] == np.float32(1 + 2**-10) and out[1] == np.float32(1 + 2 * 2**-10)
    if ml_dtypes is not None:
        _, _, out = sim.probe(5, x)
        np.testing.assert_array_equal(out[:n], x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_cast_fp16_round_trip_of_every_half_and_every_tie(sim):
    """fp32 -> fp16 (CAST_RINT) -> fp32 over every finite fp16 value, the midpoints between
    neighbours (ties go to the even one, subnormals included), infinities and NaN: the vectorized
    conversion (eight lanes per instruction) and the scalar tail agree with numpy bit for bit."""
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    finite = finite[np.concatenate(([True], np.diff(finite) != 0))]  # -0 and +0 once
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    with np.errstate(invalid="ignore"):  # the fp16 NaN patterns
        x = np.concatenate([halves.astype(np.float32), mids,
                            np.array([np.inf, -np.inf, np.nan, 65520.0, -65520.0], np.float32)])
    for start in range(0, x.size, 4093):  # chunks of 4093: whole vectors and a scalar tail each
        chunk = x[start:start + 4093]
        rc, msg, out = sim.probe(4, chunk)
        assert rc == 0, msg
        with np.errstate(over="ignore"):
            want = chunk.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(out[:chunk.size].view(np.uint32)[~np.isnan(want)],
                                      want.view(np.uint32)[~np.isnan(want)])
        assert np.isnan(out[:chunk.size][np.isnan(want)]).all()


@pytest.mark.parametrize("n", [7, 64, 1000])
def test_reduce(sim, n):
    x = rng(n).normal(0, 1, n).astype(np.float32)
    _, _, out = sim.probe(6, x, out_elems=8)
    assert out[0] == x.max()
    _, _, out = sim.probe(7, x, out_elems=8)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 3, 17])
def test_whole_reduce(sim, rows):
    x = rng(rows).normal(0, 1, rows * 64).astype(np.float32)
    _, msg, out = sim.probe(8, x, out_elems=(rows + 7) // 8 * 8)
    np.testing.assert_array_equal(out[:rows], x.reshape(rows, 64).max(1))
    _, _, out = sim.probe(9, x, out_elems=(rows + 7) // 8 * 8)
    np.testing.assert_allclose(out[:rows], x.reshape(rows, 64).sum(1), rtol=1e-5, atol=1e-5)


def first_max_bits(row):
    """WholeReduceMax's value of one repeat: the first NaN, else the first of the largest elements
    (so a max of zero keeps the sign of the first zero)."""
    best = row[0]
    for v in row[1:]:
        if np.isnan(best):
            break
        if np.isnan(v) or v > best:
            best = v
    return np.float32(best).view(np.uint32)


def test_whole_reduce_keeps_nan_signed_zero_and_element_order(sim):
    """The value-only fp32 WholeReduceMax / WholeReduceSum (the engine's vectorized paths) give the
    bits of the per-element definition: a row with NaN gives its first NaN, a max of +-0 the first
    zero's sign, all -inf gives -inf; each row's sum is the float32 sum in element order (rows 17:
    two groups of 8 rows and one alone)."""
    rows = 17
    x = rng(5).normal(0, 1, (rows, 64)).astype(np.float32)
    x[0, 5], x[0, 9] = np.float32(np.nan), -np.float32(np.nan)      # first NaN's bits win
    x[1] = -np.inf
    x[2] = -1.0
    x[2, 3], x[2, 40] = -0.0, 0.0                                    # -0 first: -0
    x[3] = -1.0
    x[3, 3], x[3, 40] = 0.0, -0.0                                    # +0 first: +0
    x[4, 63] = np.inf
    x[5, 0] = np.float32(np.nan)                                     # NaN at the first element
    x[6] = 7.0                                                       # all equal
    x[7, :] = x[7, ::-1] * np.float32(1e30)                          # large magnitudes: order-sensitive sums
    x[8, 10] = np.float32(3.4e38)
    x[8, 11] = np.float32(3.4e38)                                    # the sum overflows to inf
    x[9] = 0.0
    x[9, 0] = -0.0                                                   # -0 + 0 + ...: +0 (the sum starts at 0)
    rc, msg, out = sim.probe(8, x.ravel(), out_elems=24)
    assert rc == 0, msg
    want = np.array([first_max_bits(r) for r in x], np.uint32)
    np.testing.assert_array_equal(out[:rows].view(np.uint32), want)
    rc, msg, out = sim.probe(9, x.ravel(), out_elems=24)
    assert rc == 0, msg
    seq = np.zeros(rows, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(64):
            seq = seq + x[:, i]
    np.testing.assert_array_equal(out[:rows].view(np.uint32), seq.view(np.uint32))


@pytest.mark.parametrize("n", [8, 40])
def test_brcb(sim, n):
    x = rng(n).normal(0, 1, n).astype(np.float32)
    rc, msg, out = sim.probe(10, x, out_elems=n * 8)
    assert rc == 0, msg
    np.testing.assert_array_equal(out, np.repeat(x, 8))


@pytest.mark.parametrize("n", [64, 192])
def test_compare_select(sim, n):
    x = rng(n).normal(0, 1, n).astype(np.float32)
    rc, msg, out = sim.probe(11, x, param=0.25)
    assert rc == 0, msg
    np.testing.assert_array_equal(out[:n], np.where(x > 0.25, x, np.float32(0.25)))


@pytest.mark.parametrize("n", [1, 13, 40])
def test_datacopypad_pads_the_block(sim, n):
    x = rng(n).normal(0, 1, n).astype(np.float32)
    rc, msg, out = sim.probe(12, x, param=-7.0)
    assert rc == 0, msg
    na = (n + 7) // 8 * 8
    np.testing.assert_array_equal(out[:n], x)
    assert np.all(out[n:na] == -7.0)


INT_OPS = {"Add": (0, np.add), "Sub": (1, np.subtract), "Mul": (2, np.multiply),
           "Adds": (3, np.add), "Muls": (4, np.multiply)}


def _int_probe(sim, op, dtype, in_place, a, b):
    """PROBE_INT_ARITH: (rc, message, result) of `op` on int arrays a, b (scalar forms use b[0])."""
    code = INT_OPS[op][0] + (8 if dtype == np.int16 else 0) + {False: 0, "a": 16, "b": 32}[in_place]
    words = np.concatenate([a.astype(dtype).view(np.float32), b.astype(dtype).view(np.float32)])
    rc, msg, out = sim.probe(15, words, param=float(code), out_elems=words.size // 2)
    return rc, msg, (out.view(dtype) if out is not None else None)


# Values that keep every result inside the dtype, per (op, dtype): |a|, |b| bounds.
INT_RANGES = {("Add", np.int32): 2**30, ("Sub", np.int32): 2**30, ("Mul", np.int32): 2**15,
              ("Add", np.int16): 2**14, ("Sub", np.int16): 2**14, ("Mul", np.int16): 2**7}


@pytest.mark.parametrize("in_place", [False, "a", "b"], ids=["out", "in-place-src0", "in-place-src1"])
@pytest.mark.parametrize("dtype", [np.int32, np.int16], ids=["i32", "i16"])
@pytest.mark.parametrize("op", list(INT_OPS))
def test_int_arith_values_and_the_first_overflow(sim, op, dtype, in_place):
    # 1096 words: three of the engine's 512-element blocks (int32) with a tail that is not a whole
    # vector; every result in range equals numpy's. In place, Add and Sub write a block in one pass
    # and restore it from the results when it overflowed: the message still names the operands.
    if in_place == "b" and op.endswith("s"):
        pytest.skip("the scalar forms have no second tensor operand")
    per_word = 4 // np.dtype(dtype).itemsize
    count = 1096 * per_word
    bound = INT_RANGES[(op.rstrip("s"), dtype)]
    r = rng(INT_OPS[op][0])
    a = r.integers(-bound + 1, bound, count)
    b = r.integers(-bound + 1, bound, count)
    rc, msg, out = _int_probe(sim, op, dtype, in_place, a, b)
    assert rc == 0, msg
    y = b[0] if op.endswith("s") else b
    np.testing.assert_array_equal(out, INT_OPS[op][1](a, y).astype(dtype))
    # Results outside the dtype at elements 700 and 900 (both past the first block): the
    # violation names the first one's operands and exact result.
    info = np.iinfo(dtype)
    first, second = 700 * per_word // 2 * 2 + 1, 900 * per_word
    scalar_ops = op.endswith("s")
    for at in (first, second):
        if op.startswith("Add"):
            a[at] = info.max
            if not scalar_ops:
                b[at] = 1 + at % 3
        elif op == "Sub":
            a[at], b[at] = info.min, 1 + at % 3
        else:
            a[at] = info.max // 3 + at
            if not scalar_ops:
                b[at] = 4
    if scalar_ops:
        b[0] = 1 if op == "Adds" else 4
    rc, msg, _ = _int_probe(sim, op, dtype, in_place, a, b)
    y = b[0] if scalar_ops else b[first]
    want = int(INT_OPS[op][1](np.int64(a[first]), np.int64(y)))
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert f"rule 'integer overflow' violated on AIV 0 in {op}: {a[first]} and {y} give {want}," in msg, msg


# Mul of two tensors bounds a block by its operands' min and max: pairs at the edge of the
# dtype, where the bound max|x| max|y| does not fit although the product does (the exact check
# must then pass them) or the product itself does not (the most negative value times -1).
MUL_EDGES = [
    (np.int32, -2**31, 1, False), (np.int32, -2**31, -1, True), (np.int32, 46340, -46340, False),
    (np.int32, -46341, 46341, True), (np.int32, 2**16, 2**15 - 1, False), (np.int32, 2**16, 2**15, True),
    (np.int16, -2**15, 1, False), (np.int16, -2**15, -1, True), (np.int16, 181, -181, False),
    (np.int16, -182, 181, True),
]


@pytest.mark.parametrize("in_place", [False, "a", "b"], ids=["out", "in-place-src0", "in-place-src1"])
@pytest.mark.parametrize("dtype, x, y, overflows", MUL_EDGES)
def test_mul_at_the_edge_of_the_dtype(sim, dtype, x, y, overflows, in_place):
    # The pair sits in the second 512-element block among small operands (the first block fits).
    count = 1096 * (4 // np.dtype(dtype).itemsize)
    a = rng(3).integers(-9, 10, count)
    b = rng(4).integers(-9, 10, count)
    at = 600
    a[at], b[at] = x, y
    rc, msg, out = _int_probe(sim, "Mul", dtype, in_place, a, b)
    if overflows:
        assert rc == simlib.AICORE_EXCEPTION, msg
        assert f"rule 'integer overflow' violated on AIV 0 in Mul: {x} and {y} give {x * y}," in msg, msg
    else:
        assert rc == 0, msg
        np.testing.assert_array_equal(out, (a * b).astype(dtype))


SHIFT_TYPES = {np.int32: 0, np.uint32: 1, np.int16: 2, np.uint16: 3}


@pytest.mark.parametrize("dtype", list(SHIFT_TYPES), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("left", [False, True], ids=["right", "left"])
def test_shifts_every_amount(sim, dtype, left):
    # Every amount the unit takes, 0 to the full width: unsigned right shifts are logical, signed
    # ones arithmetic (a full-width shift leaves the sign fill), left shifts drop the top bits.
    bits = np.dtype(dtype).itemsize * 8
    words = 1096
    x = rng(bits + left).integers(0, 2**32, words, dtype=np.uint64).astype(np.uint32)
    x[:4] = [0, 0xFFFFFFFF, 0x80000000, 0x7FFF8001]
    v = x.view(dtype).astype(np.int64)
    for amount in range(bits + 1):
        code = amount + (64 if left else 0) + 128 * SHIFT_TYPES[dtype]
        rc, msg, out = sim.probe(16, x.view(np.float32), param=float(code), out_elems=words)
        assert rc == 0, msg
        if left:
            want = (v << amount) & ((1 << bits) - 1)
        elif np.issubdtype(dtype, np.signedinteger):
            want = v >> min(amount, bits - 1)
        else:
            want = v >> amount
        np.testing.assert_array_equal(out.view(dtype), want.astype(np.uint64).astype(dtype), err_msg=f"amount {amount}")


def _fitting_operands(s, info):
    """[lo, hi]: the x whose product with the scalar s lies in the dtype (every x when s = 0)."""
    lo, hi = info.min, info.max
    if s > 0:
        lo, hi = -(-info.min // s), info.max // s
    elif s < 0:
        lo, hi = -(-info.max // s), info.min // s
    return max(lo, int(info.min)), min(hi, int(info.max))


@pytest.mark.parametrize("in_place", [False, "a"], ids=["out", "in-place"])
@pytest.mark.parametrize("dtype", [np.int32, np.int16], ids=["i32", "i16"])
@pytest.mark.parametrize("scalar", [1, -1, 0, 3, -3, 7, "max", "min"])
def test_muls_range_edges(sim, dtype, in_place, scalar):
    # The engine checks a block of Muls by its operands' min and max against the range that fits:
    # both ends of that range pass exactly, one step past either end is the violation.
    info = np.iinfo(dtype)
    s = {"max": int(info.max), "min": int(info.min)}.get(scalar, scalar)
    lo, hi = _fitting_operands(s, info)
    count = 1096 * (4 // np.dtype(dtype).itemsize)
    a = rng(abs(s) % 1000).integers(lo, hi, count, endpoint=True)
    a[5], a[600] = lo, hi
    b = np.full(count, s)
    rc, msg, out = _int_probe(sim, "Muls", dtype, in_place, a, b)
    assert rc == 0, msg
    np.testing.assert_array_equal(out, (a * s).astype(dtype))
    for past in (hi + 1, lo - 1):
        if not info.min <= past <= info.max:
            continue  # every operand fits on this side (s = 0, 1; -1 has one side)
        a[700] = past
        rc, msg, _ = _int_probe(sim, "Muls", dtype, in_place, a, b)
        assert rc == simlib.AICORE_EXCEPTION, msg
        assert f"in Muls: {past} and {s} give {past * s}," in msg, msg
        a[700] = lo


def test_duplicate_maxs(sim):
    x = rng(3).normal(0, 1, 100).astype(np.float32)
    _, _, out = sim.probe(13, x, param=0.1)
    np.testing.assert_array_equal(out[:100], np.maximum(x, np.float32(0.1)))


# ---- test kernel 1: tiled vector op, double-buffered, several cores ----
@pytest.mark.parametrize("cores,tile,tiles", [(1, 64, 1), (4, 256, 3), (7, 1024, 5)])
def test_vec_scale_add(sim, cores, tile, tiles):
    total = cores * tile * tiles
    x = rng(1).normal(0, 1, total).astype(np.float32)
    y = rng(2).normal(0, 1, total).astype(np.float32)
    dx, dy, dz = sim.device(x), sim.device(y), sim.device(total * 4)
    e = sim.err()
    rc = sim.k.aclfaSimTestVecScaleAdd(dx, dy, dz, tile, tiles, 0.5, cores, e, 4096)
    assert rc == 0, sim.ffi.string(e)
    np.testing.assert_array_equal(sim.host(dz, (total,), np.float32), (x + y) * np.float32(0.5))
    s = sim.stats()
    assert (s.blockDim, s.kernelType, s.aicUsed, s.aivUsed) == (cores, 0, 0, cores)
    for c in range(cores):
        a = s.aiv[c]
        assert a.gmReadBytes == 2 * tile * tiles * 4
        assert a.gmWriteBytes == tile * tiles * 4
        assert a.vectorElems == 2 * tile * tiles
        assert a.scalarAccesses == 0 and a.cubeMacs == 0
        assert a.ubHighWater == 3 * 2 * tile * 4
    assert s.total.gmReadBytes == 2 * total * 4 and s.total.vectorElems == 2 * total


# ---- test kernel 2: Matmul + row softmax, MIX AIC:AIV 1:2 ----
def align(v, a):
    return (v + a - 1) // a * a


@pytest.mark.parametrize("m,n,k,rows,blocks", [(16, 64, 64, 8, 1), (97, 128, 96, 16, 4), (200, 40, 48, 32, 4)])
def test_mm_softmax(sim, m, n, k, rows, blocks):
    a = rng(4).normal(0, 0.5, (m, k)).astype(np.float16)
    b = rng(5).normal(0, 0.5, (n, k)).astype(np.float16)
    da, db, dout = sim.device(a), sim.device(b), sim.device(m * n * 4)
    aivs = 2 * blocks
    assert aivs * rows >= m
    ws = sim.device(simlib.SYS_WORKSPACE + aivs * rows * n * 4)
    cube = np.array([64, 128, 64, 1, 1, 2, 2, 2, 2, 2, 2, 1], np.int32)  # baseM..dbL0C
    e = sim.err()
    rc = sim.k.aclfaSimTestMmSoftmax(da, db, dout, ws, m, n, k, rows, blocks, sim.ffi.from_buffer("int32_t[]", cube), e, 4096)
    assert rc == 0, sim.ffi.string(e)
    s_ref = a.astype(np.float64) @ b.astype(np.float64).T
    p = np.exp(s_ref - s_ref.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(sim.host(dout, (m, n), np.float32), p, rtol=2e-5, atol=1e-6)

    st = sim.stats()
    assert (st.aicUsed, st.aivUsed, st.kernelType) == (blocks, aivs, 5)
    for c in range(blocks):
        macs = rd = wr = 0
        for v in (2 * c, 2 * c + 1):
            r = max(0, min(rows, m - v * rows))
            if r:
                macs += align(r, 16) * align(n, 16) * align(k, 16)
                rd += r * k * 2 * -(-n // 128) + k * n * 2 * -(-r // 64)
                wr += r * n * 4
        aic = st.aic[c]
        assert (aic.cubeMacs, aic.gmReadBytes, aic.gmWriteBytes) == (macs, rd, wr)
        assert aic.l1HighWater == 2 * 64 * 64 * 2 + 2 * 64 * 128 * 2
        assert aic.vectorElems == 0 and aic.ubHighWater == 0
    for v in range(aivs):
        r = max(0, min(rows, m - v * rows))
        aiv = st.aiv[v]
        assert aiv.vectorElems == 5 * n * r
        assert aiv.scalarAccesses == 2 * r
        assert (aiv.gmReadBytes, aiv.gmWriteBytes) == (r * n * 4, r * n * 4)
        assert aiv.cubeMacs == 0


def test_gm_trace_records_ranges_in_order(sim):
    x = np.arange(64, dtype=np.float32)
    dx, dy, dz = sim.device(x), sim.device(x), sim.device(256)
    assert sim.engine.aclfaSimSetGmTrace(1) == 0
    e = sim.err()
    assert sim.k.aclfaSimTestVecScaleAdd(dx, dy, dz, 64, 1, 1.0, 1, e, 4096) == 0
    recs, cnt = sim.ffi.new("aclfaSimGmAccess **"), sim.ffi.new("uint64_t *")
    sim.engine.aclfaSimGetGmTrace(recs, cnt)
    got = [(recs[0][i].addr, recs[0][i].bytes, recs[0][i].isWrite) for i in range(cnt[0])]
    addr = lambda p: int(sim.ffi.cast("uintptr_t", p))
    assert got == [(addr(dx), 256, 0), (addr(dy), 256, 0), (addr(dz), 256, 1)]
    sim.engine.aclfaSimSetGmTrace(0)


CUBE_TILING = np.array([64, 128, 64, 1, 1, 2, 2, 2, 2, 2, 2, 1], np.int32)  # baseM..dbL0C, fits 910B


# (baseK, stepKa, stepKb, depthA1, depthB1, B loads) for A [256, 128] . B [128, 128]^T with
# baseM = baseN = 128 and iterateOrder 0 (ORDER_M): two M blocks share every B tile of the N
# column. The Norm template caches B's K tiles when depthB1 >= K tiles x stepN, except one K tile
# in two buffers (M double buffering): asc-devkit cube_in_buffer_normal.h CubeInBuffer::Init.
@pytest.mark.parametrize("base_k, step_ka, step_kb, depth_a1, depth_b1, b_loads", [
    (64, 2, 2, 2, 2, 1),    # K in 2 tiles, both cached: B once for both M blocks
    (64, 2, 1, 2, 2, 1),    # 2 K tiles, 1 per step, 2 buffers: still all of K cached
    (32, 2, 1, 2, 2, 2),    # 4 K tiles, 2 buffers: streamed, once per M block
    (128, 1, 1, 2, 2, 2),   # 1 K tile double-buffered along M: no cache
    (128, 1, 1, 2, 1, 1),   # 1 K tile, one buffer: cached
])
def test_matmul_loads_b_once_when_its_k_tiles_are_cached(sim, base_k, step_ka, step_kb, depth_a1, depth_b1, b_loads):
    m, n, k = 256, 128, 128
    r = rng(7)
    a = r.normal(0, 1, (m, k)).astype(np.float16)
    b = r.normal(0, 1, (n, k)).astype(np.float16)
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 4)
    ws = sim.device(simlib.SYS_WORKSPACE)
    cube = np.array([128, 128, base_k, 1, 1, step_ka, step_kb, depth_a1, depth_b1, 2, 2, 1], np.int32)
    e = sim.err()
    rc = sim.k.aclfaSimTestMatmul(da, db, dc, ws, m, n, k, m, 1, sim.ffi.from_buffer("int32_t[]", cube), e, 4096)
    assert rc == 0, sim.ffi.string(e)
    np.testing.assert_allclose(sim.host(dc, (m, n), np.float32), a.astype(np.float32) @ b.astype(np.float32).T,
                               rtol=1e-3, atol=1e-2)
    assert sim.stats().aic[0].gmReadBytes == m * k * 2 + b_loads * n * k * 2  # A once: one N block
    sim.free_all()


@pytest.mark.parametrize("m,n,k", [(16, 16, 128), (13, 20, 37), (64, 96, 256), (7, 9, 8)])
def test_matmul_sums_each_element_in_k_order(sim, m, n, k):
    """fp16 A . B^T -> fp32 C through the Matmul API (matmul_only, B transposed; one AIV takes all
    rows) equals, bit for bit, each element summed from 0 in k order in float32 (a product of two
    fp16 values is exact in float32, so that is also the fused multiply-add chain): whatever the
    GEMM packs or reads in place -- small tiles read A in place and transpose B in 8 x 8 blocks
    with edges, (64, 96, 256) packs A -- the order of the additions is the same (k <= 256: one
    K panel)."""
    r = rng(m * n + k)
    a = r.normal(0, 1, (m, k)).astype(np.float16)
    b = r.normal(0, 1, (n, k)).astype(np.float16)
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 4)
    ws = sim.device(simlib.SYS_WORKSPACE)
    e = sim.err()
    rc = sim.k.aclfaSimTestMatmul(da, db, dc, ws, m, n, k, m, 1, sim.ffi.from_buffer("int32_t[]", CUBE_TILING),
                                  e, 4096)
    assert rc == 0, sim.ffi.string(e)
    c = sim.host(dc, (m, n), np.float32)
    want = np.zeros((m, n), np.float32)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for p in range(k):
        want = want + af[:, p:p + 1] * bf[:, p][None, :]
    np.testing.assert_array_equal(c.view(np.uint32), want.view(np.uint32))
    sim.free_all()


def _int8_operands(m, n, k, seed):
    r = rng(seed)
    return (r.integers(-127, 128, (m, k)).astype(np.int8), r.integers(-127, 128, (n, k)).astype(np.int8))


def test_matmul_dequantizes_int8_to_half_with_the_cut_scale(sim):
    """int8 A . B^T with a half C and SetQuantScalar (FixPipe DEQF16, asc-devkit SetQuantScalar.md):
    each exact int32 sum leaves as half(sum * scale) in fp32, where scale keeps only the top 19 bits
    of the fp32 the quant scalar carries (scale & 0xFFFFE000) -- bit for bit; and the cut matters
    (the uncut scale gives other halves for some elements)."""
    m, n, k = 64, 128, 128
    a, b = _int8_operands(m, n, k, 31)
    scale = np.float32(0.0123456)
    bits = int(scale.view(np.uint32))
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 2)
    ws = sim.device(simlib.SYS_WORKSPACE)
    e = sim.err()
    rc = sim.k.aclfaSimTestMatmulDequant(da, db, dc, ws, m, n, k, bits | 1 << 46, sim.ffi.from_buffer("int32_t[]", CUBE_TILING),
                                         e, 4096)
    assert rc == 0, sim.ffi.string(e)
    got = sim.host(dc, (m, n), np.float16)
    sums = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.float32)
    cut = np.uint32(bits & 0xFFFFE000).view(np.float32)
    np.testing.assert_array_equal(got.view(np.uint16), (sums * cut).astype(np.float16).view(np.uint16))
    assert np.any((sums * scale).astype(np.float16) != got), "the 19-bit cut left every element unchanged"
    sim.free_all()


def test_int8_matmul_with_a_half_c_needs_set_quant_scalar(sim):
    """Without SetQuantScalar an int8 matmul into a half C has no dequantization scale: refused."""
    m, n, k = 64, 128, 128
    a, b = _int8_operands(m, n, k, 32)
    da, db, dc = sim.device(a), sim.device(b), sim.device(m * n * 2)
    ws = sim.device(simlib.SYS_WORKSPACE)
    e = sim.err()
    rc = sim.k.aclfaSimTestMatmulDequant(da, db, dc, ws, m, n, k, 0, sim.ffi.from_buffer("int32_t[]", CUBE_TILING),
                                         e, 4096)
    assert rc != 0
    assert "SetQuantScalar" in sim.ffi.string(e).decode()
    sim.free_all()
