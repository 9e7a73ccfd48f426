"""Int8 QK^T for prefill (issue #31; docs/int8.md): AttentionQuant and FlashAttentionInt8 against the
float64 references of acl_fa/reference/quant.py, the accuracy rule, and the refusals.

Accuracy rule (docs/int8.md): against float64 attention on the unquantized inputs, the kernel's
max error is at most twice the quantized float64 reference's own error (plus one unit in the last
place of the dtype at the output's magnitude), and the cosine similarity of the outputs is >= 0.999,
on normal inputs and on inputs whose K has a few channels 20x the rest.
"""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.reference.accuracy import ULP
from acl_fa.reference.attention import attention_reference
from acl_fa.reference.quant import dequantize_blocks, int8_attention_reference, quantize_blocks
from conftest import run_python

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _inputs(b, n, nkv, sq, skv, d, dtype, outliers=False, seed=0, layout="BNSD"):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, n, sq, d))
    k = rng.standard_normal((b, nkv, skv, d)) + 0.5  # a per-channel offset: what smoothing removes
    v = rng.standard_normal((b, nkv, skv, d))
    if outliers:
        # A few K channels 20x the rest, as real models have them: a large per-channel value shared by
        # the tokens (what smoothing removes), not 20x the variance (see docs/int8.md, when not to use).
        k[..., :: max(1, d // 4)] += 20.0 * np.sign(rng.standard_normal(k.shape[:2] + (1, 1)))
    arrays = []
    for x in (q, k, v):
        if layout in ("BSND", "BSH"):
            x = x.transpose(0, 2, 1, 3)
        x = np.ascontiguousarray(x).astype(dtype)
        arrays.append(x.reshape(x.shape[0], x.shape[1], -1) if layout == "BSH" else x)
    return arrays


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---- the reference itself ------------------------------------------------------------------------

def test_quantize_blocks_round_trip_is_within_half_a_step():
    x = np.random.default_rng(1).standard_normal((1, 2, 100, 32))
    y, scale = quantize_blocks(x, 32, smooth=False)
    assert y.dtype == np.int8 and scale.shape == (1, 2, 4) and scale.dtype == np.float32
    assert np.abs(y).max() <= 127
    err = np.abs(dequantize_blocks(y, scale, 32) - x)
    step = np.repeat(scale.astype(np.float64), 32, axis=2)[:, :, :100, None]
    assert np.all(err <= (0.5 + 2.0 ** -5) * step * (1 + 1e-6))  # the half rounding adds up to 1/32 step


def test_smoothing_is_exact_for_softmax():
    # Attention over K minus its per-channel mean equals attention over K (float64, no rounding).
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 1, 2, 40, 16))
    shifted = k - k.mean(axis=2, keepdims=True)
    a, lse_a = attention_reference(q, k, v, causal=True)
    b, _ = attention_reference(q, shifted, v, causal=True)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert np.all(np.isfinite(lse_a))


# ---- the ops against the references -------------------------------------------------------------

QUANT_CASES = [  # (b, h, s, d, dtype, layout, block, smooth)
    (1, 2, 97, 64, F16, "BNSD", 32, False),
    (2, 1, 130, 128, BF16, "BSND", 64, True),
    (1, 3, 64, 16, F16, "BNSD", 128, True),
    # Blocks wider than one UB chunk (136 rows at D128 on A2): smoothed, the mean pass keeps the blocks'
    # column bounds (two reads of x); unsmoothed, a max pass then a quantize pass.
    (1, 2, 700, 128, F16, "BNSD", 512, True),
    (1, 1, 300, 128, BF16, "BSND", 256, False),
]


@pytest.mark.parametrize("case", QUANT_CASES, ids=lambda c: f"{c[5]}-s{c[2]}-d{c[3]}-{c[4].name}-b{c[6]}-sm{int(c[7])}")
def test_attention_quant_matches_reference(session, case):
    from acl_fa.ops import opcall
    from acl_fa.ops.quant import ATTENTION_QUANT, QuantProblem

    b, h, s, d, dtype, layout, block, smooth = case
    x = _inputs(b, h, h, s, s, d, dtype, layout=layout)[1]
    problem = QuantProblem(x.shape, x.dtype, layout, h, b, s, block, smooth)
    y, scale = opcall.runner_for(session, ATTENTION_QUANT).run(problem, x)
    xb = x.astype(np.float64) if layout == "BNSD" else x.astype(np.float64).transpose(0, 2, 1, 3)
    ref_y, ref_scale = quantize_blocks(xb, block, smooth=smooth)
    if layout == "BSND":
        y = y.transpose(0, 2, 1, 3)
    np.testing.assert_allclose(scale, ref_scale, rtol=2e-6)
    # The reference rounds as the kernel does (half, then int8); fp32 vs float64 arithmetic can land
    # a value on the other side of a rounding boundary: one step, rarely.
    diff = np.abs(y.astype(np.int32) - ref_y.astype(np.int32))
    assert diff.max() <= 1, f"int8 values differ by up to {diff.max()}"
    assert (diff > 0).mean() < 0.002, f"{(diff > 0).mean():.3%} of the int8 values differ"


FORWARD_CASES = [  # (b, n, nkv, sq, skv, d, dtype, layout, causal, outliers)
    (1, 2, 2, 256, 256, 128, F16, "BNSD", True, False),
    (1, 2, 2, 256, 256, 128, F16, "BNSD", True, True),
    (1, 4, 2, 200, 317, 64, BF16, "BSND", False, False),
    (2, 2, 1, 97, 97, 64, F16, "BNSD", False, True),
    (1, 1, 1, 1, 130, 128, BF16, "BNSD", True, True),
    (1, 4, 2, 64, 80, 32, F16, "BSH", True, False),
]


def _forward_id(c):
    return (f"{c[7]}-b{c[0]}n{c[1]}kv{c[2]}-q{c[3]}k{c[4]}d{c[5]}-{c[6].name}"
            f"{'-causal' if c[8] else ''}{'-outliers' if c[9] else ''}")


@pytest.mark.parametrize("case", FORWARD_CASES, ids=_forward_id)
def test_int8_forward_accuracy(session, case):
    _check_int8_forward(session, case)


# Blocks whose tiles are whole 128-column repeats of half: on A2/A3 every block takes the half softmax
# (S dequantized to half by FixPipe with the whole scale; the causal diagonal's and the Skv tail's
# blocks masked in half, their tiles rounded up to 128 columns).
HALF_SOFTMAX_CASES = [
    (1, 2, 2, 512, 512, 128, F16, "BNSD", True, True),
    (1, 2, 1, 384, 512, 64, F16, "BSND", False, False),
    (1, 2, 2, 400, 400, 128, F16, "BNSD", True, False),   # Sq and Skv tails on the diagonal
    (1, 2, 1, 200, 333, 64, F16, "BSND", False, True),    # an Skv tail of 77 keys, an Sq tail
    (1, 2, 2, 256, 384, 128, F16, "BNSD", True, False),   # Sq < Skv causal: the diagonal shifted
    (1, 2, 2, 512, 512, 128, BF16, "BNSD", True, False),  # bfloat16 P: the fp32 softmax throughout
]


@pytest.mark.parametrize("case", HALF_SOFTMAX_CASES, ids=_forward_id)
def test_int8_forward_accuracy_with_half_softmax_blocks(session, case):
    _check_int8_forward(session, case, block_m=128, block_n=256)


def _check_int8_forward(session, case, **blocks):
    b, n, nkv, sq, skv, d, dtype, layout, causal, outliers = case
    q, k, v = _inputs(b, n, nkv, sq, skv, d, dtype, outliers=outliers, layout=layout)
    heads = dict(num_heads=n, num_kv_heads=nkv)
    out, lse = session.flash_attention(q, k, v, causal=causal, layout=layout, qk_quant="int8", return_lse=True,
                                       **heads, **blocks)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (b, n, sq)
    exact, exact_lse = attention_reference(q, k, v, causal=causal, layout=layout, **heads)
    plan = acl_fa.ops.quant.int8_blocks(acl_fa.spec.problem.make_problem(
        q, k, v, causal=causal, layout=layout, **heads, **blocks)[0], session.soc_name())
    quantized, _ = int8_attention_reference(q, k, v, block_m=plan.block_m, block_n=plan.block_n, causal=causal,
                                            layout=layout, **heads)
    kernel_error = float(np.abs(out.astype(np.float64) - exact).max())
    own_error = float(np.abs(quantized - exact).max())
    floor = ULP[dtype.name] * max(1.0, float(np.abs(exact).max()))
    assert kernel_error <= 2 * own_error + floor, (
        f"kernel error {kernel_error:.3e} > 2 x the quantized reference's {own_error:.3e} + {floor:.1e}")
    cosine = _cosine(out, exact)
    assert cosine >= 0.999, f"cosine similarity {cosine:.6f} < 0.999"
    # The LSE of the dequantized scores, K's smoothing shift added back: close to the exact one.
    lse_error = float(np.abs(lse - exact_lse).max())
    assert lse_error < 0.05, f"LSE error {lse_error:.3g}"



# block 64: the fp32 softmax (64-column tiles), the scale split between FixPipe and the softmax;
# block 128: on A2/A3 the half softmax on every block, FixPipe's scale the whole one rounded to its
# 19 bits (2^-11 relative) and the softmax's 1.
@pytest.mark.parametrize("block", [64, 128])
def test_lower_level_call_takes_quantized_tensors(session, block):
    q, k, v = _inputs(1, 2, 2, 160, 160, 64, F16, outliers=True)
    qy, qs = quantize_blocks(q.astype(np.float64), block, smooth=False)
    ky, ks = quantize_blocks(k.astype(np.float64), block, smooth=True)
    out, lse = session.flash_attention_int8(qy, ky, v, qs, ks, block_m=block, block_n=block, causal=True,
                                            return_lse=True)
    qd, kd = dequantize_blocks(qy, qs, block), dequantize_blocks(ky, ks, block)
    ref, ref_lse = attention_reference(qd, kd, v, causal=True)
    error = float(np.abs(out.astype(np.float64) - ref).max())
    assert error <= 4 * ULP["float16"] * max(1.0, float(np.abs(ref).max())), error
    # On A2/A3 the scores leave the cube dequantized to half (FixPipe): each is off by up to half an
    # ulp of half (2^-11 relative), and FixPipe's 19-bit scale is off the exact one by up to 2^-11
    # (rounded whole, the half softmax's blocks) or completed by a scale applied in fp32: the LSE
    # moves by at most 2^-10 of the largest |score|.
    logits = np.einsum("bhqd,bhkd->bhqk", qd, kd) / np.sqrt(qd.shape[-1])
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4 + 2.0 ** -10 * float(np.abs(logits).max()))


def test_int8_blocks_are_priced_as_the_int8_kernel_runs():
    """The int8 op's blocks come from the forward's policy with S in half and the half softmax priced
    (block_cost.h ScoreForm): at the goal point they differ from the fp16 forward's (whose choice
    stays 160 x 1024) and model cheaper under that pricing; bfloat16 prices S in half only, the
    coupled chips as the forward."""
    from acl_fa.plan import forward as planmod
    from acl_fa.spec.problem import problem_from_sizes
    soc = "Ascend910B2"
    p = problem_from_sizes(seq_q=4096, batch=1, num_heads=32, head_dim=128, dtype="float16", causal=True)
    fp16 = planmod.plan(p, soc)
    assert (fp16.block_m, fp16.block_n) == (160, 1024)
    int8 = acl_fa.ops.quant.int8_blocks(p, soc)
    assert (int8.block_m, int8.block_n) == (192, 1024)
    options = acl_fa.ops.quant.int8_plan_options(p, soc)
    assert options.half_scores and options.half_softmax

    def cost(m, n, opts=options):
        return planmod.analytic_cycles(dataclasses.replace(p, block_m=m, block_n=n), soc, opts)

    assert cost(192, 1024) < cost(160, 1024)
    assert cost(160, 1024) < cost(160, 1024, planmod.PlanOptions())  # S in half costs less than fp32
    bf16 = acl_fa.ops.quant.int8_plan_options(
        problem_from_sizes(seq_q=4096, batch=1, num_heads=32, head_dim=128, dtype="bfloat16", causal=True), soc)
    assert bf16.half_scores and not bf16.half_softmax
    assert acl_fa.ops.quant.int8_plan_options(p, "Ascend310P3") == planmod.PlanOptions()


# ---- refusals, before any device work --------------------------------------------------------------

def _small():
    return _inputs(1, 1, 1, 32, 32, 16, F16)


@pytest.mark.parametrize("value, error, words", [
    ("fp8", acl_fa.InvalidArgumentError, "950"),
    ("int4", acl_fa.InvalidArgumentError, "int4b_t"),
    ("int16", acl_fa.InvalidArgumentError, "must be None, 'none' or 'int8'"),
    (8, acl_fa.InvalidTypeError, "qk_quant must be a string"),
])
def test_unknown_or_unsupported_qk_quant(value, error, words):
    q, k, v = _small()
    with pytest.raises(error, match=words):
        acl_fa.flash_attention(q, k, v, qk_quant=value)


def test_int8_refuses_float32_and_options():
    q, k, v = (x.astype(np.float32) for x in _small())
    with pytest.raises(acl_fa.InvalidTypeError, match="float16 or bfloat16"):
        acl_fa.flash_attention(q, k, v, qk_quant="int8")
    q, k, v = _small()
    with pytest.raises(acl_fa.InvalidArgumentError, match="causal and scale only"):
        acl_fa.flash_attention(q, k, v, qk_quant="int8", window=(4, 0))


def _quantized():
    q, k, v = _small()
    qy, qs = quantize_blocks(q.astype(np.float64), 16, smooth=False)
    ky, ks = quantize_blocks(k.astype(np.float64), 16, smooth=True)
    return qy, ky, v, qs, ks


@pytest.mark.parametrize("mutate, error, words", [
    (lambda a: a.update(qs=None), acl_fa.InvalidArgumentError, "need their scales"),
    (lambda a: a.update(q=a["q"].astype(np.float16)), acl_fa.InvalidTypeError, "q must be int8"),
    (lambda a: a.update(qs=a["qs"].astype(np.float64)), acl_fa.InvalidTypeError, "q_scale must be float32"),
    (lambda a: a.update(ks=a["ks"][:, :, :1]), acl_fa.InvalidArgumentError, r"k_scale must have shape \(1, 1, 2\)"),
    (lambda a: a["qs"].__setitem__((0, 0, 1), 0.0), acl_fa.InvalidArgumentError, "finite and > 0"),
    (lambda a: a["ks"].__setitem__((0, 0, 0), np.nan), acl_fa.InvalidArgumentError, "finite and > 0"),
    (lambda a: a.update(v=a["v"].astype(np.float32)), acl_fa.InvalidTypeError, "float16 or bfloat16"),
], ids=["no-scales", "float-q", "float64-scale", "scale-shape", "zero-scale", "nan-scale", "float32-v"])
def test_int8_bad_inputs(mutate, error, words):
    qy, ky, v, qs, ks = _quantized()
    args = dict(q=qy, k=ky, v=v, qs=qs, ks=ks)
    mutate(args)
    with pytest.raises(error, match=words):
        acl_fa.flash_attention_int8(args["q"], args["k"], args["v"], args["qs"], args["ks"], block_m=16, block_n=16)


def test_int8_refused_on_910a_naming_what_it_lacks():
    result = run_python("""
        import json
        import numpy as np
        import acl_fa
        q = np.ones((1, 1, 32, 32), np.float16)
        out = {}
        try:
            acl_fa.flash_attention(q, q, q, qk_quant="int8", backend="sim")
            out["error"] = None
        except acl_fa.InvalidArgumentError as exc:
            out["error"] = str(exc)
        print(json.dumps(out))
    """, ACL_FA_SIM_SOC="Ascend910A")
    error = result["error"]
    assert error and "Ascend910A" in error and "ReduceMax" in error and "Ascend310P" in error, error


# ---- Ascend310P3: the coupled-core kernels (flash_attention_int8_coupled_kernel.h) -------------------

COUPLED_CASES = [  # (b, n, nkv, sq, skv, d, layout, causal, outliers): float16 only on 310P
    (1, 2, 2, 256, 256, 128, "BNSD", True, False),
    (1, 2, 2, 256, 256, 128, "BNSD", True, True),
    (2, 2, 1, 97, 150, 64, "BSND", False, True),
    (1, 4, 2, 64, 80, 32, "BSH", True, False),
]

COUPLED_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
sys.path.insert(0, {ops!r})
import numpy as np
import acl_fa
from acl_fa.runtime.sim_stats import last_launch
import test_int8_prefill as t

results = []
with acl_fa.Session(backend="sim") as s:
    soc = s.soc_name()
    for case in {cases!r}:
        b, n, nkv, sq, skv, d, layout, causal, outliers = case
        q, k, v = t._inputs(b, n, nkv, sq, skv, d, t.F16, outliers=outliers, layout=layout)
        heads = dict(num_heads=n, num_kv_heads=nkv)
        out, lse = s.flash_attention(q, k, v, causal=causal, layout=layout, qk_quant="int8", return_lse=True,
                                     **heads)
        stats = last_launch(s.backend, per_core=True)
        exact, exact_lse = t.attention_reference(q, k, v, causal=causal, layout=layout, **heads)
        plan = acl_fa.ops.quant.int8_blocks(acl_fa.spec.problem.make_problem(
            q, k, v, causal=causal, layout=layout, **heads)[0], s.soc_name())
        quantized, _ = t.int8_attention_reference(q, k, v, block_m=plan.block_m, block_n=plan.block_n,
                                                  causal=causal, layout=layout, **heads)
        results.append(dict(
            case=list(case), dtype=str(out.dtype), shape_ok=out.shape == q.shape and lse.shape == (b, n, sq),
            kernel=stats["kernel"], kernel_type=stats["kernel_type"], aiv=len(stats["aiv"]),
            kernel_error=float(np.abs(out.astype(np.float64) - exact).max()),
            own_error=float(np.abs(quantized - exact).max()),
            floor=t.ULP["float16"] * max(1.0, float(np.abs(exact).max())),
            cosine=t._cosine(out, exact), lse_error=float(np.abs(lse - exact_lse).max())))
    # AttentionQuant alone against its reference (smoothed, a block larger than one chunk is not
    # reached at this size: one pass).
    from acl_fa.ops import opcall
    from acl_fa.ops.quant import ATTENTION_QUANT, QuantProblem
    x = t._inputs(1, 3, 3, 130, 130, 64, t.F16, layout="BSND")[1]
    y, scale = opcall.runner_for(s, ATTENTION_QUANT).run(QuantProblem(x.shape, x.dtype, "BSND", 3, 1, 130, 64, True), x)
    ref_y, ref_scale = t.quantize_blocks(x.astype(np.float64).transpose(0, 2, 1, 3), 64, smooth=True)
    diff = np.abs(y.transpose(0, 2, 1, 3).astype(np.int32) - ref_y.astype(np.int32))
    quant = dict(scale_rel=float(np.abs(scale / ref_scale - 1).max()), max_diff=int(diff.max()),
                 share=float((diff > 0).mean()))
print(json.dumps(dict(soc=soc, results=results, quant=quant)))
"""


@pytest.fixture(scope="module")
def coupled_run():
    from pathlib import Path
    here = Path(__file__).resolve().parent
    return run_python(COUPLED_SCRIPT.format(tests=str(here.parent), ops=str(here), cases=COUPLED_CASES),
                      timeout=1200, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC="Ascend310P3")


@pytest.mark.parametrize("index", range(len(COUPLED_CASES)),
                         ids=[f"{c[6]}-b{c[0]}n{c[1]}kv{c[2]}-q{c[3]}k{c[4]}d{c[5]}{'-causal' if c[7] else ''}"
                              f"{'-outliers' if c[8] else ''}" for c in COUPLED_CASES])
def test_int8_forward_accuracy_on_310p3(coupled_run, index):
    assert coupled_run["soc"] == "Ascend310P3"
    r = coupled_run["results"][index]
    assert r["dtype"] == "float16" and r["shape_ok"], r
    # The coupled kernel on the AI Cores (KERNEL_TYPE_AICORE = 6), no vector-core launch.
    assert r["kernel"] == "flash_attention_int8" and r["kernel_type"] == 6 and r["aiv"] == 0, r
    assert r["kernel_error"] <= 2 * r["own_error"] + r["floor"], r
    assert r["cosine"] >= 0.999, r
    assert r["lse_error"] < 0.05, r


def test_310p3_refusals_name_the_chip():
    result = run_python("""
        import json
        import ml_dtypes
        import numpy as np
        import acl_fa
        from acl_fa.ops import opcall
        from acl_fa.ops.quant import ATTENTION_QUANT, QuantProblem
        out = {}
        cases = {"d16": np.ones((1, 1, 32, 16), np.float16), "bf16": np.ones((1, 1, 32, 64), ml_dtypes.bfloat16)}
        with acl_fa.Session(backend="sim") as s:
            for name, q in cases.items():
                try:
                    s.flash_attention(q, q, q, qk_quant="int8")
                    out[name] = None
                except acl_fa.AclFaError as exc:
                    out[name] = f"{type(exc).__name__}: {exc}"
            x = np.ones((1, 40, 2, 48), np.float16)
            try:
                opcall.runner_for(s, ATTENTION_QUANT).run(QuantProblem(x.shape, x.dtype, "BSND", 2, 1, 40, 16, False), x)
                out["quant_d48"] = None
            except acl_fa.AclFaError as exc:
                out["quant_d48"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out))
    """, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC="Ascend310P3")
    assert result["d16"] and "multiple of 32" in result["d16"] and "Ascend310P3" in result["d16"], result
    assert result["bf16"] and "bfloat16" in result["bf16"] and "Ascend310P" in result["bf16"], result
    assert result["quant_d48"] and "multiple of 32" in result["quant_d48"], result


def test_attention_quant_on_310p3(coupled_run):
    q = coupled_run["quant"]
    assert q["scale_rel"] <= 2e-6 and q["max_diff"] <= 1 and q["share"] < 0.002, q


def test_bsnd_needs_head_dim_multiple_of_32():
    q, k, v = _inputs(1, 1, 1, 32, 32, 16, F16, layout="BSND")
    with pytest.raises(acl_fa.InvalidArgumentError, match="multiple of 32"):
        acl_fa.flash_attention(q, k, v, layout="BSND", qk_quant="int8")


def test_cli_run_qk_quant_int8(sim_only):
    from click.testing import CliRunner
    from acl_fa.cli import main

    result = CliRunner().invoke(main, ["run", "--seq", "256", "--heads", "2", "--causal", "--qk-quant", "int8"])
    assert result.exit_code == 0, result.output
    assert "qk_quant=int8" in result.output and "modeled" in result.output and "fp16 forward" in result.output
    assert ": OK" in result.output
    refused = CliRunner().invoke(main, ["run", "--seq", "64", "--qk-quant", "int8", "--backward"])
    assert refused.exit_code != 0 and "--qk-quant int8 runs the forward alone" in refused.output
