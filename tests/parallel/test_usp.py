"""2-D sequence parallelism (acl_fa.parallel.usp_attention, issue 32 item 3): Ulysses groups inside,
a ring across them; N = 32 heads on 48 devices (U = 16, R = 3; 8 key/value heads replicated over
the groups' members) equal to the float64 reference by the 2x-naive rule; the group plan; and a
head count the group size does not divide refused before any device work."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acl_fa.parallel.usp import default_ulysses_size, usp_groups

ROOT = Path(__file__).resolve().parents[2]


def test_group_plan():
    assert default_ulysses_size(48, 32, 8) == 16 and default_ulysses_size(6, 4, 2) == 2
    assert default_ulysses_size(8, 3, 3) == 1  # no group size divides both: the ring alone
    ugroups, rings = usp_groups(6, 3)
    assert ugroups == [[0, 1, 2], [3, 4, 5]] and rings == [[0, 3], [1, 4], [2, 5]]


SCRIPT = """
import numpy as np
from acl_fa.parallel.usp import usp_attention
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference
from acl_fa.runtime.errors import InvalidArgumentError
B, N, NKV, S, D = 1, 32, 8, 96, 32
rng = np.random.default_rng(7)
q = rng.standard_normal((B, N, S, D)).astype(np.float16)
k, v = (rng.standard_normal((B, NKV, S, D)).astype(np.float16) for _ in range(2))
out, lse = usp_attention(q, k, v, devices=list(range(48)), causal=True)
heads = list(range(N))
ref, ref_lse = attention_reference(q, k, v, causal=True)
naive = naive_same_precision(q, k, v, np.float16, causal=True, scale=1 / np.sqrt(D), layout="BNSD", heads=heads)
acc = check_accuracy(out, lse, ref, ref_lse, naive, "float16", heads)
assert acc.ok, acc
print("ok 48 devices", acc.max_error, acc.tolerance)
try:
    usp_attention(q[:, :6], k[:, :6], v[:, :6], devices=list(range(8)), ulysses=4, causal=True)
    raise SystemExit("no error")
except InvalidArgumentError as exc:
    assert "N=6 query heads are not divisible by 4 devices" in str(exc), exc
print("ok refused")
"""


def test_n32_on_48_devices_matches_the_reference():
    env = dict(os.environ, ACL_FA_BACKEND="sim", ACL_FA_SIM_DEVICE_COUNT="48")
    for name in ("ACL_FA_SIM_FAIL", "ACL_FA_RANK", "ACL_FA_WORLD_SIZE", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True, timeout=900,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok ") == 2, proc.stdout


if __name__ == "__main__":
    pytest.main([__file__])
