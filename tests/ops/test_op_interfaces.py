"""Each custom operator's interface is written once, in its msopgen op JSON; these tests hold every
other statement of it to the JSON, for every entry point:

(a) the driver's cffi declarations of the two aclnn functions (derived from the JSON by
    acl_fa/runtime/aclnn_entries.py with gen_aclnn's rules, or a hand-written acl_fa/cdefs/aclnn_<op>.h
    standing in for them) equal what msopgen derives from the JSON (names, C types, order), parsed
    with pycparser; and the FFI the driver uses has each function with those argument types, found
    in the simulator's libcust_opapi.so;
(b) the OpDef the op's op_host code registers (inputs / outputs: names, param types,
    value-depend, dtypes, formats; attrs: names, types, defaults) equals the JSON, read from the
    simulator's registry (aclfaSimOpDefJson), and each of its AICore targets has the kernel entry;
(c) (in tests/runtime/test_abi.py) the driver's declarations compile after the simulator's generated
    aclnn_<op>.h over the real ACL headers, for every entry.
The simulator's aclnn entries themselves are generated from the same JSON at build time
(sim/src/opapi/gen_aclnn.py), so they cannot drift.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import pkgutil
import sys
from pathlib import Path

import numpy as np
import pycparser
import pytest
from pycparser import c_ast

import acl_fa.ops
from acl_fa.ops.forward_v2 import V2Call
from acl_fa.ops.opcall import EntryOp
from acl_fa.runtime import aclnn_entries, loader
from acl_fa.runtime.ffi import ffi
from acl_fa.spec.options import build_forward_options
from acl_fa.spec.problem import make_problem

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sim" / "src" / "opapi"))
import abi_check  # noqa: E402
import gen_aclnn  # noqa: E402

OPS = [(path, op) for path in abi_check.op_jsons() for op in json.loads(path.read_text())]
IDS = [op["op"] for _, op in OPS]

# Opaque types of the cdefs, so that pycparser can parse a cdef file on its own.
_PRELUDE = ("typedef int aclnnStatus; typedef int int64_t; typedef int uint64_t; typedef int bool; "
            "typedef struct aclTensor aclTensor; typedef struct aclOpExecutor aclOpExecutor; "
            "typedef void *aclrtStream; typedef struct aclIntArray aclIntArray;\n")


def test_every_op_is_covered():
    assert len(OPS) >= 7, [op["op"] for _, op in OPS]  # at least the 7 ops of issue #27; variants add more
    assert len({op["op"] for _, op in OPS}) == len(OPS)
    assert [e["op"] for e in aclnn_entries.load()] == IDS  # the driver knows every entry of the tree


def _type_text(node) -> str:
    """A parameter's C type as gen_aclnn writes it ("const aclTensor *", "uint64_t *", "char *")."""
    stars = 0
    while isinstance(node, c_ast.PtrDecl):
        stars += 1
        node = node.type
    assert isinstance(node, c_ast.TypeDecl), node
    base = " ".join(node.quals + node.type.names)
    return base + (" " + "*" * stars if stars else "")


def c_functions(text: str, filename: str) -> dict[str, list[tuple[str, str]]]:
    """{function name: [(C type, parameter name)]} of every function C text declares."""
    ast = pycparser.CParser().parse(_PRELUDE + abi_check._strip_comments(text), filename=filename)
    functions = {}
    for ext in ast.ext:
        if isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
            functions[ext.name] = [(_type_text(p.type), p.name) for p in ext.type.args.params]
    return functions


def expected_functions(op: dict) -> dict[str, list[tuple[str, str]]]:
    iface = gen_aclnn.aclnn_interface(op)
    return {iface["phase1"]: [(t.strip(), n) for t, n, _, _ in iface["params"]],
            iface["phase2"]: [(t.strip(), n) for t, n in iface["phase2_params"]]}


@pytest.fixture(scope="module")
def driver_headers(tmp_path_factory):
    return abi_check.driver_declarations(tmp_path_factory.mktemp("driver_aclnn"))


@pytest.mark.parametrize("path, op", OPS, ids=IDS)
def test_driver_declares_what_msopgen_derives_from_the_json(driver_headers, path, op):
    header = driver_headers[f"aclnn_{gen_aclnn.snake(op['op'])}.h"]
    declared = c_functions(abi_check.read_cdef(header), str(header))
    assert declared == expected_functions(op), f"{header.name} differs from {path.relative_to(ROOT)}"


@pytest.mark.parametrize("path, op", OPS, ids=IDS)
def test_the_ffi_in_use_calls_each_entry_with_the_jsons_types(path, op):
    """The FFI object the driver calls through (the generated module when installed) has both
    functions with the argument types msopgen derives, and the simulator's library exports them."""
    lib = ffi.dlopen(str(loader.sim_library_dir() / "libcust_opapi.so"))
    for name, params in expected_functions(op).items():
        fn = getattr(lib, name)  # AttributeError: declared nowhere, or not exported by the simulator
        assert [a.cname for a in ffi.typeof(fn).args] == [ffi.typeof(t.replace("const ", "")).cname
                                                          for t, _ in params], name


def test_a_changed_attr_is_caught():
    """The comparison fails when the JSON and the declaration disagree on one attr."""
    path, op = next((p, o) for p, o in OPS if o["op"] == "FlashAttention")
    changed = json.loads(json.dumps(op))
    changed["attr"][1]["type"] = "int"  # causal: bool -> int
    entry = next(e for e in aclnn_entries.load() if e["op"] == "FlashAttention")
    declared = c_functions(aclnn_entries.declaration(entry), "FlashAttention")
    assert declared != expected_functions(changed)
    assert declared == expected_functions(op)


# ---- (b) the registered OpDef ------------------------------------------------------------------

@pytest.fixture(scope="module")
def cust_opapi():
    lib_dir = loader.sim_library_dir()
    lib = ctypes.CDLL(str(lib_dir / "libcust_opapi.so"), mode=os.RTLD_LAZY | getattr(os, "RTLD_LOCAL", 0))
    if not hasattr(lib, "aclfaSimOpDefJson"):
        pytest.skip(f"{lib_dir}/libcust_opapi.so predates aclfaSimOpDefJson (build this tree)")
    lib.aclfaSimOpDefJson.restype = ctypes.c_size_t
    lib.aclfaSimOpDefJson.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return lib_dir, lib


def registered_opdef(lib, op_type: str) -> dict:
    size = lib.aclfaSimOpDefJson(op_type.encode(), None, 0)
    assert size > 0, f"no OpDef registered as {op_type}"
    buf = ctypes.create_string_buffer(size + 1)
    lib.aclfaSimOpDefJson(op_type.encode(), buf, size + 1)
    return json.loads(buf.value.decode())


def _tensor_view(t: dict) -> dict:
    return {"name": t["name"], "param_type": t["param_type"], "value_depend": t.get("value_depend"),
            "format": t["format"], "type": t["type"]}


def _attr_view(a: dict) -> dict:
    default = a.get("default_value")
    if a["type"] == "float" and default is not None:
        default = round(float(default), 6)  # the OpDef stores a float
    return {"name": a["name"], "param_type": a.get("param_type", "required"), "type": a["type"],
            "default_value": default}


@pytest.mark.parametrize("path, op", OPS, ids=IDS)
def test_registered_opdef_equals_the_json(cust_opapi, path, op):
    _, lib = cust_opapi
    opdef = registered_opdef(lib, op["op"])
    assert opdef["op"] == op["op"]
    for key, view in (("input_desc", _tensor_view), ("output_desc", _tensor_view), ("attr", _attr_view)):
        assert [view(x) for x in opdef.get(key, [])] == [view(x) for x in op.get(key, [])], (
            f"{key} of the OpDef registered by op_host differs from {path.relative_to(ROOT)}")


# The simulator's kernel binary of each AICore target (sim/src/opapi/CMakeLists.txt).
ARCH_OF_SOC = {"ascend910b": 2201, "ascend910_93": 2201, "ascend310p": 2002, "ascend910": 1001}


@pytest.mark.parametrize("path, op", OPS, ids=IDS)
def test_every_aicore_target_has_the_kernel_entry(cust_opapi, path, op):
    lib_dir, lib = cust_opapi
    targets = registered_opdef(lib, op["op"])["aicore_config"]
    assert targets and set(targets) <= set(ARCH_OF_SOC), targets
    entry = gen_aclnn.snake(op["op"])
    for soc in targets:
        binary = ctypes.CDLL(str(lib_dir / f"libflash_attention_kernel_{ARCH_OF_SOC[soc]}.so"),
                             mode=os.RTLD_LAZY | getattr(os, "RTLD_LOCAL", 0))
        assert hasattr(binary, entry), f"{op['op']} targets {soc} but its kernel binary has no {entry}"


# ---- (d) the Python Ops read from the JSON -----------------------------------------------------

def _entry_ops():
    """Every opcall.EntryOp instance the ops modules define."""
    found = {}
    for info in pkgutil.iter_modules(acl_fa.ops.__path__):
        module = importlib.import_module(f"acl_fa.ops.{info.name}")
        for value in vars(module).values():
            if isinstance(value, EntryOp):
                found[value.op_type] = value
    return found


ENTRY_OPS = _entry_ops()


def test_the_forward_and_merge_entries_are_read_from_their_json():
    assert {"FlashAttention", "FlashAttentionV2", "FlashAttentionV3", "FlashAttentionV4", "FlashAttentionV5",
            "AttentionLseMerge", "AttentionLseMergeInt16"} <= set(ENTRY_OPS)


@pytest.mark.parametrize("op_type", sorted(ENTRY_OPS))
def test_every_json_tensor_has_a_role_the_op_can_fill(op_type):
    """A role the Op never gives a buffer would pass NULL silently (an optional tensor) or fail
    late (a required one): every JSON tensor's role is one of the Op's inputs, outputs or
    constants, and every name the Op maps is a tensor of some entry of its class."""
    op = ENTRY_OPS[op_type]
    tensors = [p[3] for p in op.entry["params"] if p[2] in ("input", "output")]
    known = set(op.inputs) | set(op.outputs) | set(op.constant_roles)
    assert [t["name"] for t in tensors if op.role(t["name"]) not in known] == []
    family = [o for o in ENTRY_OPS.values() if o.roles is op.roles]  # the entries that share the mapping
    names = {p[3]["name"] for o in family for p in o.entry["params"] if p[2] in ("input", "output")}
    assert set(op.roles) <= names, set(op.roles) - names


def _forward_call():
    q = np.zeros((1, 2, 16, 16), np.float16)
    problem, *_ = make_problem(q, q, q)
    options, _, _ = build_forward_options(scores=problem.score_grid, dtype=problem.dtype, window=(4, 0))
    return problem, V2Call(problem, options)


@pytest.mark.parametrize("op_type", [t for t in sorted(ENTRY_OPS) if t.startswith("FlashAttention")])
def test_every_json_attr_of_the_forward_is_given_explicitly(op_type):
    """An attr the Op's attr_values misses (a typo, a new attr) would silently take the JSON's
    default: each forward entry's attrs are exactly given, and no given name is unknown to all
    the entries of the class."""
    op = ENTRY_OPS[op_type]
    problem, call = _forward_call()
    values = op.attr_values(problem if op_type == "FlashAttention" else call)
    attrs = {p[3]["name"] for p in op.entry["params"] if p[2] == "attr"}
    assert attrs <= set(values), attrs - set(values)
    family = [o for o in ENTRY_OPS.values() if type(o) is type(op)]
    known = {p[3]["name"] for o in family for p in o.entry["params"] if p[2] == "attr"}
    assert set(values) <= known, set(values) - known
