"""Driver overhead: host time per Session.flash_attention call for a tiny shape, against a small
C program (bench/driver_overhead.c) making the same aclnn calls through the same libraries:
upload q/k/v, launch the cached repeatable executor, synchronize, download out.

The C program is built here with `cc` against the simulator's headers (sim/include, the op's
aclnn header) and the libraries of ACL_FA_SIM_LIB_DIR. Both sides: median per call over
--calls calls after a warm-up, in a new process per run, repeated --runs times (the paths
alternate within a run, so all see the same host load), median of runs. Two times per call:
wall (what a caller waits) and the CPU time of the calling thread (not the simulator's stream
and core threads, not time spent waiting or preempted; on a loaded host wall times swing by
tens of µs, this far less). The difference to C is what the Python driver adds (validation,
the op-call path, cffi, numpy). A third figure per Python run: the calling thread's CPU per call
with the call's C functions replaced by no-ops (after the real calls): the driver's own code, warm.

--compare TREE also times the acl_fa package of another source tree (e.g. an older commit's
`git archive <commit> acl_fa | tar -x -C TREE`) on the same libraries, side by side.
Usage: python bench/driver_overhead.py [--runs 5] [--calls 2000] [--heads 1 --seq 16 --dim 16]
       [--compare TREE]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import header, median, size_arguments, table

import acl_fa  # noqa: E402  (common puts a source checkout on the path)
from acl_fa.runtime.loader import sim_library_dir  # noqa: E402

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


def c_us(exe: Path, heads: int, seq: int, dim: int, calls: int) -> tuple:
    """(wall, thread CPU, -) µs per call of the C program (one process)."""
    out = subprocess.run([str(exe), str(heads), str(seq), str(dim), str(calls)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[1]), float(out[3]), float("nan")


# The C functions a cached call makes (3 uploads and a download, launch, synchronize).
PER_CALL_APIS = ("aclrtMemcpy", "aclnnFlashAttention", "aclrtSynchronizeStreamWithTimeout")


def python_us(session, heads: int, seq: int, dim: int, calls: int) -> tuple:
    """(wall, thread CPU, Python alone) µs per Session.flash_attention call, medians over `calls`;
    Python alone: thread CPU with the call's C functions replaced by no-ops afterwards (what the
    driver's own code costs, warm)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(0.5, 1.0, (1, heads, seq, dim)).astype(np.float16) for _ in range(3))
    session.flash_attention(q, k, v, scale=1.0)  # warm-up: buffers, tensors, executor cached
    wall, cpu, alone = [], [], []
    for _ in range(calls):
        t0, c0 = time.perf_counter(), time.thread_time()
        session.flash_attention(q, k, v, scale=1.0)
        cpu.append((time.thread_time() - c0) * 1e6)
        wall.append((time.perf_counter() - t0) * 1e6)
    functions = session.backend._functions
    real = {api: functions[api] for api in PER_CALL_APIS}
    functions.update({api: (lambda *args: 0) for api in PER_CALL_APIS})
    try:
        for _ in range(calls):
            c0 = time.thread_time()
            session.flash_attention(q, k, v, scale=1.0)
            alone.append((time.thread_time() - c0) * 1e6)
    finally:
        functions.update(real)
    return median(wall), median(cpu), median(alone)


def python_us_in(tree: Path, heads: int, seq: int, dim: int, calls: int) -> tuple:
    """python_us in a new process importing acl_fa from source tree `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, __file__, "--python-only", "--heads", str(heads), "--seq", str(seq),
                           "--dim", str(dim), "--calls", str(calls)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"driver_overhead: measuring {tree} failed:\n{done.stderr}")
    out = done.stdout.split()
    return float(out[-3]), float(out[-2]), float(out[-1])


def main():
    parser = size_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), runs=5, calls=2000,
                            heads=1, seq=16, dim=16)
    parser.add_argument("--compare", type=Path, help="another source tree whose acl_fa is timed alongside")
    parser.add_argument("--python-only", action="store_true", help=argparse.SUPPRESS)  # one measurement
    args = parser.parse_args()
    shape = (args.heads, args.seq, args.dim, args.calls)
    if args.python_only:
        with acl_fa.Session(backend="sim") as session:
            print(acl_fa.__file__, *(f"{x:.3f}" for x in python_us(session, *shape)))
        return
    libdir = sim_library_dir()
    # this checkout's acl_fa (else the imported package's)
    trees = {"this tree": ROOT if (ROOT / "acl_fa").is_dir() else Path(acl_fa.__file__).resolve().parent.parent}
    if args.compare is not None:
        trees[str(args.compare)] = args.compare.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_c(Path(tmp), libdir)
        runs = {"C": []} | {name: [] for name in trees}
        for _ in range(args.runs):
            runs["C"].append(c_us(exe, *shape))
            for name, tree in trees.items():
                runs[name].append(python_us_in(tree, *shape))
    meds = {name: tuple(median(x[i] for x in r) for i in range(3)) for name, r in runs.items()}
    print(header(f"Driver overhead per call (B1 N{args.heads} S{args.seq} D{args.dim} fp16, simulator)"))
    print(f"Libraries: {libdir}. Per run: median of {args.calls} calls in a new process; table: median of "
          f"{args.runs} runs. All runs, wall / thread CPU (/ Python alone) µs: "
          + "; ".join(f"{name} {', '.join('/'.join(f'{x:.1f}' for x in run if x == x) for run in r)}"
                      for name, r in runs.items()) + ".\n")
    c_wall, c_cpu, _ = meds["C"]
    rows = [["C program (bench/driver_overhead.c)", f"{c_wall:.1f}", "-", f"{c_cpu:.1f}", "-", "-"]]
    for name in trees:
        wall, cpu, alone = meds[name]
        rows.append([f"Session.flash_attention ({name})", f"{wall:.1f}", f"{wall - c_wall:.1f} us", f"{cpu:.1f}",
                     f"{cpu - c_cpu:.1f} us", f"{alone:.1f}"])
    print(table(["path", "wall us per call", "wall above C", "thread CPU us per call", "CPU above C",
                 "Python alone (C calls as no-ops), thread CPU us"], rows))


if __name__ == "__main__":
    main()
