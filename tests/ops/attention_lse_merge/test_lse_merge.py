"""AttentionLseMerge (acl_fa.ops.lse_merge): the device merge of two partial attention results by their
LSE against a float64 numpy merge -- every dtype combination of the OpDef, rows no key reached
(-inf LSEs), rows spread over several tiles per core, row counts not a multiple of the 8-row
block, every chip family; in place; its GM traffic; bad input refused before device work, named.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import acl_fa
from acl_fa.ops import lse_merge
from acl_fa.runtime.errors import AclFaError, InvalidArgumentError, InvalidTypeError
from acl_fa.runtime.sim_stats import last_launch
from conftest import run_python

F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AICORE = 0, 6


def _partials(shape, a_dtype, b_dtype, seed=0, dead=True):
    """Two partial results of the same rows: out ~ N(0, 1), LSEs spread over +-20 so either side
    can dominate. With `dead`, some rows have lse_a -inf, some lse_b -inf, some both (their out 0,
    as the forward writes a row that saw no key)."""
    rng = np.random.default_rng(seed)
    lead = shape[:-1]
    out_a = rng.standard_normal(shape).astype(a_dtype)
    out_b = rng.standard_normal(shape).astype(b_dtype)
    lse_a = (rng.standard_normal(lead) * 20).astype(np.float32)
    lse_b = (lse_a + rng.standard_normal(lead) * 3).astype(np.float32)
    if dead:
        flat_a, flat_b = lse_a.reshape(-1), lse_b.reshape(-1)
        rows = flat_a.size
        a_dead, b_dead = np.arange(rows) % 5 == 1, np.arange(rows) % 7 == 2
        flat_a[a_dead] = -np.inf
        flat_b[b_dead] = -np.inf
        out_a.reshape(-1, shape[-1])[a_dead] = 0
        out_b.reshape(-1, shape[-1])[b_dead] = 0
    return out_a, lse_a, out_b, lse_b


def _assert_merged(out, lse, out_a, lse_a, out_b, lse_b, out_dtype):
    ref, ref_lse = lse_merge.merge_reference([(out_a, lse_a), (out_b, lse_b)])
    assert out.dtype == out_dtype and out.shape == out_a.shape
    assert lse.dtype == F32 and lse.shape == lse_a.shape
    dead = np.isneginf(ref_lse)
    assert np.array_equal(np.isneginf(lse), dead), "rows that saw no key: LSE -inf, and only those"
    assert not np.any(out.astype(np.float64)[dead]), "rows that saw no key: output 0"
    # fp32 arithmetic (a few ulps of float32) plus one rounding to the output dtype.
    eps = float(ml_dtypes.finfo(out_dtype).eps)
    err = np.abs(out.astype(np.float64) - ref)
    assert np.all(err <= eps * np.abs(ref) + 1e-6 * (1 + np.abs(ref))), float(err.max())
    live = ~dead
    assert np.max(np.abs(lse[live] - ref_lse[live]), initial=0) <= 1e-5 * (1 + np.max(np.abs(ref_lse[live]),
                                                                                        initial=0))


COMBOS = [  # out_a, out_b, result: the OpDef's nine columns
    (F32, F16, F32), (F32, F16, F16), (F16, F16, F32), (F16, F16, F16),
    (F32, BF16, F32), (F32, BF16, BF16), (BF16, BF16, F32), (BF16, BF16, BF16),
    (F32, F32, F32),
]
SHAPES = [  # [..., D]
    (2, 3, 37, 64),     # 222 rows: a 6-row tail on the last core
    (1, 1, 1, 16),      # one row: only a tail
    (1, 2, 1000, 256),  # 2000 rows of D 256: several tiles per core
    (3, 40, 128),       # rank 3: any leading dims
]


def _id(x):
    return "-".join(d.name for d in x)


@pytest.mark.parametrize("combo", COMBOS, ids=_id)
def test_every_dtype_combination_matches_the_float64_merge(combo):
    a_dtype, b_dtype, out_dtype = combo
    parts = _partials((2, 3, 37, 64), a_dtype, b_dtype, seed=1)
    out, lse = lse_merge.merge_partials(*parts, out_dtype=out_dtype, backend="sim")
    _assert_merged(out, lse, *parts, out_dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shapes_tails_and_tiles_match_the_float64_merge_and_move_the_modeled_bytes(shape):
    parts = _partials(shape, F32, F16, seed=2)
    with acl_fa.Session(backend="sim") as s:
        out, lse = s.merge_attention_partials(*parts, out_dtype=F32)
        stats = last_launch(s.backend, per_core=True)
    _assert_merged(out, lse, *parts, F32)
    problem = lse_merge.make_problem(*parts, F32)
    assert stats["kernel_type"] == KERNEL_TYPE_AIV_ONLY and not stats["aic"]
    assert stats["gm_bytes"] == problem.gm_bytes()  # each byte of the six tensors once
    # Rows balanced over the vector cores: 8-row blocks, shares differing by at most one block.
    blocks = -(-problem.rows // 8)
    assert stats["block_dim"] == min(48, blocks)  # Ascend910B2: 48 AIVs
    reads = sorted(core["gm_read_bytes"] for core in stats["aiv"])
    row_bytes = problem.shape[-1] * (4 + 2) + 8
    assert reads[-1] - reads[0] <= 8 * row_bytes, reads


def test_all_rows_dead_and_one_side_dead():
    shape = (1, 2, 24, 32)
    out_a, lse_a, out_b, lse_b = _partials(shape, F32, F16, dead=False)
    lse_a[0, 0] = -np.inf  # head 0: a saw nothing
    out_a[0, 0] = 0
    lse_b[0, 1] = -np.inf  # head 1: b saw nothing
    out_b[0, 1] = 0
    out, lse = acl_fa.merge_attention_partials(out_a, lse_a, out_b, lse_b, out_dtype=F32, backend="sim")
    np.testing.assert_array_equal(out[0, 0], out_b[0, 0].astype(np.float32))
    np.testing.assert_array_equal(lse[0, 0], lse_b[0, 0])
    np.testing.assert_allclose(out[0, 1], out_a[0, 1], rtol=1e-6, atol=0)
    np.testing.assert_allclose(lse[0, 1], lse_a[0, 1], rtol=1e-6)
    both = lse_merge.merge_partials(out_a * 0, np.full_like(lse_a, -np.inf), out_b * 0, np.full_like(lse_b, -np.inf),
                                    backend="sim")
    assert not np.any(both[0].astype(np.float32)) and np.all(np.isneginf(both[1]))


def test_in_place_running_merge_of_four_partials():
    """A float32 accumulator merged in place on the device equals the float64 merge of all four."""
    shape = (1, 4, 50, 32)
    parts = [_partials(shape, F16, F16, seed=10 + i)[:2] for i in range(4)]
    with acl_fa.Session(backend="sim") as s:
        acc = (s.empty(shape, F32), s.empty(shape[:-1], F32))
        final = (s.empty(shape, F16), s.empty(shape[:-1], F32))
        dev = [(s.to_device(o), s.to_device(l)) for o, l in parts]
        stream = s.stream()
        lse_merge.enqueue_merge(s, stream, *dev[0], *dev[1], *acc)
        lse_merge.enqueue_merge(s, stream, *acc, *dev[2], *acc)  # in place
        lse_merge.enqueue_merge(s, stream, *acc, *dev[3], *final)
        stream.synchronize()
        out, lse = final[0].numpy(), final[1].numpy()
        for x in (*acc, *final, *(a for pair in dev for a in pair)):
            x.close()
        stream.close()
    ref, ref_lse = lse_merge.merge_reference(parts)
    assert np.max(np.abs(out.astype(np.float64) - ref)) <= float(np.finfo(np.float16).eps) * np.max(np.abs(ref))
    live = np.isfinite(ref_lse)
    assert np.array_equal(np.isneginf(lse), ~live)
    assert np.max(np.abs(lse[live] - ref_lse[live])) <= 1e-4


def test_an_output_overlapping_another_input_is_refused_by_phase_one():
    shape = (1, 1, 16, 16)
    with acl_fa.Session(backend="sim") as s:
        a, la, b, lb = (s.to_device(x) for x in _partials(shape, F16, F16))
        stream = s.stream()
        with pytest.raises(AclFaError, match="attentionOutOut overlaps outB; an output may only be exactly the "
                                             "memory of outA"):
            lse_merge.enqueue_merge(s, stream, a, la, b, lb, b, la)
        stream.close()


BAD = [  # what is changed, error, words
    (dict(out_b=np.zeros((1, 2, 8, 32), F16)), InvalidArgumentError,
     "out_b has shape (1, 2, 8, 32); it must have out_a's shape (1, 2, 9, 32)"),
    (dict(lse_a=np.zeros((1, 2, 8), F32)), InvalidArgumentError,
     "lse_a has shape (1, 2, 8); it must be out_a's leading dims (1, 2, 9)"),
    (dict(lse_b=np.zeros((1, 2, 9), np.float64)), InvalidTypeError, "lse_b must be float32, got float64"),
    (dict(out_a=np.zeros((1, 2, 9, 32), BF16)), InvalidTypeError,
     "out_a must be float32 or out_b's dtype (float16), got bfloat16"),
    (dict(out_b=np.zeros((1, 2, 9, 32), np.int32)), InvalidTypeError,
     "out_b must be float16, bfloat16 or float32, got int32"),
    (dict(out_dtype=BF16), InvalidTypeError, "out_dtype must be float32 or out_b's dtype (float16), got bfloat16"),
    (dict(out_a=np.zeros((1, 2, 9, 24), F16), out_b=np.zeros((1, 2, 9, 24), F16)), InvalidArgumentError,
     "head_dim D=24 (the last dim of out_a) must be a multiple of 16"),
    (dict(out_a=np.zeros((9,), F16), out_b=np.zeros((9,), F16), lse_a=np.zeros((), F32), lse_b=np.zeros((), F32)),
     InvalidArgumentError, "out_a must be [..., D] with at least 2 dims"),
    (dict(out_a=[[0.0] * 32]), InvalidTypeError, "out_a must be a numpy array or a DeviceArray, got list"),
]


@pytest.mark.parametrize("change, error, words", BAD, ids=[w[:30] for _, _, w in BAD])
def test_bad_input_is_refused_before_device_work_naming_the_argument(change, error, words):
    args = dict(out_a=np.zeros((1, 2, 9, 32), F16), lse_a=np.zeros((1, 2, 9), F32),
                out_b=np.zeros((1, 2, 9, 32), F16), lse_b=np.zeros((1, 2, 9), F32))
    args.update(change)
    out_dtype = args.pop("out_dtype", None)
    with acl_fa.Session(backend="sim") as s:
        before = s.copy_counters()
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                           .replace(".", r"\.")):
            lse_merge.merge_partials(**args, out_dtype=out_dtype, session=s)
        assert s.copy_counters() == before  # nothing reached the device


COUPLED_SCRIPT = """
import json
import numpy as np, ml_dtypes, acl_fa
from acl_fa.ops import lse_merge
from acl_fa.runtime.sim_stats import last_launch
from test_lse_merge import _partials, _assert_merged, F16, F32, BF16

with acl_fa.Session(backend="sim") as s:
    soc = s.soc_name()
    results = {}
    for a, b, o in [(F32, F16, F32), (F16, F16, F16), (F32, F16, F16), (F32, F32, F32)]:
        parts = _partials((2, 3, 37, 64), a, b, seed=3)
        out, lse = lse_merge.merge_partials(*parts, out_dtype=o, session=s)
        _assert_merged(out, lse, *parts, o)
        stats = last_launch(s.backend, per_core=True)
        results[f"{a}-{b}-{o}"] = dict(kernel_type=stats["kernel_type"], aic=len(stats["aic"]),
                                      gm=stats["gm_bytes"] == lse_merge.make_problem(*parts, o).gm_bytes())
    try:
        lse_merge.merge_partials(*_partials((1, 1, 8, 16), BF16, BF16), session=s)
        refusal = "none"
    except acl_fa.InvalidTypeError as exc:
        refusal = str(exc)
print(json.dumps(dict(soc=soc, results=results, refusal=refusal)))
"""


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend910A"])
def test_coupled_chips_merge_on_their_ai_cores_and_refuse_bfloat16(soc):
    got = run_python(COUPLED_SCRIPT, ACL_FA_BACKEND="sim", ACL_FA_SIM_SOC=soc)
    assert got["soc"] == soc
    for name, r in got["results"].items():
        assert r == dict(kernel_type=KERNEL_TYPE_AICORE, aic=r["aic"], gm=True) and r["aic"] > 0, (name, r)
    assert got["refusal"].startswith(f"bfloat16 partials need Atlas A2/A3: the vector unit of {soc}")
