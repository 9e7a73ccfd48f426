"""Where acl_fa.plan.routing sends a forward call to the decode op: the decode op's modeled time
against the general forward's on the same arrays, for a grid of decode shapes (issue #34; the
table in bench/RESULTS.md "Decode speed (#29) and routing (#34)").

Both ops are traced on the simulator (acl_fa.plan.timing: modeled, not measured); shapes the rule
keeps on the forward are listed as such and not run. Usage: python bench/decode_routing.py
"""
import itertools

import numpy as np

import acl_fa
from acl_fa.ops import routed
from acl_fa.ops.forward import flash_attention as general_flash_attention
from acl_fa.plan import routing, timing
from acl_fa.spec.problem import problem_from_sizes

HEADS = [(32, 8), (8, 2), (16, 16), (64, 8), (8, 1)]
SEQ_Q = [1, 2, 8, 16]          # causal when > 1
SEQ_KV = [512, 1024, 2048, 4096, 8192]
BATCH = [1, 4]
HEAD_DIM = 128


def modeled_us(session, call) -> float:
    with timing.op_trace(session.backend):
        call()
        return timing.last_model(session.backend).seconds * 1e6


def main():
    rng = np.random.default_rng(0)
    ratios = []
    with acl_fa.Session() as s:
        for (n, nkv), sq, skv, b in itertools.product(HEADS, SEQ_Q, SEQ_KV, BATCH):
            causal = sq > 1
            problem = problem_from_sizes(seq_q=sq, seq_kv=skv, batch=b, num_heads=n, num_kv_heads=nkv,
                                         head_dim=HEAD_DIM, layout="BSND", causal=causal)
            route = routing.route(problem)
            name = f"B{b} N{n}/{nkv} Sq{sq} Skv{skv}"
            if not route.decode:
                print(f"{name}: forward ({route.reason})")
                continue
            q = rng.standard_normal(problem.q_shape, dtype=np.float32).astype(np.float16)
            k = rng.standard_normal(problem.kv_shape, dtype=np.float32).astype(np.float16)
            kw = dict(layout="BSND", causal=causal, num_heads=n, num_kv_heads=nkv, session=s)
            forward = modeled_us(s, lambda: general_flash_attention(q, k, k, **kw))
            qd, kd, vd = routed.decode_arrays(problem, q, k, k)
            decode = modeled_us(s, lambda: acl_fa.flash_attention_with_kvcache(qd, kd, vd, cache_seqlens=skv,
                                                                               causal=causal, session=s))
            ratios.append(decode / forward)
            print(f"{name}: decode op {decode:.1f} us, general forward {forward:.1f} us, ratio {decode / forward:.3f} "
                  f"(closed forms {route.decode_us:.1f} / {route.forward_us:.1f} us)", flush=True)
    if ratios:
        print(f"routed to the decode op: {len(ratios)}; decode / forward {min(ratios):.3f} .. {max(ratios):.3f}, "
              f"median {float(np.median(ratios)):.3f}")


if __name__ == "__main__":
    main()
