"""The fifo_attention bench kernel (tests/kernels/fifo_attention.cpp; bench/model_validation.py
validates the timing model with it): its result against the float64 reference with the race rule
on, and its modeled time against the memory bounds."""
from __future__ import annotations

import numpy as np
import pytest

import simlib

QK_CUBE = np.array([128, 256, 64, 1, 1, 2, 2, 2, 2, 2, 2, 1], np.int32)
PV_CUBE = np.array([128, 128, 128, 1, 1, 4, 4, 4, 4, 2, 2, 1], np.int32)
D = 128


@pytest.fixture(scope="module")
def sim():
    s = simlib.SimKernels()
    yield s
    s.close()


def _attention(q, k, v, scale):
    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    top = s.max(1, keepdims=True)
    p = np.exp(s - top)
    return p / p.sum(1, keepdims=True) @ v.astype(np.float64), (top[:, 0] + np.log(p.sum(1)))


# (sq, skv, tile, preload, kv split, chunk rows, groups): fewer tiles than the preload, several
# items per group (slots and Matmul objects chain across items), a key split.
CASES = [(256, 512, 512, 3, 1, 16, 1), (512, 2048, 512, 3, 1, 16, 2), (384, 2048, 256, 2, 2, 32, 2),
         (256, 1024, 256, 1, 1, 8, 1)]


@pytest.mark.parametrize("sq,skv,tile,preload,split,chunk,groups", CASES)
def test_matches_reference_race_free(sim, sq, skv, tile, preload, split, chunk, groups):
    rng = np.random.default_rng(sq + skv)
    q, k, v = (rng.standard_normal((n, D)).astype(np.float16) for n in (sq, skv, skv))
    out, lse = sim.device(split * sq * D * 4), sim.device(split * sq * 4)
    slots = (preload + 1) * 128 * tile * 4 + 2 * 128 * tile * 2 + 2 * 128 * D * 4
    ws = sim.device(simlib.SYS_WORKSPACE + groups * slots)
    e = sim.err()
    assert sim.engine.aclfaSimSetOpTrace(3) == 0  # modeled, race rule on
    try:
        rc = sim.k.aclfaSimTestFifoAttention(sim.device(q), sim.device(k), sim.device(v), out, lse, ws, sq, skv, D,
                                             tile, preload, split, chunk, D ** -0.5, groups,
                                             sim.ffi.from_buffer("int32_t[]", QK_CUBE),
                                             sim.ffi.from_buffer("int32_t[]", PV_CUBE), e, 4096)
    finally:
        sim.engine.aclfaSimSetOpTrace(0)
    assert rc == 0, sim.ffi.string(e).decode()
    o = sim.host(out, (split, sq, D), np.float32)
    l = sim.host(lse, (split, sq), np.float32)
    part = skv // split
    for c in range(split):  # each key chunk's partial is the attention over that chunk
        ref, ref_lse = _attention(q, k[c * part:(c + 1) * part], v[c * part:(c + 1) * part], D ** -0.5)
        np.testing.assert_allclose(o[c], ref, atol=2e-3)  # P in fp16, as the PTO kernel's
        np.testing.assert_allclose(l[c], ref_lse, atol=1e-4)
    st = sim.ffi.new("aclfaSimModelStats *")
    assert sim.engine.aclfaSimGetModelStats(st) == 0
    assert st.racesChecked == 1
    assert st.compulsoryHbmBytes == q.nbytes + k.nbytes + v.nbytes  # the workspace slots are not compulsory
    assert st.cycles == max(st.pipelineCycles, st.l2BoundCycles, st.hbmBoundCycles)
    sim.free_all()
