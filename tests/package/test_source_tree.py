"""The README's Python snippet run from a checkout's root after `pip install .`: Python imports
the source tree's acl_fa/ (the current directory comes first on sys.path), which has no built
libraries; it must use the installed distribution's, or say exactly what to do."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import acl_fa
from acl_fa.runtime.aclnn_entries import source_files
from acl_fa.runtime.cdef_reader import cdef_files, included_headers
from conftest import REPO
from acl_fa.runtime.loader import sim_library_dir

SOURCE = REPO / "acl_fa"  # the checkout's package: what git holds

# The README's snippet with small sizes (the simulator is slow at S = 4096).
SNIPPET = """
import numpy as np, acl_fa

q = np.random.standard_normal((1, 4, 64, 64)).astype(np.float16)   # [B, N, Sq, D]
k = np.random.standard_normal((1, 2, 64, 64)).astype(np.float16)   # [B, Nkv, Skv, D]: GQA
v = np.random.standard_normal((1, 2, 64, 64)).astype(np.float16)
out, lse = acl_fa.flash_attention(q, k, v, causal=True, return_lse=True)

with acl_fa.Session(device=0) as s:
    for _ in range(2):
        out = s.flash_attention(q, k, v, causal=True)
ref, ref_lse = acl_fa.attention_reference(q, k, v, causal=True)
assert np.abs(out.astype(np.float64) - ref).max() < 1e-2
print("source tree:", acl_fa.__file__)
"""


def _checkout(tmp_path: Path) -> Path:
    """A checkout's root: acl_fa/ as in git (sources and cdefs, no _sim/, no generated module) and
    the headers of our own C APIs that the cdefs name (native/, sim/include/), the op JSONs and the
    rules the aclnn entries are derived from (op_host/*/*.json, sim/src/opapi/gen_aclnn.py)."""
    root = tmp_path / "checkout"
    shutil.copytree(SOURCE, root / "acl_fa",
                    ignore=shutil.ignore_patterns("_sim", "_acl_cffi.py", "_aclnn_entries.json", "__pycache__", "*.so"))
    headers = [h for cdef in cdef_files(SOURCE / "cdefs") for h in included_headers(cdef)]
    for header in headers + source_files(SOURCE.parent):
        target = root / header.relative_to(SOURCE.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(header, target)
    return root


def _installed(tmp_path: Path, with_libraries: bool) -> Path:
    """A site directory holding an installed acl-fa: its dist-info and acl_fa/_sim/lib."""
    site = tmp_path / "site"
    info = site / "acl_fa-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acl-fa\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("")
    (site / "acl_fa").mkdir()
    if with_libraries:
        (site / "acl_fa" / "_sim").mkdir()
        os.symlink(sim_library_dir(), site / "acl_fa" / "_sim" / "lib")
    return site


def _run_in(root: Path, site: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ACL_FA_SIM_LIB_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), ACL_FA_BACKEND="sim")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SNIPPET)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_readme_snippet_from_the_checkout_root_uses_the_installed_libraries(tmp_path, sim_only):
    root = _checkout(tmp_path)
    proc = _run_in(root, _installed(tmp_path, with_libraries=True))
    assert proc.returncode == 0, proc.stderr
    assert f"source tree: {root / 'acl_fa' / '__init__.py'}" in proc.stdout  # the shadowing copy ran


def test_without_an_installed_build_the_error_says_what_to_do(tmp_path, sim_only):
    root = _checkout(tmp_path)
    proc = _run_in(root, _installed(tmp_path, with_libraries=False))
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()
    text = "\n".join(last)
    assert "AclLibraryError" in text
    assert f"this acl_fa ({root / 'acl_fa'}) is a source tree without built libraries" in text
    assert "pip install ." in text and "export ACL_FA_SIM_LIB_DIR=$PWD/build/lib" in text
