"""acl_fa.sim_stats as the README shows it: reachable from `import acl_fa`, last_launch() on the
current backend, work_items the tiling's items per AIC core."""
from __future__ import annotations

import numpy as np
import pytest

import acl_fa
from acl_fa.ops import forward as attention
from conftest import run_python


def test_reachable_without_an_explicit_import(sim_only):
    result = run_python("""
        import json
        import numpy as np, acl_fa
        q = np.ones((1, 2, 40, 16), np.float16)
        acl_fa.flash_attention(q, q, q)
        print(json.dumps({"kernel": acl_fa.sim_stats.last_launch()["kernel"]}))
    """)
    assert result["kernel"] == "flash_attention"


@pytest.mark.parametrize("shape, causal, block_m", [
    ((1, 2, 40, 16), False, None),      # 2 items on 2 cores
    ((2, 3, 300, 64), True, 64),        # 30 items, zigzag
    ((1, 16, 512, 64), True, None),     # more items than cores
])
def test_work_items_are_the_tilings(session, sim_only, shape, causal, block_m):
    q = np.random.default_rng(0).standard_normal(shape).astype(np.float16)
    session.flash_attention(q, q, q, causal=causal, block_m=block_m)
    stats = acl_fa.sim_stats.last_launch(per_core=True)
    problem, *_ = attention.make_problem(q, q, q, causal=causal, block_m=block_m)
    plan = attention.check_plan(problem, session.soc_name())
    assert stats["work_items"] == plan.total_items == shape[0] * shape[1] * plan.num_q_blocks
    starts = plan.core_item_start
    assert [core["work_items"] for core in stats["aic"]] == [starts[c + 1] - starts[c]
                                                               for c in range(plan.used_core_num)]
    assert all(core["work_items"] == 0 for core in stats["aiv"])
    assert stats == acl_fa.sim_stats.last_launch(session.backend, per_core=True)
