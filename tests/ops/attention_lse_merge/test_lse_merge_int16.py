"""AttentionLseMergeInt16 (acl_fa.ops.lse_merge, docs/lse_merge.md): the merge with the running result
in int16 units of a per-row bound, against a float64 merge -- every dtype column of the OpDef
(int16 out: a running merge; T out: the final conversion), the empty first merge (bound 0, LSE
-inf, whatever out_a holds), rows no key reached, tails and tiles; a running merge of five partials
in place ending in T over the int16 memory; its GM traffic; chips without the int16 Cast and bad
input refused before device work, named.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.ops import lse_merge
from acl_fa.runtime.device_array import DeviceArray
from acl_fa.runtime.errors import AclFaError, InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.sim_stats import last_launch
from conftest import run_python
from test_lse_merge import F16, BF16, F32, KERNEL_TYPE_AIV_ONLY, _partials

I16 = np.dtype(np.int16)
UNITS = lse_merge.FIXED16_UNITS


def _fixed_partials(shape, b_dtype, seed=0, dead=True):
    """_partials with out_a as an int16 running result and its row bounds."""
    out_a, lse_a, out_b, lse_b = _partials(shape, F32, b_dtype, seed=seed, dead=dead)
    values, bound = lse_merge.to_fixed16(out_a)
    return values, bound, lse_a, out_b, lse_b


def _check(got, values, bound, lse_a, out_b, lse_b, out_dtype):
    """The device result against the float64 merge of (values * bound / 32767, lse_a) and
    (out_b, lse_b): the new bound exactly max(bound, max |out_b|); an int16 result within half a
    unit of it plus float32 arithmetic, a T result within one rounding of T; dead rows 0 / -inf."""
    out, new_bound, lse = got
    ref, ref_lse = lse_merge.merge_reference([(lse_merge.from_fixed16(values, bound), lse_a), (out_b, lse_b)])
    assert out.dtype == out_dtype and new_bound.dtype == lse.dtype == F32
    expected_bound = np.maximum(bound, np.abs(out_b.astype(np.float32)).max(axis=-1))
    np.testing.assert_array_equal(new_bound, expected_bound)
    dead = np.isneginf(ref_lse)
    assert np.array_equal(np.isneginf(lse), dead)
    if out_dtype == I16:
        unit = new_bound[..., None].astype(np.float64) / UNITS
        err = np.abs(lse_merge.from_fixed16(out, new_bound) - ref)
        assert np.all(err <= 0.5 * unit + 2e-6 * np.abs(ref) + 1e-30), float((err / np.maximum(unit, 1e-30)).max())
    else:
        eps = float(ml_dtypes.finfo(out_dtype).eps)
        err = np.abs(out.astype(np.float64) - ref)
        assert np.all(err <= eps * np.abs(ref) + 1e-6 * (1 + np.abs(ref))), float(err.max())
    assert not np.any(out.astype(np.float64)[dead])
    live = ~dead
    np.testing.assert_allclose(lse[live], ref_lse[live], rtol=1e-6, atol=1e-5)


COLUMNS = [(F16, I16), (F16, F16), (BF16, I16), (BF16, BF16), (F32, I16), (F32, F32)]  # out_b, attention_out
SHAPES = [(2, 3, 37, 64), (1, 1, 1, 16), (1, 2, 1000, 256)]  # a 6-row tail; only a tail; several tiles per core


@pytest.mark.parametrize("b_dtype, out_dtype", COLUMNS, ids=lambda d: d.name)
def test_every_dtype_column_matches_the_float64_merge(b_dtype, out_dtype):
    parts = _fixed_partials((2, 3, 37, 64), b_dtype, seed=1)
    got = lse_merge.merge_partials_int16(*parts, out_dtype=out_dtype, backend="sim")
    _check(got, *parts, out_dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tails_and_tiles_match_and_move_the_modeled_bytes_on_the_vector_cores(shape):
    parts = _fixed_partials(shape, F16, seed=2)
    with acl_fa.Session(backend="sim") as s:
        got = lse_merge.merge_partials_int16(*parts, session=s)
        stats = last_launch(s.backend, per_core=True)
    _check(got, *parts, I16)
    problem = lse_merge.make_int16_problem(*parts)
    assert stats["kernel_type"] == KERNEL_TYPE_AIV_ONLY and not stats["aic"]
    assert stats["gm_bytes"] == problem.gm_bytes()  # each byte of the eight tensors once


def test_the_empty_first_merge_takes_the_partial_whatever_out_a_holds():
    """bound 0 and LSE -inf: a row nothing was merged into yet; out_a's int16 garbage weighs 0."""
    shape = (1, 2, 24, 32)
    _, _, _, out_b, lse_b = _fixed_partials(shape, F16, seed=3, dead=False)
    garbage = np.random.default_rng(4).integers(-32767, 32768, shape).astype(np.int16)
    out, bound, lse = lse_merge.merge_partials_int16(garbage, np.zeros(shape[:-1], F32),
                                                     np.full(shape[:-1], -np.inf, F32), out_b, lse_b, backend="sim")
    expected, expected_bound = lse_merge.to_fixed16(out_b.astype(np.float32))
    np.testing.assert_array_equal(bound, expected_bound)
    np.testing.assert_array_equal(lse, lse_b)
    assert np.max(np.abs(out.astype(np.int32) - expected)) <= 1  # float32 scaling vs the host's


def test_running_merge_of_five_partials_in_place_ends_in_the_input_dtype_over_the_int16_memory():
    """The ring's use: one 2-byte buffer holds the int16 running result and then, after the last
    merge, the result in T; it equals the float64 merge of all five within one rounding of T."""
    shape = (1, 4, 50, 32)
    parts = [_partials(shape, F16, F16, seed=10 + i)[:2] for i in range(5)]
    parts[0] = (parts[0][0] * 8, parts[0][1] + 5)  # an early, dominant, large partial (q = k = v's shape)
    with acl_fa.Session(backend="sim") as s:
        memory = s.alloc(int(np.prod(shape)) * 2)
        acc, final = DeviceArray(s, shape, I16, _buffer=memory), DeviceArray(s, shape, F16, _buffer=memory)
        bound = s.to_device(np.zeros(shape[:-1], F32))
        lse = s.to_device(np.full(shape[:-1], -np.inf, F32))
        dev = [(s.to_device(o.astype(F16)), s.to_device(l)) for o, l in parts]
        stream = s.stream()
        for i, pair in enumerate(dev):
            out = final if i == len(dev) - 1 else acc
            lse_merge.enqueue_merge_int16(s, stream, acc, bound, lse, *pair, out, bound, lse)
        stream.synchronize()
        out, got_lse = final.numpy(), lse.numpy()
        for x in (bound, lse, *(a for pair in dev for a in pair)):
            x.close()
        acc.buffer = final.buffer = None
        memory.close()
        stream.close()
    ref, ref_lse = lse_merge.merge_reference([(o.astype(F16), l) for o, l in parts])
    err = np.abs(out.astype(np.float64) - ref)
    assert np.all(err <= float(np.finfo(np.float16).eps) * np.abs(ref) + 1e-3), float(err.max())
    np.testing.assert_allclose(got_lse, ref_lse, rtol=1e-6, atol=1e-5)


def test_an_output_overlapping_another_tensor_is_refused_by_phase_one():
    shape = (1, 1, 16, 16)
    with acl_fa.Session(backend="sim") as s:
        a, ba, la, b, lb = (s.to_device(x) for x in _fixed_partials(shape, F16))
        stream = s.stream()
        with pytest.raises(AclFaError, match="boundOutOut overlaps lseA; an output may only be exactly the "
                                             "memory of boundA"):
            lse_merge.enqueue_merge_int16(s, stream, a, ba, la, b, lb, a, la, lb)
        stream.close()


BAD = [  # what is changed, error, words
    (dict(out_a=np.zeros((1, 2, 9, 32), F16)), InvalidTypeError,
     "out_a must be int16 (the running result in units of bound_a / 32767), got float16"),
    (dict(bound_a=np.zeros((1, 2, 8), F32)), InvalidArgumentError,
     "bound_a has shape (1, 2, 8); it must be out_a's leading dims (1, 2, 9)"),
    (dict(bound_a=np.zeros((1, 2, 9), F16)), InvalidTypeError, "bound_a must be float32, got float16"),
    (dict(out_dtype=F32), InvalidTypeError, "out_dtype must be int16 or out_b's dtype (float16), got float32"),
    (dict(out_b=np.zeros((1, 2, 9, 32), np.int16)), InvalidTypeError,
     "out_b must be float16, bfloat16 or float32, got int16"),
]


@pytest.mark.parametrize("change, error, words", BAD, ids=[w[:30] for _, _, w in BAD])
def test_bad_input_is_refused_before_device_work_naming_the_argument(change, error, words):
    args = dict(out_a=np.zeros((1, 2, 9, 32), I16), bound_a=np.zeros((1, 2, 9), F32), lse_a=np.zeros((1, 2, 9), F32),
                out_b=np.zeros((1, 2, 9, 32), F16), lse_b=np.zeros((1, 2, 9), F32))
    args.update(change)
    out_dtype = args.pop("out_dtype", I16)
    with acl_fa.Session(backend="sim") as s:
        before = s.copy_counters()
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            lse_merge.merge_partials_int16(**args, out_dtype=out_dtype, session=s)
        assert s.copy_counters() == before  # nothing reached the device


COUPLED_SCRIPT = """
import json
import numpy as np, acl_fa
from acl_fa.ops import lse_merge
from test_lse_merge_int16 import _fixed_partials, F16

with acl_fa.Session(backend="sim") as s:
    before = s.copy_counters()
    try:
        lse_merge.merge_partials_int16(*_fixed_partials((1, 1, 8, 16), F16), session=s)
        refusal = "none"
    except acl_fa.InvalidTypeError as exc:
        refusal = str(exc)
    print(json.dumps(dict(soc=s.soc_name(), refusal=refusal, untouched=s.copy_counters() == before)))
"""


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
def test_coupled_chips_refuse_the_int16_merge_naming_the_chip(soc):
    got = run_python(COUPLED_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    assert got["soc"] == soc and got["untouched"]
    assert got["refusal"].startswith(f"the int16 running result needs Atlas A2/A3: the vector unit of")
    assert f"({soc})" in got["refusal"] or soc in got["refusal"]
