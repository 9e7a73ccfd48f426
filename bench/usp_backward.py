"""The 2-D (USP) backward measured on the simulator: Ulysses all-to-alls inside groups of U
devices, the ring backward across the R = P / U groups (acl_fa.parallel.usp_attention_backward).

Per grid: the bytes each device's backward all-to-alls sent each member of its group, read from
the group clique's link counters (the ring's exchanges go over the ring cliques), against the
formula of docs/hccl.md (usp.usp_link_bytes: the Ulysses backward's over the group's L_g rows and U
ranks); the gradients (every head) against the float64 backward by the 2x-naive rule (the largest
error / tolerance ratio of dq, dk, dv); the host wall seconds of the forward and the backward
(the simulator's time, not NPU time).

    python bench/usp_backward.py      # after pip install . (or ACL_FA_SIM_LIB_DIR=<build>/lib)
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("ACL_FA_SIM_DEVICE_COUNT", "16")  # before HCCL loads: the 16-device grid

import numpy as np  # noqa: E402
from common import header, table  # noqa: E402

from acl_fa.parallel.usp import usp_attention, usp_attention_backward  # noqa: E402
from acl_fa.reference.accuracy import check_gradients  # noqa: E402

GRIDS = [  # S, devices, U, N, Nkv, D (causal, B = 1, fp16)
    (1024, 8, 4, 8, 8, 64),
    (1024, 8, 2, 8, 2, 64),
    (1027, 6, 3, 6, 1, 64),
    (512, 16, 4, 8, 2, 64),
]


def run(seq: int, devices: int, ulysses: int, heads: int, kv_heads: int, head_dim: int) -> list:
    rng = np.random.default_rng(seq + devices)
    q = rng.standard_normal((1, heads, seq, head_dim)).astype(np.float16)
    k, v = (rng.standard_normal((1, kv_heads, seq, head_dim)).astype(np.float16) for _ in range(2))
    dout = rng.standard_normal(q.shape).astype(np.float16)
    where = dict(devices=list(range(devices)), ulysses=ulysses, causal=True)
    start = time.perf_counter()
    out, lse = usp_attention(q, k, v, **where)
    forward = time.perf_counter() - start
    *grads, rep = usp_attention_backward(dout, q, k, v, out, lse, report=True, **where)
    backward = time.perf_counter() - start - forward
    checks = check_gradients(grads, (q, k, v, dout), causal=True, scale=1 / np.sqrt(head_dim), layout="BNSD",
                             num_heads=heads, num_kv_heads=kv_heads, dtype_name="float16")
    worst = max(c.max_error / c.tolerance for c in checks)
    sent = [x for x in rep.link_bytes[0] if x]
    return [seq, devices, f"{rep.ulysses} x {rep.rings}", f"{heads} / {kv_heads}", head_dim,
            f"{min(sent)}..{max(sent)}", "yes" if rep.link_bytes == rep.analytic_link_bytes else "NO",
            f"{worst:.3f} ({'OK' if all(c.ok for c in checks) else 'FAILED'})", f"{forward:.1f}", f"{backward:.1f}"]


def main() -> int:
    print(header("The USP backward on the simulated HCCL (usp_attention_backward)"))
    rows = [run(*grid) for grid in GRIDS]
    print(table(["S", "devices", "U x R", "N / Nkv", "D", "bytes device 0 -> each group peer (backward all-to-alls)",
                 "every link = formula", "max error / tolerance (dq, dk, dv)", "forward s (host)",
                 "backward s (host)"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
