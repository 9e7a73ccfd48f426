"""Reads the C declarations of acl_fa/cdefs/*.h into one string for cffi's ``FFI.cdef``.

The files are plain C headers (each compiles after the real CANN header it mirrors, which
is how the ABI conformance test uses them), so the few preprocessor lines a header needs
(``#pragma once``, ``#include``, ``extern "C"`` guards) are dropped here; ``#define NAME
<integer>`` lines are kept, cffi understands them.
"""
from __future__ import annotations

import re
from pathlib import Path

# Files that declare the base types the others use come first; the rest follow by name.
_FIRST = ("acl_rt.h", "aclnn_base.h")

_DROPPED_LINE = re.compile(
    r"""^\s*(\#\s*(pragma|include|if|ifdef|ifndef|else|elif|endif)\b   # preprocessor lines
          |extern\s+"C"\s*\{?\s*$                                    # C++ linkage guards
          |\}\s*(//.*)?$)""",                                         # their closing brace
    re.VERBOSE,
)


def cdef_files(cdefs_dir: Path) -> list[Path]:
    """The header files in the order their declarations must be given to cffi."""
    files = sorted(Path(cdefs_dir).glob("*.h"))
    first = [f for name in _FIRST for f in files if f.name == name]
    return first + [f for f in files if f not in first]


def _strip(text: str) -> str:
    return "\n".join(
        "" if _DROPPED_LINE.match(line) else line for line in text.splitlines()
    )


def read_cdefs(cdefs_dir: Path) -> str:
    """All declarations, each file under a comment naming it."""
    return "\n".join(
        f"/* ---- {f.name} ---- */\n{_strip(f.read_text())}" for f in cdef_files(cdefs_dir)
    )


def default_cdefs_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "cdefs"
