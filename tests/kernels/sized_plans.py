"""The plans of loose sizes, as the tests spell them: keyword sizes (seq, heads, ...; the plans'
defaults) and the V2 options (pre_tokens, seq_lens_q, ...) turned into the unchecked Problem
(acl_fa.spec.problem.sized_problem) and PlanOptions the plan functions take, so each test states
only the sizes it is about."""
from __future__ import annotations

import dataclasses

from acl_fa.plan import backward, forward
from acl_fa.spec.problem import sized_problem

_OPTIONS = {f.name for f in dataclasses.fields(forward.PlanOptions)}
_NAMES = {"seq": "seq_q", "heads": "num_heads", "kv_heads": "num_kv_heads"}  # the CLI's spelling -> acl_fa's


def _problem(kw: dict):
    return sized_problem(**{_NAMES.get(key, key): value for key, value in kw.items()})


def plan(soc=None, **kw):
    """acl_fa.plan.forward.plan of these sizes and V2 options on `soc`."""
    options = {key: kw.pop(key) for key in list(kw) if key in _OPTIONS}
    return forward.plan(_problem(kw), soc, forward.PlanOptions(**options))


def analytic_cycles(soc=None, **kw):
    """acl_fa.plan.forward.analytic_cycles of these sizes (block_m and block_n among them)."""
    return forward.analytic_cycles(_problem(kw), soc)


def backward_plan(soc=None, deterministic=True, **kw):
    """acl_fa.plan.backward.backward_plan of these sizes."""
    return backward.backward_plan(_problem(kw), soc, deterministic)
