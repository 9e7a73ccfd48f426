"""The operator on every chip family of the catalogue: the coupled-core path of Atlas 300I Duo
(Ascend310P3, arch 2002) and 910A (arch 1001) against the float64 reference over the forward's
case table, and the refusals of what a chip lacks.

The simulator reads ACL_FA_SIM_SOC when aclInit takes its first reference, so each chip's cases
run in a child process of their own (this process keeps its default chip and sessions).
"""
from __future__ import annotations

import pytest

from conftest import TESTS, run_python
from test_flash_attention import CASES, F16, _case_id

COUPLED = ("Ascend310P3", "Ascend910A")
KERNEL_TYPE_AICORE = 6


def _fp16(case):
    """The case in float16: the coupled chips have no bfloat16."""
    return case[:6] + (F16,) + case[7:]


COUPLED_CASES = [_fp16(c) for c in CASES]

# Runs the cases on the chip of ACL_FA_SIM_SOC; per case "ok" or the failure, and what the
# launch was (kernel type, cores, GM bytes, scalar accesses).
CASES_SCRIPT = """
import json
import acl_fa
from acl_fa.runtime.sim_stats import last_launch
from test_flash_attention import _assert_close, _case_id, _inputs
from test_chips import COUPLED_CASES

results = {}
with acl_fa.Session(backend="sim") as s:
    soc = s.soc_name()
    for case in COUPLED_CASES:
        b, n, nkv, sq, skv, d, dtype, layout, causal = case
        q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
        try:
            out, lse = s.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv,
                                         return_lse=True)
            assert out.dtype == dtype and out.shape == q.shape
            _assert_close(q, k, v, out, lse, causal=causal, layout=layout, n=n, nkv=nkv, dtype=dtype)
            verdict = "ok"
        except AssertionError as exc:
            verdict = f"mismatch: {exc}"
        except acl_fa.AclFaError as exc:
            verdict = f"raised {type(exc).__name__}: {exc}"
        stats = last_launch(s.backend, per_core=True)
        results[_case_id(case)] = dict(verdict=verdict, kernel_type=stats["kernel_type"],
                                       aiv=len(stats["aiv"]), aic=len(stats["aic"]), block_dim=stats["block_dim"])
print(json.dumps(dict(soc=soc, results=results)))
"""


def _once_per_chip(script):
    """soc -> the JSON a child running `script` on that chip printed (one child per chip)."""
    runs = {}

    def get(soc):
        if soc not in runs:
            runs[soc] = run_python(script, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
        return runs[soc]
    return get


@pytest.fixture(scope="module")
def chip_runs():
    """soc -> the child's results for COUPLED_CASES on that chip."""
    return _once_per_chip(CASES_SCRIPT)


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("case", COUPLED_CASES, ids=[_case_id(c) for c in COUPLED_CASES])
def test_coupled_chips_match_reference(chip_runs, soc, case):
    run = chip_runs(soc)
    assert run["soc"] == soc
    result = run["results"][_case_id(case)]
    assert result["verdict"] == "ok", result["verdict"]
    # The coupled path ran: one AI Core per block, no AIVs.
    assert result["kernel_type"] == KERNEL_TYPE_AICORE and result["aiv"] == 0
    assert result["aic"] == result["block_dim"]


# Refused before any device work, naming the chip and the limit: (kwargs, words).
REFUSALS_SCRIPT = """
import json
import ml_dtypes
import numpy as np
import acl_fa
from acl_fa.runtime.session import live_counts

q = np.zeros((1, 2, 64, 64), np.float16)
cases = {{
    "bfloat16": dict(q=q.astype(ml_dtypes.bfloat16)),
    "float32": dict(q=q.astype(np.float32)),
    "blocks": dict(q=q, block_m=256, block_n=512),
}}
out = {{}}
with acl_fa.Session(backend="sim") as s:
    out["soc"] = s.soc_name()
    before = live_counts(s.backend)
    for name, kw in cases.items():
        x = kw.pop("q")
        try:
            s.flash_attention(x, x, x, **kw)
            out[name] = "no error"
        except acl_fa.AclFaError as exc:
            out[name] = f"{{type(exc).__name__}}: {{exc}}"
    out["device_objects_made"] = live_counts(s.backend) != before
print(json.dumps(out))
"""


@pytest.mark.parametrize("soc", COUPLED)
def test_what_the_chip_lacks_is_refused_naming_it(soc):
    out = run_python(REFUSALS_SCRIPT.format(), ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    assert out["soc"] == soc
    assert out["bfloat16"] == (f"InvalidArgumentError: dtype bfloat16 is not supported on {soc}: its AI Core has "
                               "no bfloat16 (use float16)")
    assert out["float32"] == (f"InvalidArgumentError: dtype float32 is not supported on {soc}: its cube takes "
                              "float16 operands only, not float32 (use float16)")
    assert out["blocks"].startswith("InvalidArgumentError: block_m=256, block_n=512 (head_dim=64, 2-byte dtype) "
                                    "needs ") and f"B of UB per AI Core" in out["blocks"]
    assert f"{soc} has 262144 B" in out["blocks"]
    assert not out["device_objects_made"]


# The probe kernel (tests/kernels/probe.cpp) on a coupled chip: what each architecture lacks
# stops the launch with the rule, the path or instruction, and the chip.
ARCH_RULES_SCRIPT = """
import json, sys
import numpy as np
import simlib
sim = simlib.SimKernels()
out = {{}}
for name, op, kernel_type in (("aicore", 200, 6), ("aiv_only", 0, 0), ("declared_aiv_on_aicore", 0, 6)):
    rc, msg, _ = sim.probe(op, np.ones(64, np.float32), kernel_type=kernel_type)
    out[name] = [rc, msg]
sim.free_all()
print(json.dumps(out))
"""


@pytest.mark.parametrize("soc, aicore_rule", [
    ("Ascend310P3", "rule 'data path' violated on AIC 0 in DataCopyPad: the unaligned GM <-> UB copy (DataCopyPad) "
                    "does not exist on Ascend310P3 (arch 2002)"),
    ("Ascend910A", "rule 'kernel type' violated on AIC 0 in KERNEL_TASK_TYPE_DEFAULT: KERNEL_TASK_TYPE does not "
                   "exist on Ascend910A (arch 1001)"),
])
def test_paths_the_architecture_lacks_are_violations(soc, aicore_rule):
    import pathlib
    kernels = str(TESTS / "kernels")
    out = run_python("import sys; sys.path.insert(0, %r)\n" % kernels + ARCH_RULES_SCRIPT.format(),
                     ACL_FA_SIM_SOC=soc)
    rc, msg = out["aicore"]
    assert rc == 507015 and aicore_rule in msg, msg
    # Separate AIC/AIV kernel types do not launch on coupled AI Cores.
    rc, msg = out["aiv_only"]
    assert rc != 0 and f"the simulated chip {soc} has coupled AI Cores" in msg, msg
    rc, msg = out["declared_aiv_on_aicore"]
    assert rc == 507015 and "rule 'kernel type'" in msg, msg


# Every registered op whose OpDef claims the coupled chips (op_host: RegisterHost with
# Chips::kA2A3Coupled), run once on each of them with its own reference check; the launch must be
# the op's kernel, on the coupled AI Cores. The kernels use only what each architecture provides
# (sim/include/ascendc_sim/arch_surface.h stops any other call; docs/simulator.md).
COUPLED_OPS = {"FlashAttention": "flash_attention", "FlashAttentionV2": "flash_attention_v2",
               "FlashAttentionV3": "flash_attention_v3", "AttentionLseMerge": "attention_lse_merge",
               "FlashAttentionInt8": "flash_attention_int8"}
# Registered for the coupled chips too, whose tiling refuses what they lack, naming it: V4 is
# reached only with precision="high_performance" (inner_precise=1), which A2/A3 alone serve.
# V5 is reached only with a score modifier (ALiBi, sinks, a float mask), which the Python layer
# refuses before any device work (the TilingFunc's policy refuses direct aclnn callers the same way).
# (FlashAttentionV4: refused by the host-side plan before device work, which knows the
# high-performance precision since docs/memory.md's fit; it was phase 1's AclError.)
COUPLED_REFUSED = {"FlashAttentionV4": ("InvalidArgumentError", "inner_precise=1 (high-performance precision) is "
                                                                "supported on Atlas A2/A3"),
                   "FlashAttentionV5": ("InvalidArgumentError", "alibi_slopes and sinks and a float attn_mask: "
                                                                "supported on Atlas A2/A3")}

# Registered for the coupled chips, run on some and refused before device work on others, naming
# what the chip lacks: AttentionQuant (docs/int8.md) runs on 310P3; 910A has no float32 ReduceMax.
COUPLED_SOME = {"AttentionQuant": ("attention_quant", {"Ascend910A": "ReduceMax"})}

OPS_SCRIPT = """
import json, sys
for sub in ("flash_attention", "attention_lse_merge"):
    sys.path.insert(0, {ops_dir!r} + "/" + sub)
import numpy as np
import acl_fa
from acl_fa.ops import lse_merge
from acl_fa.runtime.sim_stats import last_launch
import test_flash_attention as fa, test_flash_attention_v2 as v2, test_softcap as v3, test_lse_merge as merge


def forward(s):
    case = (1, 2, 2, 200, 300, 64, fa.F16, "BNSD", True)
    b, n, nkv, sq, skv, d, dtype, layout, causal = case
    q, k, v = fa._inputs(layout, b, n, nkv, sq, skv, d, dtype)
    out, lse = s.flash_attention(q, k, v, causal=causal, layout=layout, return_lse=True)
    fa._assert_close(q, k, v, out, lse, causal=causal, layout=layout, n=n, nkv=nkv, dtype=dtype)


def band(s):
    v2.check_band(s, v2.FIXED[3])  # Sq < Skv, next < 0, float16


def softcap(s):
    case = next(c for c in v3.CASES if c[6] == "float16" and not c[10])
    b, n, nkv, sq, skv, d, dtype, layout, causal, window, mask, cap = case
    q, k, v = v3._inputs(layout, b, n, nkv, sq, skv, d, dtype)
    o, lse = s.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n, num_kv_heads=nkv, softcap=cap,
                               return_lse=True)
    v3._check(q, k, v, o, lse, case, None)


def high_performance(s):
    q, k, v = fa._inputs("BNSD", 1, 2, 2, 128, 128, 64, fa.F16)
    s.flash_attention(q, k, v, precision="high_performance")


def score_mods(s):
    q, k, v = fa._inputs("BNSD", 1, 2, 2, 64, 64, 64, fa.F16)
    s.flash_attention(q, k, v, alibi_slopes=np.ones(2, np.float32), sinks=np.zeros(2, np.float32),
                      attn_mask=np.zeros((64, 64), np.float16))


def int8_forward(s):
    sys.path.insert(0, {ops_dir!r})
    import test_int8_prefill as i8
    q, k, v = i8._inputs(1, 2, 2, 160, 160, 64, i8.F16, outliers=True)
    qy, qs = i8.quantize_blocks(q.astype(np.float64), 64, smooth=False)
    ky, ks = i8.quantize_blocks(k.astype(np.float64), 64, smooth=True)
    out, lse = s.flash_attention_int8(qy, ky, v, qs, ks, block_m=64, block_n=64, causal=True, return_lse=True)
    ref, ref_lse = i8.attention_reference(i8.dequantize_blocks(qy, qs, 64), i8.dequantize_blocks(ky, ks, 64), v,
                                          causal=True)
    error = float(np.abs(out.astype(np.float64) - ref).max())
    assert error <= 4 * i8.ULP["float16"] * max(1.0, float(np.abs(ref).max())), error
    np.testing.assert_allclose(lse, ref_lse, atol=1e-4)


def quantize(s):
    sys.path.insert(0, {ops_dir!r})
    import test_int8_prefill as i8
    from acl_fa.ops import opcall
    from acl_fa.ops.quant import ATTENTION_QUANT, QuantProblem
    x = i8._inputs(1, 2, 2, 97, 97, 64, i8.F16)[1]
    y, scale = opcall.runner_for(s, ATTENTION_QUANT).run(QuantProblem(x.shape, x.dtype, "BNSD", 2, 1, 97, 32, True), x)
    ref_y, ref_scale = i8.quantize_blocks(x.astype(np.float64), 32, smooth=True)
    np.testing.assert_allclose(scale, ref_scale, rtol=2e-6)
    assert np.abs(y.astype(np.int32) - ref_y.astype(np.int32)).max() <= 1


def merge_f16(s):
    parts = merge._partials((2, 3, 37, 64), merge.F16, merge.F16, seed=5)
    out, lse = lse_merge.merge_partials(*parts, out_dtype=merge.F16, session=s)
    merge._assert_merged(out, lse, *parts, merge.F16)


results = {{}}
with acl_fa.Session(backend="sim") as s:
    soc = s.soc_name()
    for op, run in (("FlashAttention", forward), ("FlashAttentionV2", band), ("FlashAttentionV3", softcap),
                    ("AttentionLseMerge", merge_f16), ("FlashAttentionV4", high_performance),
                    ("FlashAttentionV5", score_mods), ("FlashAttentionInt8", int8_forward),
                    ("AttentionQuant", quantize)):
        try:
            run(s)
            verdict = "ok"
        except AssertionError as exc:
            verdict = f"mismatch: {{exc}}"
        except acl_fa.AclFaError as exc:
            verdict = f"raised {{type(exc).__name__}}: {{exc}}"
        stats = last_launch(s.backend, per_core=True)
        results[op] = dict(verdict=verdict, kernel=stats["kernel"], kernel_type=stats["kernel_type"],
                           aiv=len(stats["aiv"]))
print(json.dumps(dict(soc=soc, results=results)))
"""


@pytest.fixture(scope="module")
def op_runs():
    """soc -> the child's verdicts for COUPLED_OPS on that chip."""
    return _once_per_chip(OPS_SCRIPT.format(ops_dir=str(TESTS / "ops")))


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("op", list(COUPLED_OPS))
def test_each_registered_op_runs_on_each_coupled_chip(op_runs, op, soc):
    run = op_runs(soc)
    assert run["soc"] == soc
    result = run["results"][op]
    assert result["verdict"] == "ok", result["verdict"]
    assert result["kernel"] == COUPLED_OPS[op], result
    assert result["kernel_type"] == KERNEL_TYPE_AICORE and result["aiv"] == 0, result


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("op", list(COUPLED_REFUSED))
def test_each_refusing_op_names_what_the_coupled_chip_lacks(op_runs, op, soc):
    result = op_runs(soc)["results"][op]
    error, words = COUPLED_REFUSED[op]
    assert result["verdict"].startswith(f"raised {error}"), result["verdict"]
    assert words in result["verdict"] and "has coupled AI Cores" in result["verdict"], result


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("op", list(COUPLED_SOME))
def test_each_partly_coupled_op_runs_or_names_what_the_chip_lacks(op_runs, op, soc):
    kernel, refused = COUPLED_SOME[op]
    result = op_runs(soc)["results"][op]
    if soc in refused:
        verdict = result["verdict"]
        assert verdict.startswith("raised InvalidArgumentError"), verdict
        assert refused[soc] in verdict and soc in verdict, verdict
    else:
        assert result["verdict"] == "ok", result["verdict"]
        assert result["kernel"] == kernel, result
        assert result["kernel_type"] == KERNEL_TYPE_AICORE and result["aiv"] == 0, result


def test_the_coupled_op_list_is_the_registered_one():
    """COUPLED_OPS names every OpDef registered for the coupled chips: OP_ADD(X) in a file that
    registers with Chips::kA2A3Coupled, or through RegisterFlashAttentionV2 (which does)."""
    import re

    claimed = set()
    for src in (TESTS.parent / "op_host").rglob("*.cpp"):
        text = src.read_text()
        if "Chips::kA2A3Coupled" in text or "RegisterFlashAttentionV2(*this" in text:
            claimed |= set(re.findall(r"^OP_ADD\((\w+)\);", text, re.M))
    assert claimed == set(COUPLED_OPS) | set(COUPLED_REFUSED) | set(COUPLED_SOME), claimed
