"""Finds and loads the CANN libraries (backend "npu") or the CPU simulator (backend "sim").

Backend choice: argument, else ``ACL_FA_BACKEND`` = npu | sim | auto (default auto).

- npu: in ``$ASCEND_HOME_PATH/lib64``, ``$ASCEND_TOOLKIT_HOME/lib64`` and
  ``/usr/local/Ascend/ascend-toolkit/latest/lib64``: ``libacl_rt.so`` (else the legacy
  ``libascendcl.so``), then ``libnnopbase.so`` from the same directory.
- sim: the same file names in ``$ACL_FA_SIM_LIB_DIR`` when set (a dev build's ``lib/``),
  else in the package's bundled ``acl_fa/_sim/lib``; a source tree (which has none) uses
  the installed acl-fa distribution's.
- auto: npu when its libraries load and ``aclrtGetDeviceCount`` finds a device, else sim,
  said once at INFO level on the ``acl_fa`` logger.

One backend per process: both backends ship libraries of the same names, and the dynamic
linker resolves a library's dependencies by name against what is already loaded. So "auto"
probes a CANN found on disk in a child process before loading anything here.

Every path tried is recorded in order with its outcome ("not found", "failed to load:
<dlerror>", ...); `doctor` shows the record, and AclLibraryError carries it when nothing loads.
The op library (libcust_opapi.so, the aclnn entry of our operator) is loaded on first use, and
so are HCCL (``libhccl.so``, for acl_fa.parallel) and CANN's builtin op library (``libopapi.so``,
for aclnnInplaceAdd): backend npu looks in the directory its runtime came from, then the other
CANN lib64 directories above; backend sim uses the simulator's own.
"""
from __future__ import annotations

import importlib.metadata
import json
import logging
import numbers
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional

import _cffi_backend

from .ffi import ffi
from .errors import (
    ACLNN_ERR_INNER_NULLPTR, AclLibraryError, InvalidArgumentError, InvalidTypeError, LoadAttempt, error_for_code,
    hccl_error_for_code)

log = logging.getLogger("acl_fa")

BACKENDS = ("npu", "sim", "auto")
ENV_BACKEND = "ACL_FA_BACKEND"
ENV_SIM_LIB_DIR = "ACL_FA_SIM_LIB_DIR"
DISTRIBUTION = "acl-fa"  # the name pip installs this package under (pyproject.toml)
# Variables the finder reads (shown by doctor and in AclLibraryError).
ENV_READ = (
    ENV_BACKEND,
    ENV_SIM_LIB_DIR,
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_CUSTOM_OPP_PATH",
    "ASCEND_OPP_PATH",
)
DEFAULT_TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
RUNTIME_NAMES = ("libacl_rt.so", "libascendcl.so")  # preferred first (docs/cann-facts.md#runtime-libraries-and-lookup)
NNOPBASE_NAME = "libnnopbase.so"
OP_LIBRARY_NAME = "libcust_opapi.so"
HCCL_NAME = "libhccl.so"
# Functions of libhccl.so: HCCL's own and the simulator's extensions to it.
HCCL_PREFIXES = ("Hccl", "aclfaSimHccl")
BUILTIN_OPAPI_NAME = "libopapi.so"
BUILTIN_OPAPI_PREFIXES = ("aclnnInplaceAdd", "aclfaSimGetBuiltinOpStats")
OP_ENTRY = "aclnnFlashAttentionGetWorkspaceSize"  # what makes a libcust_opapi.so ours
# version.info key written by `./build.sh --sim` packages; a package without it was built by CANN.
PACKAGE_BACKEND_KEY = "acl_fa_backend"
SIM_OWN_ORIGIN = "the simulator's library directory"

_DLOPEN_FLAGS = ffi.RTLD_NOW | ffi.RTLD_GLOBAL
# What getattr(lib, name) raises for a name the library does not export: AttributeError
# with cdefs parsed at run time, ffi.error (_cffi_backend.FFI.error) with the generated
# out-of-line module.
MISSING_SYMBOL = (AttributeError, _cffi_backend.FFI.error)


def _env_snapshot(env: Mapping[str, str]) -> dict:
    return {k: env.get(k) for k in ENV_READ}


def _try_dlopen(library: str, path: Path, attempts: list) -> Optional[object]:
    """dlopen `path`, recording the outcome; the cffi library object or None."""
    if not path.is_file():
        attempts.append(LoadAttempt(library, str(path), "not found"))
        return None
    try:
        lib = ffi.dlopen(str(path), _DLOPEN_FLAGS)
    except OSError as exc:
        attempts.append(LoadAttempt(library, str(path), "found but failed to load", str(exc)))
        return None
    attempts.append(LoadAttempt(library, str(path), "loaded"))
    return lib


class Backend:
    """The loaded libraries of one backend and the process's one checked-call path."""

    def __init__(self, name: str, libdir: Path, runtime, runtime_path: Path, nnopbase,
                 nnopbase_path: Path, attempts: list, env: dict):
        self.name = name
        self.libdir = libdir
        self.runtime_path = runtime_path
        self.nnopbase_path = nnopbase_path
        self.attempts = attempts
        self.env = env
        self._libs = [runtime, nnopbase]
        self._functions: dict[str, Callable] = {}
        self._op_lock = threading.Lock()
        self._op_loaded = False
        self.op_library_path: Optional[Path] = None
        self.op_library_origin: Optional[str] = None
        self.op_library_error: Optional[AclLibraryError] = None
        self._hccl = None
        self.hccl_path: Optional[Path] = None
        self.hccl_error: Optional[AclLibraryError] = None
        self._builtin_opapi = None
        self.builtin_opapi_path: Optional[Path] = None
        self.builtin_opapi_error: Optional[AclLibraryError] = None

    # ---- symbols ---------------------------------------------------------------------
    def fn(self, api: str) -> Callable:
        """The C function `api` from the runtime, nnopbase or op library (in that order)."""
        cached = self._functions.get(api)
        if cached is not None:
            return cached
        if api.startswith(HCCL_PREFIXES):
            libs = [self.load_hccl()]
        elif api.startswith(BUILTIN_OPAPI_PREFIXES):
            libs = [self.load_builtin_opapi()]
        else:
            if api.startswith("aclnn") and not api.startswith(("aclnnInit", "aclnnFinalize")):
                self.load_op_library()
            libs = list(self._libs)
        for lib in libs:
            try:
                function = getattr(lib, api)
            except MISSING_SYMBOL:
                continue
            self._functions[api] = function
            return function
        raise AclLibraryError(
            f"{api}: not declared in acl_fa/cdefs, or exported by none of the {self.name} "
            f"libraries loaded: {', '.join(str(p) for p in self.library_paths())}"
        )

    def has(self, api: str) -> bool:
        try:
            self.fn(api)
        except AclLibraryError:
            return False
        return True

    def library_paths(self) -> list:
        paths = [self.runtime_path, self.nnopbase_path]
        paths += [self.op_library_path] if self.op_library_path else []
        return paths + [p for p in (self.hccl_path, self.builtin_opapi_path) if p]

    # ---- the checked call --------------------------------------------------------------
    def call(self, api: str, *args):
        """Calls `api`; raises the AclError family on failure, else returns the result.

        Status-returning APIs (aclError, aclnnStatus) fail on non-zero; object-creating
        APIs (aclCreateTensor, ...) fail on NULL, reported as ACLNN_ERR_INNER_NULLPTR.
        The exception carries aclGetRecentErrMsg() of this thread.
        """
        function = self._functions.get(api) or self.fn(api)
        result = function(*args)
        if isinstance(result, int):
            if result != 0:
                if api.startswith(HCCL_PREFIXES):
                    raise hccl_error_for_code(result, api, self._hccl_message(result))
                raise error_for_code(result, api, self.recent_error_message())
            return result
        if result == ffi.NULL:
            message = self.recent_error_message()
            raise error_for_code(
                ACLNN_ERR_INNER_NULLPTR, api, f"{api} returned NULL. {message}".strip()
            )
        return result

    def recent_error_message(self) -> str:
        text = self.fn("aclGetRecentErrMsg")()
        return "" if text == ffi.NULL else ffi.string(text).decode(errors="replace")

    def _hccl_message(self, code: int) -> str:
        """HcclGetErrorString(code), then the runtime's recent messages (where CANN's error
        manager, and the simulator, record what HCCL found)."""
        text = self.fn("HcclGetErrorString")(code)
        described = "" if text == ffi.NULL else ffi.string(text).decode(errors="replace")
        return "\n".join(m for m in (described, self.recent_error_message()) if m)

    # ---- HCCL ------------------------------------------------------------------------------
    def hccl_dirs(self) -> list:
        """Where libhccl.so (and libopapi.so) is looked for, in order (see the module docstring)."""
        if self.name == "sim":
            return [self.libdir]
        return [self.libdir] + [d for d in npu_library_dirs(os.environ) if d != self.libdir]

    def load_hccl(self):
        """Loads libhccl.so once (the cffi library); AclLibraryError listing every path tried."""
        return self._load_cann_library("hccl", HCCL_NAME, "HCCL")

    def load_builtin_opapi(self):
        """Loads CANN's builtin op library libopapi.so once (same search as HCCL's)."""
        return self._load_cann_library("builtin_opapi", BUILTIN_OPAPI_NAME, "the builtin op library")

    def _load_cann_library(self, key: str, file_name: str, what: str):
        """The library `file_name` from hccl_dirs(), loaded once and kept as self._<key>, its path
        as self.<key>_path; a failure is kept as self.<key>_error and raised again on every call."""
        with self._op_lock:
            lib = getattr(self, f"_{key}")
            if lib is not None:
                return lib
            error = getattr(self, f"{key}_error")
            if error is not None:
                raise error
            attempts: list = []
            for libdir in self.hccl_dirs():
                lib = _try_dlopen(key, libdir / file_name, attempts)
                if lib is not None:
                    setattr(self, f"_{key}", lib)
                    setattr(self, f"{key}_path", libdir / file_name)
                    break
            self.attempts.extend(attempts)
            if lib is None:
                error = AclLibraryError(f"{what} ({file_name}) of backend {self.name} was not found or failed to load",
                                        attempts, _env_snapshot(os.environ))
                setattr(self, f"{key}_error", error)
                raise error
            return lib

    # ---- the op library ------------------------------------------------------------------
    def load_op_library(self):
        """Loads libcust_opapi.so (find_op_library order) once; AclLibraryError if absent."""
        with self._op_lock:
            if self._op_loaded:
                return
            if self.op_library_error is not None:
                raise self.op_library_error
            attempts: list = []
            for candidate in find_op_library(self.name, self.libdir, os.environ):
                label = f"op library via {candidate.origin}"
                path = str(candidate.path)
                if self._op_loaded:
                    attempts.append(LoadAttempt(label, path, "not used",
                                                f"{self.op_library_path} comes first"))
                    continue
                built_for = package_backend(candidate) if candidate.path.is_file() else None
                if built_for not in (None, self.name):
                    attempts.append(LoadAttempt(label, path, "skipped", (
                        f"a package for backend {built_for} (version.info), this process "
                        f"uses backend {self.name}")))
                    continue
                lib = _try_dlopen(label, candidate.path, attempts)
                if lib is None:
                    continue
                try:
                    getattr(lib, OP_ENTRY)
                except MISSING_SYMBOL:
                    ffi.dlclose(lib)
                    attempts[-1] = LoadAttempt(
                        label, path, "unusable",
                        f"does not export {OP_ENTRY} (another operator package)")
                    continue
                attempts[-1] = LoadAttempt(label, path, "loaded", "picked")
                self._libs.append(lib)
                self.op_library_path = candidate.path
                self.op_library_origin = candidate.origin
                self._op_loaded = True
            self.attempts.extend(attempts)
            if not self._op_loaded:
                self.op_library_error = AclLibraryError(
                    f"the operator library {OP_LIBRARY_NAME} of backend {self.name} was not "
                    "found or failed to load", attempts, _env_snapshot(os.environ))
                raise self.op_library_error


def sim_library_dir(env: Mapping[str, str] = os.environ) -> Path:
    """$ACL_FA_SIM_LIB_DIR when set, else the package's bundled acl_fa/_sim/lib, else -- when
    this acl_fa is a source tree (no built libraries) -- the installed acl-fa distribution's."""
    override = env.get(ENV_SIM_LIB_DIR)
    if override:
        return Path(override)
    # The package is a directory on disk (a wheel's or a checkout's); found from this file, not through
    # importlib.resources, whose first use imports its readers: a module body run under the first
    # call, where a Ctrl-C can land (tests/runtime/test_lifecycle.py).
    bundled = Path(__file__).resolve().parent.parent / "_sim" / "lib"
    if bundled.is_dir():
        return bundled
    installed = installed_sim_library_dir()
    return installed if installed is not None else bundled


def installed_sim_library_dir() -> Optional[Path]:
    """acl_fa/_sim/lib of the installed acl-fa distribution, or None. Python puts the current
    directory first on sys.path, so in a checkout where `pip install .` just ran, the source
    tree's acl_fa/ (no built libraries) is imported instead of the installed package; it then
    uses the installed package's libraries."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    libdir = Path(str(dist.locate_file("acl_fa/_sim/lib")))
    if not libdir.is_dir():
        return None
    log.info("acl_fa at %s has no built libraries; using those of the installed %s %s in %s",
             Path(__file__).parent.parent, DISTRIBUTION, dist.version, libdir)
    return libdir


def npu_library_dirs(env: Mapping[str, str] = os.environ) -> list:
    """The CANN lib64 directories to search, in order, without duplicates."""
    roots = [env.get("ASCEND_HOME_PATH"), env.get("ASCEND_TOOLKIT_HOME"), DEFAULT_TOOLKIT]
    dirs: list = []
    for root in roots:
        if root and Path(root, "lib64") not in dirs:
            dirs.append(Path(root, "lib64"))
    return dirs


class OpCandidate(NamedTuple):
    """A place libcust_opapi.so may be: ``path`` and ``origin``, the lookup rule naming it."""

    path: Path
    origin: str


def find_op_library(backend: str, sim_dir: Optional[Path] = None,
                    env: Mapping[str, str] = os.environ) -> list:
    """Candidates (OpCandidate) for libcust_opapi.so, most preferred first, as nnopbase looks
    up custom operator packages (docs/cann-facts.md#custom-operator-packages): each vendor directory in
    ASCEND_CUSTOM_OPP_PATH, left first (as the package's set_env.bash prepends it); then
    $ASCEND_OPP_PATH/vendors/<vendor> in vendors/config.ini's load_priority order; then, for
    backend sim only, the simulator's own library next to its runtime.
    """
    vendor_dirs = [(Path(p), f"ASCEND_CUSTOM_OPP_PATH[{i}]")
                   for i, p in enumerate(env.get("ASCEND_CUSTOM_OPP_PATH", "").split(":")) if p]
    opp = env.get("ASCEND_OPP_PATH")
    if opp:
        vendors = Path(opp, "vendors")
        vendor_dirs += [(vendors / v, f"{vendors / 'config.ini'} load_priority[{i}]")
                        for i, v in enumerate(_load_priority(vendors))]
    candidates = [OpCandidate(d / "op_api" / "lib" / OP_LIBRARY_NAME, origin)
                  for d, origin in vendor_dirs]
    if backend == "sim":
        candidates.append(OpCandidate(Path(sim_dir or sim_library_dir(env), OP_LIBRARY_NAME),
                                      SIM_OWN_ORIGIN))
    return candidates


def package_backend(candidate: OpCandidate) -> Optional[str]:
    """The backend an installed package was built for: "sim" when its version.info says so
    (``./build.sh --sim``), "npu" for any other package; None for a library outside a package
    (the simulator's own)."""
    if candidate.origin == SIM_OWN_ORIGIN:
        return None
    vendor_dir = candidate.path.parent.parent.parent  # <vendor>/op_api/lib/libcust_opapi.so
    try:
        text = (vendor_dir / "version.info").read_text()
    except OSError:
        return "npu"
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == PACKAGE_BACKEND_KEY:
            return value.strip()
    return "npu"


def _load_priority(vendors: Path) -> list:
    """Vendor names from vendors/config.ini ("load_priority=a,b"), or [] when absent."""
    try:
        text = (vendors / "config.ini").read_text()
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "load_priority":
            return [v.strip() for v in value.split(",") if v.strip()]
    return []


def _load_from_dirs(name: str, dirs: list, attempts: list, env: dict) -> Backend:
    """Runtime then nnopbase from the first directory whose runtime loads."""
    for libdir in dirs:
        for runtime_name in RUNTIME_NAMES:
            runtime = _try_dlopen("runtime", libdir / runtime_name, attempts)
            if runtime is None:
                continue
            nnopbase = _try_dlopen("nnopbase", libdir / NNOPBASE_NAME, attempts)
            if nnopbase is None:
                break  # this directory's runtime is unusable without its nnopbase
            return Backend(name, libdir, runtime, libdir / runtime_name, nnopbase,
                           libdir / NNOPBASE_NAME, attempts, env)
    where = ", ".join(str(d) for d in dirs)
    raise AclLibraryError(
        f"backend {name}: no loadable runtime ({' or '.join(RUNTIME_NAMES)}) with "
        f"{NNOPBASE_NAME} in {where}", attempts, env)


def load_sim(lib_dir: Optional[Path] = None, env: Mapping[str, str] = os.environ) -> Backend:
    """Loads the simulator from `lib_dir` (default: sim_library_dir()). Not cached."""
    libdir = Path(lib_dir) if lib_dir else sim_library_dir(env)
    try:
        return _load_from_dirs("sim", [libdir], [], _env_snapshot(env))
    except AclLibraryError as exc:
        if lib_dir is None and not env.get(ENV_SIM_LIB_DIR) and not libdir.is_dir():
            exc.summary += (
                f"\nthis acl_fa ({Path(__file__).parent.parent}) is a source tree without built libraries, and no "
                f"installed {DISTRIBUTION} has them. In the checkout, either run `pip install .` (the source "
                "tree then uses the installed package's libraries), or build in place: "
                "`cmake -S . -B build -G Ninja && cmake --build build` and "
                f"`export {ENV_SIM_LIB_DIR}=$PWD/build/lib`")
        raise


def load_npu(env: Mapping[str, str] = os.environ) -> Backend:
    """Loads the CANN libraries from the standard locations. Not cached."""
    return _load_from_dirs("npu", npu_library_dirs(env), [], _env_snapshot(env))


def device_count(backend: Backend) -> int:
    count = ffi.new("uint32_t *")
    backend.call("aclrtGetDeviceCount", count)
    return int(count[0])


def check_device_id(backend: Backend, device) -> int:
    """`device` as an int when it names a device of this host (aclrtSetDevice takes int32_t);
    InvalidTypeError / InvalidArgumentError naming it otherwise."""
    if isinstance(device, bool) or not isinstance(device, numbers.Integral):
        raise InvalidTypeError(f"device must be an integer, got {device!r}")
    count = device_count(backend)
    if not 0 <= device < count:
        plural = "device" if count == 1 else "devices"
        raise InvalidArgumentError(f"device={device} is out of range: this host has {count} {plural}")
    return int(device)


def _probe_npu(env: Mapping[str, str]) -> tuple:
    """(True, []) when CANN loads and sees a device; else (False, attempts).

    Runs in a child process when CANN exists on disk (see the module docstring)."""
    candidates = [d / n for d in npu_library_dirs(env) for n in RUNTIME_NAMES]
    if not any(p.is_file() for p in candidates):
        return False, [LoadAttempt("runtime", str(p), "not found") for p in candidates]
    # The child must import this very acl_fa, whatever its current directory holds.
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    child = subprocess.run(
        [sys.executable, "-c", "from acl_fa.runtime.loader import probe_main; probe_main()"],
        capture_output=True, text=True, env={**env, ENV_BACKEND: "npu", "PYTHONPATH": path},
        timeout=120, cwd=package_root)
    try:
        report = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        detail = (child.stderr.strip().splitlines() or ["no output"])[-1]
        return False, [LoadAttempt("npu probe", sys.executable, "failed", detail)]
    attempts = [LoadAttempt(*a) for a in report["attempts"]]
    if report.get("devices", 0) > 0:
        return True, attempts
    attempts.append(LoadAttempt("npu probe", "aclrtGetDeviceCount", "unusable",
                                report.get("error") or "0 devices"))
    return False, attempts


def probe_main():
    """Child side of _probe_npu: prints one JSON line."""
    report: dict = {"attempts": [], "devices": 0}
    try:
        backend = load_npu()
        report["attempts"] = [tuple(a) for a in backend.attempts]
        report["devices"] = device_count(backend)
    except Exception as exc:  # reported to the parent, which decides
        report["attempts"] = [tuple(a) for a in getattr(exc, "attempts", [])]
        report["error"] = str(exc).splitlines()[0]
    print(json.dumps(report))


_lock = threading.Lock()
_loaded: Optional[Backend] = None


def requested_backend(env: Mapping[str, str] = os.environ) -> str:
    name = (env.get(ENV_BACKEND) or "auto").strip().lower()
    if name not in BACKENDS:
        raise InvalidArgumentError(
            f"{ENV_BACKEND}={env.get(ENV_BACKEND)!r}: must be one of {', '.join(BACKENDS)}")
    return name


def get_backend(name: Optional[str] = None) -> Backend:
    """The process's backend, loading it on first call (see the module docstring)."""
    global _loaded
    wanted = (name or requested_backend()).lower()
    if wanted not in BACKENDS:
        raise InvalidArgumentError(f"backend {name!r}: must be one of {', '.join(BACKENDS)}")
    with _lock:
        if _loaded is None:
            _loaded = _load(wanted)
        elif wanted != "auto" and wanted != _loaded.name:
            raise AclLibraryError(
                f"backend {wanted} requested, but this process already uses backend "
                f"{_loaded.name} ({_loaded.runtime_path}); one backend per process")
        return _loaded


def loaded_backend() -> Optional[Backend]:
    """The backend loaded so far in this process, or None."""
    return _loaded


def _load(wanted: str) -> Backend:
    if wanted == "sim":
        return load_sim()
    if wanted == "npu":
        return load_npu()
    found, npu_attempts = _probe_npu(os.environ)
    if found:
        return load_npu()
    backend = load_sim()
    backend.attempts[:0] = npu_attempts
    reason = npu_attempts[-1].describe() if npu_attempts else "no CANN found"
    log.info("%s=auto: using the CPU simulator (%s); NPU not usable: %s",
             ENV_BACKEND, backend.runtime_path, reason)
    return backend
