"""The routing rule (issue #34, acl_fa.plan.routing): every entry point of the forward --
acl_fa.flash_attention, Session.flash_attention, flash_attn_func, scaled_dot_product_attention,
``acl-fa run`` and ``acl-fa plan`` -- runs a decode-shaped call on the decode op's split-KV kernel
(the launch's kernel says which ran) with the general forward's results within the accuracy rule,
its outputs (LSE included) and its errors; prefill-shaped calls and calls with options only the
general forward has keep it."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main
from acl_fa.ops.forward import flash_attention as general_flash_attention
from acl_fa.plan import routing, timing
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.runtime import sim_stats
from acl_fa.spec.layouts import to_bnsd
from acl_fa.spec.problem import problem_from_sizes

# A decode-shaped call the decode op's tiling models faster than the forward's (B1 N32 Nkv8 D128,
# one query token against 2048 keys), and a prefill-shaped one.
DECODE = dict(batch=1, heads=32, kv_heads=8, seq_q=1, seq_kv=2048, head_dim=128)
PREFILL = dict(batch=1, heads=4, kv_heads=2, seq_q=256, seq_kv=256, head_dim=64)


def _shape(layout, batch, heads, seq, d):
    return {"BNSD": (batch, heads, seq, d), "BSND": (batch, seq, heads, d), "BSH": (batch, seq, heads * d)}[layout]


def _inputs(rng, layout, dims, dtype=np.float16):
    q = rng.standard_normal(_shape(layout, dims["batch"], dims["heads"], dims["seq_q"], dims["head_dim"]),
                            dtype=np.float32).astype(dtype)
    kv = _shape(layout, dims["batch"], dims["kv_heads"], dims["seq_kv"], dims["head_dim"])
    k = rng.standard_normal(kv, dtype=np.float32).astype(dtype)
    v = rng.standard_normal(kv, dtype=np.float32).astype(dtype)
    return q, k, v


def _check(q, k, v, out, lse, layout, dims, causal):
    """out/lse against the float64 reference by the 2x-naive rule (the accuracy rule)."""
    kw = dict(causal=causal, scale=None, layout=layout, num_heads=dims["heads"], num_kv_heads=dims["kv_heads"],
              heads=list(range(dims["heads"])))
    ref, ref_lse = attention_reference(q, k, v, **kw)
    naive = naive_same_precision(q, k, v, q.dtype, **kw)
    name = "bfloat16" if q.dtype == np.dtype(ml_dtypes.bfloat16) else "float16"
    got = to_bnsd(np.asarray(out), layout, dims["heads"]).astype(np.float64)
    acc = check_accuracy(got, lse, to_bnsd(ref, layout, dims["heads"]), ref_lse, naive, name,
                         range(dims["heads"]))
    assert acc.ok, acc


def _kernel(backend):
    return sim_stats.last_launch(backend)["kernel"]


# ---- the rule --------------------------------------------------------------------------------

def _problem(dims, **kw):
    return problem_from_sizes(seq_q=dims["seq_q"], seq_kv=dims["seq_kv"], batch=dims["batch"],
                              num_heads=dims["heads"], num_kv_heads=dims["kv_heads"], head_dim=dims["head_dim"], **kw)


def test_decode_shapes_route_by_modeled_cost():
    for dims in (DECODE, dict(DECODE, seq_kv=32768), dict(DECODE, seq_q=16, seq_kv=32768)):
        r = routing.route(_problem(dims, layout="BSND"))
        assert r.decode, r
        assert r.decode_us < r.forward_us  # the closed forms of both tilings decide
        assert f"{r.decode_us:.1f} us" in r.reason and f"{r.forward_us:.1f} us" in r.reason
    r = routing.route(_problem(DECODE, layout="BSND", block_m=32, block_n=128))
    assert not r.decode and "block_m" in r.reason


def test_forward_keeps_what_the_decode_op_cannot_serve_better():
    prefill = routing.route(_problem(PREFILL))
    assert not prefill.decode and "query rows per kv head" in prefill.reason
    fp32 = routing.route(_problem(DECODE, dtype="float32"))
    assert not fp32.decode and "float32" in fp32.reason
    short = routing.route(_problem(dict(DECODE, heads=8, kv_heads=2, seq_kv=512)))
    assert not short.decode and short.forward_us <= short.decode_us  # both modeled, the forward cheaper
    # one query head per kv head with the forward's items filling every AI Core: nothing to win
    mha = routing.route(_problem(dict(batch=4, heads=16, kv_heads=16, seq_q=1, seq_kv=4096, head_dim=128)))
    assert not mha.decode and "fill the 24 AI Cores" in mha.reason and mha.decode_us is not None
    few = routing.route(_problem(dict(batch=1, heads=8, kv_heads=8, seq_q=1, seq_kv=32768, head_dim=128)))
    assert few.decode  # 8 forward items leave 16 AI Cores idle: the split-KV uses them
    # rows whose buffers do not fit one group: the decode op runs them in row groups (reading the
    # keys once per row group), and the forward models faster here
    big = routing.route(_problem(dict(batch=1, heads=2, kv_heads=2, seq_q=200, seq_kv=50, head_dim=64)))
    assert not big.decode and big.decode_us is not None and big.forward_us < big.decode_us


# ---- every entry point -----------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["BSND", "BNSD", "BSH"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_runs_the_decode_op(session, sim_only, layout, causal):
    rng = np.random.default_rng(1)
    dims = dict(DECODE, seq_q=3) if causal else DECODE  # causal with Sq > 1: bottom-right rows
    q, k, v = _inputs(rng, layout, dims)
    kw = dict(layout=layout, causal=causal, num_heads=dims["heads"], num_kv_heads=dims["kv_heads"],
              return_lse=True)
    out, lse = session.flash_attention(q, k, v, **kw)
    assert _kernel(session.backend) == "flash_attention_decode"
    assert session.last_route().decode
    general_out, general_lse = general_flash_attention(q, k, v, session=session, **kw)
    assert _kernel(session.backend) == "flash_attention"
    assert out.shape == general_out.shape and out.dtype == general_out.dtype and lse.shape == general_lse.shape
    _check(q, k, v, out, lse, layout, dims, causal)
    np.testing.assert_allclose(lse, general_lse, atol=1e-4)
    np.testing.assert_allclose(out.astype(np.float32), general_out.astype(np.float32), atol=2e-3)


def test_module_function_and_bf16(backend, sim_only):
    rng = np.random.default_rng(2)
    q, k, v = _inputs(rng, "BNSD", DECODE, np.dtype(ml_dtypes.bfloat16))
    out = acl_fa.flash_attention(q, k, v, num_heads=32, num_kv_heads=8)
    assert _kernel(backend) == "flash_attention_decode"
    _, lse = general_flash_attention(q, k, v, return_lse=True)
    _check(q, k, v, out, lse, "BNSD", DECODE, False)


def test_flash_attn_func_runs_the_decode_op(backend, sim_only):
    rng = np.random.default_rng(3)
    q, k, v = _inputs(rng, "BSND", DECODE)
    out, lse, probs = acl_fa.flash_attn_func(q, k, v, return_attn_probs=True)
    assert _kernel(backend) == "flash_attention_decode" and probs is None
    assert lse.shape == (1, 32, 1) and lse.dtype == np.float32
    _check(q, k, v, out, lse, "BSND", DECODE, False)


def test_scaled_dot_product_attention_runs_the_decode_op(backend, sim_only):
    rng = np.random.default_rng(4)
    q, k, v = _inputs(rng, "BNSD", DECODE)
    out = acl_fa.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert _kernel(backend) == "flash_attention_decode"
    _, lse = general_flash_attention(q, k, v, num_heads=32, num_kv_heads=8, return_lse=True)
    _check(q, k, v, out, lse, "BNSD", DECODE, False)


def test_prefill_shaped_call_runs_the_forward(session, sim_only):
    rng = np.random.default_rng(5)
    q, k, v = _inputs(rng, "BNSD", PREFILL)
    session.flash_attention(q, k, v, causal=True, num_heads=4, num_kv_heads=2)
    assert _kernel(session.backend) == "flash_attention"
    assert not session.last_route().decode


@pytest.mark.parametrize("option, words", [
    (dict(block_m=32, block_n=128), "block_m"),
    (dict(window=(64, 0)), "window"),
    (dict(attn_mask=np.ones((1, 2048), bool)), "attn_mask"),
    (dict(softcap=30.0), "softcap"),
])
def test_options_only_the_forward_has_keep_it(session, sim_only, option, words):
    rng = np.random.default_rng(6)
    q, k, v = _inputs(rng, "BNSD", DECODE)
    session.flash_attention(q, k, v, num_heads=32, num_kv_heads=8, **option)
    assert _kernel(session.backend).startswith("flash_attention") and _kernel(session.backend) != \
        "flash_attention_decode"
    route = session.last_route()
    assert not route.decode and words in route.reason


def test_device_arrays_route_in_place_only_in_bsnd(session, sim_only):
    rng = np.random.default_rng(7)
    for layout, ran in (("BSND", "flash_attention_decode"), ("BNSD", "flash_attention")):
        q, k, v = (session.to_device(x) for x in _inputs(rng, layout, DECODE))
        try:
            session.flash_attention(q, k, v, layout=layout, num_heads=32, num_kv_heads=8)
            assert _kernel(session.backend) == ran
        finally:
            for x in (q, k, v):
                x.close()


@pytest.mark.parametrize("bad, error", [
    (dict(layout="NSBD"), acl_fa.InvalidArgumentError),
    (dict(scale="big"), acl_fa.InvalidTypeError),
    (dict(return_lse=1), acl_fa.InvalidTypeError),
    (dict(num_kv_heads=5), acl_fa.InvalidArgumentError),
])
def test_errors_are_the_general_forwards(session, bad, error):
    rng = np.random.default_rng(8)
    q, k, v = _inputs(rng, "BNSD", DECODE)
    kw = dict(dict(num_heads=32, num_kv_heads=8), **bad)
    with pytest.raises(error) as routed:
        session.flash_attention(q, k, v, **kw)
    with pytest.raises(error) as general:
        general_flash_attention(q, k, v, session=session, **kw)
    assert str(routed.value) == str(general.value)


def test_routed_decode_kernel_has_no_race(session, sim_only):
    rng = np.random.default_rng(9)
    q, k, v = _inputs(rng, "BSND", dict(DECODE, seq_q=2))
    with timing.op_trace(session.backend, races=True):
        session.flash_attention(q, k, v, layout="BSND", causal=True, num_heads=32, num_kv_heads=8)
    assert timing.last_model(session.backend).races_checked
    assert _kernel(session.backend) == "flash_attention_decode"


# ---- the CLI ---------------------------------------------------------------------------------

def test_plan_shows_the_route_and_both_times():
    args = ["plan", "--seq", "1", "--seq-kv", "32768", "--kv-heads", "8"]
    text = CliRunner().invoke(main, args).stdout
    assert "route     acl_fa.flash_attention runs flash_attention_decode" in text
    data = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)[0]["route"]
    assert data["op"] == "flash_attention_decode" and data["decode_us"] < data["forward_us"]
    prefill = CliRunner().invoke(main, ["plan", "--seq", "4096", "--kv-heads", "8"]).stdout
    assert "route     acl_fa.flash_attention runs flash_attention:" in prefill


def test_run_reports_the_op_that_ran(sim_only):
    result = CliRunner().invoke(main, ["run", "--seq", "1", "--seq-kv", "2048", "--kv-heads", "8", "--iters", "1",
                                       "--warmup", "0", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["route"]["op"] == "flash_attention_decode" and data["check"]["ok"]
    assert data["simulator"]["kernel"] == "flash_attention_decode"
    assert data["modeled_time"]["time_s"] >= data["modeled_time"]["hbm_s"] > 0
