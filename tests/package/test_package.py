"""The custom operator package: build.sh, the .run installer, and op-library discovery.

- Installer rules run on a .run packed by scripts/pack_sim.sh from small stand-in libraries
  (compiled here, with the simulator's DT_NEEDED shape), so they need no simulator build.
- End to end: `./build.sh --sim` builds the real simulator package once per session (reusing the
  libraries of $ACL_FA_SIM_LIB_DIR when set), installs it under a path with a space, runs the
  operator through the driver with only the package's set_env.bash pointing at it, uninstalls.
- Discovery order (ASCEND_CUSTOM_OPP_PATH, config.ini load_priority, the simulator's own) on
  fake vendor trees.

Tests that pack a .run need makeself; they skip without it only outside CI.
"""
from __future__ import annotations

import json
import re
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acl_fa.runtime import loader

from conftest import run_python

REPO = Path(__file__).resolve().parents[2]
VENDOR = "acl_fa"
ARCH = os.uname().machine


def _need_makeself():
    if shutil.which("makeself") is None:
        if os.environ.get("CI"):
            pytest.fail("makeself is missing in CI (.ci/run installs it with apt-get)")
        pytest.skip("makeself not installed (apt-get install makeself)")


def _run(cmd, *, cwd=None, env=None, timeout=120):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _compile_lib(out: Path, source: str, *needed: str):
    """A shared library from C `source`, linked against `needed` (in out's directory) with
    RUNPATH $ORIGIN, as the simulator's libraries are."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("c++")
    src = out.with_suffix(".c")
    src.write_text(source)
    libs = [f"-l{n[3:-3]}" for n in needed]
    cmd = [compiler, "-x", "c", "-shared", "-fPIC", "-o", str(out), str(src),
           f"-L{out.parent}", "-Wl,--no-as-needed", *libs, "-Wl,-rpath,$ORIGIN"]
    proc = _run(cmd)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="session")
def stand_in_run(tmp_path_factory) -> Path:
    """A .run packed by scripts/pack_sim.sh from stand-in libraries (installer tests)."""
    _need_makeself()
    libs = tmp_path_factory.mktemp("stand_in_libs")
    _compile_lib(libs / "libascendcl.so", "int aclInit(const char *p) { return 0; }\n")
    _compile_lib(libs / "libacl_rt.so", "int acl_rt_marker;\n", "libascendcl.so")
    _compile_lib(libs / "libnnopbase.so", "int nnopbase_marker;\n", "libascendcl.so")
    _compile_lib(libs / "libascendc_sim.so", "int engine_marker;\n", "libascendcl.so")
    _compile_lib(libs / "libcust_opapi.so", "int aclnnFlashAttentionGetWorkspaceSize;\n",
                 "libnnopbase.so", "libascendc_sim.so", "libascendcl.so")
    _compile_lib(libs / "libunrelated.so", "int unrelated;\n")
    out = tmp_path_factory.mktemp("stand_in_out")
    proc = _run(["bash", str(REPO / "scripts/pack_sim.sh"), str(libs), str(out), VENDOR, "0.0.0"])
    assert proc.returncode == 0, proc.stderr
    run = Path(proc.stdout.strip().splitlines()[-1])
    assert run == out / f"custom_opp_sim_{ARCH}.run" and run.is_file()
    return run


@pytest.fixture(scope="session")
def sim_run(tmp_path_factory) -> Path:
    """`./build.sh --sim` once per session: the real simulator package."""
    _need_makeself()
    build_dir = tmp_path_factory.mktemp("build out")
    cmd = ["bash", str(REPO / "build.sh"), "--sim", "--build-dir", str(build_dir)]
    prebuilt = os.environ.get(loader.ENV_SIM_LIB_DIR)
    if prebuilt and Path(prebuilt, loader.OP_LIBRARY_NAME).is_file():
        cmd += ["--sim-lib-dir", prebuilt]
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    proc = _run(cmd, env=env, timeout=1800)
    assert proc.returncode == 0, (
        f"build.sh --sim failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    run = build_dir / f"custom_opp_sim_{ARCH}.run"
    assert run.is_file(), proc.stdout
    return run


def _install(run: Path, *args, cwd=None, env=None):
    base = {k: v for k, v in os.environ.items()
            if k not in ("ASCEND_CUSTOM_OPP_PATH", "ASCEND_OPP_PATH")}
    return _run(["bash", str(run), *args], cwd=cwd, env={**base, **(env or {})})


def _tree(root: Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ---- build.sh ----------------------------------------------------------------------------------

def test_build_without_cann_fails_fast_with_the_way_out(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no ASCEND_* at all
    if Path("/usr/local/Ascend/ascend-toolkit/latest").exists():
        pytest.skip("a CANN toolkit is installed here")
    proc = _run(["bash", str(REPO / "build.sh"), "--build-dir", str(tmp_path / "out")],
                env=env, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "CANN (Ascend toolkit with msopgen) not found" in err
    assert "/usr/local/Ascend/ascend-toolkit/latest: no such directory" in err
    assert f"{tmp_path}/Ascend/ascend-toolkit/latest: no such directory" in err
    assert "set_env.sh" in err and "./build.sh --sim" in err
    assert not (tmp_path / "out" / "op_project").exists()


# A stand-in for CANN's msopgen: writes a project with the generated project's entry points
# (CMakePresets.json "default", targets binary and package, op_host/ op_kernel/ stubs) so that
# build.sh's own steps around it can be checked. It says nothing about CANN itself.
FAKE_MSOPGEN = r"""#!/bin/bash
echo "$*" > "$(dirname "$0")/args"
while (($#)); do case "$1" in -out) out="$2"; shift;; esac; shift; done
mkdir -p "$out/op_host" "$out/op_kernel"
echo generated-stub > "$out/op_kernel/flash_attention.cpp"
cat > "$out/CMakePresets.json" <<'J'
{"version": 1, "cmakeMinimumRequired": {"major": 3, "minor": 19, "patch": 0},
 "configurePresets": [{"name": "default", "generator": "Unix Makefiles",
  "binaryDir": "${sourceDir}/build_out", "cacheVariables": {
   "vendor_name": {"type": "STRING", "value": "customize"},
   "ASCEND_COMPUTE_UNIT": {"type": "STRING", "value": "__UNIT__"},
   "ASCEND_CANN_PACKAGE_PATH": {"type": "PATH", "value": "/usr/local/Ascend/latest"}}}]}
J
cat > "$out/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.19)
project(generated NONE)
string(REPLACE ";" "_" units "${ASCEND_COMPUTE_UNIT}")
set(run ${CMAKE_BINARY_DIR}/custom_opp_${vendor_name}_${units}.run)
add_custom_target(binary COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/binary.done)
add_custom_target(package COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_BINARY_DIR}/binary.done ${run})
C
"""


def _fake_toolkit(root: Path) -> Path:
    msopgen = root / "python/site-packages/bin/msopgen"
    msopgen.parent.mkdir(parents=True)
    msopgen.write_text(FAKE_MSOPGEN)
    msopgen.chmod(0o755)
    return msopgen


def test_build_cann_branch_drives_msopgen_and_the_generated_presets(tmp_path):
    toolkit = tmp_path / "toolkit"
    msopgen = _fake_toolkit(toolkit)
    out = tmp_path / "out"
    env = {**os.environ, "ASCEND_HOME_PATH": str(toolkit), "ASCEND_OPP_PATH": str(tmp_path)}
    proc = _run(["bash", str(REPO / "build.sh"), "--build-dir", str(out), "--soc", "ascend910_93",
                 "--vendor", "myvendor"], env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    args = (msopgen.parent / "args").read_text().split()
    assert args == ["gen", "-i", str(out / "ops.json"), "-c",
                    "ai_core-ascend910_93", "-lan", "cpp", "-out", str(out / "op_project")]
    # One project for every op of op_host/<family>/*.json: their descriptions merged into one JSON list.
    ops = json.loads((out / "ops.json").read_text())
    assert [op["op"] for op in ops] == [json.loads(f.read_text())[0]["op"]
                                        for f in sorted(REPO.glob("op_host/*/*.json"))]
    assert {"FlashAttention", "FlashAttentionV2", "FlashAttentionGrad", "FlashAttentionGradV2", "FlashAttentionDecode",
            "AttentionLseMerge", "AttentionLseMergeInt16"} <= {op["op"] for op in ops}
    project = out / "op_project"
    for name in ("op_host/flash_attention.cpp", "op_host/tiling_policy.cpp", "op_host/flash_attention_grad.cpp",
                 "op_kernel/flash_attention.cpp", "op_kernel/flash_attention_tiling.h",
                 "op_kernel/flash_attention_grad.cpp", "op_kernel/flash_attention_grad_kernel.h",
                 "op_host/flash_attention_grad_v2.cpp", "op_host/flash_attention_grad_host.cpp",
                 "op_kernel/flash_attention_grad_v2.cpp",
                 "op_host/flash_attention_decode.cpp", "op_host/decode_tiling_policy.cpp",
                 "op_kernel/flash_attention_decode.cpp", "op_kernel/flash_attention_decode_kernel.h",
                 "op_host/flash_attention_v2.cpp", "op_host/forward_tiling.h", "op_kernel/flash_attention_v2.cpp",
                 "op_kernel/flash_attention_entry.h", "op_kernel/flash_attention_items.h",
                 "op_host/attention_lse_merge.cpp", "op_kernel/attention_lse_merge.cpp",
                 "op_kernel/attention_lse_merge_kernel.h", "op_kernel/attention_lse_merge_tiling.h",
                 "op_host/attention_lse_merge_int16.cpp", "op_host/attention_lse_merge_host.h",
                 "op_kernel/attention_lse_merge_int16.cpp", "op_kernel/attention_band.h",
                 "op_host/attention_band.h", "op_host/flash_attention_tiling.h"):
        # The project is flat; the repository keeps each file in an op folder (op_host/ receives
        # op_kernel's headers too): the one file of that name.
        top, base = name.split("/")
        trees = [top] + (["op_kernel"] if top == "op_host" and base.endswith(".h") else [])
        [source] = [f for tree in trees for f in REPO.glob(f"{tree}/*/{base}")]
        assert (project / name).read_text() == source.read_text(), name
    # The preset's vendor and compute unit were overridden; the .run was collected.
    assert (out / "custom_opp_myvendor_ascend910_93.run").is_file()
    cache = (project / "build_out/CMakeCache.txt").read_text()
    assert f"ASCEND_CANN_PACKAGE_PATH:UNINITIALIZED={toolkit}" in cache


def test_build_refuses_two_op_files_of_one_name(tmp_path):
    """The msopgen project is flat: a header name used in two op folders would overwrite the other."""
    repo = tmp_path / "repo"
    for name in ("op_host", "op_kernel"):
        shutil.copytree(REPO / name, repo / name)
    for name in ("build.sh", "pyproject.toml"):
        shutil.copy(REPO / name, repo / name)
    shutil.copy(repo / "op_kernel/common/attention_band.h", repo / "op_host/flash_attention/attention_band.h")
    _fake_toolkit(tmp_path / "toolkit")
    env = {**os.environ, "ASCEND_HOME_PATH": str(tmp_path / "toolkit"), "ASCEND_OPP_PATH": str(tmp_path)}
    proc = _run(["bash", str(repo / "build.sh"), "--build-dir", str(tmp_path / "out")], env=env, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "a file name is used in two op folders" in proc.stderr
    assert f"{repo}/op_host/flash_attention/attention_band.h" in proc.stderr
    assert f"{repo}/op_kernel/common/attention_band.h" in proc.stderr


def test_build_rejects_an_soc_the_operator_is_not_registered_for(tmp_path):
    _fake_toolkit(tmp_path / "toolkit")
    env = {**os.environ, "ASCEND_HOME_PATH": str(tmp_path / "toolkit"),
           "ASCEND_OPP_PATH": str(tmp_path)}
    proc = _run(["bash", str(REPO / "build.sh"), "--build-dir", str(tmp_path / "out"),
                 "--soc", "ascend310p,ascend310b"], env=env, timeout=30)
    assert proc.returncode == 2
    assert ("--soc ascend310b: the operator is registered for ascend910b, ascend910_93, ascend310p and ascend910"
            in proc.stderr)
    assert not (tmp_path / "out" / "op_project").exists()


@pytest.mark.parametrize("args, message", [
    (["--soc", "ascend310b"], "--soc ascend310b: the operator is registered for ascend910b, ascend910_93, ascend310p and ascend910"),
    (["--soc", "ascend910b,ascend310b"], "--soc ascend310b: the operator is registered for"),
    (["--sim", "--soc", "ascend910b"], "--soc ascend910b goes with the CANN build"),
])
def test_build_checks_soc_before_looking_for_cann(tmp_path, args, message):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no CANN anywhere
    proc = _run(["bash", str(REPO / "build.sh"), "--build-dir", str(tmp_path / "out"), *args], env=env, timeout=30)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "CANN (Ascend toolkit with msopgen) not found" not in proc.stderr
    assert not (tmp_path / "out" / "sim").exists()


def test_installed_and_removed_counts_agree(stand_in_run, tmp_path):
    import re

    installed = _install(stand_in_run, f"--install-path={tmp_path}")
    removed = _install(stand_in_run, "--uninstall", f"--install-path={tmp_path}")
    assert installed.returncode == removed.returncode == 0, installed.stderr + removed.stderr
    n_in = int(re.search(r"installed (\d+) files", installed.stdout).group(1))
    n_out = int(re.search(r"removed (\d+) files", removed.stdout).group(1))
    assert n_in == n_out > 0


def test_build_takes_a_list_of_socs(tmp_path):
    """One project, one kernel binary per SoC: the first SoC for msopgen, all of them as the
    generated presets' ASCEND_COMPUTE_UNIT list."""
    msopgen = _fake_toolkit(tmp_path / "toolkit")
    out = tmp_path / "out"
    env = {**os.environ, "ASCEND_HOME_PATH": str(tmp_path / "toolkit"), "ASCEND_OPP_PATH": str(tmp_path)}
    proc = _run(["bash", str(REPO / "build.sh"), "--build-dir", str(out), "--soc", "ascend310p,ascend910",
                 "--vendor", "myvendor"], env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (msopgen.parent / "args").read_text().split()[4] == "ai_core-ascend310p"
    cache = (out / "op_project/build_out/CMakeCache.txt").read_text()
    assert re.search(r"^ASCEND_COMPUTE_UNIT:\w+=ascend310p;ascend910$", cache, re.M), cache


def test_build_rejects_unknown_option():
    proc = _run(["bash", str(REPO / "build.sh"), "--frobnicate"], timeout=30)
    assert proc.returncode == 2 and "unknown option '--frobnicate'" in proc.stderr


# ---- the installer ------------------------------------------------------------------------------

def test_run_help_lists_the_options(stand_in_run):
    proc = _install(stand_in_run, "--help")
    assert proc.returncode == 0
    for option in ("--install-path=DIR", "--uninstall", "--force", "--quiet"):
        assert option in proc.stdout


def test_package_holds_the_vendor_layout_and_the_dt_needed_closure(stand_in_run, tmp_path):
    proc = _install(stand_in_run, f"--install-path={tmp_path}", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    vendor = tmp_path / "vendors" / VENDOR
    assert sorted(p.name for p in (vendor / "op_api/lib").iterdir()) == [
        "libacl_rt.so", "libascendc_sim.so", "libascendcl.so", "libcust_opapi.so",
        "libnnopbase.so"]  # not libunrelated.so: outside libcust_opapi.so's closure
    assert (vendor / "op_api/include/aclnn_flash_attention.h").is_file()
    assert (vendor / "op_api/include/aclnn_flash_attention_decode.h").is_file()
    assert (vendor / "op_api/include/aclnn_attention_lse_merge.h").is_file()
    assert (vendor / "op_api/include/aclnn_attention_lse_merge_int16.h").is_file()
    assert (vendor / "op_api/include/aclnn_flash_attention_v2.h").is_file()
    info = (vendor / "version.info").read_text()
    assert "acl_fa_backend=sim" in info and "custom_opp_compiler_version=" in info


def test_relative_install_path_with_spaces_then_uninstall_leaves_nothing(stand_in_run, tmp_path):
    proc = _install(stand_in_run, "--install-path=my prefix/opp root", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    vendor = tmp_path / "my prefix" / "opp root" / "vendors" / VENDOR
    assert (vendor / "op_api/lib/libcust_opapi.so").is_file()
    set_env = (vendor / "bin/set_env.bash").read_text()
    assert f"'{vendor}'" in set_env
    # Sourcing it prepends the vendor directory and its op_api/lib, keeping what was there.
    shown = _run(["bash", "-c", f'source {shlex.quote(str(vendor / "bin/set_env.bash"))} && '
                  'printf "%s\\n%s\\n" "$ASCEND_CUSTOM_OPP_PATH" "$LD_LIBRARY_PATH"'],
                 env={"PATH": os.environ["PATH"], "ASCEND_CUSTOM_OPP_PATH": "/other",
                      "LD_LIBRARY_PATH": "/lib/x"})
    assert shown.stdout.splitlines() == [f"{vendor}:/other", f"{vendor}/op_api/lib:/lib/x"]
    # Installing again replaces the same files (no foreign-directory refusal for our own).
    assert _install(stand_in_run, "--install-path=my prefix/opp root", cwd=tmp_path).returncode == 0
    proc = _install(stand_in_run, "--uninstall", "--install-path=my prefix/opp root", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _tree(tmp_path) == []


def test_uninstall_keeps_files_it_did_not_install(stand_in_run, tmp_path):
    mine = tmp_path / "vendors" / "someone_else" / "op_api" / "lib" / "libcust_opapi.so"
    mine.parent.mkdir(parents=True)
    mine.write_text("x")
    before = _tree(tmp_path)
    assert _install(stand_in_run, f"--install-path={tmp_path}").returncode == 0
    proc = _install(stand_in_run, f"--install-path={tmp_path}", "--uninstall")
    assert proc.returncode == 0, proc.stderr
    assert _tree(tmp_path) == before


BAD_TARGETS = [
    pytest.param(["--install-path=a_file/../opp"], {}, "a_file' is not a directory",
                 id="relative-dotdot-through-a-file"),
    pytest.param(["--install-path=foreign"], {}, "was not installed by this package",
                 id="non-empty-foreign-vendor-dir"),
    pytest.param([], {"ASCEND_CUSTOM_OPP_PATH": "/x/one:/x/two"}, "holds several directories",
                 id="custom-opp-path-with-colon"),
    pytest.param(["--install-path=with:colon"], {}, "contains ':'", id="install-path-with-colon"),
    pytest.param([], {}, "no target: give --install-path", id="no-target-at-all"),
    pytest.param(["--install-path"], {}, "--install-path needs a directory", id="missing-value"),
    pytest.param(["--bogus"], {}, "unknown option '--bogus'", id="unknown-option"),
]


@pytest.mark.parametrize("args, env, message", BAD_TARGETS)
def test_bad_targets_are_refused_and_nothing_is_written(stand_in_run, tmp_path, args, env, message):
    (tmp_path / "a_file").write_text("not a directory")
    foreign = tmp_path / "foreign" / "vendors" / VENDOR / "their_file"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("theirs")
    before = _tree(tmp_path)
    proc = _install(stand_in_run, *args, cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert _tree(tmp_path) == before


def test_force_installs_over_a_foreign_dir_and_uninstall_keeps_its_files(stand_in_run, tmp_path):
    foreign = tmp_path / "vendors" / VENDOR / "their_file"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("theirs")
    before = _tree(tmp_path)
    assert _install(stand_in_run, f"--install-path={tmp_path}", "--force").returncode == 0
    assert (tmp_path / "vendors" / VENDOR / "op_api/lib/libcust_opapi.so").is_file()
    assert _install(stand_in_run, f"--install-path={tmp_path}", "--uninstall").returncode == 0
    assert _tree(tmp_path) == before and foreign.read_text() == "theirs"


def test_custom_opp_path_is_the_target_without_install_path(stand_in_run, tmp_path):
    target = tmp_path / "custom opp"
    env = {"ASCEND_CUSTOM_OPP_PATH": str(target)}
    assert _install(stand_in_run, env=env).returncode == 0
    assert (target / "vendors" / VENDOR / "op_api/lib/libcust_opapi.so").is_file()
    assert _install(stand_in_run, "--uninstall", env=env).returncode == 0
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("config_before, config_installed", [
    (None, "load_priority=acl_fa\n"),
    ("# site\nload_priority=other,acl_fa,third\n", "# site\nload_priority=acl_fa,other,third\n"),
    ("load_priority=other\n", "load_priority=acl_fa,other\n"),
], ids=["no-config", "already-listed", "listed-after"])
def test_opp_path_install_puts_the_vendor_first_in_config_ini(stand_in_run, tmp_path,
                                                             config_before, config_installed):
    opp = tmp_path / "opp"
    (opp / "vendors").mkdir(parents=True)
    config = opp / "vendors" / "config.ini"
    if config_before is not None:
        config.write_text(config_before)
    env = {"ASCEND_OPP_PATH": str(opp)}
    assert _install(stand_in_run, env=env).returncode == 0
    assert config.read_text() == config_installed
    assert (opp / "vendors" / VENDOR / "bin" / "set_env.bash").is_file()
    assert _install(stand_in_run, "--uninstall", env=env).returncode == 0
    assert sorted(p.name for p in (opp / "vendors").iterdir()) == (
        [] if config_before is None else ["config.ini"])
    if config_before is not None:
        without = config_installed.replace("acl_fa,", "")
        assert config.read_text() == without


# ---- discovery: the lookup order on fake trees ----------------------------------------------

def _vendor(root: Path, name: str, backend: str = "sim") -> Path:
    """A fake installed vendor directory holding a placeholder libcust_opapi.so."""
    vdir = root / "vendors" / name
    (vdir / "op_api" / "lib").mkdir(parents=True)
    (vdir / "op_api" / "lib" / loader.OP_LIBRARY_NAME).write_text("placeholder")
    if backend == "sim":
        (vdir / "version.info").write_text("custom_opp_compiler_version=none\nacl_fa_backend=sim\n")
    else:
        (vdir / "version.info").write_text("custom_opp_compiler_version=8.1.RC1\n")
    return vdir


ORDER_CASES = [
    # (custom entries, config.ini vendors, backend) -> expected origins in order
    pytest.param(["c1", "c2"], ["v1", "v2"], "sim",
                 ["ASCEND_CUSTOM_OPP_PATH[0]", "ASCEND_CUSTOM_OPP_PATH[1]",
                  "load_priority[0]", "load_priority[1]", "simulator"], id="env-then-ini-then-own"),
    pytest.param(["c1", "c2"], ["v1", "v2"], "npu",
                 ["ASCEND_CUSTOM_OPP_PATH[0]", "ASCEND_CUSTOM_OPP_PATH[1]",
                  "load_priority[0]", "load_priority[1]"], id="npu-has-no-bundled"),
    pytest.param([], ["v2", "v1"], "sim", ["load_priority[0]", "load_priority[1]", "simulator"],
                 id="ini-order-is-load-priority"),
    pytest.param(["c1"], [], "sim", ["ASCEND_CUSTOM_OPP_PATH[0]", "simulator"], id="env-only"),
    pytest.param([], [], "sim", ["simulator"], id="own-only"),
]


@pytest.mark.parametrize("custom, priority, backend, origins", ORDER_CASES)
def test_lookup_order(tmp_path, custom, priority, backend, origins):
    opp = tmp_path / "opp"
    for name in priority:
        _vendor(opp, name)
    env = {"ASCEND_CUSTOM_OPP_PATH": ":".join(str(_vendor(tmp_path / c, c)) for c in custom)}
    if priority:
        (opp / "vendors" / "config.ini").write_text(f"load_priority={','.join(priority)}\n")
        env["ASCEND_OPP_PATH"] = str(opp)
    candidates = loader.find_op_library(backend, sim_dir=tmp_path / "own", env=env)
    assert len(candidates) == len(origins)
    for candidate, origin in zip(candidates, origins):
        assert origin in candidate.origin
    expected = ([tmp_path / c / "vendors" / c for c in custom]
                + [opp / "vendors" / v for v in priority])
    assert [c.path.parents[2] for c in candidates[:len(expected)]] == expected
    if backend == "sim":
        assert candidates[-1].path == tmp_path / "own" / loader.OP_LIBRARY_NAME


def test_package_backend_comes_from_version_info(tmp_path):
    sim = loader.OpCandidate(_vendor(tmp_path, "s", "sim") / "op_api/lib/x.so", "env[0]")
    npu = loader.OpCandidate(_vendor(tmp_path, "n", "npu") / "op_api/lib/x.so", "env[1]")
    own = loader.OpCandidate(tmp_path / "own" / "x.so", loader.SIM_OWN_ORIGIN)
    assert [loader.package_backend(c) for c in (sim, npu, own)] == ["sim", "npu", None]


def test_each_candidate_says_why_it_was_or_was_not_used(tmp_path):
    """Backend.load_op_library over one candidate of each kind, in a child process (the
    stand-in libraries are dlopen'ed RTLD_GLOBAL)."""
    missing = tmp_path / "missing" / "vendors" / "gone"
    npu_pkg = _vendor(tmp_path / "n", "npu_pkg", "npu")
    broken = _vendor(tmp_path / "b", "broken")  # placeholder text: dlopen fails
    other = _vendor(tmp_path / "o", "other")
    _compile_lib(other / "op_api/lib" / loader.OP_LIBRARY_NAME, "int aclnnOtherOp;\n")
    ours = _vendor(tmp_path / "p", "ours")
    _compile_lib(ours / "op_api/lib" / loader.OP_LIBRARY_NAME,
                 "int aclnnFlashAttentionGetWorkspaceSize(void) { return 0; }\n")
    later = _vendor(tmp_path / "l", "later")
    custom = ":".join(str(p) for p in (missing, npu_pkg, broken, other, ours, later))
    result = run_python(f"""
        import json, os
        from pathlib import Path
        from acl_fa.runtime import loader
        backend = loader.Backend("sim", Path({str(tmp_path / 'own')!r}), None, Path("rt"), None,
                                 Path("nnopbase"), [], {{}})
        backend.load_op_library()
        print(json.dumps({{"picked": str(backend.op_library_path),
                          "origin": backend.op_library_origin,
                          "attempts": [tuple(a) for a in backend.attempts]}}))
    """, ASCEND_CUSTOM_OPP_PATH=custom, ASCEND_OPP_PATH="")
    lib = loader.OP_LIBRARY_NAME
    assert result["picked"] == str(ours / "op_api/lib" / lib)
    assert result["origin"] == "ASCEND_CUSTOM_OPP_PATH[4]"
    outcomes = [(Path(a[1]), a[2]) for a in result["attempts"]]
    assert outcomes == [
        (missing / "op_api/lib" / lib, "not found"),
        (npu_pkg / "op_api/lib" / lib, "skipped"),
        (broken / "op_api/lib" / lib, "found but failed to load"),
        (other / "op_api/lib" / lib, "unusable"),
        (ours / "op_api/lib" / lib, "loaded"),
        (later / "op_api/lib" / lib, "not used"),
        (tmp_path / "own" / lib, "not used"),
    ]
    details = [a[3] for a in result["attempts"]]
    assert "backend npu" in details[1]
    assert "does not export aclnnFlashAttentionGetWorkspaceSize" in details[3]
    assert str(ours) in details[5]


# ---- end to end: the real simulator package ------------------------------------------------

E2E_CHILD = """
import json
import numpy as np
from acl_fa.reference import accuracy, attention as reference
from acl_fa.jobs import doctor
from acl_fa.ops.forward import flash_attention

report = doctor.collect()
rng = np.random.default_rng(7)
b, n, sq, skv, d = 1, 2, 37, 53, 64
q = rng.standard_normal((b, n, sq, d)).astype(np.float16)
k = rng.standard_normal((b, n, skv, d)).astype(np.float16)
v = rng.standard_normal((b, n, skv, d)).astype(np.float16)
out, lse = flash_attention(q, k, v, causal=True, return_lse=True)
ref_out, ref_lse = reference.attention_reference(q, k, v, causal=True)
heads = list(range(n))
naive = accuracy.naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(d),
                                      layout="BNSD", heads=heads)
acc = accuracy.check_accuracy(out, lse, ref_out, ref_lse, naive, "float16", heads)
print(json.dumps({"backend": report["backend"], "ok": acc.ok, "error": acc.max_error,
                  "tolerance": acc.tolerance, "lse_error": acc.lse_max_error}))
"""


def test_sim_package_end_to_end(sim_run, tmp_path):
    prefix = tmp_path / "opp prefix"
    proc = _install(sim_run, f"--install-path={prefix}")
    assert proc.returncode == 0, proc.stderr
    vendor = prefix / "vendors" / VENDOR
    set_env = vendor / "bin" / "set_env.bash"
    env = {k: v for k, v in os.environ.items()
           if k not in ("ASCEND_CUSTOM_OPP_PATH", "ASCEND_OPP_PATH")}
    # The child imports this acl_fa (installed or source tree) and runs outside the repository,
    # whose acl_fa/ would otherwise shadow an installed one.
    package_root = str(Path(loader.__file__).resolve().parents[1])
    env.update(ACL_FA_BACKEND="sim",
               PYTHONPATH=os.pathsep.join([package_root] + [p for p in sys.path if p]))
    script = (f"source {shlex.quote(str(set_env))} && exec {shlex.quote(sys.executable)} -c "
              f"{shlex.quote(textwrap.dedent(E2E_CHILD))}")
    child = _run(["bash", "-c", script], env=env, cwd=tmp_path, timeout=600)
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout.strip().splitlines()[-1])
    picked = str(vendor / "op_api" / "lib" / loader.OP_LIBRARY_NAME)
    libraries = result["backend"]
    assert libraries["op library"] == f"{picked} (via ASCEND_CUSTOM_OPP_PATH[0])", libraries
    candidates = libraries["op library candidates"]
    assert candidates[0].startswith(f"op library via ASCEND_CUSTOM_OPP_PATH[0]: {picked}: loaded")
    assert "not used" in candidates[-1]  # the simulator's own library came after the package
    assert result["ok"], (f"max error {result['error']:.3g} > tolerance {result['tolerance']:.3g}"
                          f" (lse error {result['lse_error']:.3g})")

    proc = _install(sim_run, f"--install-path={prefix}", "--uninstall")
    assert proc.returncode == 0, proc.stderr
    assert _tree(tmp_path) == []
