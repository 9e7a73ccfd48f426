"""Simulator kernel against torch.nn.functional.scaled_dot_product_attention on the CPU, side by
side in one process: B1 N32 D128 fp16, S in {1024, 2048, 4096}, causal and not.

Simulator time: the kernel's host wall time between two events around aclnnFlashAttention on
the op's stream (the simulated chip on this CPU; not NPU time). torch: wall time of one SDPA
call on fp16 CPU tensors, torch's default threads. Each figure is the median of --runs calls
after one warm-up call; the two alternate so that both see the same host load.
Skips (exit 0, with a message) when torch is not installed: torch is not a dependency of acl-fa.
Usage: python bench/vs_torch.py [--runs 5] [--seq 1024,2048,4096]
"""
import argparse
import sys
import time

import numpy as np

from common import header, median, table

try:
    import torch
except ImportError:
    print("vs_torch: torch is not installed (pip install torch); skipped")
    sys.exit(0)

import acl_fa  # noqa: E402
from acl_fa.ops.forward import runner_for  # noqa: E402
from acl_fa.spec.problem import make_problem  # noqa: E402


def sim_kernel_ms(session, runner, prepared, stream):
    start, end = session.event(), session.event()
    try:
        start.record(stream)
        runner.launch(prepared, stream)
        end.record(stream)
        stream.synchronize()
        return start.elapsed_ms(end)
    finally:
        start.close()
        end.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seq", default="1024,2048,4096")
    parser.add_argument("--heads", type=int, default=32)
    args = parser.parse_args()
    rows = []
    with acl_fa.Session(backend="sim") as session:
        runner = runner_for(session)
        for causal in (False, True):
            for s in [int(x) for x in args.seq.split(",")]:
                rng = np.random.default_rng(s)
                q, k, v = (rng.standard_normal((1, args.heads, s, 128), dtype=np.float32).astype(np.float16)
                           for _ in range(3))
                problem, *_ = make_problem(q, k, v, causal=causal)
                tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
                sim_ms, torch_ms = [], []
                with runner.lock:
                    prepared = runner.prepare(problem)
                    prepared.upload(q, k, v)
                    stream = runner.stream
                    for i in range(args.runs + 1):
                        t_sim = sim_kernel_ms(session, runner, prepared, stream)
                        t0 = time.perf_counter()
                        ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
                        t_torch = (time.perf_counter() - t0) * 1e3
                        if i:  # call 0 warms up both
                            sim_ms.append(t_sim)
                            torch_ms.append(t_torch)
                    out = prepared.buffers["out"].to_numpy()
                err = float(np.abs(out.astype(np.float32) - ref.float().numpy()).max())
                rows.append([s, "causal" if causal else "full", f"{median(sim_ms):.0f}", f"{median(torch_ms):.0f}",
                             f"{median(sim_ms) / median(torch_ms):.2f}x", f"{err:.2g}"])
                print(rows[-1], file=sys.stderr, flush=True)
        runner.close()
    print(header(f"Simulator kernel vs torch SDPA on the CPU (B1 N{args.heads} D128 fp16)"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; medians of {args.runs} calls each.\n")
    print(table(["S", "mask", "simulator kernel ms", "torch SDPA ms", "sim / torch", "max abs diff"], rows))


if __name__ == "__main__":
    main()
