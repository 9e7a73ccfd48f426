"""The per-chip Ascend C API surface (sim/include/ascendc_sim/arch_surface.h; docs/simulator.md "The
per-chip API surface"): on each simulated architecture, an API / dtype / mode combination its chip
provides runs and gives the right values, and one it lacks stops the launch with the rule, the API,
what is missing and the chip with its arch -- as the real toolchain refuses it.

The test kernel (tests/kernels/arch_surface.cpp) runs one combination per launch; the simulator reads
ACL_FA_SIM_SOC at aclInit, so each chip's launches run in a child process of their own.
"""
from __future__ import annotations

import pytest

from conftest import TESTS, run_python

# soc -> (__NPU_ARCH__, the launch's kernel type: KERNEL_TYPE_AICORE on the coupled chips, AIV_ONLY on A2)
CHIPS = {"Ascend910A": (1001, 6), "Ascend310P3": (2002, 6), "Ascend910B2": (2201, 0)}

# SurfaceOp codes (arch_surface.cpp) -> per arch: None (runs) or (rule, api, what the message names).
F32_ON_910A = ("dtype", "WholeReduceMax", "WholeReduceMax on float")
CASES = {
    "whole_max_f32": (0, {1001: F32_ON_910A, 2002: None, 2201: None}),
    "whole_max_f32_only_value": (1, {1001: F32_ON_910A,
                                     2002: ("reduce order", "WholeReduceMax", "ORDER_ONLY_VALUE"), 2201: None}),
    "whole_max_f16": (2, {1001: None, 2002: None, 2201: None}),
    "whole_sum_f32": (3, {1001: ("dtype", "WholeReduceSum", "WholeReduceSum on float"), 2002: None, 2201: None}),
    "block_max_f32": (4, {1001: ("dtype", "BlockReduceMax", "BlockReduceMax on float"), 2002: None, 2201: None}),
    "block_sum_f32": (5, {1001: ("dtype", "BlockReduceSum", "BlockReduceSum on float"), 2002: None, 2201: None}),
    "maxs_f32": (6, {1001: ("instruction", "Maxs", "Maxs (vmaxs)"), 2002: None, 2201: None}),
    "brcb_f32": (7, {1001: ("instruction", "Brcb", "Brcb"), 2002: None, 2201: None}),
    "cast_f16_rint": (8, {1001: ("Cast mode", "Cast", "float -> half takes CAST_NONE, CAST_ODD"),
                          2002: ("Cast mode", "Cast", "float -> half takes CAST_NONE, CAST_ODD"), 2201: None}),
    "cast_f16_none": (9, {1001: None, 2002: None, 2201: None}),
    "add_i16": (10, {1001: ("dtype", "Add", "Add on int16_t"), 2002: None, 2201: None}),
    "dup_max_f32": (11, {1001: None, 2002: None, 2201: None}),
    "compares_f32": (12, {1001: ("instruction", "Compares", "Compares (tensor-scalar compare)"), 2002: None,
                          2201: None}),
    "reduce_sum_f32": (13, {1001: ("dtype", "ReduceSum", "ReduceSum on float"), 2002: None, 2201: None}),
    "sync_all": (14, {1001: ("instruction", "SyncAll", "the hardware SyncAll"),
                      2002: ("instruction", "SyncAll", "the hardware SyncAll"), 2201: None}),
    "select_scalar_f32": (15, {1001: ("select mode", "Select", "VSEL_TENSOR_SCALAR_MODE"), 2002: None, 2201: None}),
    "select_spr_f32": (16, {1001: None, 2002: None, 2201: None}),
}

# Runs every case on the chip of ACL_FA_SIM_SOC: name -> [rc, message, out] (out only when rc is 0).
SCRIPT = """
import json, sys
sys.path.insert(0, {kernels!r})
import numpy as np
import simlib
sim = simlib.SimKernels()
rng = np.random.default_rng(7)
x = rng.standard_normal(256).astype(np.float32)
x[5] = 3.0000002  # rounds differently to half under nearest-even and truncation
small = np.arange(-256, 256, dtype=np.int16).view(np.float32)  # add_i16: int16 lanes that cannot overflow
out = {{"x": x.tolist(), "small": small.view(np.int16).tolist()}}
for name, op in {ops!r}.items():
    data = small if name == "add_i16" else x
    din, dout = sim.device(data), sim.device(256 * 8 * 4)
    err = sim.err()
    rc = sim.k.aclfaSimTestArchSurface(op, din, dout, {kernel_type}, err, 4096)
    msg = sim.ffi.string(err).decode()
    res = sim.host(dout, (256,), np.float32) if rc == 0 else None
    out[name] = [rc, msg, None if res is None else res.view(np.uint32).tolist()]
    sim.free_all()
sim.close()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def chip_runs():
    runs = {}

    def get(soc):
        if soc not in runs:
            ops = {name: op for name, (op, _) in CASES.items()}
            code = SCRIPT.format(kernels=str(TESTS / "kernels"), ops=ops, kernel_type=CHIPS[soc][1])
            runs[soc] = run_python(code, ACL_FA_SIM_SOC=soc)
        return runs[soc]
    return get


def _expected(name, x, small):
    """The values a case that runs must give (float32 words of out, compared bit for bit or closely)."""
    import numpy as np

    rows = x.reshape(4, 64)
    if name == "whole_max_f32":
        return ("at", slice(0, 8, 2), rows.max(1))
    if name == "whole_max_f32_only_value":
        return ("at", slice(0, 4), rows.max(1))
    if name == "whole_max_f16":
        return ("at", slice(0, 8, 2), rows.astype(np.float16).max(1).astype(np.float32))
    if name == "whole_sum_f32":
        return ("close", slice(0, 4), rows.sum(1, dtype=np.float64))
    if name == "block_max_f32":
        return ("at", slice(0, 32), x.reshape(32, 8).max(1))
    if name == "block_sum_f32":
        return ("close", slice(0, 32), x.reshape(32, 8).sum(1, dtype=np.float64))
    if name in ("maxs_f32", "dup_max_f32"):
        return ("at", slice(0, 256), np.maximum(x, np.float32(0.5)))
    if name == "brcb_f32":
        return ("at", slice(0, 256), np.repeat(x[:32], 8))
    if name in ("cast_f16_rint", "cast_f16_none"):
        return ("at", slice(0, 256), x.astype(np.float16).astype(np.float32))
    if name == "add_i16":
        return ("i16", slice(0, 256), (small * 2).astype(np.int16))
    if name == "compares_f32":
        return ("bits", slice(0, 8), np.packbits(x > 0, bitorder="little"))
    if name == "reduce_sum_f32":
        return ("close", slice(0, 1), np.array([x.sum(dtype=np.float64)]))
    if name in ("select_scalar_f32", "select_spr_f32"):
        return ("at", slice(0, 256), np.where(np.arange(256) % 2 == 0, x, np.float32(0.5)))
    if name == "sync_all":
        return ("at", slice(0, 256), np.zeros(256, np.float32))
    raise KeyError(name)


@pytest.mark.parametrize("soc", list(CHIPS))
@pytest.mark.parametrize("name", list(CASES))
def test_each_chip_runs_what_it_has_and_refuses_what_it_lacks(chip_runs, soc, name):
    import numpy as np

    arch = CHIPS[soc][0]
    run = chip_runs(soc)
    rc, msg, words = run[name]
    expect = CASES[name][1][arch]
    if expect is not None:
        rule, api, what = expect
        assert rc == 507015, f"{name} ran on {soc}; it should stop: {msg}"
        assert f"rule '{rule}' violated on " in msg and f" in {api}: " in msg and what in msg, msg
        assert f"{soc} (arch {arch}" in msg, msg
        return
    assert rc == 0, msg
    out = np.array(words, np.uint32).view(np.float32)
    x = np.array(run["x"], np.float32)
    small = np.array(run["small"], np.int16)
    kind, at, want = _expected(name, x, small)
    if kind == "at":
        np.testing.assert_array_equal(out[at], want.astype(np.float32))
    elif kind == "close":
        np.testing.assert_allclose(out[at], want, rtol=2e-6, atol=1e-6)
    elif kind == "i16":
        np.testing.assert_array_equal(out.view(np.int16)[:512], want)
    else:
        np.testing.assert_array_equal(out.view(np.uint8)[:32], want)


def test_every_vector_api_entry_asks_the_table():
    """The header's static_asserts hold its rows to the Api enum; here, that every public entry of
    the simulator's vector headers whose API has a row asks the table (OnArch) before it works, itself
    or through the one helper it hands over to, so no API bypasses it."""
    import re

    inc = TESTS.parent / "sim" / "include" / "ascendc_sim"
    apis = set(re.findall(r"\{Api::(\w+), \"", (inc / "arch_surface.h").read_text()))
    assert {"WholeReduceMax", "BlockReduceSum", "Maxs", "Brcb", "DataCopyPad", "Mmad"} <= apis
    seen = set()
    for header in ("vec.h", "vec_int.h", "vec_fixed16.h", "data_copy.h"):
        text = (inc / header).read_text()
        for m in re.finditer(r"^void (\w+)\(.*?\{\n(.*?)\n\}\n", text, re.M | re.S):
            name, body = m.group(1), m.group(2)
            if name not in apis:
                continue
            seen.add(name)
            head = "\n".join(line for line in body.splitlines() if "static_assert" not in line and
                             not line.strip().startswith(('"', "//")))[:400]
            delegated = re.search(r"sim::(Shift|Bitwise|CopyGmUb|BlockCopyGmUb|EnterDataCopyPad<T>)\(", head) or \
                "DataCopyPad(dst, src, DataCopyExtParams(" in head
            assert "OnArch" in head or delegated, (header, name, head)
    assert {"Add", "Maxs", "WholeReduceMax", "BlockReduceMax", "Brcb", "Compares", "Gather", "DataCopy",
            "DataCopyPad", "ShiftLeft"} <= seen
