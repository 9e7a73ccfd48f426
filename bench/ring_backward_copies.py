"""The ring backward per rank: host wall time and device-to-host bytes of
RankContext.ring_attention_backward (the Session's copy counters, read around the call), P ranks
on threads of one process, B=1 N=Nkv=1 D=128 float16 BNSD, causal zigzag split.

    python bench/ring_backward_copies.py 8 4096     # P, S; after pip install . (or PYTHONPATH=$PWD
                                                    # ACL_FA_SIM_LIB_DIR=$PWD/build/lib from a build)

Prints the wall time of the whole backward (all ranks), the slowest rank's, and each rank's d2h
bytes. Simulator host times are not NPU times (docs/simulator.md); the bytes are exact.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

from acl_fa import parallel
from acl_fa.parallel import hccl
from acl_fa.api import Session


def main(p: int, seq: int) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, seq, 128)).astype(np.float16) for _ in range(3))
    dout = rng.standard_normal(q.shape).astype(np.float16)
    out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=True)
    ranges = parallel.zigzag_chunks(seq, p, True)

    def rows(x, r):
        return np.concatenate([x[:, :, a:b] for a, b in ranges[r]], axis=2)

    sessions = [Session(device=d) for d in range(p)]
    comms = hccl.Communicator.init_all(sessions)
    results: list = [None] * p

    def rank(r):
        ctx = parallel.RankContext(sessions[r], comms[r])
        before = sessions[r].copy_counters()["d2h"]["bytes"]
        start = time.perf_counter()
        ctx.ring_attention_backward(*(rows(x, r) for x in (dout, q, k, v, out, lse)), causal=True)
        results[r] = (time.perf_counter() - start, sessions[r].copy_counters()["d2h"]["bytes"] - before)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(p)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = time.perf_counter() - start
    for c in comms:
        c.close()
    for s in sessions:
        s.close()
    if any(x is None for x in results):
        raise SystemExit("a rank failed (see its traceback above)")
    print(f"P={p} S={seq}: backward wall {total:.3f} s (all ranks), slowest rank {max(w for w, _ in results):.3f} s; "
          f"d2h bytes per rank {[b for _, b in results]}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
