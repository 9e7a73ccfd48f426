"""The README as a newcomer meets it: two set-up lines that build the project once, error examples
that are today's messages, and a pasted `acl-fa run` report in today's format."""
from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

import acl_fa
from acl_fa.cli import main

from conftest import REPO

README = (REPO / "README.md").read_text()


def _blocks(language: str = "") -> list:
    """The README's fenced code blocks of `language` ("" = no language), in order, as text."""
    blocks, current, fence = [], None, None
    for line in README.splitlines():
        if current is None and line.startswith("```"):
            current, fence = [], line[3:].strip()
        elif current is not None and line.strip() == "```":
            if fence == language:
                blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_readme_opens_with_one_build_then_the_tests():
    """The first block: one line installs (with the test extras) and runs the main command, the
    other runs the tests without installing again (each `pip install` builds the whole wheel)."""
    first = README.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(first) == 2, first
    install, tests = first
    assert install.startswith("pip install '.[test]' && ") and install.endswith("acl-fa run --seq 4096 --causal")
    assert "pip" not in tests and tests.startswith("pytest")
    assert README.index("```bash") < README.index("## "), "the set-up lines come before the first section"


def _examples() -> list:
    block = _blocks("text")[0]
    return block.splitlines()


def _message(call) -> str:
    try:
        call()
    except acl_fa.AclFaError as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    raise AssertionError("no error")


def test_readme_error_examples_are_todays_messages(backend):
    examples = _examples()
    q300 = np.zeros((1, 1, 64, 300), np.float16)
    q64 = np.zeros((1, 1, 64, 64), np.float64)
    closed = acl_fa.Session(backend=backend.name)
    closed.close()
    half = np.zeros((1, 1, 64, 64), np.float16)
    for call in (lambda: acl_fa.flash_attention(q300, q300, q300, backend=backend.name),
                 lambda: acl_fa.flash_attention(q64, q64, q64, backend=backend.name),
                 lambda: closed.flash_attention(half, half, half)):
        message = _message(call)
        assert message in examples, message


def _labels(text: str) -> list:
    """The first word of each unindented report line (backend, problem, tiling, ...)."""
    return [line.split()[0] for line in text.splitlines() if line and not line[0].isspace()]


def test_readme_run_report_has_todays_lines(sim_only):
    pasted = next(b for b in _blocks() if b.startswith("backend     sim"))
    result = CliRunner().invoke(main, ["run", "--seq", "256", "--heads", "2", "--causal", "--iters", "1",
                                       "--warmup", "0"])
    assert result.exit_code == 0, result.output
    assert _labels(pasted) == _labels(result.stdout)
    # the indented lines too, by their first words (a renamed figure shows here)
    # (a figure in those words, like the range line's "range 716.1", is not part of the label)
    firsts = lambda text: [" ".join(w for w in l.split()[:2] if not w[0].isdigit())  # noqa: E731
                           for l in text.splitlines() if l.startswith("            ")]
    assert firsts(pasted) == firsts(result.stdout)
