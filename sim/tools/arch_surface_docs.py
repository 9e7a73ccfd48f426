"""Prints what the asc-devkit API reference says about each page sim/include/ascendc_sim/arch_surface.h
cites: per simulated architecture, whether the page marks the API supported and the dtype lines of its
"数据类型" section, so that a maintainer can compare them with the table's rows (docs/simulator.md,
"The per-chip API surface").

    python sim/tools/arch_surface_docs.py <asc-devkit git dir> [<commit>]

The pages mark each product's paragraphs with <!-- npu="..." --> comments: "910" is the Atlas training
series (arch 1001), "310p" the Atlas inference series AI Core (2002), "910b" Atlas A2 (2201).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOCS = "docs/zh/api/SIMD-API/基础API/"
HEADER = Path(__file__).resolve().parents[1] / "include" / "ascendc_sim" / "arch_surface.h"
ARCHES = {"910": "1001", "310p": "2002", "910b": "2201"}


def cited_pages() -> list[str]:
    """The .md pages the table's `source` strings name, in table order."""
    pages = re.findall(r"\"([^\"]*?/[^\"/]*?\.md)", HEADER.read_text())
    return list(dict.fromkeys(p.split(";")[0].split(" (")[0] for p in pages))


def show(git_dir: str, commit: str, rel: str) -> str:
    out = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{DOCS}{rel}"], capture_output=True,
                         text=True)
    return out.stdout


def product_lines(text: str, tag: str) -> list[str]:
    """The lines of the page's paragraphs marked for npu `tag` that name dtypes or support."""
    lines, inside = [], False
    for line in text.splitlines():
        m = re.match(r'\s*<!-- npu="([^"]+)"', line)
        if m:
            inside = tag in m.group(1).split(",")
            continue
        if line.strip().startswith("<!-- end"):
            inside = False
            continue
        if inside and re.search(r"支持|数据类型|\|", line):
            lines.append(line.strip())
    return lines


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    git_dir, commit = argv[1], argv[2] if len(argv) > 2 else "HEAD"
    for rel in cited_pages():
        text = show(git_dir, commit, rel)
        print(f"== {rel}" + ("" if text else "  (not in this commit)"))
        for tag, arch in ARCHES.items():
            for line in product_lines(text, tag)[:12]:
                print(f"  {arch}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
