"""The process's single cffi FFI object.

Installed packages use the module generated at build time (acl_fa/runtime/_acl_cffi.py). A source
checkout has no generated module; there the same declarations are parsed at import time
(slower import, same ABI), so a dev build needs only its libraries (ACL_FA_SIM_LIB_DIR); the
aclnn entries of the custom operators are then derived from the checkout's op JSONs
(aclnn_entries.py).
"""
from __future__ import annotations

from .cdef_reader import default_cdefs_dir, read_cdefs

try:
    from ._acl_cffi import ffi
except ImportError:  # a source checkout: parse the declarations now
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(read_cdefs(default_cdefs_dir()))

__all__ = ["ffi"]
