"""Every docs/ page the repository cites exists, with the section it names; nothing cites design
notes that are not part of the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the repository is made of (build outputs and caches excluded).
SOURCES = ["acl_fa", "bench", "docs", "native", "op_host", "op_kernel", "scripts", "sim", "tests",
           ".ci", "README.md", "build.sh", "CMakeLists.txt", "pyproject.toml"]
SUFFIXES = {".py", ".h", ".c", ".cpp", ".sh", ".md", ".txt", ".json", ".toml", ".in", ".info", ""}
# Files outside the repository that older comments cited (spelled in pieces so this file does
# not cite them itself).
GONE = ("DESIGN" + ".md", "CANN_" + "FACTS", "../" + "shared/")

CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)(#[A-Za-z0-9_-]+)?")
RELATIVE_LINK = re.compile(r"\]\(([A-Za-z0-9_.-]+\.md)(#[A-Za-z0-9_-]+)?\)")


def _files():
    for name in SOURCES:
        path = ROOT / name
        paths = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for p in paths:
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts:
                yield p


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set:
    return {_slug(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def _citations():
    found = []
    for path in _files():
        text = path.read_text(errors="replace")
        for m in CITATION.finditer(text):
            found.append((path, m.group(1), m.group(2)))
        if path.parent == ROOT / "docs":
            for m in RELATIVE_LINK.finditer(text):
                found.append((path, m.group(1), m.group(2)))
    return found


def test_the_repository_cites_its_docs():
    cited = {page for _, page, _ in _citations()}
    assert {"architecture.md", "cann-facts.md", "simulator.md"} <= cited


@pytest.mark.parametrize("path, page, anchor", _citations(),
                         ids=lambda x: str(x.relative_to(ROOT)) if isinstance(x, Path) else str(x))
def test_cited_docs_exist(path, page, anchor):
    target = ROOT / "docs" / page
    assert target.is_file(), f"{path.relative_to(ROOT)} cites docs/{page}, which does not exist"
    if anchor:
        assert anchor[1:] in _anchors(target), \
            f"{path.relative_to(ROOT)} cites docs/{page}{anchor}: no such section"


def test_no_citation_of_files_outside_the_repository():
    offenders = [f"{p.relative_to(ROOT)}: {name}" for p in _files()
                 for name in GONE if name in p.read_text(errors="replace")]
    assert offenders == []


RECORDS = [ROOT / "README.md", ROOT / "bench" / "RESULTS.md"]


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_recorded_commands_run_from_a_checkout(path):
    """No private build directory and no tracker numbers in the recorded commands and results."""
    text = path.read_text()
    assert re.findall(r"/tmp/|/work/|build-[a-z0-9]+/lib", text) == []
    assert re.findall(r"\bissue #?\d+|\bissues? \d+", text, flags=re.IGNORECASE) == []


def test_regenerate_script_covers_every_bench_script():
    script = (ROOT / "bench" / "regenerate.sh").read_text()
    results = (ROOT / "bench" / "RESULTS.md").read_text()
    for bench in sorted((ROOT / "bench").glob("*.py")):
        if bench.name == "common.py":
            continue
        assert f"bench/{bench.name}" in script, f"bench/regenerate.sh does not run bench/{bench.name}"
        assert f"bench/{bench.name}" in results, f"bench/RESULTS.md records nothing from bench/{bench.name}"
    for cited in set(re.findall(r"python (bench/[\w.]+\.py)", results)):
        assert (ROOT / cited).is_file() and cited in script, cited
