"""Error families, the code table, pickling."""
from __future__ import annotations

import pickle
import re

import pytest

from acl_fa.runtime.cdef_reader import read_cdefs
from conftest import CDEFS
from acl_fa.runtime.errors import (
    ERROR_CODES, AclError, AclFaError, AclLibraryError, AclMemoryError, AclParamError, ClosedObjectError,
    InvalidArgumentError, InvalidTypeError, LoadAttempt, error_for_code)


def test_code_table_matches_the_cdefs():
    """Every code we explain has the value the cdefs (checked against CANN's headers) give."""
    # `#define NAME value` (rt_error_codes.h) or `static const int NAME = value;` (acl_base_rt.h)
    defines = {m[0]: int(m[1]) for m in
               re.findall(r"(?:#define\s+|static\s+const\s+int\s+)(ACL\w+)\s*=?\s*(\d+)\b",
                          read_cdefs(CDEFS))}
    mismatches = {info.name: (code, defines.get(info.name))
                  for code, info in ERROR_CODES.items() if defines.get(info.name) != code}
    assert not mismatches, f"name: (table, cdefs) {mismatches}"


@pytest.mark.parametrize("code, family, also", [
    (207001, AclMemoryError, MemoryError),
    (207018, AclMemoryError, MemoryError),
    (200000, AclMemoryError, MemoryError),
    (100000, AclParamError, ValueError),
    (107000, AclParamError, ValueError),
    (161001, AclParamError, ValueError),
    (161002, AclParamError, ValueError),
    (507015, AclError, RuntimeError),
    (561002, AclError, RuntimeError),
    (999999, AclError, RuntimeError),
], ids=lambda v: str(v) if isinstance(v, int) else v.__name__)
def test_family_by_code(code, family, also):
    exc = error_for_code(code, "aclSomething", "the runtime's words")
    assert type(exc) is family
    assert isinstance(exc, also) and isinstance(exc, AclFaError)


def test_message_names_code_api_and_runtime_text():
    exc = error_for_code(207001, "aclrtMalloc", "HBM exhausted: 10 bytes requested\n")
    text = str(exc)
    assert "aclrtMalloc failed with 207001 (ACL_ERROR_RT_MEMORY_ALLOCATION)" in text
    assert "device memory allocation failed" in text
    assert text.endswith("runtime message: HBM exhausted: 10 bytes requested")
    unknown = AclError(424242, "aclX")
    assert unknown.name == "UNKNOWN" and "424242" in str(unknown)


@pytest.mark.parametrize("exc", [
    error_for_code(207001, "aclrtMalloc", "oom"),
    error_for_code(161002, "aclnnFlashAttentionGetWorkspaceSize", "bad D"),
    error_for_code(507015, "aclrtSynchronizeStream", "core 3"),
    AclLibraryError("no runtime", [LoadAttempt("runtime", "/x/libacl_rt.so", "not found")],
                    {"ASCEND_HOME_PATH": None}),
    InvalidArgumentError("seq must be > 0"),
    InvalidTypeError("dtype int8"),
    ClosedObjectError("closed"),
], ids=lambda e: type(e).__name__)
def test_every_family_pickles(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    for attr in ("code", "name", "api", "message", "attempts", "env"):
        assert getattr(back, attr, None) == getattr(exc, attr, None)


def test_library_error_lists_attempts_and_env():
    exc = AclLibraryError(
        "backend sim: nothing loads",
        [LoadAttempt("runtime", "/a/libacl_rt.so", "not found"),
         LoadAttempt("runtime", "/a/libascendcl.so", "found but failed to load", "bad ELF")],
        {"ACL_FA_SIM_LIB_DIR": "/a", "ASCEND_HOME_PATH": None})
    assert isinstance(exc, ImportError)
    assert str(exc).splitlines() == [
        "backend sim: nothing loads",
        "paths tried, in order:",
        "  runtime: /a/libacl_rt.so: not found",
        "  runtime: /a/libascendcl.so: found but failed to load: bad ELF",
        "environment read:",
        "  ACL_FA_SIM_LIB_DIR=/a",
        "  ASCEND_HOME_PATH (unset)",
    ]
