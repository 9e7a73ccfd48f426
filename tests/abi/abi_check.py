"""ABI conformance of acl-fa's declarations against the real CANN ACL headers.

The real headers come from the torch-npu wheel on PyPI (torch_npu/include/acl, ACL 1.17),
downloaded with ``pip download --no-deps`` into a cache outside the repository. Three checks:

(a) every source of the simulated runtime (and nnopbase) compiles with the REAL acl headers
    first on the include path, so our definitions match the real prototypes;
(b) a C file including the real headers followed by every function declaration of our cffi
    cdefs compiles (a conflicting redeclaration is an error);
(c) every constant (enum member, #define, static const) declared in our cdefs and in
    sim/include/acl has the real value.
The aclnn cdefs are checked the same way against sim/include/aclnn (the mirror of hicann/opbase,
which no wheel ships), itself compiled over the real acl headers.
HCCL: the wheel's third_party/hccl/inc/hccl/{hccl.h,hccl_types.h} (C++ only: const array
bounds) are the reference for acl_fa/cdefs/hccl.h, sim/include/hccl and the simulator's
sim/src/hccl, checked as C++ the same three ways, plus the sizes and field offsets of the
structs that cross the ABI.

Usable as a script: ``python tests/abi/abi_check.py`` prints each problem and exits non-zero.
"""
from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIM_INCLUDE = ROOT / "sim" / "include"
CDEFS = ROOT / "acl_fa" / "cdefs"


def _this_trees_cdef_reader():
    # By path: as a script, `import acl_fa` could find another (installed) copy of the package.
    spec = importlib.util.spec_from_file_location("_abi_cdef_reader", ROOT / "acl_fa" / "runtime" / "cdef_reader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_read_cdef = _this_trees_cdef_reader().read_cdef


def read_cdef(header: Path) -> str:
    """A header's text; for a file of acl_fa/cdefs, the declarations cffi reads from it (its
    #include "..." lines stand for the C part of our own header they name)."""
    header = Path(header)
    return _read_cdef(header) if header.parent == CDEFS else header.read_text()
CACHE = Path(os.environ.get("ACL_FA_CACHE_DIR", Path.home() / ".cache" / "acl-fa")) / "torch-npu"

# Where the wheel keeps HCCL's headers under torch_npu/include (hccl.h includes its types by
# this path, so the include root must stay on the include path).
HCCL_SUBDIR = "third_party/hccl/inc"

# Prelude that makes the cffi cdefs (which have no system #include) valid C.
C_PRELUDE = "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n"


def cdef_prelude(names: list[str]) -> str:
    """C_PRELUDE and the declarations of the cdefs files `names` as cffi reads them (a cdefs file
    that names one of our own headers stands for that header's C part)."""
    return C_PRELUDE + "".join(f"/* {name} */\n{read_cdef(CDEFS / name)}\n" for name in names)


class AbiError(Exception):
    """A declaration of ours disagrees with the real one; the message says which."""


# ---- the real headers -----------------------------------------------------------------------

def real_acl_include(download: bool = True) -> Path:
    """Directory holding the real ``acl/`` headers, extracted from a cached torch-npu wheel.

    Downloads the wheel when the cache has none and `download` is true. Raises FileNotFoundError
    when no wheel can be had (the message says why).
    """
    include = CACHE / "include"
    if (include / "acl" / "acl.h").is_file() and (include / HCCL_SUBDIR / "hccl" / "hccl.h").is_file():
        return include
    wheels = sorted(CACHE.glob("torch_npu-*.whl"))
    if not wheels and download:
        CACHE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
             "torch-npu", "-d", str(CACHE)],
            capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise FileNotFoundError(f"pip download --no-deps torch-npu failed:\n{proc.stderr[-2000:]}")
        wheels = sorted(CACHE.glob("torch_npu-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no torch_npu-*.whl in {CACHE}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        for subdir in ("acl", HCCL_SUBDIR + "/hccl"):
            prefix = f"torch_npu/include/{subdir}/"
            members = [n for n in wheel.namelist() if n.startswith(prefix) and not n.endswith("/")]
            if not members:
                raise FileNotFoundError(f"{wheels[-1].name} has no {prefix}")
            for name in members:
                target = include / subdir / name[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(name))
    return include


def real_hccl_include(real_include: Path) -> Path:
    """The directory that makes ``#include "hccl/hccl.h"`` find the real header."""
    return real_include / HCCL_SUBDIR


# ---- parsing our declarations -----------------------------------------------------------------

def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def function_declarations(header: Path) -> list[str]:
    """The function prototypes of a cdef file (top-level statements with a parameter list)."""
    text = _strip_comments(read_cdef(header))
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    decls, depth, current = [], 0, []
    for ch in text:
        current.append(ch)
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            stmt = " ".join("".join(current).split())
            current = []
            if "(" in stmt and not stmt.startswith("typedef"):
                decls.append(stmt)
    return decls


_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Z][A-Z0-9_]*)\s+(?:\(?\s*-?\s*(?:0x[0-9a-fA-F]+|\d+)[uUlL]*\s*\)?)\s*$",
                     re.M)
_STATIC_CONST = re.compile(r"static\s+const\s+int\s+([A-Z][A-Z0-9_]*)\s*=")
_ENUM_BODY = re.compile(r"\benum\b[^{;]*\{([^}]*)\}", re.S)
_ENUM_MEMBER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=[^,]*)?$")


def constant_names(header: Path) -> list[str]:
    """Names of the integer constants a header declares: numeric #defines, static const ints,
    enum members."""
    text = _strip_comments(read_cdef(header))
    names = _DEFINE.findall(text) + _STATIC_CONST.findall(text)
    for body in _ENUM_BODY.findall(text):
        for item in body.split(","):
            match = _ENUM_MEMBER.match(item.strip())
            if match:
                names.append(match.group(1))
    return list(dict.fromkeys(names))


# ---- compiling ------------------------------------------------------------------------------

def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AbiError(f"{what}:\n$ {' '.join(cmd)}\n{proc.stderr.strip()[-4000:]}")
    return proc.stdout


def compile_sources_against_real(real_include: Path, sources: list[Path]) -> list[str]:
    """(a): compiles each source (syntax and types only) with the real headers first. Returns
    one message per source that fails."""
    def check(source: Path) -> str | None:
        compiler = "gcc" if source.suffix == ".c" else "g++"
        std = ["-std=c11", "-Werror=implicit-function-declaration"] if source.suffix == ".c" else ["-std=c++17"]
        cmd = [compiler, *std, "-fsyntax-only", "-DFUNC_VISIBILITY",
               f"-I{real_include}", f"-I{real_hccl_include(real_include)}", f"-I{SIM_INCLUDE}",
               f"-I{source.parent}", str(source)]
        try:
            _run(cmd, f"{source.relative_to(ROOT)} does not compile against the real ACL headers")
        except AbiError as err:
            return str(err)
        return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return [msg for msg in pool.map(check, sources) if msg]


def check_declarations(real_include: Path, includes: list[str], cdef: Path, work: Path, cxx: bool = False) -> None:
    """(b): `includes` (the reference headers) then every function declaration of `cdef`,
    compiled as C (as C++ with C linkage when `cxx`): a conflicting redeclaration fails."""
    shown = cdef.relative_to(ROOT) if cdef.is_relative_to(ROOT) else cdef
    decls = function_declarations(cdef)
    if not decls:
        raise AbiError(f"{cdef.name}: no function declarations found")
    body = "\n".join(decls)
    if cxx:
        body = f'extern "C" {{\n{body}\n}}'
    source = work / f"decls_{cdef.stem}.{'cpp' if cxx else 'c'}"
    source.write_text(C_PRELUDE + "".join(f'#include "{h}"\n' for h in includes) +
                      f"/* function declarations of {shown} */\n" + body + "\n")
    compiler = ["g++", "-std=c++17"] if cxx else ["gcc", "-std=c11"]
    _run([*compiler, "-fsyntax-only", f"-I{real_include}", f"-I{real_hccl_include(real_include)}",
          f"-I{SIM_INCLUDE}", str(source)],
         f"{shown} declares a function differently from {', '.join(includes)}")


def constant_values(include_dirs: list[Path], prelude: str, names: list[str], work: Path, tag: str,
                    cxx: bool = False) -> dict[str, int]:
    """Compiles (as C, or C++ when `cxx`) and runs a program printing each name's value with
    `prelude` included. A name may be any integer expression without blanks
    (``sizeof(HcclRootInfo)``)."""
    source = work / f"values_{tag}.{'cpp' if cxx else 'c'}"
    body = "".join(f'    printf("%s %lld\\n", "{n}", (long long)({n}));\n' for n in names)
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n" + prelude + "\nint main(void) {\n" + body +
                      "    return 0;\n}\n")
    exe = work / f"values_{tag}"
    compiler = ["g++", "-std=c++17"] if cxx else ["gcc", "-std=c11"]
    _run([*compiler, "-w", *[f"-I{d}" for d in include_dirs], "-o", str(exe), str(source)],
         f"constants of {tag} do not compile (a name is missing from the reference?)")
    out = _run([str(exe)], f"running the {tag} constant printer")
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


def compare_constants(ours: dict[str, int], reference: dict[str, int], what: str) -> list[str]:
    return [f"{what}: {name} = {value}, real value {reference[name]}"
            for name, value in ours.items() if reference[name] != value]


# ---- the whole check ------------------------------------------------------------------------

ACL_SIM_HEADERS = ["acl_base_rt.h", "acl_rt.h", "error_codes/rt_error_codes.h"]


# Struct layouts that cross the HCCL ABI: (expression, ...) evaluated on both sides.
HCCL_LAYOUT = ["sizeof(HcclRootInfo)", "sizeof(HcclSendRecvItem)",
               "offsetof(HcclSendRecvItem,buf)", "offsetof(HcclSendRecvItem,count)",
               "offsetof(HcclSendRecvItem,dataType)", "offsetof(HcclSendRecvItem,remoteRank)",
               "sizeof(HcclResult)", "sizeof(HcclDataType)"]


def simulator_sources() -> list[Path]:
    """The simulator sources that implement a real API: runtime, nnopbase, HCCL, builtin op API."""
    return sorted((ROOT / "sim" / "src" / "runtime").glob("*.c*")) + \
        sorted((ROOT / "sim" / "src" / "nnopbase").glob("*.cpp")) + \
        sorted((ROOT / "sim" / "src" / "hccl").glob("*.cpp")) + \
        sorted((ROOT / "sim" / "src" / "opapi_builtin").glob("*.cpp"))


def hccl_problems(real_include: Path, work: Path) -> list[str]:
    """(b) and (c) for HCCL: cdef prototypes, cdef and sim/include constants, struct layouts."""
    problems: list[str] = []
    for includes, cdef in [(["hccl/hccl.h"], CDEFS / "hccl.h"),
                           (["hccl/hccl.h", "acl_fa_sim_hccl.h"], CDEFS / "hccl_sim.h")]:
        try:
            check_declarations(real_include, includes, cdef, work, cxx=True)
        except AbiError as err:
            problems.append(str(err))
    cdef_names = constant_names(CDEFS / "hccl.h")
    sim_names = constant_names(SIM_INCLUDE / "hccl" / "hccl_types.h")
    real_prelude = '#include "hccl/hccl.h"\n'
    real_dirs = [real_include, real_hccl_include(real_include)]
    try:
        real = constant_values(real_dirs, real_prelude, list(dict.fromkeys(cdef_names + sim_names + HCCL_LAYOUT)),
                               work, "real_hccl", cxx=True)
        # As C++, as the real header: HCCL_ROOT_INFO_BYTES is a const array bound.
        ours = constant_values([], cdef_prelude(["acl_rt.h", "hccl.h"]), cdef_names + HCCL_LAYOUT, work, "cdef_hccl",
                               cxx=True)
        # sim/include/hccl over the real acl headers (it includes acl/acl.h).
        sim = constant_values([real_include, SIM_INCLUDE], real_prelude, sim_names + HCCL_LAYOUT, work, "sim_hccl",
                              cxx=True)
        problems += compare_constants(ours, real, "acl_fa/cdefs/hccl.h")
        problems += compare_constants(sim, real, "sim/include/hccl")
    except AbiError as err:
        problems.append(str(err))
    return problems


def _this_trees_aclnn_entries():
    spec = importlib.util.spec_from_file_location("_abi_aclnn_entries", ROOT / "acl_fa" / "runtime" / "aclnn_entries.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def op_jsons() -> list[Path]:
    """Every custom operator's msopgen op JSON (op_host/<family>/<op>.json)."""
    return _this_trees_aclnn_entries().op_jsons(ROOT)


def driver_declarations(work: Path) -> dict[str, Path]:
    """{aclnn_<op>.h: file} of the declarations the driver's cffi reads for every custom op entry:
    those derived from the op JSON (acl_fa/runtime/aclnn_entries.py), or a hand-written
    acl_fa/cdefs/aclnn_<op>.h where one still stands in for them."""
    entries = _this_trees_aclnn_entries()
    out = work / "driver_aclnn"
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for entry in entries.derive(ROOT):
        name = f"aclnn_{entry['snake']}.h"
        if (CDEFS / name).is_file():
            files[name] = CDEFS / name
        else:
            files[name] = out / name
            files[name].write_text(entries.declaration(entry))
    return files


def custom_op_checks(work: Path) -> list[tuple[list[str], Path]]:
    """(includes, declarations) for every custom op entry: the simulator's aclnn_<op>.h (generated
    at build time by sim/src/opapi/gen_aclnn.py; here into `work`) against the driver's
    declarations of the same entry (driver_declarations)."""
    out = work / "generated_aclnn"
    _run([sys.executable, str(ROOT / "sim/src/opapi/gen_aclnn.py"), "--headers-only", "--out", str(out),
          *map(str, op_jsons())], "generating the aclnn declarations from the op JSON")
    driver = driver_declarations(work)
    return [(["acl/acl.h", "aclnn/aclnn_base.h", str(header)], driver[header.name])
            for header in sorted(out.glob("aclnn_*.h"))]


def run_all(real_include: Path) -> list[str]:
    """Every check; returns the list of problems (empty = conformant)."""
    problems: list[str] = []
    sources = simulator_sources()
    problems += compile_sources_against_real(real_include, sources)

    with tempfile.TemporaryDirectory(prefix="acl_fa_abi_") as tmp:
        work = Path(tmp)
        checks = [
            (["acl/acl.h"], CDEFS / "acl_rt.h"),
            (["acl/acl.h", "aclnn/aclnn_base.h"], CDEFS / "aclnn_base.h"),
            (["acl/acl.h", "aclnn/aclnn_base.h", "acl_fa_sim.h", "acl_fa_sim_kernel.h"], CDEFS / "acl_fa_sim.h"),
            # every custom op's aclnn entries, against the declarations the simulator's libcust_opapi.so is
            # generated from (sim/src/opapi/gen_aclnn.py over the op JSON)
            *custom_op_checks(work),
        ]
        for includes, cdef in checks:
            try:
                check_declarations(real_include, includes, cdef, work)
            except AbiError as err:
                problems.append(str(err))

        # ACL constants: cdefs and sim/include/acl against the real headers.
        acl_names = constant_names(CDEFS / "acl_rt.h")
        sim_names = [n for h in ACL_SIM_HEADERS for n in constant_names(SIM_INCLUDE / "acl" / h)]
        real_prelude = '#include "acl/acl.h"\n'
        try:
            real = constant_values([real_include], real_prelude, list(dict.fromkeys(acl_names + sim_names)), work,
                                   "real_acl")
            cdef_values = constant_values([], cdef_prelude(["acl_rt.h"]), acl_names, work, "cdef_acl_rt")
            sim_values = constant_values([SIM_INCLUDE], real_prelude, sim_names, work, "sim_acl")
            problems += compare_constants(cdef_values, real, "acl_fa/cdefs/acl_rt.h")
            problems += compare_constants(sim_values, real, "sim/include/acl")
        except AbiError as err:
            problems.append(str(err))

        # aclnn and simulator-extension constants against sim/include (their reference).
        # (cdef, the cdefs it is parsed after plus itself, its reference headers, tag)
        for cdef, cdef_chain, reference_headers, tag in [
            (CDEFS / "aclnn_base.h", ["acl_rt.h", "aclnn_base.h"],
             ["aclnn/aclnn_base.h", "aclnn/opdev/op_errno.h"], "aclnn"),
            (CDEFS / "acl_fa_sim.h", ["acl_rt.h", "aclnn_base.h", "acl_fa_sim.h"],
             ["acl_fa_sim.h", "acl_fa_sim_kernel.h"], "acl_fa_sim"),
        ]:
            names = constant_names(cdef)
            ref_prelude = "#include <stdbool.h>\n" + "".join(f'#include "{h}"\n' for h in reference_headers)
            try:
                reference = constant_values([real_include, SIM_INCLUDE], ref_prelude, names, work, f"ref_{tag}")
                ours = constant_values([], cdef_prelude(cdef_chain), names, work, f"cdef_{tag}")
                problems += compare_constants(ours, reference, f"acl_fa/cdefs/{cdef.name}")
            except AbiError as err:
                problems.append(str(err))
        problems += hccl_problems(real_include, work)
    return problems


def main() -> int:
    try:
        include = real_acl_include()
    except FileNotFoundError as err:
        print(f"cannot get the real ACL headers: {err}", file=sys.stderr)
        return 2
    problems = run_all(include)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"ABI check against {include}: {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
