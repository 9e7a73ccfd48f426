"""How many roundings to the input dtype the ring's merge can afford: a numpy emulation.

Ring attention (acl_fa.parallel) merges each query sub-chunk's partial results, one per key
sub-block it meets, in the order the ring computes them (parallel.ring_calls over the steps and
units, zigzag split, sub-blocks of BLOCK_ROWS rows). This script replays that order on the host
with an emulation of the forward op's arithmetic (scores, softmax, l and acc in float32; P rounded
to the input dtype T before P.V, as op_kernel/flash_attention_kernel.h does for a 16-bit T) and
of AttentionLseMerge's (float32, docs/lse_merge.md). Where the running result of a query row is
kept between merges (its memory per element in brackets):

  two        -- accumulate="output" today: the op rounds its partial to T, the merge rounds the
                running result, kept in the output, to T again [T]
  one        -- the partial stays float32 (the op would write its accumulator unrounded), the
                merge rounds the running result to T once per partial [T]. The op merging into
                the running O / LSE itself before its Cast does the same float32 arithmetic, so
                this column is that design too.
  step       -- as one, with a step's partials merged in float32 and one rounding to T per ring
                step (the loop over a step ordered by query sub-chunk) [T]
  fixed16    -- T partials; the running result in int16 fixed point in units of M / 32767, M =
                max |V| of the head (|O| <= M: a row of O is a convex combination of rows of V) [2 B]
  fixed16row -- as fixed16 with a bound per row instead of M: the largest |partial| of the row so
                far, kept as one float32 per row beside the LSE [2 B + 4 B per row]; built since
                2026-12-01 as accumulate="int16" (AttentionLseMergeInt16, the ring's default)
  float32    -- accumulate="float32" today: T partials, a float32 running result, one rounding
                to T at the end [4 B]

Each result is checked by the 2x-naive rule (acl_fa.reference.accuracy.check_accuracy against the float64
reference) on the parallel tests' cases, on q = k = v (every row dominated by its own key) and on
random data with one large V row that no query attends to; printed: the largest error /
tolerance over the seeds per design (<= 1 passes). --device also runs the simulated devices'
ring in its three modes on seed 0 ("output" against two, "float32" against float32, "int16"
against fixed16row) and prints how many elements differ from the emulation.

    python bench/ring_rounding.py [--seeds 8] [--block-rows 4] [--device]
"""
from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np

from acl_fa import parallel
from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
from acl_fa.reference.attention import attention_reference

F32 = np.float32


def forward_partial(q, k, v, diag: bool, scale: float, dt):
    """The op on one (query sub-chunk, key sub-block) pair, per head: (acc / l float32 [N, rows, D],
    lse float32 [N, rows]). q [N, rows, D], k / v [N, cols, D] (kv heads already repeated)."""
    s = np.einsum("nid,njd->nij", q.astype(F32), k.astype(F32), dtype=F32) * F32(scale)
    if diag:  # a diagonal block: query and key sub-blocks share bounds
        s = np.where(np.triu(np.ones(s.shape[1:], bool), 1), F32(-np.inf), s)
    m = s.max(axis=2, keepdims=True)
    p = np.exp(s - m, dtype=F32)
    l = p.sum(axis=2, keepdims=True, dtype=F32)
    pv = np.einsum("nij,njd->nid", p.astype(dt).astype(F32), v.astype(F32), dtype=F32)
    return pv / l, (m + np.log(l))[..., 0].astype(F32)


def merge(out_a, lse_a, out_b, lse_b):
    """AttentionLseMerge's float32 arithmetic (before the result's rounding)."""
    m = np.maximum(np.maximum(lse_a, lse_b), F32(-np.finfo(F32).max))
    wa, wb = np.exp(lse_a - m, dtype=F32), np.exp(lse_b - m, dtype=F32)
    total = np.maximum(wa + wb, F32(np.finfo(F32).tiny))
    out = (wa[..., None] * out_a.astype(F32) + wb[..., None] * out_b.astype(F32)) / total[..., None]
    return out.astype(F32), (m + np.log(wa + wb)).astype(F32)


def ring_order(seq: int, ranks: int, causal: bool) -> list:
    """[(query rows (a0, a1), [(key rows (k0, k1), diag), ...] in merge order)] over every rank's
    query sub-chunks, as parallel._Rank._ring calls and merges them."""
    chunks = parallel.zigzag_chunks(seq, ranks, causal)
    pieces = parallel.sub_blocks([[b - a for a, b in rr] for rr in chunks], parallel.BLOCK_ROWS)
    order = []
    for r in range(ranks):
        per_sub: dict = {}
        units = parallel.ring_units(pieces, r)
        for t in range(ranks):
            src = (r - t) % ranks
            for unit in units:
                j, i = unit
                k0 = chunks[src][j][0] + pieces[src][j][i][0]
                k1 = chunks[src][j][0] + pieces[src][j][i][1]
                for qi, a, diag in parallel.ring_calls(r, t, ranks, causal, unit, pieces):
                    per_sub.setdefault((qi, a), []).append(((k0, k1), diag, t))
        for (qi, a), keys in per_sub.items():
            base = chunks[r][qi][0]
            order.append(((base + pieces[r][qi][a][0], base + pieces[r][qi][a][1]), [x[:2] for x in keys],
                          [x[2] for x in keys]))
    return order


def fixed_scale(v):
    """M per (batch, kv head): max |V| over the sequence, an upper bound of |O| for every query row
    of that head (a row of O is a convex combination of rows of V). A ring would agree on it with
    one HcclAllReduce (max) before the first step."""
    return np.maximum(np.abs(v.astype(F32)).max(axis=(2, 3)), F32(np.finfo(F32).tiny))


def merge_sequence(partials, steps, design: str, dt, m16=None):
    """One query sub-chunk's result (out T, lse) from its float32 partials [(out, lse), ...] in
    merge order, `steps` the ring step of each, as `design` stores the running result."""
    run_o = run_l = row_bound = row_scale = None
    count = len(partials)
    for idx, (o, l) in enumerate(partials):
        last = idx == count - 1
        step_ends = last or steps[idx + 1] != steps[idx]
        if design in ("two", "float32", "fixed16", "fixed16row"):
            o = o.astype(dt)  # the forward op writes its partial in T
        if design == "fixed16row":  # the row's bound: the largest |partial| of the row so far
            top = np.abs(o.astype(F32)).max(axis=-1, keepdims=True)
            row_bound = top if run_o is None else np.maximum(row_bound, top)
        if run_o is None:  # the first partial: the op's own output (in the output itself for two / one)
            run_o, run_l = o.astype(F32), l
        else:
            unit = {"fixed16": m16, "fixed16row": row_scale}.get(design)
            prev = run_o if unit is None else run_o.astype(F32) * (unit / F32(32767))
            run_o, run_l = merge(prev, run_l, o, l)
        if design == "fixed16" and not last:  # int16 in units of M / 32767
            run_o = np.rint(run_o * (F32(32767) / m16)).astype(np.int16)
        elif design == "fixed16row" and not last:  # int16 in units of the row's bound / 32767
            row_scale = np.maximum(row_bound, F32(np.finfo(F32).tiny))
            run_o = np.rint(run_o * (F32(32767) / row_scale)).astype(np.int16)
        elif design in ("two", "one") or (design == "step" and step_ends) or last:
            run_o = run_o.astype(dt)
        # "float32" (and "step" within a step): the running result stays float32
    return run_o, run_l


def ring_emulated(q, k, v, causal: bool, ranks: int, design: str):
    """q [B, N, S, D], k / v [B, Nkv, S, D] in T: (out T, lse float32) of the emulated ring."""
    dt = q.dtype
    b, n, seq, d = q.shape
    group = n // k.shape[1]
    scale = 1.0 / np.sqrt(d)
    out = np.zeros(q.shape, dt)
    lse = np.full(q.shape[:3], -np.inf, F32)
    kr, vr = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    bound = fixed_scale(vr)
    for (a0, a1), keys, steps in ring_order(seq, ranks, causal):
        for bi in range(b):
            partials = [forward_partial(q[bi, :, a0:a1], kr[bi, :, k0:k1], vr[bi, :, k0:k1], diag, scale, dt)
                        for (k0, k1), diag in keys]
            out[bi, :, a0:a1], lse[bi, :, a0:a1] = merge_sequence(partials, steps, design, dt,
                                                                  bound[bi][:, None, None])
    return out, lse


# devices, causal, N, Nkv, S, dtype, data: the parallel tests' cases (random), then q = k = v (every
# row dominated by its own key) and "outlier" (random, one V row of 1000 that no query attends to:
# its key scores ~20 below the others)
CASES = [
    (2, False, 2, 2, 40, "float16", "random"), (4, True, 4, 2, 37, "float16", "random"),
    (3, False, 4, 4, 29, "float16", "random"), (8, True, 2, 1, 70, "bfloat16", "random"),
    (2, True, 2, 2, 33, "float16", "random"),
    (4, True, 2, 2, 64, "float16", "q=k=v"), (2, False, 2, 2, 64, "float16", "q=k=v"),
    (2, True, 2, 2, 64, "float16", "q=k=v"), (4, False, 4, 2, 61, "float16", "q=k=v"),
    (8, True, 2, 2, 64, "float16", "q=k=v"), (8, False, 2, 1, 100, "float16", "q=k=v"),
    (8, True, 2, 2, 128, "bfloat16", "q=k=v"), (4, False, 2, 2, 64, "float16", "outlier"),
]
DESIGNS = ("two", "one", "step", "fixed16", "fixed16row", "float32")


def case_inputs(n, nkv, s, dt, data, seed, d=32):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, n, s, d)).astype(dt)
    if data == "q=k=v":
        k = v = np.ascontiguousarray(q[:, ::n // nkv])
        return q, k, v
    k, v = (rng.standard_normal((2, nkv, s, d)).astype(np.float32) for _ in range(2))
    if data == "outlier":
        q[..., 0] = np.abs(q[..., 0]) + 2
        k[:, :, s // 2, 0] = -40
        v[:, :, s // 2] = 1000
    return q, k.astype(dt), v.astype(dt)


def ratio(out, lse, q, k, v, causal, dtype) -> float:
    """max error / tolerance of out by the 2x-naive rule (<= 1 passes)."""
    n, d = q.shape[1], q.shape[3]
    ref, ref_lse = attention_reference(q, k, v, causal=causal)
    naive = naive_same_precision(q, k, v, q.dtype, causal=causal, scale=1 / np.sqrt(d), layout="BNSD",
                                 heads=list(range(n)))
    acc = check_accuracy(out, lse, ref, ref_lse, naive, dtype, list(range(n)))
    return acc.max_error / acc.tolerance


def device_agreement(cases, seed=0) -> list:
    """The emulation against the simulated devices' ring (accumulate "output" = two, "float32",
    "int16" = fixed16row):
    per case and mode, the elements that differ, the largest difference and both error ratios."""
    rows = []
    for p, causal, n, nkv, s, dtype, data in cases:
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        q, k, v = case_inputs(n, nkv, s, dt, data, seed)
        for mode, design in (("output", "two"), ("float32", "float32"), ("int16", "fixed16row")):
            out, lse = parallel.ring_attention(q, k, v, devices=list(range(p)), causal=causal, accumulate=mode)
            emulated, emulated_lse = ring_emulated(q, k, v, causal, p, design)
            diff = np.abs(out.astype(np.float64) - emulated.astype(np.float64))
            rows.append((p, causal, s, dtype, data, mode, int((diff > 0).sum()), diff.size, float(diff.max()),
                         ratio(out, lse, q, k, v, causal, dtype), ratio(emulated, emulated_lse, q, k, v, causal, dtype)))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--block-rows", type=int, default=parallel.BLOCK_ROWS,
                        help="rows of a sub-block (several sub-blocks per chunk below the default)")
    parser.add_argument("--device", action="store_true",
                        help="also compare the emulation with the simulated devices' ring (seed 0)")
    args = parser.parse_args(argv)
    parallel.BLOCK_ROWS = args.block_rows
    d = 32
    worst = {name: 0.0 for name in DESIGNS}
    print(f"BLOCK_ROWS={parallel.BLOCK_ROWS}, B=2, D={d}, seeds 0..{args.seeds - 1}; max error / tolerance "
          "over the seeds (2x-naive rule: <= 1 passes)")
    print("| devices | causal | N/Nkv | S | dtype | data | partials per row (max) | " + " | ".join(DESIGNS) + " |")
    print("|---" * (7 + len(DESIGNS)) + "|")
    for p, causal, n, nkv, s, dtype, data in CASES:
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        ratios = {name: 0.0 for name in DESIGNS}
        for seed in range(args.seeds):
            q, k, v = case_inputs(n, nkv, s, dt, data, seed, d)
            for name in DESIGNS:
                ratios[name] = max(ratios[name], ratio(*ring_emulated(q, k, v, causal, p, name), q, k, v, causal, dtype))
        most = max(len(keys) for _, keys, _ in ring_order(s, p, causal))
        for name in DESIGNS:
            worst[name] = max(worst[name], ratios[name])
        print(f"| {p} | {causal} | {n}/{nkv} | {s} | {dtype} | {data} | {most} | "
              + " | ".join(f"{ratios[name]:.3f}" for name in DESIGNS) + " |", flush=True)
    print("worst: " + ", ".join(f"{name} {worst[name]:.3f}" for name in DESIGNS))
    if args.device:
        print("\nemulation vs the simulated devices' ring (seed 0):")
        print("| devices | causal | S | dtype | data | accumulate | elements that differ | max difference "
              "| error / tolerance: device | emulated |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p, causal, s, dtype, data, mode, differ, size, most, dev, emu in device_agreement(CASES):
            print(f"| {p} | {causal} | {s} | {dtype} | {data} | {mode} | {differ} / {size} | {most:.2e} | {dev:.3f} "
                  f"| {emu:.3f} |", flush=True)

if __name__ == "__main__":
    main()
