"""Peak RSS of `acl-fa run --seq 32768 --causal --heads 8` (B1 D128 fp16) in a child process,
against the bytes of S and P that standard attention would hold for the same problem.

The child is measured with resource.getrusage(RUSAGE_CHILDREN).ru_maxrss (kilobytes on Linux).
--no-check: the float64 reference at S=32768 would need 8 GiB per head of scores and minutes;
the run's accuracy at large S is covered by `acl-fa run` with its check on smaller problems.
Usage: python bench/peak_rss.py [--seq 32768] [--heads 8] [--runs 1]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from common import header, median, table

from acl_fa.plan.standard import standard_intermediate_bytes  # noqa: E402
from acl_fa.spec.problem import problem_from_sizes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def child_peak_kib(seq: int, heads: int) -> tuple:
    """(peak RSS KiB, run report) of one `acl-fa run`, started by a fresh wrapper process whose
    RUSAGE_CHILDREN then covers exactly that run."""
    code = ("import json, resource, subprocess, sys;"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
            "print(json.dumps({'rc': p.returncode, 'maxrss_kib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
            " 'out': p.stdout, 'err': p.stderr[-2000:]}))")
    cmd = [sys.executable, "-m", "acl_fa", "run", "--backend", "sim", "--seq", str(seq), "--causal", "--heads",
           str(heads), "--no-check", "--warmup", "0", "--iters", "1", "--json"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    wrapped = json.loads(subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True,
                                        check=True, env=env).stdout)
    if wrapped["rc"] != 0:
        sys.exit(f"acl-fa run failed ({wrapped['rc']}): {wrapped['err']}")
    return wrapped["maxrss_kib"], json.loads(wrapped["out"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=32768)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    peaks, report = [], None
    for _ in range(args.runs):
        kib, report = child_peak_kib(args.seq, args.heads)
        peaks.append(kib)
    peak = median(peaks) * 1024
    standard = standard_intermediate_bytes(problem_from_sizes(seq_q=args.seq, num_heads=args.heads))
    dev = report["device_bytes"]
    gib = 1 << 30
    print(header(f"Peak RSS of acl-fa run --seq {args.seq} --causal --heads {args.heads} (simulator)"))
    print(f"`acl-fa run ... --no-check --warmup 0 --iters 1 --json` in a child process; peak RSS from "
          f"getrusage(RUSAGE_CHILDREN), median of {args.runs} run(s). The simulator's device memory is host "
          f"memory, so the RSS includes the device buffers. Kernel wall time of the run: "
          f"{report['time']['median_ms'] / 1e3:.1f} s.\n")
    print(table(["what", "bytes", "GiB"], [
        ["peak RSS of the whole run (Python, libraries, host arrays, simulated device memory)", f"{peak:.0f}",
         f"{peak / gib:.3f}"],
        ["device buffers: inputs + outputs + workspace",
         f"{dev['inputs'] + dev['outputs'] + dev['workspace']}",
         f"{(dev['inputs'] + dev['outputs'] + dev['workspace']) / gib:.3f}"],
        ["of which FlashAttention intermediates (workspace scratch)", f"{dev['intermediate']}",
         f"{dev['intermediate'] / gib:.4f}"],
        ["standard attention's S and P (2 x B x N x S^2 x 2 B)", f"{standard}", f"{standard / gib:.1f}"],
    ]))
    print(f"\nPeak RSS is {standard / peak:.1f}x below the S and P that standard attention would need.")


if __name__ == "__main__":
    main()
