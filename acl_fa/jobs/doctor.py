"""`acl-fa doctor`: where everything came from (backend, libraries, device, versions, env).

collect() never raises for a problem it can describe: a failing item is reported with the
error's text, so the report still shows everything else (that is the point of a doctor).
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Optional

from ..runtime.ffi import ffi
from ..runtime.errors import AclFaError, AclLibraryError
from ..runtime.loader import Backend, device_count, get_backend, requested_backend
from ..runtime.session import DeviceSession

ENV_PREFIXES = ("ACL_FA_", "ASCEND_")
ACL_PKG_NAME_CANN = 0


def _package_version() -> str:
    try:
        return importlib.metadata.version("acl-fa")
    except importlib.metadata.PackageNotFoundError:
        return "not installed (source tree)"


def _cann_version(backend: Backend) -> str:
    major, minor, patch = (ffi.new("int32_t *") for _ in range(3))
    backend.call("aclrtGetVersion", major, minor, patch)
    text = f"ACL {major[0]}.{minor[0]}.{patch[0]}"
    if backend.has("aclsysGetCANNVersion"):
        version = ffi.new("aclCANNPackageVersion *")
        try:
            backend.call("aclsysGetCANNVersion", ACL_PKG_NAME_CANN, version)
            text += f", CANN {ffi.string(version.version).decode(errors='replace')}"
        except AclFaError as exc:
            text += f", CANN version unavailable ({str(exc).splitlines()[0]})"
    return text


def _chip(backend: Backend) -> str:
    c = backend.fn("aclfaSimGetChip")()
    return (f"{ffi.string(c.name).decode()}: {c.aicNum} AIC / {c.aivNum} AIV, "
            f"UB {c.ubBytes} B, L1 {c.l1Bytes} B, L0A/L0B/L0C {c.l0aBytes}/{c.l0bBytes}/{c.l0cBytes} B")


def collect(backend: Optional[str] = None, device: int = 0) -> dict:
    """The report as an ordered dict of section -> {item: text}."""
    report: dict = {
        "package": {
            "acl-fa": _package_version(),
            "python": f"{sys.version.split()[0]} ({sys.executable})",
            "platform": platform.platform(),
        },
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
        or {"(none set)": ""},
    }
    libraries: dict = {}
    report["backend"] = libraries
    try:
        libraries["requested"] = backend or requested_backend()
        loaded = get_backend(backend)
    except AclLibraryError as exc:
        libraries["error"] = exc.summary
        libraries["paths tried"] = [a.describe() for a in exc.attempts]
        return report
    except AclFaError as exc:
        libraries["error"] = str(exc)
        return report
    libraries["backend"] = loaded.name
    libraries["runtime"] = str(loaded.runtime_path)
    libraries["nnopbase"] = str(loaded.nnopbase_path)
    try:
        loaded.load_op_library()
        libraries["op library"] = f"{loaded.op_library_path} (via {loaded.op_library_origin})"
    except AclLibraryError as exc:
        libraries["op library"] = f"unavailable: {exc.summary}"
    # The operator library's candidates in lookup order, each with why it was or was not used.
    op_attempts = [a for a in loaded.attempts if a.library.startswith("op library")]
    libraries["op library candidates"] = [a.describe() for a in op_attempts] or ["(none)"]
    libraries["paths tried"] = [a.describe() for a in loaded.attempts if a not in op_attempts]

    device_info: dict = {}
    report["device"] = device_info
    for name, query in (
        ("version", lambda: _cann_version(loaded)),
        ("device count", lambda: str(device_count(loaded))),
    ):
        device_info[name] = _safely(query)
    try:
        with DeviceSession(device=device, backend=loaded.name) as session:
            device_info["device"] = str(device)
            device_info["SoC"] = _safely(session.soc_name)
            device_info["memory"] = _safely(lambda: _memory(session))
    except AclFaError as exc:
        device_info["session"] = f"failed: {exc}"
    if loaded.name == "sim":
        device_info["simulated chip"] = _safely(lambda: _chip(loaded))
    return report


def _memory(session: DeviceSession) -> str:
    free, total = session.mem_info()
    return f"{free / 2**30:.2f} GiB free of {total / 2**30:.2f} GiB"


def _safely(query) -> str:
    try:
        return query()
    except AclFaError as exc:
        return f"unavailable: {exc}"


def format_report(report: dict) -> str:
    """Sections, one item a line; list items (the paths tried) one per indented line."""
    lines = []
    for section, items in report.items():
        lines.append(f"{section}:")
        for key, value in items.items():
            if isinstance(value, list):
                lines.append(f"  {key}:")
                lines += [f"    {entry}" for entry in value]
            else:
                lines.append(f"  {key}: {value}" if value != "" else f"  {key}")
    return "\n".join(lines)
