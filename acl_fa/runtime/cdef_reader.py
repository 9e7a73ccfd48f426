"""Reads the C declarations of acl_fa/cdefs/*.h into one string for cffi's ``FFI.cdef``.

The files are plain C headers (each compiles after the real CANN header it mirrors, which
is how the ABI conformance test uses them), so the few preprocessor lines a header needs
(``#pragma``, ``#include``, include guards) are dropped here; ``#define NAME <integer>``
lines are kept, cffi understands them.

Our own C APIs (the simulator's extension functions in sim/include/acl_fa_sim*.h, the tiling
policies' C ABI in native/aclfa_*plan.h) are declared once, in those headers: a cdefs file
names them with ``#include "../../<path>"`` and the reader puts the named header's C part in
its place (what stands between ``#ifdef __cplusplus`` and its ``#endif`` is C++ only: the
``extern "C"`` wrappers and C++ declarations, dropped). Only a source tree has them; an
installed package uses the module generated from them at build time (build_cffi.py).

The aclnn entries of the custom operators are not written here: they follow from each op's JSON
(aclnn_entries.py) and are appended after the files. A cdefs file may still declare an entry by
hand (tests/ops/test_op_interfaces.py holds it to the JSON); then that declaration is the one used.
"""
from __future__ import annotations

import importlib.util
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
# A #define cffi cannot take: anything but ``#define NAME <integer>`` (include guards, the
# exported-symbol marker).
_NON_INTEGER_DEFINE = re.compile(
    r"^\s*#\s*define\s+\w+(\s*$|\s+(?![-(]*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\)?\s*(/\*.*\*/|//.*)?$))")
# The exported-symbol marker of the CANN headers before each function: nothing, or a visibility
# attribute, for the C compiler; nothing for cffi.
_EXPORT_MARKER = re.compile(r"\bACL_FUNC_VISIBILITY\s+")
_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
_IF = re.compile(r"^\s*#\s*if")
_IF_CPLUSPLUS = re.compile(r"^\s*#\s*(ifdef\s+__cplusplus|if\s+defined\s*\(?\s*__cplusplus)\b")
_ENDIF = re.compile(r"^\s*#\s*endif\b")


def cdef_files(cdefs_dir: Path) -> list[Path]:
    """The header files in the order their declarations must be given to cffi."""
    files = sorted(Path(cdefs_dir).glob("*.h"))
    first = [f for name in _FIRST for f in files if f.name == name]
    return first + [f for f in files if f not in first]


def _c_part(lines: list[str]) -> list[str]:
    """The lines outside ``#ifdef __cplusplus`` ... ``#endif`` blocks (nesting followed)."""
    kept, depth = [], 0
    for line in lines:
        if depth:
            depth += 1 if _IF.match(line) else -1 if _ENDIF.match(line) else 0
            kept.append("")
        elif _IF_CPLUSPLUS.match(line):
            depth = 1
            kept.append("")
        else:
            kept.append(line)
    return kept


def _strip(lines: list[str]) -> str:
    return "\n".join("" if _DROPPED_LINE.match(line) or _NON_INTEGER_DEFINE.match(line)
                     else _EXPORT_MARKER.sub("", line) for line in lines)


def included_headers(cdef: Path) -> list[Path]:
    """The headers of our own C APIs that a cdefs file names with ``#include "..."``."""
    cdef = Path(cdef)
    return [(cdef.parent / m.group(1)).resolve()
            for m in map(_LOCAL_INCLUDE.match, cdef.read_text().splitlines()) if m]


def c_declarations(header: Path) -> str:
    """The C part of one of our own headers as cffi reads it: without the ``#ifdef __cplusplus``
    blocks and the preprocessor lines (``#define NAME <integer>`` kept)."""
    return _strip(_c_part(Path(header).read_text().splitlines()))


def read_cdef(cdef: Path) -> str:
    """One cdefs file's declarations, each ``#include "..."`` replaced by the C part of the
    header it names."""
    out = []
    for line in Path(cdef).read_text().splitlines():
        match = _LOCAL_INCLUDE.match(line)
        if match:
            header = (Path(cdef).parent / match.group(1)).resolve()
            out.append(f"/* ---- {header.name} ---- */\n{c_declarations(header)}")
        else:
            out.append(_strip([line]))
    return "\n".join(out)


def _aclnn_entries():
    # By path, like this module itself at build time (acl_fa need not be importable then).
    spec = importlib.util.spec_from_file_location("_acl_fa_aclnn_entries", Path(__file__).with_name("aclnn_entries.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_cdefs(cdefs_dir: Path, entries: list = None) -> str:
    """All declarations: each file under a comment naming it, then the two functions of every
    aclnn entry in `entries` (aclnn_entries.load() when None) that no file declares."""
    files = "\n".join(f"/* ---- {f.name} ---- */\n{read_cdef(f)}" for f in cdef_files(cdefs_dir))
    module = _aclnn_entries()
    entries = module.load() if entries is None else entries
    generated = [module.declaration(e) for e in entries
                 if not re.search(rf"\b{e['phase1']}\s*\(", files)]
    return files + "\n/* ---- aclnn entries generated from the op JSON (aclnn_entries.py) ---- */\n" + "".join(generated)


def default_cdefs_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "cdefs"
