"""Modeled cost of the in-kernel dropout (op_kernel/philox_dropout.h) per tile element.

Launches the philox_tile test kernel on one AIV (a 64 x 128 fp32 tile; every chunk is generated
twice: the 8-bit draws for the bit-exact test and the keep mask applied to P) under the pipeline
model and prints modeled cycles, vector instructions and cycles per element per generation.
Modeled, not measured (docs/timing_model.md). Needs ACL_FA_SIM_LIB_DIR (a build's lib/).
Usage: python bench/philox_tile_cost.py [--lanes 64 128]
"""
import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "kernels"))
import numpy as np  # noqa: E402

import simlib  # noqa: E402

ROWS, WIDTH = 64, 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", type=int, nargs="+", default=[64, 128])
    args = ap.parse_args()
    sim = simlib.SimKernels()
    print(f"tile {ROWS}x{WIDTH} fp32 on 1 AIV, 2 generations per chunk")
    print(f"{'lanes':>6} {'cycles':>10} {'V instr':>8} {'cycles/elem/gen':>16}")
    for lanes in args.lanes:
        sim.engine.aclfaSimSetOpTrace(1)
        try:
            p = np.ones((ROWS, WIDTH), np.float32)
            sim.philox_tile(p, 1, 2, 0, 0, lanes, 0x1999999A, 1 / 0.9)  # keep_prob 0.9
        finally:
            sim.engine.aclfaSimSetOpTrace(0)
        st = sim.ffi.new("aclfaSimModelStats *")
        assert sim.engine.aclfaSimGetModelStats(st) == 0
        elems = ROWS * WIDTH
        print(f"{lanes:>6} {st.cycles:>10.0f} {st.ops:>8} {st.cycles / elems / 2:>16.1f}")
        sim.free_all()


if __name__ == "__main__":
    main()
