"""Driver overhead: host time per Session.flash_attention call for a tiny shape, against a small
C program (bench/driver_overhead.c) making the same aclnn calls through the same libraries:
upload q/k/v, launch the cached repeatable executor, synchronize, download out.

The C program is built here with `cc` against the simulator's headers (sim/include, the op's
aclnn header) and the libraries of ACL_FA_SIM_LIB_DIR. Both sides: median per call over
--calls calls after a warm-up, repeated --runs times (C: separate processes), median of runs.
The difference is what the Python driver adds (validation, the tiling-policy check, cffi, numpy).
Usage: python bench/driver_overhead.py [--runs 5] [--calls 2000] [--heads 1 --seq 16 --dim 16]
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import header, median, table

import acl_fa  # noqa: E402  (common puts a source checkout on the path)
from acl_fa.loader import sim_library_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def build_c(workdir: Path, libdir: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("driver_overhead: no C compiler (cc) found")
    exe = workdir / "driver_overhead"
    subprocess.run([cc, "-O2", "-std=c11", "-Wall", f"-I{ROOT / 'sim/include'}", f"-I{ROOT / 'sim/src/opapi'}",
                    str(ROOT / "bench/driver_overhead.c"), f"-L{libdir}", "-lascendcl", "-lnnopbase", "-lcust_opapi",
                    f"-Wl,-rpath,{libdir}", "-o", str(exe)], check=True)
    return exe


def c_us(exe: Path, heads: int, seq: int, dim: int, calls: int) -> float:
    out = subprocess.run([str(exe), str(heads), str(seq), str(dim), str(calls)], capture_output=True, text=True,
                         check=True).stdout
    return float(out.split()[1])


def python_us(session, heads: int, seq: int, dim: int, calls: int) -> float:
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(0.5, 1.0, (1, heads, seq, dim)).astype(np.float16) for _ in range(3))
    session.flash_attention(q, k, v, scale=1.0)  # warm-up: buffers, tensors, executor cached
    us = []
    for _ in range(calls):
        t0 = time.perf_counter()
        session.flash_attention(q, k, v, scale=1.0)
        us.append((time.perf_counter() - t0) * 1e6)
    return median(us)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--dim", type=int, default=16)
    args = parser.parse_args()
    libdir = sim_library_dir()
    shape = (args.heads, args.seq, args.dim, args.calls)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_c(Path(tmp), libdir)
        with acl_fa.Session(backend="sim") as session:
            c_runs, py_runs = [], []
            for _ in range(args.runs):  # alternate so both see the same host load
                c_runs.append(c_us(exe, *shape))
                py_runs.append(python_us(session, *shape))
    c_med, py_med = median(c_runs), median(py_runs)
    print(header(f"Driver overhead per call (B1 N{args.heads} S{args.seq} D{args.dim} fp16, simulator)"))
    print(f"Libraries: {libdir}. Per run: median of {args.calls} calls; table: median of {args.runs} runs "
          f"(all runs: C {', '.join(f'{x:.1f}' for x in c_runs)}; Python {', '.join(f'{x:.1f}' for x in py_runs)}).\n")
    print(table(["path", "us per call", "above C"],
                [["C program (bench/driver_overhead.c)", f"{c_med:.1f}", "-"],
                 ["Session.flash_attention", f"{py_med:.1f}", f"{py_med - c_med:.1f} us"]]))


if __name__ == "__main__":
    main()
