"""The check of `acl-fa run --parallel` on long sequences (acl_fa.jobs.parallel_run.check_sharded):
above CHECK_ALL_ROWS it compares sampled blocks of query rows, each exact against the float64
reference of the whole sequence (causal: keys [0, b) for the block [a, b)). No device work."""
import numpy as np
import pytest

from acl_fa.jobs import parallel_run
from acl_fa.spec.layouts import from_bnsd, shape_of, to_bnsd
from acl_fa.reference.attention import attention_reference
from acl_fa.spec.problem import problem_from_sizes


@pytest.fixture
def small_sampling(monkeypatch):
    monkeypatch.setattr(parallel_run, "CHECK_ALL_ROWS", 64)
    monkeypatch.setattr(parallel_run, "SAMPLE_ROWS", 8)


def test_sampled_rows_spread_over_the_sequence_and_end_at_s(small_sampling):
    assert parallel_run.sampled_rows(64) == [(0, 64)]
    assert parallel_run.sampled_rows(200) == [(0, 8), (64, 72), (128, 136), (192, 200)]


@pytest.mark.parametrize("causal, layout", [(True, "BNSD"), (False, "BSND"), (True, "BSH")])
def test_sampled_check_passes_the_reference_and_catches_a_wrong_sampled_row(small_sampling, causal, layout):
    rng = np.random.default_rng(1)
    n, nkv, s, d = 2, 1, 200, 32
    q = rng.standard_normal(shape_of(layout, 1, n, s, d)).astype(np.float16)
    k, v = (rng.standard_normal(shape_of(layout, 1, nkv, s, d)).astype(np.float16) for _ in range(2))
    names = dict(num_heads=n, num_kv_heads=nkv) if layout == "BSH" else {}
    ref, lse = attention_reference(q, k, v, causal=causal, layout=layout, **names)
    out = ref.astype(np.float16)
    problem = problem_from_sizes(seq_q=s, num_heads=n, num_kv_heads=nkv, head_dim=d, layout=layout, causal=causal)
    assert parallel_run.check_sharded(problem, q, k, v, out, lse.astype(np.float32)).ok
    for row, caught in ((130, True), (199, True), (100, False)):  # 100 lies between the sampled blocks
        bad = to_bnsd(out, layout, n).copy()
        bad[0, 0, row] += np.float16(0.25)
        acc = parallel_run.check_sharded(problem, q, k, v, from_bnsd(bad, layout), lse.astype(np.float32))
        assert acc.ok is not caught, (row, acc)
