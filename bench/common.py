"""What every bench/ script prints with its numbers: the machine, the date, the command; and the
median helper. Scripts run from a source checkout with ACL_FA_SIM_LIB_DIR set (a build's lib/)
or with acl-fa installed."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

# a source checkout's acl_fa when the package is not installed
try:
    import acl_fa  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

def machine() -> str:
    """CPU model and core count (lscpu), load average at the start: other work on the host skews times."""
    model = platform.processor() or platform.machine()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model}, {os.cpu_count()} logical CPUs, load average {load}"


def header(title: str) -> str:
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lib = os.environ.get("ACL_FA_SIM_LIB_DIR")
    return "\n".join([
        f"### {title}",
        "",
        f"Command: `{'ACL_FA_SIM_LIB_DIR=' + lib + ' ' if lib else ''}python {command}`  ",
        f"Machine: {machine()}  ",
        f"Date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}; Python {platform.python_version()}",
        "",
    ])


def median(values) -> float:
    return statistics.median(values)


def table(header_row, rows) -> str:
    lines = ["| " + " | ".join(header_row) + " |", "|" + "---|" * len(header_row)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def size_arguments(parser: argparse.ArgumentParser, **defaults: int) -> argparse.ArgumentParser:
    """Adds one integer option per keyword, in order: size_arguments(parser, seq=4096, heads=2)
    adds --seq and --heads (head_dim: --head-dim)."""
    for name, default in defaults.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    return parser


def list_argument(name: str, default: str, item=int) -> list:
    """The comma-separated list given to a script's one option --`name`, each item parsed by `item`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--" + name, default=default)
    return [item(s) for s in getattr(parser.parse_args(), name).split(",")]


def sim_chip_and_link():
    """The simulator's HCCL-enabled backend, its current chip's name and fp16 cube peak (FLOP/s),
    and the link model between devices 0 and 1: what the parallel models scale by."""
    from acl_fa.parallel import hccl
    from acl_fa.runtime.ffi import ffi
    from acl_fa.runtime.loader import get_backend

    backend = hccl.use_hccl(get_backend("sim"))
    chip = backend.fn("aclfaSimGetChip")()
    return backend, chip, ffi.string(chip.name).decode(), float(chip.cubeFp16Tflops) * 1e12, \
        hccl.link_model(0, 1, backend)


def random_heads(seq: int, head_dim: int, *heads: int) -> list:
    """float16 [1, n, seq, head_dim] standard normal arrays, one per n of `heads`, from seed 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    return [rng.standard_normal((1, n, seq, head_dim)).astype(np.float16) for n in heads]
