"""FlashAttentionV4's high-performance precision (precision="high_performance", inner_precise 1).

S = Q.K^T leaves the cube rounded to the input dtype (float16 / bfloat16) instead of float32;
each AIV casts its rows back to float32 and runs the same softmax. The result is that of S
rounded to the input dtype, which is what the same-precision naive attention of the accuracy
rule computes (acl_fa/reference/accuracy.py), so the rule applies unchanged: the error against
the float64 reference at most twice the naive one's (docs/attention_options.md).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from acl_fa.jobs.measure import measure
from acl_fa.jobs.run import random_inputs
from acl_fa.ops import forward_v2 as attention_v2, opcall
from acl_fa.plan import timing
from acl_fa.reference.accuracy import ULP, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.runtime import sim_stats
from acl_fa.runtime.errors import InvalidArgumentError, InvalidTypeError
from acl_fa.spec.layouts import shape_of, to_bnsd
from acl_fa.spec.options import build_options
from acl_fa.spec.problem import problem_from_sizes

HP = "high_performance"

# (b, n, nkv, sq, skv, d, dtype, layout, causal, window, blocks)
CASES = [
    (1, 2, 2, 300, 300, 64, "float16", "BNSD", False, None, None),
    (1, 2, 2, 257, 257, 128, "float16", "BNSD", True, None, None),
    (2, 4, 2, 97, 203, 64, "float16", "BSND", True, None, None),     # GQA, Sq != Skv, tails
    (1, 2, 1, 1023, 1023, 128, "bfloat16", "BSH", True, None, None),
    (1, 2, 2, 384, 384, 64, "float16", "BNSD", False, (64, 32), None),
    (1, 2, 2, 512, 512, 128, "float16", "BNSD", True, None, (128, 384)),  # several row chunks per AIV
    # The half softmax's masked tiles (blockN a multiple of 128): Sq > Skv causal, whose first
    # 144 rows see no key at all (the shift's floor: O 0, LSE -inf), and a window whose rows
    # meet tiles where they have seen no key yet and see none.
    (1, 2, 2, 400, 256, 64, "float16", "BNSD", True, None, (64, 128)),
    (1, 2, 2, 512, 512, 128, "float16", "BNSD", False, (100, 0), (64, 256)),
]


def _case_id(case) -> str:
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, blocks = case
    return (f"{dtype}-{layout}-b{b}n{n}kv{nkv}-{sq}x{skv}-d{d}{'-causal' if causal else ''}"
            f"{f'-w{window[0]}_{window[1]}' if window else ''}{f'-{blocks[0]}x{blocks[1]}' if blocks else ''}")


def _inputs(case, seed=0):
    b, n, nkv, sq, skv, d, dtype, layout = case[:8]
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    q = (3 * rng.standard_normal(shape_of(layout, b, n, sq, d))).astype(np_dtype)
    k = (3 * rng.standard_normal(shape_of(layout, b, nkv, skv, d))).astype(np_dtype)
    v = rng.standard_normal(shape_of(layout, b, nkv, skv, d)).astype(np_dtype)
    return q, k, v


def _call(session, case, q, k, v, **extra):
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, blocks = case
    bm, bn = blocks or (None, None)
    return session.flash_attention(q, k, v, causal=causal, window=window, layout=layout, num_heads=n,
                                   num_kv_heads=nkv, block_m=bm, block_n=bn, return_lse=True, **extra)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_the_same_precision_rule(session, case):
    """The error against the float64 reference is within 2x the naive attention's in the input
    dtype (scores rounded to it), as the default's is."""
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, _ = case
    q, k, v = _inputs(case)
    out, lse = _call(session, case, q, k, v, precision=HP)
    kw = dict(layout=layout, num_heads=n, num_kv_heads=nkv, causal=causal, window=window)
    ref, ref_lse = attention_reference(q, k, v, **kw)
    scale = 1.0 / np.sqrt(d)
    naive = naive_same_precision(q, k, v, np.float16 if dtype == "float16" else ml_dtypes.bfloat16, scale=scale,
                                 heads=list(range(n)), **kw)
    ref_b = to_bnsd(ref, layout, n)
    err = np.abs(to_bnsd(out, layout, n).astype(np.float64) - ref_b).max()
    naive_err = np.abs(naive - ref_b).max()
    tol = max(2 * naive_err, ULP[dtype] * max(1.0, np.abs(ref_b).max()))
    assert err <= tol, f"max error {err:.3g} > tolerance {tol:.3g} (naive {naive_err:.3g})"
    finite = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    # The LSE comes from S rounded to the dtype: within a few units of its rounding of |S * scale|.
    s_max = float(np.abs(q.astype(np.float32)).max() * np.abs(k.astype(np.float32)).max() * d * scale)
    assert np.abs(lse[finite] - ref_lse[finite]).max() <= 4 * ULP[dtype] * max(1.0, s_max)


def test_default_precision_is_the_plain_call(session):
    """precision="high_precision" (the default) runs the entry the call ran before, bit for bit."""
    case = CASES[1]
    q, k, v = _inputs(case)
    plain = _call(session, case, q, k, v)
    plain_stats = sim_stats.last_launch(session.backend)
    explicit = _call(session, case, q, k, v, precision="high_precision")
    explicit_stats = sim_stats.last_launch(session.backend)
    assert explicit_stats["kernel"] == plain_stats["kernel"] == "flash_attention"
    assert np.array_equal(plain[0], explicit[0]) and np.array_equal(plain[1], explicit[1])


def test_counted_work_halves_the_score_bytes(session, sim_only):
    """The same cube MACs; the workspace's S writes (FixPipe) and reads (AIVs) in 2 bytes instead
    of 4: the launch moves exactly half of S's bytes less."""
    q, k, v = _inputs((1, 2, 2, 512, 512, 128, "float16", "BNSD"))
    session.flash_attention(q, k, v, block_m=128, block_n=256)  # float32 S
    default = sim_stats.last_launch(session.backend)
    session.flash_attention(q, k, v, block_m=128, block_n=256, precision=HP)
    fast = sim_stats.last_launch(session.backend)
    assert default["kernel"] == "flash_attention" and fast["kernel"] == "flash_attention_v4"
    assert fast["cube_macs"] == default["cube_macs"]
    s_elems = 2 * 512 * 512  # heads x Sq x Skv: every score once out of L0C and once into UB
    assert default["gm_write_bytes"] - fast["gm_write_bytes"] == 2 * s_elems
    assert default["gm_read_bytes"] - fast["gm_read_bytes"] == 2 * s_elems


def test_no_pipe_race(session, sim_only):
    """The race rule over the high-performance path: several chunks per AIV, a causal diagonal,
    and a mask whose hidden blocks make consecutive computed blocks share a slot."""
    case = CASES[-1]
    q, k, v = _inputs(case)
    with timing.op_trace(session.backend, races=True):
        _call(session, case, q, k, v, precision=HP)
    assert timing.last_model(session.backend).races_checked
    rng = np.random.default_rng(21)
    q, k, v = (rng.standard_normal((1, 2, s, 64)).astype(np.float16) for s in (96, 448, 448))
    mask = np.zeros((1, 1, 1, 448), dtype=bool)
    for block in (0, 2, 5, 6):
        mask[..., block * 64:(block + 1) * 64] = True  # True = visible: computed blocks 0 and 2 share a slot
    with timing.op_trace(session.backend, races=True):
        session.flash_attention(q, k, v, attn_mask=mask, block_m=32, block_n=64, precision=HP)
    assert timing.last_model(session.backend).races_checked


def test_modeled_time_is_shorter(session, sim_only):
    """Fewer GM bytes and a shorter FixPipe stage for QK: the modeled launch is faster (modeled,
    not a measurement; bench/RESULTS.md records the figures)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 8, 2048, 128)).astype(np.float16) for _ in range(3))
    seconds = {}
    for precision in ("high_precision", HP):
        with timing.op_trace(session.backend):
            session.flash_attention(q, k, v, precision=precision)
        seconds[precision] = timing.last_model(session.backend).seconds
    assert seconds[HP] < seconds["high_precision"]


@pytest.mark.parametrize("precision, error, message", [
    ("fast", InvalidArgumentError, "precision must be one of high_precision, high_performance; got 'fast'"),
    (1, InvalidTypeError, "precision must be a str"),
])
def test_bad_precision_is_refused(session, precision, error, message):
    q, k, v = _inputs(CASES[0])
    with pytest.raises(error, match=message):
        session.flash_attention(q, k, v, precision=precision)


def test_float32_is_refused(session):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 64, 64)).astype(np.float32) for _ in range(3))
    with pytest.raises(InvalidArgumentError, match="precision='high_performance' needs float16 or bfloat16 inputs"):
        session.flash_attention(q, k, v, precision=HP)


def test_float16_softmax_takes_fewer_vector_cycles(session, sim_only):
    """float16: fully visible chunks are softmaxed in half (no Cast of S to fp32, 128 elements per
    repeat); bfloat16, which has no vector arithmetic on A2, keeps the fp32 softmax of the cast S.
    Same shape and plan: the AIVs' vector pipe is busy far fewer cycles with float16 (modeled)."""
    rng = np.random.default_rng(5)
    busy = {}
    for dtype in (np.float16, ml_dtypes.bfloat16):
        q, k, v = (rng.standard_normal((1, 2, 512, 128)).astype(dtype) for _ in range(3))
        with timing.op_trace(session.backend):
            session.flash_attention(q, k, v, block_m=128, block_n=256, precision=HP)
        model = timing.last_model(session.backend)
        busy[np.dtype(dtype).name] = model.aiv_busy[:, timing.PIPES.index("V")].sum()
    assert busy["float16"] < 0.8 * busy["bfloat16"], busy


def test_float16_softmax_takes_the_causal_diagonal(session, sim_only):
    """The causal diagonal's tiles are softmaxed in half too (masked in half), not cast to fp32:
    with one item per head whose one block the diagonal cuts, float16's vector pipe is busy far
    fewer cycles than bfloat16's, which casts every tile (modeled)."""
    rng = np.random.default_rng(6)
    busy = {}
    for dtype in (np.float16, ml_dtypes.bfloat16):
        q, k, v = (rng.standard_normal((1, 2, 256, 128)).astype(dtype) for _ in range(3))
        with timing.op_trace(session.backend):
            session.flash_attention(q, k, v, causal=True, block_m=256, block_n=256, precision=HP)
        model = timing.last_model(session.backend)
        busy[np.dtype(dtype).name] = model.aiv_busy[:, timing.PIPES.index("V")].sum()
    assert busy["float16"] < 0.8 * busy["bfloat16"], busy


def test_workspace_slots_hold_s_in_the_input_dtype(session, sim_only):
    """The S slots of each used AI Core group hold S as the cube writes it: 2 x [blockM, blockN]
    float16 in this precision, half the default's fp32 slots (the P.V slots stay fp32): the
    workspace phase 1 asks for is that much smaller (#33 friction 10)."""
    problem = problem_from_sizes(seq_q=512, num_heads=2, head_dim=128, block_m=128, block_n=256)
    q, k, v = random_inputs(problem)
    asked = {}
    for precision in ("high_precision", HP):
        options, _ = build_options(scores=problem.score_grid, precision=precision)
        m = measure(session, attention_v2.V2Call(problem, options), q, k, v, None, warmup=0, iters=1,
                    download=False, runner=opcall.runner_for(session, attention_v2.op_for(options)),
                    check=attention_v2.check_v2_plan)
        asked[precision] = m.device_bytes["workspace"]
    cores = 2 * 512 // 128  # one item per AI Core group
    assert asked["high_precision"] - asked[HP] == cores * 2 * 128 * 256 * 2
