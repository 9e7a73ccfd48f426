"""The library finder: what it tries, in which order, and how it explains failures."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from acl_fa.runtime import loader
from acl_fa.runtime.errors import AclLibraryError, InvalidArgumentError

from conftest import CDEFS, run_python


def test_bad_sim_lib_dir_lists_every_path_as_not_found(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(AclLibraryError) as info:
        loader.load_sim(env={"ACL_FA_SIM_LIB_DIR": str(missing)})
    exc = info.value
    assert isinstance(exc, ImportError)
    assert [(a.path, a.outcome) for a in exc.attempts] == [
        (str(missing / "libacl_rt.so"), "not found"),
        (str(missing / "libascendcl.so"), "not found"),
    ]
    assert exc.env["ACL_FA_SIM_LIB_DIR"] == str(missing)
    assert f"{missing / 'libascendcl.so'}: not found" in str(exc)
    assert "ACL_FA_SIM_LIB_DIR=" in str(exc)
    assert pickle.loads(pickle.dumps(exc)).attempts == exc.attempts


def test_found_but_unloadable_is_told_apart_with_dlerror(tmp_path):
    (tmp_path / "libacl_rt.so").write_bytes(b"not an ELF file")
    with pytest.raises(AclLibraryError) as info:
        loader.load_sim(lib_dir=tmp_path)
    first, second = info.value.attempts
    assert first.outcome == "found but failed to load"
    assert str(tmp_path / "libacl_rt.so") in first.detail or "ELF" in first.detail
    assert first.detail, "the dlerror text must be kept"
    assert second.outcome == "not found"
    assert "found but failed to load: " in str(info.value)


def test_npu_without_cann_tries_the_env_dirs_then_the_default(tmp_path):
    home, toolkit = tmp_path / "home", tmp_path / "toolkit"
    env = {"ASCEND_HOME_PATH": str(home), "ASCEND_TOOLKIT_HOME": str(toolkit)}
    dirs = loader.npu_library_dirs(env)
    assert dirs == [home / "lib64", toolkit / "lib64", Path(loader.DEFAULT_TOOLKIT, "lib64")]
    if (Path(loader.DEFAULT_TOOLKIT, "lib64") / "libacl_rt.so").exists():
        pytest.skip("a CANN toolkit is installed here")
    with pytest.raises(AclLibraryError) as info:
        loader.load_npu(env)
    tried = [a.path for a in info.value.attempts]
    assert tried[:4] == [str(home / "lib64/libacl_rt.so"), str(home / "lib64/libascendcl.so"),
                         str(toolkit / "lib64/libacl_rt.so"),
                         str(toolkit / "lib64/libascendcl.so")]
    assert all(a.outcome == "not found" for a in info.value.attempts)
    assert "backend npu" in str(info.value) and "ASCEND_HOME_PATH=" in str(info.value)


def test_npu_attempt_stops_at_a_runtime_without_nnopbase(tmp_path, backend):
    """A directory whose runtime loads but has no libnnopbase.so is reported as such."""
    if backend.name != "sim":
        pytest.skip("copies the simulator's runtime")
    lib64 = tmp_path / "lib64"
    lib64.mkdir()
    (lib64 / "libascendcl.so").symlink_to(backend.runtime_path)
    with pytest.raises(AclLibraryError) as info:
        loader._load_from_dirs("npu", [lib64], [], {})
    outcomes = [(Path(a.path).name, a.outcome) for a in info.value.attempts]
    assert outcomes == [("libacl_rt.so", "not found"), ("libascendcl.so", "loaded"),
                        ("libnnopbase.so", "not found")]


def test_backend_name_is_validated():
    with pytest.raises(InvalidArgumentError, match="ACL_FA_BACKEND='gpu'"):
        loader.requested_backend({"ACL_FA_BACKEND": "gpu"})
    assert loader.requested_backend({}) == "auto"
    assert loader.requested_backend({"ACL_FA_BACKEND": " SIM "}) == "sim"


def test_one_backend_per_process(backend):
    other = "npu" if backend.name == "sim" else "sim"
    with pytest.raises(AclLibraryError, match="one backend per process"):
        loader.get_backend(other)
    assert loader.get_backend("auto") is backend
    assert loader.get_backend(backend.name) is backend


def test_auto_without_cann_uses_the_simulator_and_says_so_once(tmp_path):
    result = run_python("""
        import json, logging
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        from acl_fa.runtime.loader import get_backend
        first, second = get_backend(), get_backend()
        print(json.dumps({"name": first.name, "same": first is second,
                          "tried": [tuple(a) for a in first.attempts]}))
    """, ACL_FA_BACKEND="auto", ASCEND_HOME_PATH=tmp_path, ASCEND_TOOLKIT_HOME=tmp_path)
    if any(Path(p).exists() for p in (Path(loader.DEFAULT_TOOLKIT, "lib64", n)
                                       for n in loader.RUNTIME_NAMES)):
        pytest.skip("a CANN toolkit is installed here")
    assert result["name"] == "sim" and result["same"]
    said = [line for line in result["_stderr"].splitlines() if "using the CPU simulator" in line]
    assert len(said) == 1 and said[0].startswith("acl_fa INFO")
    assert result["tried"][0][1] == str(tmp_path / "lib64" / "libacl_rt.so")


def test_op_library_candidates_in_order(tmp_path):
    opp = tmp_path / "opp"
    (opp / "vendors").mkdir(parents=True)
    (opp / "vendors" / "config.ini").write_text("load_priority=mine,customize\n")
    env = {"ASCEND_CUSTOM_OPP_PATH": f"{tmp_path}/a/vendors/x:{tmp_path}/b",
           "ASCEND_OPP_PATH": str(opp)}
    packages = [
        tmp_path / "a/vendors/x/op_api/lib/libcust_opapi.so",
        tmp_path / "b/op_api/lib/libcust_opapi.so",
        opp / "vendors/mine/op_api/lib/libcust_opapi.so",
        opp / "vendors/customize/op_api/lib/libcust_opapi.so",
    ]
    assert [c.path for c in loader.find_op_library("npu", env=env)] == packages
    assert [c.path for c in loader.find_op_library("sim", sim_dir=tmp_path, env=env)] == [
        *packages, tmp_path / "libcust_opapi.so"]


def test_unknown_function_is_a_library_error(backend):
    with pytest.raises(AclLibraryError, match="aclrtNoSuchThing"):
        backend.fn("aclrtNoSuchThing")


def test_generated_out_of_line_module_resolves_symbols(tmp_path, backend):
    """With the module generated at build time (what an installed package uses), a symbol
    declared in the cdefs but exported by no loaded library is reported, not crashed on."""
    if backend.name != "sim":
        pytest.skip("loads the simulator")
    generated = tmp_path / "_acl_cffi.py"
    build = Path(loader.__file__).with_name("build_cffi.py")
    cdefs = CDEFS  # the checkout's: the installed copy names headers only a checkout has
    result = run_python(f"""
        import importlib.util, json, runpy, sys
        sys.argv = ["build_cffi.py", "--cdefs", {str(cdefs)!r}, "--output", {str(generated)!r}]
        try:
            runpy.run_path({str(build)!r}, run_name="__main__")
        except SystemExit as exit:
            assert exit.code == 0
        spec = importlib.util.spec_from_file_location("acl_fa.runtime._acl_cffi", {str(generated)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["acl_fa.runtime._acl_cffi"] = module
        import numpy as np, _cffi_backend, acl_fa
        from acl_fa.runtime.ffi import ffi
        from acl_fa.runtime.tensor import Tensor
        b = acl_fa.get_backend("sim")
        with acl_fa.Session(backend="sim") as s:
            with s.upload(np.arange(6, dtype=np.float16).reshape(2, 3)) as buf:
                tensor_ok = Tensor(buf).to_numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
        try:
            b.fn("aclfaPlanSizeOf")
            missing = "found"
        except acl_fa.AclLibraryError as exc:
            missing = str(exc)
        print(json.dumps({{"out_of_line": type(ffi) is _cffi_backend.FFI, "tensor": tensor_ok,
                          "missing": missing}}))
    """, ACL_FA_BACKEND="sim")
    assert result["out_of_line"] and result["tensor"]
    assert result["missing"].startswith("aclfaPlanSizeOf: not declared in acl_fa/cdefs, or "
                                        "exported by none of the sim libraries loaded")
