"""The operator on every chip family of the catalogue: the coupled-core path of Atlas 300I Duo
(Ascend310P3, arch 2002) and 910A (arch 1001) against the float64 reference over the forward's
case table, and the refusals of what a chip lacks.

The simulated chip is chosen per Session: the simulator reads ACL_FA_SIM_SOC when aclInit takes
its first reference, and acl_fa finalizes when its last Session closes.
"""
from __future__ import annotations

import numpy as np
import pytest

import acl_fa
from acl_fa.errors import InvalidArgumentError
from test_flash_attention import BF16, CASES, F16, _assert_close, _case_id, _inputs

COUPLED = ("Ascend310P3", "Ascend910A")
KERNEL_TYPE_AICORE = 6


@pytest.fixture
def chip_session(request, monkeypatch, backend, sim_only):
    """A Session on the simulated chip named by the test's `soc` parameter."""
    monkeypatch.setenv("ACL_FA_SIM_SOC", request.getfixturevalue("soc"))
    with acl_fa.Session(backend=backend.name) as s:
        yield s


def _fp16(case):
    """The case in float16: the coupled chips have no bfloat16."""
    return case[:6] + (F16,) + case[7:]


@pytest.mark.parametrize("soc", COUPLED)
@pytest.mark.parametrize("case", [_fp16(c) for c in CASES], ids=[_case_id(_fp16(c)) for c in CASES])
def test_coupled_chips_match_reference(chip_session, soc, case):
    b, n, nkv, sq, skv, d, dtype, layout, causal = case
    assert chip_session.soc_name() == soc
    q, k, v = _inputs(layout, b, n, nkv, sq, skv, d, dtype)
    out, lse = chip_session.flash_attention(q, k, v, causal=causal, layout=layout, num_heads=n,
                                            num_kv_heads=nkv, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape
    _assert_close(q, k, v, out, lse, causal=causal, layout=layout, n=n, nkv=nkv, dtype=dtype)
