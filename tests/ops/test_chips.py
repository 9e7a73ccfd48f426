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


@pytest.fixture(scope="module")
def chip_runs():
    """soc -> the child's results for COUPLED_CASES on that chip (run once per chip)."""
    runs = {}

    def get(soc):
        if soc not in runs:
            runs[soc] = run_python(CASES_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
        return runs[soc]
    return get


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
