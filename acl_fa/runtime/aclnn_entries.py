"""The aclnn entries of the custom operators, as msopgen derives them from each op's JSON.

Every custom operator's interface is written once, in its msopgen op JSON
(``op_host/<family>/<op>.json``). msopgen derives two C functions from it,
``aclnn<Op>GetWorkspaceSize(<inputs>, <attrs>, <outputs>, uint64_t *workspaceSize,
aclOpExecutor **executor)`` and ``aclnn<Op>(workspace, workspaceSize, executor, stream)``
(docs/cann-facts.md#custom-operator-api); ``sim/src/opapi/gen_aclnn.py`` states those rules
(``aclnn_interface``) and generates the simulator's entries from them. This module gives the
driver the same derivation, so neither the cffi declarations of the entries nor the order of
their arguments is written by hand:

- an installed package reads ``_aclnn_entries.json``, written beside the cffi module at build
  time (``build_cffi.py``) from the op JSONs of the source tree;
- a source checkout derives them at import time from ``op_host/*/*.json`` with
  ``gen_aclnn.aclnn_interface`` (both loaded by path: this module is also loaded by path at build
  time, when ``acl_fa`` is not importable).

An entry is ``{"op", "snake", "phase1", "phase2", "params": [[c_type, name, kind, json_entry]],
"phase2_params": [[c_type, name]]}`` with kind ``input``, ``attr``, ``output`` or ``tail``
(gen_aclnn.aclnn_interface). The runtime layer knows no op: it reads whatever JSON is there.
"""
from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
INSTALLED = HERE / "_aclnn_entries.json"  # written at build time beside _acl_cffi.py
SOURCE_ROOT = HERE.parents[1]  # a checkout's root (op_host/, sim/) when this file is in one
GENERATOR = Path("sim") / "src" / "opapi" / "gen_aclnn.py"


def op_jsons(root: Path = SOURCE_ROOT) -> list:
    """Every custom operator's msopgen op JSON in a source tree (op_host/<family>/<op>.json)."""
    return sorted(Path(root).glob("op_host/*/*.json"))


def _generator(root: Path):
    path = Path(root) / GENERATOR
    spec = importlib.util.spec_from_file_location("_acl_fa_gen_aclnn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def derive(root: Path = SOURCE_ROOT) -> list:
    """The entries of every op JSON of the source tree at `root`, in file order then JSON order."""
    gen = _generator(root)
    out = []
    for path in op_jsons(root):
        for op in json.loads(path.read_text()):
            iface = gen.aclnn_interface(op)
            iface["params"] = [list(p) for p in iface["params"]]
            iface["phase2_params"] = [list(p) for p in iface["phase2_params"]]
            iface["source"] = str(path.relative_to(root))
            out.append(iface)
    return out


def source_files(root: Path = SOURCE_ROOT) -> list:
    """The files of a source tree `derive` reads (what a checkout needs besides acl_fa/)."""
    return [Path(root) / GENERATOR] + op_jsons(root)


@functools.lru_cache(maxsize=None)
def _load() -> tuple:
    return tuple(_read())


def load() -> list:
    """The entries: the build's list when installed, else derived from the checkout; [] when
    neither is there (then only hand-written declarations exist). Read once per process."""
    return list(_load())


def _read() -> list:
    if INSTALLED.is_file():
        return json.loads(INSTALLED.read_text())
    if (SOURCE_ROOT / GENERATOR).is_file():
        return derive(SOURCE_ROOT)
    return []


def _param(c_type: str, name: str) -> str:
    return f"{c_type}{name}" if c_type.endswith("*") else f"{c_type} {name}"


def declaration(entry: dict) -> str:
    """The two C declarations of one entry, as msopgen's aclnn_<op>.h declares them."""
    one = ", ".join(_param(p[0], p[1]) for p in entry["params"])
    two = ", ".join(_param(p[0], p[1]) for p in entry["phase2_params"])
    return (f"/* {entry['phase1']} / {entry['phase2']}: generated from {entry.get('source', entry['op'])} */\n"
            f"aclnnStatus {entry['phase1']}({one});\naclnnStatus {entry['phase2']}({two});\n")


def by_op(entries: list) -> dict:
    """{op type: entry}."""
    return {e["op"]: e for e in entries}
