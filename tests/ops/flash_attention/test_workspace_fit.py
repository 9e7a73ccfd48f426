"""The forward's workspace sized to the device's memory (docs/memory.md; issue 33, friction 10).

The README's small shape, B1 N8 S1024 D64 float16, asks for 36.25 MiB of workspace with its
fastest tiling on Ascend910B2 (the library's 16 MiB system workspace and 24 AIC groups of S and
P.V slots for 192 x 512 blocks) although its tensors take 4 MiB. On a device whose free memory
lies between the floor (tensors + system workspace + the smallest slots) and that, the call
runs with the fastest tiling that fits; below the floor it is refused before device work,
naming the floor and what takes it. The policy's choice is checked against a brute-force search
over plan() with fixed blocks (an independent path: ComputePlan, not ComputePlanWithin).
"""
from __future__ import annotations

import dataclasses

import pytest

from acl_fa.plan import forward as planmod
from acl_fa.spec.problem import sized_problem
from conftest import run_python

MIB = 1 << 20
SOC = "Ascend910B2"
DEVICE = 24 * MIB  # between the floor (~20.5 MiB) and the fastest tiling's 40.3 MiB


def _problem(causal=False, **blocks):
    return sized_problem(seq_q=1024, seq_kv=1024, batch=1, num_heads=8, num_kv_heads=8, head_dim=64,
                         dtype="float16", layout="BNSD", causal=causal, **blocks)


def _fixed_block_plans(problem):
    """Every plan with fixed blocks the chip accepts: blockM a multiple of 32 up to 256, blockN 16,
    32, the multiples of 64 up to 1024 (at most Skv rounded up to 16)."""
    plans = []
    for m in range(32, 257, 32):
        for n in [16, 32] + list(range(64, 1025, 64)):
            try:
                plans.append(planmod.plan(dataclasses.replace(problem, block_m=m, block_n=n), SOC))
            except planmod.PlanError:
                continue  # the blocks break a UB or L1 budget line
    return plans


def _cycles(problem, p):
    return planmod.analytic_cycles(dataclasses.replace(problem, block_m=p.block_m, block_n=p.block_n), SOC)


def test_fastest_tiling_does_not_fit_the_device():
    """The state before: 36.25 MiB of workspace (16 MiB system), 40.3 MiB per call > 24 MiB."""
    auto = planmod.plan(_problem(), SOC)
    assert auto.system_workspace_bytes == 16 * MIB
    assert auto.workspace_bytes == 36.25 * MIB, auto.workspace_bytes
    assert auto.device_bytes > DEVICE


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_plan_within_is_the_fastest_tiling_that_fits(causal):
    problem = _problem(causal)
    fitted = planmod.plan_within(problem, DEVICE, SOC)
    assert fitted.device_bytes <= DEVICE
    assert fitted.system_workspace_bytes == 16 * MIB
    fitting = [p for p in _fixed_block_plans(problem) if p.device_bytes <= DEVICE]
    best = min(_cycles(problem, p) for p in fitting)
    assert _cycles(problem, fitted) <= best * (1 + 1e-12), (fitted.block_m, fitted.block_n)


def test_plan_within_keeps_the_auto_plan_when_it_fits():
    auto = planmod.plan(_problem(), SOC)
    assert planmod.plan_within(_problem(), auto.device_bytes, SOC) == auto


def test_plan_within_gives_the_floor_when_nothing_fits():
    """Below the floor: the plan of least memory, which the caller refuses by its device_bytes."""
    problem = _problem()
    floor = planmod.plan_within(problem, 16 * MIB, SOC)
    assert floor.device_bytes > 16 * MIB
    assert floor.device_bytes == min(p.device_bytes for p in _fixed_block_plans(problem))
    assert (floor.block_m, floor.block_n) == (32, 16)


def test_blocks_the_caller_fixed_are_never_changed():
    fixed = planmod.plan_within(_problem(block_m=128, block_n=256), DEVICE, SOC)
    assert (fixed.block_m, fixed.block_n) == (128, 256)


def test_plan_within_refuses_a_bad_size():
    with pytest.raises(planmod.PlanError, match="non-negative number of bytes"):
        planmod.plan_within(_problem(), -1, SOC)


# One call on a device of DEVICE bytes, in a fresh process (ACL_FA_SIM_HBM_BYTES is read at start):
# the result against the float64 reference (the project's accuracy rule), the workspace phase 1
# asked for and whether any aclrtMalloc ran before a refusal.
_CALL = """
    import json
    import numpy as np, acl_fa
    from acl_fa.ops import forward as forward_op, forward_v2
    from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
    kwargs = {kwargs!r}
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 8, 1024, 64), dtype=np.float32).astype(np.float16) for _ in range(3))
    with acl_fa.Session(backend="sim") as s:
        calls = []
        real = s.backend.call
        s.backend.call = lambda api, *args: (calls.append(api), real(api, *args))[1]
        try:
            out, lse = s.flash_attention(q, k, v, return_lse=True, **kwargs)
        except acl_fa.InsufficientMemoryError as exc:
            print(json.dumps(dict(error=str(exc), mallocs=calls.count("aclrtMalloc"))))
            raise SystemExit(0)
        runner = (forward_op if not kwargs.get("window") else forward_v2).runner_for(s)
        (prepared,) = runner._cache.values()
        workspace = prepared.workspace_size
    ref_kwargs = dict(causal=kwargs.get("causal", False), scale=1 / 8, layout="BNSD", num_heads=8, num_kv_heads=8,
                      heads=list(range(8)))
    features = dict(window=tuple(kwargs["window"])) if kwargs.get("window") else {{}}
    ref, ref_lse = acl_fa.attention_reference(q, k, v, **ref_kwargs, **features)
    naive = naive_same_precision(q, k, v, np.float16, **ref_kwargs, **features)
    acc = check_accuracy(out.astype(np.float64), lse, ref, ref_lse, naive, "float16", list(range(8)))
    print(json.dumps(dict(ok=acc.ok, error=acc.max_error, tolerance=acc.tolerance, lse_error=acc.lse_max_error,
                          workspace=workspace)))
"""


@pytest.mark.parametrize("kwargs", [{}, {"causal": True}, {"window": [128, 0]}], ids=["full", "causal", "window-v2"])
def test_call_runs_between_the_floor_and_the_fastest_tiling(sim_only, kwargs):
    """Failed before the fix: InsufficientMemoryError (40.3 MiB needed, 24 MiB free)."""
    result = run_python(_CALL.format(kwargs=kwargs), ACL_FA_SIM_HBM_BYTES=DEVICE)
    assert "ok" in result, result
    assert result["ok"], result
    assert result["lse_error"] < 1e-3, result
    tensors = planmod.plan(_problem(), SOC).tensor_bytes
    assert 16 * MIB < result["workspace"] <= DEVICE - tensors, result
    assert result["workspace"] < planmod.plan(_problem(), SOC).workspace_bytes


def test_nothing_fits_names_the_floor_before_device_work(sim_only):
    """18 MiB: the tensors (4 MiB) fit, but not with the 16 MiB system workspace and the smallest
    slots: refused before any aclrtMalloc, the message naming the floor and what takes it."""
    result = run_python(_CALL.format(kwargs={}), ACL_FA_SIM_HBM_BYTES=18 * MIB)
    floor = planmod.plan_within(_problem(), 18 * MIB, SOC)
    assert result["mallocs"] == 0, result
    text = result["error"]
    assert text.startswith("flash_attention needs at least "), text
    assert "at its smallest tiling: BLOCK_M=32 BLOCK_N=16: the Ascend C library's system workspace 16.0 MiB + " \
           f"24 AIC groups x {floor.ws_bytes_per_core / 1024:.1f} KiB of S and P.V slots" in text, text
    assert "the device has 18.0 MiB free of 18.0 MiB" in text, text


def test_backward_fitted_tiling_is_the_first_in_its_policys_order_that_fits():
    """The backward's policy has no cost model: its own order (the largest blockN first), the
    first whose workspace fits. B1 N8 S1024 D64: 77.3 MiB with the auto 96 x 128 blocks."""
    from acl_fa.ops.problem import fitted_backward_tiling
    from acl_fa.plan.backward import backward_plan

    auto = backward_plan(_problem(), SOC, True)
    fitted, ws_bytes, holds = fitted_backward_tiling(_problem(), SOC, True, 32 * MIB)
    assert auto.workspace_bytes > 32 * MIB >= ws_bytes
    assert backward_plan(fitted, SOC, True).workspace_bytes == ws_bytes
    larger = [n for n in range(fitted.block_n + 16, auto.block_n + 1, 16)]
    assert all(backward_plan(dataclasses.replace(_problem(), block_n=n), SOC, True).workspace_bytes > 32 * MIB
               for n in larger), larger
    assert holds.startswith(f"at its smallest tiling: BLOCK_M={fitted.block_m} BLOCK_N={fitted.block_n}: the Ascend C library's system "
                            "workspace 16.0 MiB + ")


def test_backward_runs_on_a_device_smaller_than_its_fastest_tiling(sim_only):
    """B1 N8 S1024 D64 backward: 8 MiB of tensors + 77.3 MiB of workspace with the auto blocks;
    on a 40 MiB device it runs with the fitted blocks, the gradients within the accuracy rule."""
    result = run_python("""
        import json
        import numpy as np, acl_fa
        from acl_fa.reference.accuracy import check_gradients
        rng = np.random.default_rng(2)
        q, k, v, dout = (rng.standard_normal((1, 8, 1024, 64), dtype=np.float32).astype(np.float16)
                         for _ in range(4))
        out, lse = acl_fa.attention_reference(q, k, v, causal=True)
        out, lse = out.astype(np.float16), lse.astype(np.float32)
        with acl_fa.Session(backend="sim") as s:
            grads = s.flash_attention_backward(dout, q, k, v, out, lse, causal=True)
        acc = check_gradients(grads, (q, k, v, dout), causal=True, scale=1 / 8, layout="BNSD", num_heads=8,
                              num_kv_heads=8, dtype_name="float16", kv_heads=[0, 5])
        print(json.dumps(dict(grads=[dict(name=a.name, ok=a.ok, error=a.max_error, tolerance=a.tolerance)
                                     for a in acc])))
    """, ACL_FA_SIM_HBM_BYTES=40 * MIB)
    assert len(result["grads"]) == 3 and all(g["ok"] for g in result["grads"]), result


def test_slots_only_for_the_cores_with_items_and_no_larger_than_the_problem():
    """B1 N2 S40: 2 items on 2 AIC groups, blocks within Sq rounded up to 32 and Skv to 16."""
    p = planmod.plan(sized_problem(seq_q=40, num_heads=2, head_dim=64), SOC)
    assert p.used_core_num == p.total_items == 2
    assert p.block_m <= 64 and p.block_n <= 48
    assert p.user_workspace_bytes == 2 * p.ws_bytes_per_core


def test_blocks_given_that_do_not_fit_are_named_as_given(sim_only):
    """The caller's blocks stay; the refusal says they are the caller's, not the smallest tiling."""
    result = run_python(_CALL.format(kwargs={"block_m": 192, "block_n": 512}), ACL_FA_SIM_HBM_BYTES=DEVICE)
    assert result["mallocs"] == 0, result
    assert "workspace 36.3 MiB with the blocks given: BLOCK_M=192 BLOCK_N=512: " in result["error"], result


def test_forward_then_backward_in_one_session_on_a_small_device(sim_only):
    """The forward's cached call (33.2 MiB, causal) gives way to the backward of the same Session on
    a 40 MiB device (it gave way only to calls of its own op before), and the backward runs fitted."""
    result = run_python("""
        import json
        import numpy as np, acl_fa
        rng = np.random.default_rng(3)
        q, k, v, dout = (rng.standard_normal((1, 8, 1024, 64), dtype=np.float32).astype(np.float16)
                         for _ in range(4))
        with acl_fa.Session(backend="sim") as s:
            out, lse = s.flash_attention(q, k, v, causal=True, return_lse=True)
            dq, dk, dv = s.flash_attention_backward(dout, q, k, v, out, lse, causal=True)
            again = s.flash_attention(q, k, v, causal=True)
        print(json.dumps(dict(finite=bool(all(np.isfinite(x.astype(np.float32)).all() for x in (dq, dk, dv))),
                              same=bool(np.array_equal(out, again)))))
    """, ACL_FA_SIM_HBM_BYTES=40 * MIB)
    assert result["finite"] and result["same"], result


def test_high_performance_precision_counts_its_narrower_score_slots():
    """FlashAttentionV4's S slots hold the input dtype: the plan the memory check uses asks for what
    its phase 1 asks for (27.25 MiB at the README shape), not the float32 slots' 36.25 MiB."""
    from acl_fa.ops import forward_v2
    from acl_fa.spec.options import build_forward_options

    problem = _problem()
    options = build_forward_options(scores=problem.score_grid, dtype=problem.dtype, causal=False,
                                    precision="high_performance")[0]
    call = forward_v2.V2Call(problem, options)
    assert forward_v2.check_v2_plan(call, SOC).workspace_bytes == 27.25 * MIB


def test_high_performance_call_asks_what_the_check_counted(sim_only):
    result = run_python("""
        import json
        import numpy as np, acl_fa
        from acl_fa.ops import forward_v2, opcall
        q = np.zeros((1, 8, 1024, 64), np.float16)
        with acl_fa.Session(backend="sim") as s:
            s.flash_attention(q, q, q, precision="high_performance")
            (prepared,) = opcall.runner_for(s, forward_v2.FLASH_ATTENTION_V4)._cache.values()
        print(json.dumps(dict(workspace=prepared.workspace_size)))
    """)
    assert result["workspace"] == 27.25 * MIB, result
