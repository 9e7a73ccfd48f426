"""Ring attention over simulated hosts: H "hosts" x G devices, ranks started by Open MPI's mpirun
from an HCCL rank table (issue 32, goal: 8 x 8 devices at S = 262,144, B1 N1 D64 causal, fp16).

The parent writes a rank table of H servers with G devices each (device ids 0 .. G-1 on every
server), starts one mpirun application context per server (its ranks' ACL_FA_SIM_HOST = that
server's id, so the simulated libhccl costs links between servers as RoCE and within as HCCS),
and each rank (this script with --worker) joins with RankContext.from_env
(HcclCommInitClusterInfo), runs ring attention on its zigzag rows of the seeded inputs (the same
inputs on every rank) and saves its output rows, LSE and report. The parent then checks the
output against a float64 reference computed in chunks: in every one of the 2P zigzag chunks, the
last `--check-rows` query rows (which see the most keys of their chunk) against all the keys they
see, by the 2x-naive rule (acl_fa.reference.accuracy); and every rank's peak device memory
against (Q + K + V + O) / P plus the ring's constant (parallel.MemoryBound).

    python bench/cluster_scale.py --hosts 8 --per-host 8 --seq 262144 --head-dim 64
    python bench/cluster_scale.py --hosts 2 --per-host 2 --seq 4096        # a quick one
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


GEN_ROWS = 4096  # rows drawn per seeded block: any rank draws its rows alone, every rank the same values


def _rows(tensor: int, a: int, b: int, head_dim: int, seed: int) -> np.ndarray:
    """Rows [a, b) of tensor 0 (Q), 1 (K) or 2 (V), [1, 1, b - a, D] fp16: block g of GEN_ROWS rows
    comes from its own generator seeded (seed, tensor, g), so no rank holds the whole sequence."""
    blocks = []
    for g in range(a // GEN_ROWS, (b - 1) // GEN_ROWS + 1):
        rows = np.random.default_rng([seed, tensor, g]).standard_normal((GEN_ROWS, head_dim), dtype=np.float32)
        lo, hi = max(a, g * GEN_ROWS) - g * GEN_ROWS, min(b, (g + 1) * GEN_ROWS) - g * GEN_ROWS
        blocks.append(rows[lo:hi].astype(np.float16))
    return np.concatenate(blocks)[None, None]


def _rank(ctx, out_dir: str, seq: int, head_dim: int, seed: int, start: float):
    """One rank's ring on its zigzag rows; its output rows, LSE and report saved under out_dir."""
    from acl_fa import parallel

    rows = parallel.zigzag_chunks(seq, ctx.size, True)[ctx.rank]
    shard = [np.ascontiguousarray(np.concatenate([_rows(t, a, b, head_dim, seed) for a, b in rows], axis=2))
             for t in range(3)]
    out, lse, rep = ctx.ring_attention(*shard, causal=True, report=True, accumulate="output")
    m = rep.memory_bound
    record = {"rank": ctx.rank, "device": ctx.device, "host": os.environ.get("ACL_FA_SIM_HOST", ""),
              "rows": rows, "device_bytes": rep.device_bytes, "shards": m.shards, "constant": m.constant,
              "rounding": m.rounding, "bound": m.bound, "flops": rep.flops, "wall": time.perf_counter() - start,
              "link_bytes_per_step": rep.link_bytes_per_step, "link": rep.link,
              "modeled_comm_seconds": rep.modeled_comm_seconds,
              "modeled_compute_seconds": rep.modeled_compute_seconds,
              "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    np.savez(os.path.join(out_dir, f"rank{ctx.rank}.npz"), out=out, lse=lse)
    with open(os.path.join(out_dir, f"rank{ctx.rank}.json"), "w") as f:
        json.dump(record, f)


def worker(out_dir: str, seq: int, head_dim: int, seed: int):
    """One process per rank: the rank from the launcher, the clique from RANK_TABLE_FILE."""
    from acl_fa import parallel

    start = time.perf_counter()
    with parallel.RankContext.from_env() as ctx:
        _rank(ctx, out_dir, seq, head_dim, seed, start)


def host_worker(out_dir: str, seq: int, head_dim: int, seed: int, per_host: int):
    """One process per host (the launcher's rank h is host h), one thread per device: ranks
    h G .. h G + G - 1 of the rank table, each on its device_id (RankContext.from_rank_table)."""
    import threading

    from acl_fa import parallel
    from acl_fa.parallel import launchers

    host = launchers.detect().rank
    table = os.environ["RANK_TABLE_FILE"]
    errors = []

    def run(rank):
        start = time.perf_counter()
        try:
            with parallel.RankContext.from_rank_table(table, rank) as ctx:
                _rank(ctx, out_dir, seq, head_dim, seed, start)
        except BaseException as exc:  # noqa: BLE001 -- reported below, the process fails
            errors.append(f"rank {rank}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(host * per_host + g,)) for g in range(per_host)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("\n".join(errors))


def check(out_dir: str, ranks: int, seq: int, head_dim: int, seed: int, check_rows: int):
    from acl_fa.reference.accuracy import check_accuracy, naive_same_precision
    from acl_fa.reference.attention import attention_reference

    q, k, v = (_rows(t, 0, seq, head_dim, seed) for t in range(3))
    scale = 1 / np.sqrt(head_dim)
    parts = {"ref": [], "ref_lse": [], "naive": [], "got": [], "got_lse": []}
    for r in range(ranks):
        shard = np.load(os.path.join(out_dir, f"rank{r}.npz"))
        rec = json.load(open(os.path.join(out_dir, f"rank{r}.json")))
        at = 0
        for a, b in rec["rows"]:
            lo = max(a, b - check_rows)  # the chunk's last rows: they see keys [0, b)
            args = (q[:, :, lo:b], k[:, :, :b], v[:, :, :b])
            ref, ref_lse = attention_reference(*args, causal=True, scale=scale, layout="BNSD")
            parts["ref"].append(ref)
            parts["ref_lse"].append(ref_lse)
            parts["naive"].append(naive_same_precision(*args, np.float16, causal=True, scale=scale, layout="BNSD",
                                                       heads=[0]))
            parts["got"].append(shard["out"][:, :, at + lo - a:at + b - a])
            parts["got_lse"].append(shard["lse"][:, :, at + lo - a:at + b - a])
            at += b - a
    joined = {key: np.concatenate(value, axis=2) for key, value in parts.items()}
    return check_accuracy(joined["got"], joined["got_lse"], joined["ref"], joined["ref_lse"], joined["naive"],
                          "float16", [0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--per-host", type=int, default=8)
    parser.add_argument("--seq", type=int, default=262144)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-rows", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument("--ranks-as", choices=["threads", "processes"], default="threads",
                        help="threads: one process per host, one thread per device (the 8 x 8 run: 64 Python "
                             "processes do not fit this host's memory); processes: one process per rank")
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--host-worker", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--check-only", metavar="DIR", help="check and summarize a run's saved ranks (its directory, "
                        "kept when the check of a run was interrupted) instead of running")
    args = parser.parse_args(argv)
    if args.check_only:
        return summarize(args.check_only, args, wall=None, threads=args.ranks_as == "threads")
    if args.worker:
        worker(args.worker, args.seq, args.head_dim, args.seed)
        return 0
    if args.host_worker:
        host_worker(args.host_worker, args.seq, args.head_dim, args.seed, args.per_host)
        return 0
    from acl_fa.parallel.rank_table import write_rank_table

    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("mpirun not found (apt-get install openmpi-bin)")
    out_dir = tempfile.mkdtemp(prefix="acl-fa-cluster-")
    table = os.path.join(out_dir, "rank_table.json")
    write_rank_table(table, [args.per_host] * args.hosts)
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe"]
    threads = args.ranks_as == "threads"
    for h in range(args.hosts):
        cmd += ([":"] if h else []) + ["-n", "1" if threads else str(args.per_host), "-x",
                                       f"ACL_FA_SIM_HOST=10.0.0.{h + 1}", "-x", f"RANK_TABLE_FILE={table}",
                                       sys.executable, os.path.abspath(__file__),
                                       "--host-worker" if threads else "--worker", out_dir, "--seq", str(args.seq),
                                       "--head-dim", str(args.head_dim), "--seed", str(args.seed),
                                       "--per-host", str(args.per_host)]
    env = dict(os.environ, ACL_FA_BACKEND="sim", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("HCCL_CONNECT_TIMEOUT", "1200")
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, timeout=args.timeout)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"mpirun exited with {proc.returncode} after {wall:.0f} s")
    code = summarize(out_dir, args, wall, threads)
    shutil.rmtree(out_dir, ignore_errors=True)
    return code


def summarize(out_dir: str, args, wall, threads: bool) -> int:
    """The check and the figures of the ranks saved under out_dir (printed); 0 when both hold."""
    from acl_fa.runtime.units import format_bytes

    ranks = args.hosts * args.per_host
    recs = [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(ranks)]
    check_start = time.monotonic()
    acc = check(out_dir, ranks, args.seq, args.head_dim, args.seed, args.check_rows)
    check_wall = time.monotonic() - check_start
    tensor = args.seq * args.head_dim * 2  # one of Q, K, V, O (B1 N1, fp16)
    worst = max(recs, key=lambda r: r["device_bytes"] - r["shards"])
    within = all(r["device_bytes"] <= r["bound"] for r in recs)
    kinds = sorted({(r["link"]["kind"]) for r in recs})
    inter = [r for r in recs if r["rank"] % args.per_host == args.per_host - 1]  # sends to the next host
    comm = max(sum(r["modeled_comm_seconds"]) for r in recs)
    compute = max(sum(r["modeled_compute_seconds"]) for r in recs)
    how = "one process per host, one thread per device" if threads else "one process per rank"
    print(f"{args.hosts} hosts x {args.per_host} devices = {ranks} ranks (mpirun, rank table; {how}), S={args.seq} "
          f"B1 N1 D{args.head_dim} causal fp16, accumulate=output; mpirun wall "
          f"{'(not measured here)' if wall is None else f'{wall:.0f} s'}")
    print(f"devices: {[r['device'] for r in recs[:args.per_host]]} on each of {sorted({r['host'] for r in recs})}")
    print(f"check ({2 * ranks} chunks x last {args.check_rows} rows, float64 reference, 2x-naive rule): "
          f"{'OK' if acc.ok else 'FAILED'}, max error {acc.max_error:.3e}, tolerance {acc.tolerance:.3e}, "
          f"LSE error {acc.lse_max_error:.1e} ({check_wall:.0f} s)")
    print(f"(Q+K+V+O)/P = {format_bytes(4 * tensor // ranks)}; peak device memory per rank: "
          f"max {format_bytes(max(r['device_bytes'] for r in recs))}, min {format_bytes(min(r['device_bytes'] for r in recs))}; "
          f"worst peak - shards = {format_bytes(worst['device_bytes'] - worst['shards'])} "
          f"(constant {format_bytes(worst['constant'])} + rounding {format_bytes(worst['rounding'])}); "
          f"every rank within its bound: {'yes' if within else 'NO'}")
    print(f"bytes to the next rank per step (rank 0): {recs[0]['link_bytes_per_step'][0]} x "
          f"{len(recs[0]['link_bytes_per_step']) - 1}, then {recs[0]['link_bytes_per_step'][-1]}")
    print(f"links seen by rank reports: {kinds}; modeled per rank (max over ranks, sums over steps): "
          f"communication {comm * 1e6:.1f} us, compute {compute * 1e6:.1f} us; "
          f"host-boundary ranks: {len(inter)}")
    print(f"balance (max/mean FLOPs): {max(r['flops'] for r in recs) / (sum(r['flops'] for r in recs) / ranks):.4f}; "
          f"rank wall s: max {max(r['wall'] for r in recs):.0f}; peak host RSS per process: "
          f"max {max(r['max_rss_kib'] for r in recs) / 1024:.0f} MiB")
    return 0 if acc.ok and within else 1


if __name__ == "__main__":
    sys.exit(main())
