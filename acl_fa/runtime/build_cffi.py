"""Generates acl_fa/runtime/_acl_cffi.py, the cffi out-of-line ABI-mode module (run by CMake).

ABI mode: nothing is compiled against CANN; the generated module holds the parsed
declarations and the libraries are dlopen'ed at run time (acl_fa/runtime/loader.py).

    python acl_fa/runtime/build_cffi.py --cdefs acl_fa/cdefs --output build/python/acl_fa/runtime/_acl_cffi.py
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path


def _load_cdefs_module():
    # Loaded by path: at build time acl_fa is not importable (its deps may be missing).
    path = Path(__file__).resolve().parent / "cdef_reader.py"
    spec = importlib.util.spec_from_file_location("_acl_fa_cdefs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdefs", type=Path, required=True, help="directory of *.h declarations")
    parser.add_argument("--output", type=Path, required=True, help="path of the generated .py")
    args = parser.parse_args(argv)

    import cffi

    ffi = cffi.FFI()
    ffi.cdef(_load_cdefs_module().read_cdefs(args.cdefs))
    ffi.set_source("acl_fa.runtime._acl_cffi", None)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    ffi.emit_python_code(str(args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
