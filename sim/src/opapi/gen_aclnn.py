"""Generates the simulator's aclnn entries of a custom operator from its msopgen op JSON.

For each op of the JSON this writes what msopgen's autogen would put in libcust_opapi.so:
``aclnn_<op_snake>.h`` (the two declarations) and ``aclnn_<op_snake>.cpp`` (their definitions).
The definitions only marshal the arguments into ``acl_fa_sim::opapi::PhaseOne`` /
``PhaseTwo`` (generic_op.h), which check the tensors, run the op's own InferShape and
TilingFunc and launch the kernel entry ``<op_snake>`` with the GM addresses in the JSON's
order. The interface rules (names, types, order) are ``aclnn_interface`` below; the tests
derive the declarations with the same function and compare them with acl_fa/cdefs.

Usage: python gen_aclnn.py --out DIR (--kernel-dir OP_KERNEL_DIR | --headers-only) OP_JSON...
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# msopgen's C type of an attr in the aclnn signature (docs/cann-facts.md#custom-operator-api).
ATTR_C_TYPES = {"float": "double", "bool": "bool", "int": "int64_t", "string": "char *"}
# The op runtime's attr value type (sim_host/op_runtime.h AttrValue) for each JSON attr type.
ATTR_VALUE_CASTS = {"float": "static_cast<float>({})", "bool": "{}", "int": "static_cast<int64_t>({})"}


def snake(name: str) -> str:
    """UpperCamelCase op type -> snake_case (file stem, kernel entry): FlashAttentionV2 -> flash_attention_v2."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def lower_camel(name: str) -> str:
    """snake_case JSON name -> lowerCamelCase parameter name: attention_out -> attentionOut."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def aclnn_interface(op: dict) -> dict:
    """The aclnn entry points msopgen generates for one op of a JSON.

    Returns {"phase1": name, "phase2": name, "params": [(c_type, name, kind, json_entry)], ...}
    where params are phase one's parameters in order (kind: input, attr, output, or tail for
    workspaceSize / executor)."""
    op_type = op["op"]
    inputs, outputs, attrs = op.get("input_desc", []), op.get("output_desc", []), op.get("attr", [])
    in_names = {t["name"] for t in inputs}
    params = []
    for t in inputs:
        if t["param_type"] == "dynamic":
            raise ValueError(f"{op_type}: dynamic input {t['name']} is not supported by the generator")
        if t["name"] in {o["name"] for o in outputs}:
            raise ValueError(f"{op_type}: in-place (Ref) input {t['name']} is not supported by the generator")
        name = lower_camel(t["name"]) + ("Optional" if t["param_type"] == "optional" else "")
        params.append(("const aclTensor *", name, "input", t))
    for a in attrs:
        if a["type"] not in ATTR_C_TYPES:
            raise ValueError(f"{op_type}: attr {a['name']} of type {a['type']} is not supported by the generator")
        optional_string = a["type"] == "string" and a.get("param_type", "required") == "optional"
        params.append((ATTR_C_TYPES[a["type"]], lower_camel(a["name"]) + ("Optional" if optional_string else ""),
                       "attr", a))
    for t in outputs:
        if t["param_type"] == "dynamic":
            raise ValueError(f"{op_type}: dynamic output {t['name']} is not supported by the generator")
        base = "out" if len(outputs) == 1 else lower_camel(t["name"]) + "Out"
        name = base + ("Optional" if t["param_type"] == "optional" else "")
        params.append(("const aclTensor *", name, "output", t))
    assert not in_names & {t["name"] for t in outputs}
    params.append(("uint64_t *", "workspaceSize", "tail", None))
    params.append(("aclOpExecutor **", "executor", "tail", None))
    return {"op": op_type, "snake": snake(op_type), "phase1": f"aclnn{op_type}GetWorkspaceSize",
            "phase2": f"aclnn{op_type}", "params": params,
            "phase2_params": [("void *", "workspace"), ("uint64_t", "workspaceSize"),
                              ("aclOpExecutor *", "executor"), ("aclrtStream", "stream")]}


def _param_text(c_type: str, name: str) -> str:
    return f"{c_type}{name}" if c_type.endswith("*") else f"{c_type} {name}"


def declarations(iface: dict, export: str = "") -> str:
    one = ", ".join(_param_text(t, n) for t, n, _, _ in iface["params"])
    two = ", ".join(_param_text(t, n) for t, n in iface["phase2_params"])
    return (f"{export}aclnnStatus {iface['phase1']}({one});\n"
            f"{export}aclnnStatus {iface['phase2']}({two});\n")


def kernel_type(kernel_dir: Path, stem: str) -> str:
    """The kernel type the op's kernel declares for dav-c220 (KERNEL_TASK_TYPE_DEFAULT in
    op_kernel/.../<stem>.cpp or a header it includes): the one that is not KERNEL_TYPE_AICORE
    (the coupled chips' type), MIX_AIC_1_2 when it declares none. Checked again at run time by
    the kernel engine (a mismatch is a rule violation)."""
    sources = sorted(kernel_dir.rglob(f"{stem}.cpp"))
    if not sources:
        raise FileNotFoundError(f"no {stem}.cpp under {kernel_dir}")
    seen, todo, types = set(), [sources[0]], []
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = path.read_text()
        types += re.findall(r"KERNEL_TASK_TYPE_DEFAULT\(\s*(KERNEL_TYPE_[A-Z0-9_]+)\s*\)", text)
        for inc in re.findall(r'#include\s+"([^"]+)"', text):
            todo += [path.parent / inc] + sorted(kernel_dir.rglob(Path(inc).name))
    decoupled = [t for t in types if t != "KERNEL_TYPE_AICORE"]
    return decoupled[0] if decoupled else "KERNEL_TYPE_MIX_AIC_1_2"


def definitions(iface: dict, source: str, ktype: str) -> str:
    op = iface["op"]
    tensors = [(n, k, e) for _, n, k, e in iface["params"] if k in ("input", "output")]
    lines = [f"// Generated from {source} by sim/src/opapi/gen_aclnn.py at build time -- do not edit.",
             f'#include "aclnn_{iface["snake"]}.h"', "", '#include "generic_op.h"', "", "namespace {", "",
             "using acl_fa_sim::opapi::TensorParam;", ""]

    def table(kind: str) -> str:
        rows = [f'    {{"{e["name"]}", "{n}", {str(e["param_type"] == "optional").lower()}, '
                f'{str(bool(e.get("value_depend"))).lower()}}},' for n, k, e in tensors if k == kind]
        return "\n".join(rows) if rows else ""

    lines += [f"const TensorParam kInputs[] = {{\n{table('input')}\n}};"]
    lines += [f"const TensorParam kOutputs[] = {{\n{table('output')}\n}};"]
    n_in = sum(1 for t in tensors if t[1] == "input")
    n_out = len(tensors) - n_in
    lines += ["", f"const acl_fa_sim::opapi::OpInterface kOp{{\"{op}\", \"{iface['snake']}\", "
              f"\"{iface['phase1']}\", \"{iface['phase2']}\",",
              f"    kInputs, {n_in}, kOutputs, {n_out}, {ktype}}};", "", "}  // namespace", ""]
    one = ", ".join(_param_text(t, n) for t, n, _, _ in iface["params"])
    lines += [f'extern "C" aclnnStatus {iface["phase1"]}({one})', "{"]
    lines += ["    const aclTensor *const tensors[] = {" + ", ".join(n for n, _, _ in tensors) + "};"]
    lines += ["    std::vector<acl_fa_sim::host::AttrInfo> attrs;"]
    for c_type, name, kind, entry in iface["params"]:
        if kind != "attr":
            continue
        if entry["type"] == "string":
            lines += [f'    if ({name} != nullptr) attrs.push_back({{"{entry["name"]}", std::string({name})}});']
        else:
            value = ATTR_VALUE_CASTS[entry["type"]].format(name)
            lines += [f'    attrs.push_back({{"{entry["name"]}", {value}}});']
    lines += ["    return acl_fa_sim::opapi::PhaseOne(kOp, tensors, std::move(attrs), workspaceSize, executor);",
              "}", ""]
    two = ", ".join(_param_text(t, n) for t, n in iface["phase2_params"])
    lines += [f'extern "C" aclnnStatus {iface["phase2"]}({two})', "{",
              "    return acl_fa_sim::opapi::PhaseTwo(kOp, workspace, workspaceSize, executor, stream);", "}", ""]
    return "\n".join(lines)


def header(iface: dict, source: str) -> str:
    return (f"/* aclnn_{iface['snake']}.h -- the op API of the {iface['op']} custom operator, generated from "
            f"{source}\n * by sim/src/opapi/gen_aclnn.py as msopgen generates it; exported by libcust_opapi.so. */\n"
            "#pragma once\n\n#include \"aclnn/acl_meta.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            + declarations(iface, '__attribute__((visibility("default"))) ')
            + "\n#ifdef __cplusplus\n}\n#endif\n")


def write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernel-dir", type=Path, help="op_kernel (for each kernel's type); not with --headers-only")
    parser.add_argument("--headers-only", action="store_true", help="write only the aclnn_<op>.h declarations")
    parser.add_argument("jsons", type=Path, nargs="+")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.jsons:
        for op in json.loads(path.read_text()):
            iface = aclnn_interface(op)
            source = path.name
            write_if_changed(args.out / f"aclnn_{iface['snake']}.h", header(iface, source))
            if args.headers_only:
                continue
            write_if_changed(args.out / f"aclnn_{iface['snake']}.cpp",
                             definitions(iface, source, kernel_type(args.kernel_dir, iface["snake"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
