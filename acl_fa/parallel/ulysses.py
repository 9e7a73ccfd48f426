"""Ulysses (all-to-all) sequence parallelism: sequence shards -> head shards -> FlashAttention ->
back, one thread per device.

``ulysses_attention(q, k, v, devices=[0, 1, ...])`` shards the sequence of host arrays over the P
devices (rank r holds rows [a_r, b_r) of Q, K, V, every head), then per tensor and batch one
HcclAlltoAllV turns the sequence shards into head shards (rank r gets heads
[r N/P, (r+1) N/P) for the whole sequence), each rank runs acl-fa's FlashAttention op on its heads
(layout BSND, so the rows received from rank i land contiguously at row a_i), and one more
HcclAlltoAllV per batch sends every rank's output rows back to the rank that holds them. The
result is read back from the sequence shards; the LSE is read from the head shards (the op writes
it per head, [B, N/P, S]); it is not re-sharded.

HcclAlltoAllV rather than HcclAlltoAll: S need not be a multiple of P, so the ranks' row counts
(and the blocks) differ by up to one row.

Heads: N must be divisible by P. Key/value heads (GQA): when Nkv is divisible by P each rank
gets Nkv/P of them; when P is divisible by Nkv instead, the N/P query heads of a rank all use one
key/value head, which is sent to that rank (each key/value head goes to P/Nkv ranks: replication,
so the all-to-all carries P/Nkv times the K/V bytes of a split); otherwise it is refused before
any device work.

Device order (aclrtStreamWaitEvent): the compute stream waits for the event recorded after the
inbound all-to-alls on the comm stream; the comm stream waits for the event recorded after the
FlashAttention call before the outbound all-to-all. The host waits once, at the end.

Send layout: the host lays out each rank's sequence shard on upload as the all-to-all needs it,
per batch [P (destination), S_r, heads of that destination, D], so every block is contiguous.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ops import forward as attention
from ..spec.problem import make_problem
from . import hccl
from ..runtime.errors import InvalidArgumentError
from ..spec.layouts import from_bnsd, to_bnsd
from ..runtime.loader import get_backend
from .clique import (
    TimedRank, check_devices, chip_peak_flops, device_clique, run_rank_threads, settle_and_close, split_bounds)
from ..runtime.device_array import DeviceArray
from .rank_agree import agree
from ..spec.problem import problem_from_sizes

__all__ = ["ulysses_attention", "UlyssesReport", "kv_heads_of_rank", "ulysses_link_bytes", "all_to_all_batches",
           "send_layout", "pair_bytes"]


def kv_heads_of_rank(num_heads: int, num_kv_heads: int, ranks: int) -> list:
    """Per rank, the key/value head indices it receives (see the module docstring)."""
    if num_heads % ranks:
        raise InvalidArgumentError(f"Ulysses splits the heads over the devices: N={num_heads} query heads are not "
                                   f"divisible by {ranks} devices")
    if num_kv_heads % ranks == 0:
        per = num_kv_heads // ranks
        return [list(range(r * per, (r + 1) * per)) for r in range(ranks)]
    if ranks % num_kv_heads == 0:
        # rank r's query heads [r N/P, (r+1) N/P) lie in the group of key/value head r Nkv / P.
        return [[r * num_kv_heads // ranks] for r in range(ranks)]
    raise InvalidArgumentError(f"Ulysses cannot share Nkv={num_kv_heads} key/value heads among {ranks} devices: "
                               f"Nkv must be divisible by the device count (split) or divide it (replication)")


def ulysses_link_bytes(seq: int, ranks: int, batch: int, num_heads: int, kv_per_rank: int, head_dim: int,
                       itemsize: int) -> list:
    """Analytic bytes rank r sends to rank j != r: [r][j], both all-to-alls (Q, K, V in; O out)."""
    hq = num_heads // ranks
    # in: Q, K, V -- r's rows of j's heads; out: O -- j's rows of r's heads
    return pair_bytes(seq, ranks, batch * head_dim * itemsize, hq + 2 * kv_per_rank, hq)


def pair_bytes(seq: int, ranks: int, row_bytes: int, inbound_heads: int, outbound_heads: int) -> list:
    """[r][j] (j != r): row_bytes (S_r inbound_heads + S_j outbound_heads) for the contiguous split
    S_r of seq: what the two all-to-all rounds of Ulysses move from rank r to rank j."""
    rows = [b - a for a, b in split_bounds(seq, ranks)]
    return [[0 if j == r else row_bytes * (rows[r] * inbound_heads + rows[j] * outbound_heads) for j in range(ranks)]
            for r in range(ranks)]


@dataclasses.dataclass
class UlyssesReport:
    """What one ulysses_attention run did. Times: host wall seconds of the simulator (not NPU
    time); modeled seconds: the link model's communication per rank (its slowest outgoing link,
    links in parallel) and the compute at the chip's fp16 cube peak (a lower bound)."""

    devices: list
    causal: bool
    link_bytes: list              # [r][j]: bytes rank r sent to rank j (measured by the link counters)
    analytic_link_bytes: list     # [r][j]: ulysses_link_bytes
    flops: list                   # per rank
    modeled_comm_seconds: list    # per rank: both all-to-alls, slowest outgoing link
    modeled_compute_seconds: list
    wall_seconds: list
    link: dict
    kv_heads: list                # per rank: the key/value heads it received

    @property
    def balance(self) -> float:
        mean = sum(self.flops) / len(self.flops)
        return max(self.flops) / mean if mean else 1.0

    def modeled(self) -> dict:
        """Ulysses does not overlap: step time = communication + compute (slowest rank)."""
        comm, compute = max(self.modeled_comm_seconds), max(self.modeled_compute_seconds)
        return {"comm_seconds": comm, "compute_seconds": compute, "step_seconds": comm + compute,
                "comm_fraction": comm / (comm + compute) if comm + compute else 0.0}


def all_to_all_batches(comm, send, recv, send_block, recv_block, batch: int, dtype, stream):
    """One HcclAlltoAllV per batch: send_block(b, j) / recv_block(b, i) = (count, displ) in elements."""
    p = comm.size
    for b in range(batch):
        sc, sd = zip(*[send_block(b, j) for j in range(p)])
        rc, rd = zip(*[recv_block(b, i) for i in range(p)])
        comm.all_to_all_v(send, list(sc), list(sd), recv, list(rc), list(rd), dtype, stream)


def send_layout(x, a: int, b: int, ranks: int, heads_per_dest: int):
    """[B, H_all, S, D] (heads in destination order) rows a:b -> [B, P, S_r, heads of the
    destination, D]: every destination's block contiguous, as HcclAlltoAllV sends it."""
    shard = x[:, :, a:b]
    return np.ascontiguousarray(shard.reshape(shard.shape[0], ranks, heads_per_dest, b - a, shard.shape[3])
                                .transpose(0, 1, 3, 2, 4))


class _UlyssesRank(TimedRank):
    def __init__(self, comm, session, shards, rows, kv_heads, problem, peak):
        self.comm, self.session = comm, session
        self.r, self.p = comm.rank, comm.size
        self.shards = shards          # {"q"|"k"|"v": host [B, P, S_r, H, D]}
        self.rows = rows              # [(a_i, b_i)] of every rank
        self.kv_heads = kv_heads
        self.problem, self.peak = problem, peak
        self.out = self.lse = None
        self.flops, self.wall = 0, 0.0
        self.comm_seconds = 0.0

    def _all_to_all(self, send, recv, send_block, recv_block, stream):
        all_to_all_batches(self.comm, send, recv, send_block, recv_block, self.problem.batch, self.problem.dtype,
                           stream)

    def _run(self):
        s, pr, p, r = self.session, self.problem, self.p, self.r
        seq, batch, d = pr.seq_q, pr.batch, pr.head_dim
        hq, hkv = pr.num_heads // p, len(self.kv_heads[r])
        a_r, b_r = self.rows[r]
        mine = b_r - a_r
        comm_stream = s.stream()
        runner = attention.runner_for(s)
        inbound, computed = s.event(timing=False), s.event(timing=False)
        sent = {name: s.upload(self.shards[name]) for name in ("q", "k", "v")}
        heads = {"q": hq, "k": hkv, "v": hkv}
        gathered = {name: s.alloc(batch * seq * h * d * pr.dtype.itemsize) for name, h in heads.items()}
        back = s.alloc(batch * p * mine * hq * d * pr.dtype.itemsize)
        compute_stream = None
        try:
            for name, h in heads.items():
                block = mine * h * d
                # to rank j: its heads of my rows; from rank i: my heads of its rows, at row a_i (BSND).
                self._all_to_all(sent[name], gathered[name],
                                 lambda b, j, block=block: (block, (b * p + j) * block),
                                 lambda b, i, h=h: ((self.rows[i][1] - self.rows[i][0]) * h * d,
                                                    (b * seq + self.rows[i][0]) * h * d), comm_stream)
            inbound.record(comm_stream)
            views = {name: DeviceArray(s, (batch, seq, h, d), pr.dtype, _buffer=gathered[name])
                     for name, h in heads.items()}
            problem, *_ = make_problem(views["q"], views["k"], views["v"], causal=pr.causal,
                                                 scale=pr.scale, layout="BSND")
            with s.in_flight(), runner.lock:
                compute_stream = runner.stream
                compute_stream.wait(inbound)
                prepared = runner.prepare(problem, runner.bound_inputs((views["q"], views["k"], views["v"])))
                runner.launch(prepared, compute_stream)
                computed.record(compute_stream)
                comm_stream.wait(computed)
                out = prepared.buffers["out"]  # [B, S, N/P, D]
                block = mine * hq * d
                # to rank i: its rows of my heads; from rank j: my rows of its heads, as [B, P, S_r, N/P, D].
                self._all_to_all(out, back,
                                 lambda b, i: ((self.rows[i][1] - self.rows[i][0]) * hq * d,
                                               (b * seq + self.rows[i][0]) * hq * d),
                                 lambda b, j: (block, (b * p + j) * block), comm_stream)
                comm_stream.synchronize()
                compute_stream.synchronize()
                self.lse = prepared.read("lse")  # [B, N/P, S]
            self.out = back.to_numpy((batch, p, mine, hq, d), pr.dtype)
            self.flops = 4 * batch * hq * d * problem.visible_pairs()
            for view in views.values():
                view.buffer = None  # closed below, not through the view
        finally:
            settle_and_close((compute_stream, comm_stream),
                             [*sent.values(), *gathered.values(), back, inbound, computed, comm_stream])


def ulysses_devices(problem, devices, backend) -> tuple:
    """(backend with HCCL loaded, device list, kv_heads_of_rank) of Ulysses over `devices` for
    `problem`, checked before any device work: one sequence (Sq = Skv), heads that split, S >= P."""
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"Ulysses shards one sequence: Sq={problem.seq_q} must equal Skv={problem.seq_kv}")
    be = hccl.use_hccl(get_backend(backend))
    devices = check_devices(devices, be)
    p = len(devices)
    kv_heads = kv_heads_of_rank(problem.num_heads, problem.num_kv_heads, p)
    if problem.seq_q < p:
        raise InvalidArgumentError(f"S={problem.seq_q} cannot be split over {p} devices: needs S >= P = {p}")
    return be, devices, kv_heads


def ulysses_attention(q, k, v, *, devices=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                      num_kv_heads=None, backend=None, report=False):
    """FlashAttention of host arrays sharded over `devices` (default: every device) by Ulysses
    all-to-all. Returns (out like q, lse float32 [B, N, S]), and an UlyssesReport when `report`."""
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout,
                                              num_heads=num_heads, num_kv_heads=num_kv_heads)
    be, devices, kv_heads = ulysses_devices(problem, devices, backend)
    p = len(devices)
    layout, n, d = problem.layout, problem.num_heads, problem.head_dim
    qb = to_bnsd(q, layout, n)
    kb, vb = to_bnsd(k, layout, problem.num_kv_heads), to_bnsd(v, layout, problem.num_kv_heads)
    rows = split_bounds(problem.seq_q, p)
    hq = n // p
    kv_order = [h for heads in kv_heads for h in heads]  # destination-major

    shards = [{"q": send_layout(qb, a, b, p, hq), "k": send_layout(kb[:, kv_order], a, b, p, len(kv_heads[0])),
               "v": send_layout(vb[:, kv_order], a, b, p, len(kv_heads[0]))} for a, b in rows]
    with device_clique(devices, be.name) as (sessions, comms):  # a new clique: its link counters start at zero
        peak = chip_peak_flops(be)
        ranks = [_UlyssesRank(c, sess, shards[i], rows, kv_heads, problem, peak)
                 for i, (c, sess) in enumerate(zip(comms, sessions))]
        # Ctrl-C: the ranks' one exchange round, call and return round run to their end (a rank
        # that left a collective would hang its peers), then the KeyboardInterrupt is raised.
        run_rank_threads([rk.run for rk in ranks], "ulysses-rank")
        out = np.empty(qb.shape, problem.dtype)
        lse = np.empty(qb.shape[:3], np.float32)
        for r, ((a, b), rk) in enumerate(zip(rows, ranks)):
            # [B, P (source j), S_r, N/P, D] -> [B, N, S_r, D]
            out[:, :, a:b] = rk.out.transpose(0, 1, 3, 2, 4).reshape(qb.shape[0], n, b - a, d)
            lse[:, r * hq:(r + 1) * hq] = rk.lse
        result = (np.ascontiguousarray(from_bnsd(out, layout)), lse)
        if not report:
            return result
        return (*result, _report(be, devices, comms, ranks, rows, problem, kv_heads, peak))


def _report(be, devices, comms, ranks, rows, problem, kv_heads, peak) -> UlyssesReport:
    p = len(devices)
    link = hccl.link_model(devices[0], devices[1 % p], be) if be.name == "sim" and p > 1 else {}
    measured = [[0] * p for _ in range(p)]
    modeled = [0.0] * p
    if be.name == "sim":
        for r in range(p):
            for j in range(p):
                if j != r:
                    stats = comms[r].link_stats(r, j)
                    measured[r][j] = stats["bytes"]
                    modeled[r] = max(modeled[r], stats["modeled_seconds"])
    analytic = ulysses_link_bytes(problem.seq_q, p, problem.batch, problem.num_heads, len(kv_heads[0]),
                                  problem.head_dim, problem.dtype.itemsize)
    return UlyssesReport(devices, problem.causal, measured, analytic, [rk.flops for rk in ranks], modeled,
                         [rk.flops / peak if peak else 0.0 for rk in ranks], [rk.wall for rk in ranks], link,
                         kv_heads)


def rank_ulysses_attention(ctx, q, k, v, *, causal=False, scale=None, layout="BNSD", num_heads=None,
                           num_kv_heads=None):
    """One rank of Ulysses over its clique (RankContext.ulysses_attention): q, k, v are the rank's
    rows [a_r, b_r) of split_bounds(S, P) -- the contiguous split -- every head. Every rank calls it
    together; the ranks' row counts are all-gathered and must be the split of their sum. Returns
    (out rows like q, lse float32 [B, N/P, S]: this rank's heads over the whole sequence)."""

    local, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                  num_kv_heads=num_kv_heads)
    p, r = ctx.size, ctx.rank
    shared = dict(B=local.batch, N=local.num_heads, Nkv=local.num_kv_heads, D=local.head_dim, dtype=local.dtype.name,
                  layout=layout, causal=local.causal, scale=float(local.scale))
    counts = [row["rows"] for row in agree(ctx.comm, "ulysses_attention", shared, {"rows": local.seq_q})]
    if ctx.session.backend.name == "sim":
        ctx.comm.reset_link_stats()  # this rank's links count the all-to-alls alone (its agree sends are done)
    seq = sum(counts)
    rows = split_bounds(seq, p)
    if counts != [b - a for a, b in rows]:
        raise InvalidArgumentError(f"the ranks hold {counts} rows: Ulysses under a launcher needs the contiguous split "
                                   f"of S={seq} over {p} ranks, {[b - a for a, b in rows]}")
    kv_heads = kv_heads_of_rank(local.num_heads, local.num_kv_heads, p)
    n, nkv = local.num_heads, local.num_kv_heads
    problem = make_problem_of_sizes(local, seq)
    qb, kb, vb = to_bnsd(q, layout, n), to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)
    kv_order = [h for heads in kv_heads for h in heads]
    mine = counts[r]
    shards = {"q": send_layout(qb, 0, mine, p, n // p), "k": send_layout(kb[:, kv_order], 0, mine, p, len(kv_heads[0])),
              "v": send_layout(vb[:, kv_order], 0, mine, p, len(kv_heads[0]))}
    rank = _UlyssesRank(ctx.comm, ctx.session, shards, rows, kv_heads, problem, ctx.peak)
    rank.run()
    hq, d = n // p, local.head_dim
    out = rank.out.transpose(0, 1, 3, 2, 4).reshape(qb.shape[0], n, mine, d)  # [B, P (source), S_r, N/P, D]
    return np.ascontiguousarray(from_bnsd(out, layout)), rank.lse.reshape(qb.shape[0], hq, seq)


def make_problem_of_sizes(local, seq: int):
    """The whole sequence's Problem for a rank's `local` one (same heads, dtype, options; S = seq)."""

    dtype = "bfloat16" if local.dtype.name == "bfloat16" else local.dtype.name
    return problem_from_sizes(seq_q=seq, batch=local.batch, num_heads=local.num_heads,
                              num_kv_heads=local.num_kv_heads, head_dim=local.head_dim, dtype=dtype, layout="BNSD",
                              causal=local.causal, scale=local.scale)
