"""Loads the simulator's libraries and the test-kernel library for the engine tests.

Libraries are found in ACL_FA_SIM_LIB_DIR (a build tree's lib/ directory), else in the
installed package's acl_fa/_sim/lib. The test kernels (tests/kernels/*.cpp) are test-only code,
not part of the package: kernel_library() compiles them against sim/include and those
libraries on first use, into a cache directory keyed by everything the build reads (the
sources, the headers, the compiler command, the simulator libraries), so a session builds them
at most once and later sessions reuse the result. Device buffers come from the simulated runtime
(aclrtMalloc), because kernels may only touch live device allocations.
"""
import fcntl
import hashlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import cffi
import numpy as np

from acl_fa.runtime.cdef_reader import c_declarations, read_cdefs

REPO = Path(__file__).resolve().parents[2]
KERNELS_DIR = Path(__file__).resolve().parent
HOOKS_DIR = REPO / "tests" / "sim_hooks"

# The driver's declarations (ACL runtime, simulator extension) plus the test kernels' entries,
# from the checkout (an installed package's cdefs name headers only a checkout has).
CDEF = read_cdefs(REPO / "acl_fa" / "cdefs") + c_declarations(KERNELS_DIR / "test_kernels.h")

MEMCPY_H2D, MEMCPY_D2H = 1, 2
AICORE_EXCEPTION = 507015
KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_MIX_AIC_1_2 = 0, 5
SYS_WORKSPACE = 16 << 20  # GetLibApiWorkSpaceSize on Ascend910B


def lib_dir():
    # The driver's own rule: ACL_FA_SIM_LIB_DIR, else the package's libraries -- the installed
    # distribution's when `acl_fa` resolves to a source tree (a child started from the checkout).
    from acl_fa.runtime.loader import sim_library_dir

    return sim_library_dir()

# The include directories: the test kernels, the simulator's CANN headers, and op_kernel's folders
# (mask_tile and philox_tile run the operator's own mask and dropout headers; the tiling hook
# rewrites the forward's tiling struct).
INCLUDE_DIRS = [KERNELS_DIR, REPO / "sim" / "include"] + sorted(d for d in (REPO / "op_kernel").iterdir() if d.is_dir())
CXXFLAGS = ["-std=c++17", "-O3", "-DNDEBUG", "-fPIC"]
BUILD_JOBS = 2  # compilers at once: the machines that run the tests have few cores
_built = {}  # (library name, lib dir) -> the library built for it in this process


def _build_key(cxx, libs, sources):
    """Digest of what a test library's build reads: its command, sources, headers and the libraries it links."""
    h = hashlib.sha256(shlex.join([*cxx, *CXXFLAGS, str(libs)]).encode())
    h.update(subprocess.run([*cxx, "--version"], capture_output=True, check=True).stdout)
    files = sorted({*sources, *(f for d in INCLUDE_DIRS for f in d.rglob("*") if f.is_file() and f.suffix in (".h", ".cpp"))})
    for f in files:
        h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    for name in ("libascendc_sim.so", "libascendcl.so"):
        st = (libs / name).stat()
        h.update(f"{name} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _compile(cxx, libs, sources, out):
    """Compiles `sources` (BUILD_JOBS at a time) and links them into `out`."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        objs, running = [], []
        for src in sources:
            obj = Path(tmp) / (src.stem + ".o")
            cmd = [*cxx, *CXXFLAGS, *(f"-I{d}" for d in INCLUDE_DIRS), "-c", str(src), "-o", str(obj)]
            running.append(subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True))
            objs.append(str(obj))
            if len(running) >= BUILD_JOBS:
                _wait(running.pop(0))
        for job in running:
            _wait(job)
        lib = Path(tmp) / out.name
        _wait(subprocess.Popen([*cxx, "-shared", "-o", str(lib), *objs, f"-L{libs}", "-lascendc_sim", "-lascendcl",
                                f"-Wl,-rpath,{libs}", "-pthread"], stderr=subprocess.PIPE, text=True))
        os.replace(lib, out)  # atomic: a reader sees the whole library or none


def _wait(proc):
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"building a test library failed: {shlex.join(proc.args)}\n{err}")


def _test_library(name, sources, libs):
    """Path of the test-only library `name` built from `sources` for the simulator libraries in
    `libs` (default lib_dir()), building it first when the cache ($ACL_FA_TEST_KERNEL_CACHE, else
    ~/.cache/acl-fa/test-kernels) has none for the current sources."""
    libs = Path(libs or lib_dir()).resolve()
    if (name, libs) in _built:
        return _built[name, libs]
    cxx = shlex.split(os.environ.get("CXX", "c++"))
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "acl-fa" / "test-kernels"
    cache = Path(os.environ.get("ACL_FA_TEST_KERNEL_CACHE", default_cache))
    out = cache / _build_key(cxx, libs, sources) / name
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / "lock", "w") as lock:  # one builder at a time (pytest's child processes)
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not out.is_file():
                _compile(cxx, libs, sources, out)
    _built[name, libs] = out
    return out


def kernel_library(libs=None):
    """libaclfa_sim_testkernels.so: the engine's test kernels (tests/kernels/*.cpp)."""
    return _test_library("libaclfa_sim_testkernels.so", sorted(KERNELS_DIR.glob("*.cpp")), libs)


def hook_library(libs=None):
    """libaclfa_sim_testhooks.so: the op API's test-only tiling hook (tests/sim_hooks/), loaded by
    libcust_opapi from $ACL_FA_SIM_TEST_HOOKS when ACL_FA_SIM_TEST_FORCE_BLOCK_M is set."""
    return _test_library("libaclfa_sim_testhooks.so", sorted(HOOKS_DIR.glob("*.cpp")), libs)


class SimKernels:
    def __init__(self):
        d = lib_dir()
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.rt = self.ffi.dlopen(str(d / "libascendcl.so"))
        self.engine = self.ffi.dlopen(str(d / "libascendc_sim.so"))
        self.k = self.ffi.dlopen(str(kernel_library(d)))
        rc = self.rt.aclInit(self.ffi.NULL)
        assert rc in (0, 100002)  # 100002: already initialised (by someone else: not ours to finalize)
        self._owns_init = rc == 0
        assert self.rt.aclrtSetDevice(0) == 0
        self._bufs = []

    def device(self, arr_or_nbytes):
        """Device copy of a numpy array (or an uninitialised buffer of n bytes)."""
        nbytes = arr_or_nbytes if isinstance(arr_or_nbytes, int) else arr_or_nbytes.nbytes
        p = self.ffi.new("void **")
        assert self.rt.aclrtMalloc(p, nbytes, 0) == 0
        self._bufs.append(p[0])
        if not isinstance(arr_or_nbytes, int):
            a = np.ascontiguousarray(arr_or_nbytes)
            assert self.rt.aclrtMemcpy(p[0], nbytes, self.ffi.from_buffer(a), nbytes, MEMCPY_H2D) == 0
        return p[0]

    def host(self, ptr, shape, dtype):
        out = np.empty(shape, dtype)
        assert self.rt.aclrtMemcpy(self.ffi.from_buffer(out), out.nbytes, ptr, out.nbytes, MEMCPY_D2H) == 0
        return out

    def free_all(self):
        for p in self._bufs:
            self.rt.aclrtFree(p)
        self._bufs.clear()

    def close(self):
        """Frees the buffers and finalizes ACL when this object initialized it, so that a later
        Session in the process starts from a clean runtime (its leak check counts aclInit)."""
        self.free_all()
        if self._owns_init:
            self.rt.aclFinalize()
            self._owns_init = False

    def err(self):
        return self.ffi.new("char[4096]")

    def stats(self):
        s = self.ffi.new("aclfaSimLaunchStats *")
        assert self.engine.aclfaSimGetLastLaunchStats(s) == 0
        return s

    def philox_tile(self, p, seed, stream, i0, j0, lanes, threshold, inv_keep_prob, cores=1):
        """The philox_tile kernel (op_kernel/common/philox_dropout.h) on p [rows, width] fp32 of the tile at
        (i0, j0): (p with dropout, the 8-bit Philox draws uint32, the keep mask uint8), all [rows, width]."""
        rows, width = p.shape
        t = np.array([seed & 0xFFFFFFFF, seed >> 32, stream & 0xFFFFFFFF, stream >> 32, threshold,
                      np.float32(inv_keep_prob).view(np.uint32), i0, j0, rows, width, lanes, -(-rows // cores)],
                     np.uint32)
        dp = self.device(np.ascontiguousarray(p, np.float32))
        dout, dwords, dbytes = self.device(p.size * 4), self.device(p.size * 4), self.device(p.size)
        e = self.err()
        rc = self.k.aclfaSimTestPhiloxTile(dp, dout, dwords, dbytes, self.ffi.from_buffer("uint32_t[]", t), cores,
                                           e, 4096)
        assert rc == 0, self.ffi.string(e).decode()
        return (self.host(dout, p.shape, np.float32), self.host(dwords, p.shape, np.uint32),
                self.host(dbytes, p.shape, np.uint8))

    def probe(self, op, x, param=0.0, out_elems=None, kernel_type=KERNEL_TYPE_AIV_ONLY):
        x = np.ascontiguousarray(x, np.float32)
        n = x.size
        out_n = out_elems if out_elems is not None else (n + 7) // 8 * 8
        din, dout = self.device(x), self.device(max(out_n, (n + 7) // 8 * 8) * 4)
        e = self.err()
        rc = self.k.aclfaSimTestProbe(op, din, dout, n, param, kernel_type, e, 4096)
        msg = self.ffi.string(e).decode()
        out = self.host(dout, (out_n,), np.float32) if rc == 0 else None
        return rc, msg, out
