"""The Python package's shape (docs/architecture.md "Layers of the Python package"), read from the
source with ast: layers import only downwards, no import cycle, no function-local import of the
package's own modules, no private name imported across modules, and functions small enough to
read (at most 80 lines; at most 12 parameters outside click commands and the public faces, whose
keyword arguments mirror the APIs users already know)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "acl_fa"
# Bottom to top; a module may import its own layer and the layers before it.
LAYERS = ["runtime", "spec", "plan", "ops", "reference", "api", "parallel", "jobs", "cli"]
# Functions whose signature is a public API (acl_fa.__all__ and acl_fa.parallel), exempt from the
# parameter limit: they keep the keyword names of the APIs they mirror and build a Problem first;
# and the float64 references of those faces, which take the same keywords.
PUBLIC_FACES = {
    "ops/forward.py:flash_attention", "ops/routed.py:flash_attention", "ops/decode.py:flash_attention_with_kvcache",
    "parallel/ring.py:ring_attention",
    "ops/varlen.py:flash_attention_varlen", "ops/varlen.py:flash_attention_varlen_backward",
    "ops/backward.py:flash_attention_backward", "parallel/ring.py:ring_attention_backward",
    "ops/quant.py:flash_attention_int8", "parallel/ulysses_backward.py:ulysses_attention_backward",
    "reference/attention.py:attention_reference", "reference/attention.py:attention_reference_backward",
    "reference/attention.py:attention_reference_varlen", "reference/attention.py:attention_reference_varlen_backward",
    "ops/flash_attn_interface.py:flash_attn_varlen_func", "ops/flash_attn_interface.py:flash_attn_varlen_kvpacked_func",
    "ops/decode_compat.py:flash_attn_with_kvcache", "reference/decode.py:kvcache_reference",
    "parallel/usp.py:usp_attention_backward", "parallel/usp.py:rank_usp_attention_backward",
}
MAX_LINES, MAX_PARAMS = 80, 12


def _modules() -> dict:
    """Dotted module name -> (path, parsed tree) for every module of acl_fa."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = (path, ast.parse(path.read_text(), str(path)))
    return out


MODULES = _modules()


def _imports(name: str, tree: ast.Module):
    """(imported acl_fa module, imported names, node) for each import statement of module `name`."""
    is_package = MODULES[name][0].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "acl_fa":
                    yield alias.name, [], node
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "acl_fa":
                continue
            names = [a.name for a in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            if submodules:
                for sub in submodules:
                    yield sub, [], node
            else:
                yield target, names, node


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "api"  # acl_fa.api and acl_fa (the faces' assembly)


def _edges():
    for name, (path, tree) in MODULES.items():
        for target, names, node in _imports(name, tree):
            if target in MODULES:
                yield name, target, names, node


def test_every_module_belongs_to_a_layer():
    strays = [m for m in MODULES if _layer(m) not in LAYERS + ["__main__"] and m != "acl_fa"]
    assert not strays, f"modules outside the layers {LAYERS}: {strays}"


def test_layers_import_only_downwards():
    upward = [f"{a} imports {b}" for a, b, _, _ in _edges()
              if a != "acl_fa" and _layer(a) in LAYERS and _layer(b) in LAYERS
              and LAYERS.index(_layer(b)) > LAYERS.index(_layer(a))]
    assert not upward, "\n".join(upward)


def test_the_reference_imports_no_op_and_no_band_translation():
    bad = [f"{a} imports {b}" for a, b, _, _ in _edges()
           if _layer(a) == "reference" and (_layer(b) == "ops" or b == "acl_fa.spec.band")]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    graph = {m: set() for m in MODULES}
    for a, b, _, _ in _edges():
        if a != b:
            graph[a].add(b)
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert not cycles, "\n".join(cycles)


def _function_bodies(tree: ast.Module) -> set:
    """ids of every node inside a function (a module-level try/except is still module level)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def test_no_function_local_import_of_the_package():
    local = []
    for name, (path, tree) in MODULES.items():
        inside = _function_bodies(tree)
        for target, _, node in _imports(name, tree):
            if id(node) in inside:
                local.append(f"{path.relative_to(REPO)}:{node.lineno} imports {target}")
    assert not local, "\n".join(local)


def test_no_private_name_imported_across_modules():
    private = [f"{a} imports {n} from {b}" for a, b, names, _ in _edges() for n in names
               if n.startswith("_") and not n.startswith("__") and a != b]
    assert not private, "\n".join(private)


def _functions():
    for name, (path, tree) in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(PACKAGE).as_posix(), node


def _is_click_command(node) -> bool:
    return any("command" in ast.unparse(d) or "click." in ast.unparse(d) for d in node.decorator_list)


@pytest.mark.parametrize("limit", ["lines", "parameters"])
def test_functions_are_small(limit):
    over = []
    for where, node in _functions():
        if limit == "lines":
            size = node.end_lineno - node.lineno + 1
            if size > MAX_LINES:
                over.append(f"{where}:{node.name}: {size} lines")
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs] + [p for p in (a.vararg, a.kwarg) if p]
        count = len([p for p in params if p.arg not in ("self", "cls")])
        if count > MAX_PARAMS and not _is_click_command(node) and f"{where}:{node.name}" not in PUBLIC_FACES:
            over.append(f"{where}:{node.name}: {count} parameters")
    assert not over, "\n".join(over)
