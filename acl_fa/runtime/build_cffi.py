"""Generates acl_fa/runtime/_acl_cffi.py, the cffi out-of-line ABI-mode module (run by CMake),
and beside it _aclnn_entries.json, the custom operators' aclnn entries derived from the op JSONs
of the source tree (aclnn_entries.py), whose declarations the module holds.

ABI mode: nothing is compiled against CANN; the generated module holds the parsed
declarations and the libraries are dlopen'ed at run time (acl_fa/runtime/loader.py).

    python acl_fa/runtime/build_cffi.py --cdefs acl_fa/cdefs --output build/python/acl_fa/runtime/_acl_cffi.py
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path


def _load_module(stem: str):
    # Loaded by path: at build time acl_fa is not importable (its deps may be missing).
    path = Path(__file__).resolve().parent / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"_acl_fa_{stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdefs", type=Path, required=True, help="directory of *.h declarations")
    parser.add_argument("--output", type=Path, required=True, help="path of the generated .py")
    parser.add_argument("--source-root", type=Path, default=None,
                        help="the source tree whose op JSONs declare the aclnn entries (op_host/, sim/); "
                             "default: the tree holding --cdefs (<root>/acl_fa/cdefs)")
    args = parser.parse_args(argv)
    # The op JSONs belong to the tree the declarations come from, not to wherever this script
    # lives: an installed copy of it has no op_host/ or sim/ beside it.
    source_root = args.source_root if args.source_root is not None else args.cdefs.resolve().parents[1]

    import cffi

    entries = _load_module("aclnn_entries").derive(source_root)
    ffi = cffi.FFI()
    ffi.cdef(_load_module("cdef_reader").read_cdefs(args.cdefs, entries))
    ffi.set_source("acl_fa.runtime._acl_cffi", None)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    ffi.emit_python_code(str(args.output))
    (args.output.parent / "_aclnn_entries.json").write_text(json.dumps(entries, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
