"""The simulator's APIs of 16-bit fixed point (sim/include/ascendc_sim/vec_fixed16.h) through the
probe kernel: Cast float -> int16_t in each round mode asc-devkit's Cast.md lists for Atlas A2/A3
and back (int16_t -> float, CAST_NONE), against numpy; a value outside int16_t and CAST_NONE on
float -> int16_t are violations naming the rule; Abs against numpy."""
import sys
import pathlib

import numpy as np
import pytest

import simlib  # noqa: E402

PROBE_CAST_I16, PROBE_ABS, PROBE_BAD_CAST_I16_MODE = 17, 18, 117
CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC = 1, 2, 3, 4, 5  # RoundMode's values


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


MODES = [(CAST_RINT, np.rint), (CAST_FLOOR, np.floor), (CAST_CEIL, np.ceil), (CAST_ROUND, _round_half_away),
         (CAST_TRUNC, np.trunc)]


@pytest.mark.parametrize("mode, reference", MODES, ids=["rint", "floor", "ceil", "round", "trunc"])
def test_cast_to_int16_rounds_as_its_mode_and_back_exactly(sim, mode, reference):
    ties = np.array([2.5, -2.5, 3.5, -3.5, 0.5, -0.5, 32766.5, -32767.5], np.float32)
    x = np.concatenate([ties, np.random.default_rng(mode).uniform(-32767, 32767, 93).astype(np.float32)])
    rc, msg, out = sim.probe(PROBE_CAST_I16, x, param=float(mode))
    assert rc == 0, msg
    np.testing.assert_array_equal(out[:x.size], reference(x.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("value, element", [(32767.6, 3), (-32768.6, 0), (np.nan, 5)], ids=["over", "under", "nan"])
def test_cast_to_int16_outside_its_range_is_a_violation(sim, value, element):
    x = np.zeros(16, np.float32)
    x[element] = value
    rc, msg, _ = sim.probe(PROBE_CAST_I16, x, param=float(CAST_RINT))
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert "rule 'Cast range' violated on AIV 0 in Cast: " in msg and f"(element {element}) rounds outside int16_t" \
        in msg, msg


def test_cast_to_int16_with_cast_none_is_a_violation(sim):
    rc, msg, _ = sim.probe(PROBE_BAD_CAST_I16_MODE, np.ones(16, np.float32))
    assert rc == simlib.AICORE_EXCEPTION, msg
    assert "rule 'Cast mode' violated on AIV 0 in Cast: float -> int16_t takes CAST_RINT" in msg, msg


def test_abs(sim):
    x = np.random.default_rng(1).standard_normal(101).astype(np.float32)
    x[:4] = [-0.0, np.inf, -np.inf, -3e38]
    rc, msg, out = sim.probe(PROBE_ABS, x)
    assert rc == 0, msg
    np.testing.assert_array_equal(out[:x.size], np.abs(x))
