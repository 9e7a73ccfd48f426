"""The host's pace for element loops: int32 lanes per ns of a plain vectorized add and of the
overflow-checked add the simulator's integer vector instructions use (bench/host_lane_rate.c),
over L1-resident arrays of the sizes a Philox chunk's instructions take (2 L to 8 L lanes, L the
chunk's counters). Compiled here with -O3 -march=native, the best the host's compiler does.

The simulator's dropout cost per score element is its generator's int32 lanes per element
divided by this pace (bench/RESULTS.md, "Mask and dropout").
Usage: python bench/host_lane_rate.py [--lanes 320 640 1280]
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import header, table

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, nargs="+", default=[320, 640, 1280])
    args = parser.parse_args()
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("host_lane_rate: no C compiler (cc) found")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "host_lane_rate"
        subprocess.run([cc, "-O3", "-march=native", "-std=c11", str(ROOT / "bench/host_lane_rate.c"), "-o", str(exe)],
                       check=True)
        for n in args.lanes:
            out = subprocess.run([str(exe), str(n), str(max(1, 256_000_000 // n))], capture_output=True, text=True,
                                 check=True).stdout.split()
            rows.append([f"{n:,}", out[1], out[3]])
    print(header("Host element-loop pace (int32 add, L1-resident, best of 5)"))
    print(table(["lanes per loop", "plain lanes / ns", "overflow-checked lanes / ns"], rows))


if __name__ == "__main__":
    main()
