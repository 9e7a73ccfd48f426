"""Ulysses backward: sequence shards -> head shards -> FlashAttentionGrad -> back, one thread per
device (``ulysses_attention_backward``), the mirror of ulysses.py's forward.

Rank r holds rows [a_r, b_r) of Q, K, V, the forward's O and the upstream dO, every head; per
tensor and batch one HcclAlltoAllV turns them into head shards (rank r gets its N/P query heads
and its key/value heads -- kv_heads_of_rank -- over the whole sequence, layout BSND, the rows from
rank i at row a_i), the rank runs FlashAttentionGrad on its heads with its heads' rows of the
forward's LSE ([B, N/P, S]: the forward leaves the LSE head-sharded, so it needs no exchange), and
one more HcclAlltoAllV per tensor and batch sends the dQ, dK and dV rows back to the ranks that
hold them. When the key/value heads are replicated (P a multiple of Nkv: each goes to P/Nkv
ranks), every copy's dK and dV holds only its ranks' query heads' part; the host adds the copies
(float32, then rounded once to the input dtype).

Bytes rank r sends rank j != r (both rounds): B D itemsize (S_r (3 N/P + 2 Nkv_j) + S_j (N/P +
2 Nkv_r)) -- Q, O, dO and K, V of j's heads from r's rows; dQ, dK, dV of r's heads for j's rows
(ulysses_backward_link_bytes; docs/hccl.md), checked against the simulated HCCL's link counters
in tests/parallel/test_ulysses_backward.py. The rounds and the call do not overlap.

Device order: the compute stream waits for the event after the inbound all-to-alls; the comm
stream waits for the event after the FlashAttentionGrad call before the outbound ones; the host
waits once, at the end.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ops import backward
from ..ops.problem import check_like_forward
from ..runtime.device_array import DeviceArray
from ..runtime.errors import InvalidArgumentError
from ..spec.layouts import from_bnsd, to_bnsd
from ..spec.problem import as_array, make_problem
from .clique import TimedRank, device_clique, run_rank_threads, settle_and_close, split_bounds
from .ulysses import all_to_all_batches, kv_heads_of_rank, pair_bytes, send_layout, ulysses_devices
from .rank_agree import agree
from .ulysses import make_problem_of_sizes

__all__ = ["ulysses_attention_backward", "UlyssesBackwardReport", "ulysses_backward_link_bytes"]

_INBOUND = ("q", "k", "v", "out", "dout")


def ulysses_backward_link_bytes(seq: int, ranks: int, batch: int, num_heads: int, kv_per_rank: int, head_dim: int,
                                itemsize: int) -> list:
    """Analytic bytes rank r sends rank j != r in the backward's two rounds: [r][j]."""
    hq = num_heads // ranks
    # in: Q, O, dO and K, V -- r's rows of j's heads; out: dQ, dK, dV -- j's rows of r's heads
    return pair_bytes(seq, ranks, batch * head_dim * itemsize, 3 * hq + 2 * kv_per_rank, hq + 2 * kv_per_rank)


@dataclasses.dataclass
class UlyssesBackwardReport:
    """What one ulysses_attention_backward run did: the measured and analytic bytes per link, the
    op's FLOPs per rank (5 matmuls) and host wall seconds (simulator, not NPU time)."""

    devices: list
    link_bytes: list
    analytic_link_bytes: list
    flops: list
    wall_seconds: list
    kv_heads: list


class _GradRank(TimedRank):
    def __init__(self, comm, session, sends, lse, rows, kv_heads, problem):
        self.comm, self.session = comm, session
        self.r, self.p = comm.rank, comm.size
        self.sends = sends            # {role: host [B, P, S_r, heads of the destination, D]}
        self.lse = lse                # float32 [B, N/P, S]: this rank's heads, every row
        self.rows, self.kv_heads, self.problem = rows, kv_heads, problem
        self.grads: dict = {}
        self.flops, self.wall = 0, 0.0

    def _run(self):
        s, pr, p, r = self.session, self.problem, self.p, self.r
        seq, batch, d, dtype = pr.seq_q, pr.batch, pr.head_dim, pr.dtype
        hq, hkv = pr.num_heads // p, len(self.kv_heads[r])
        heads = {"q": hq, "k": hkv, "v": hkv, "out": hq, "dout": hq}
        mine = self.rows[r][1] - self.rows[r][0]
        comm_stream = s.stream()
        inbound, computed = s.event(timing=False), s.event(timing=False)
        held = []
        compute_stream = None
        try:
            sent = {role: s.upload(self.sends[role]) for role in _INBOUND}
            held += sent.values()
            gathered = {role: s.alloc(batch * seq * h * d * dtype.itemsize) for role, h in heads.items()}
            held += gathered.values()
            lse = s.upload(np.ascontiguousarray(self.lse, np.float32))
            held.append(lse)
            back = {role: s.alloc(batch * p * mine * heads[role[1:]] * d * dtype.itemsize)
                    for role in ("dq", "dk", "dv")}
            held += back.values()
            rows = self.rows
            for role, h in heads.items():
                block = mine * h * d
                # to rank j: its heads of my rows; from rank i: my heads of its rows, at row a_i (BSND).
                all_to_all_batches(self.comm, sent[role], gathered[role],
                                   lambda b, j, block=block: (block, (b * p + j) * block),
                                   lambda b, i, h=h: ((rows[i][1] - rows[i][0]) * h * d, (b * seq + rows[i][0]) * h * d),
                                   batch, dtype, comm_stream)
            inbound.record(comm_stream)
            views = {role: DeviceArray(s, (batch, seq, h, d), dtype, _buffer=gathered[role]) for role, h in heads.items()}
            lse_view = DeviceArray(s, (batch, hq, seq), np.dtype(np.float32), _buffer=lse)
            forward, *_ = make_problem(views["q"], views["k"], views["v"], causal=pr.causal, scale=pr.scale,
                                       layout="BSND")
            problem, *arrays = backward.make_backward_problem(forward, views["dout"], views["q"], views["k"],
                                                              views["v"], views["out"], lse_view, True)
            runner = backward.runner_for(s)
            with s.in_flight(), runner.lock:
                compute_stream = runner.stream
                compute_stream.wait(inbound)
                prepared = runner.prepare(problem, runner.bound_inputs(arrays))
                runner.launch(prepared, compute_stream)
                computed.record(compute_stream)
                comm_stream.wait(computed)
                for role in ("dq", "dk", "dv"):
                    h = heads[role[1:]]
                    block = mine * h * d
                    # to rank i: its rows of my heads; from rank j: my rows of its heads, as [B, P, S_r, h, D].
                    all_to_all_batches(self.comm, prepared.buffers[role], back[role],
                                       lambda b, i, h=h: ((rows[i][1] - rows[i][0]) * h * d,
                                                          (b * seq + rows[i][0]) * h * d),
                                       lambda b, j, block=block: (block, (b * p + j) * block), batch, dtype,
                                       comm_stream)
                comm_stream.synchronize()
                compute_stream.synchronize()
            self.grads = {role: back[role].to_numpy((batch, p, mine, heads[role[1:]], d), dtype)
                          for role in ("dq", "dk", "dv")}
            self.flops = problem.flops()
            for view in [*views.values(), lse_view]:
                view.buffer = None  # closed below, not through the view
        finally:
            settle_and_close((compute_stream, comm_stream), [*held, inbound, computed, comm_stream])


def ulysses_attention_backward(dout, q, k, v, out, lse, *, devices=None, causal=False, scale=None, layout="BNSD",
                               num_heads=None, num_kv_heads=None, backend=None, report=False):
    """(dq, dk, dv) of host arrays sharded over `devices` (default: every device) by Ulysses
    all-to-all, for out, lse = ulysses_attention(q, k, v, ...) (or flash_attention) with the same
    options; dq like q, dk and dv like k and v. With `report`, an UlyssesBackwardReport too."""
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                    num_kv_heads=num_kv_heads)
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"Ulysses shards one sequence: Sq={problem.seq_q} must equal Skv={problem.seq_kv}")
    dout, out, lse = (as_array(name, x) for name, x in (("dout", dout), ("out", out), ("lse", lse)))
    check_like_forward(q, dout, out, lse)
    if tuple(lse.shape) != tuple(problem.lse_shape):
        raise InvalidArgumentError(f"lse has shape {lse.shape}; it must be [B, N, S] = {list(problem.lse_shape)}")
    be, devices, kv_heads = ulysses_devices(problem, devices, backend)
    p = len(devices)
    n, nkv, d = problem.num_heads, problem.num_kv_heads, problem.head_dim
    qb, ob, gb = (to_bnsd(x, layout, n) for x in (q, out, dout))
    kb, vb = to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)
    rows = split_bounds(problem.seq_q, p)
    hq, hkv = n // p, len(kv_heads[0])
    kv_order = [h for heads in kv_heads for h in heads]  # destination-major
    sends = [{"q": send_layout(qb, a, b, p, hq), "out": send_layout(ob, a, b, p, hq),
              "dout": send_layout(gb, a, b, p, hq), "k": send_layout(kb[:, kv_order], a, b, p, hkv),
              "v": send_layout(vb[:, kv_order], a, b, p, hkv)} for a, b in rows]
    with device_clique(devices, be.name) as (sessions, comms):  # a new clique: its link counters start at zero
        ranks = [_GradRank(c, sess, sends[i], np.ascontiguousarray(lse[:, i * hq:(i + 1) * hq]), rows, kv_heads,
                           problem) for i, (c, sess) in enumerate(zip(comms, sessions))]
        # one round, one call, one round back: they run to their end, then a Ctrl-C is raised
        run_rank_threads([rk.run for rk in ranks], "ulysses-grad-rank")
        batch = qb.shape[0]
        dq = np.empty(qb.shape, problem.dtype)
        dk32 = np.zeros(kb.shape, np.float32)
        dv32 = np.zeros(vb.shape, np.float32)
        for (a, b), rk in zip(rows, ranks):
            # [B, P (source j), S_r, h, D] -> heads of every source, rows a:b
            dq[:, :, a:b] = rk.grads["dq"].transpose(0, 1, 3, 2, 4).reshape(batch, n, b - a, d)
            for j in range(p):
                for slot, head in enumerate(kv_heads[j]):  # replicated copies add up
                    dk32[:, head, a:b] += rk.grads["dk"][:, j, :, slot].astype(np.float32)
                    dv32[:, head, a:b] += rk.grads["dv"][:, j, :, slot].astype(np.float32)
        result = tuple(np.ascontiguousarray(from_bnsd(x.astype(problem.dtype), layout)) for x in (dq, dk32, dv32))
        if not report:
            return result
        measured = [[comms[r].link_stats(r, j)["bytes"] if j != r and be.name == "sim" else 0 for j in range(p)]
                    for r in range(p)]
        analytic = ulysses_backward_link_bytes(problem.seq_q, p, problem.batch, n, hkv, d, problem.dtype.itemsize)
        return (*result, UlyssesBackwardReport(devices, measured, analytic, [rk.flops for rk in ranks],
                                               [rk.wall for rk in ranks], kv_heads))


def rank_ulysses_attention_backward(ctx, dout, q, k, v, out, lse, *, causal=False, scale=None, layout="BNSD",
                                    num_heads=None, num_kv_heads=None):
    """One rank of the Ulysses backward over its clique (RankContext.ulysses_attention_backward):
    dout, q, k, v, out are the rank's rows of the contiguous split, every head; lse is what the
    rank's RankContext.ulysses_attention returned (float32 [B, N/P, S]: its heads, every row).
    Returns the rank's rows of (dq, dk, dv), like q, k, v. With replicated key/value heads (P a
    multiple of Nkv) the copies' dK, dV are added on the rank that holds the rows (float32)."""

    local, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                  num_kv_heads=num_kv_heads)
    dout, out, lse = (as_array(name, x) for name, x in (("dout", dout), ("out", out), ("lse", lse)))
    check_like_forward(q, dout, out, np.asarray(lse))
    p, r = ctx.size, ctx.rank
    shared = dict(B=local.batch, N=local.num_heads, Nkv=local.num_kv_heads, D=local.head_dim, dtype=local.dtype.name,
                  layout=layout, causal=local.causal, scale=float(local.scale))
    counts = [row["rows"] for row in agree(ctx.comm, "ulysses_attention_backward", shared, {"rows": local.seq_q})]
    seq = sum(counts)
    rows = split_bounds(seq, p)
    if counts != [b - a for a, b in rows]:
        raise InvalidArgumentError(f"the ranks hold {counts} rows: Ulysses under a launcher needs the contiguous split "
                                   f"of S={seq} over {p} ranks, {[b - a for a, b in rows]}")
    n, nkv, d = local.num_heads, local.num_kv_heads, local.head_dim
    kv_heads = kv_heads_of_rank(n, nkv, p)
    hq, hkv = n // p, len(kv_heads[0])
    if tuple(np.shape(lse)) != (local.batch, hq, seq):
        raise InvalidArgumentError(f"lse has shape {np.shape(lse)}; under a launcher it must be this rank's heads over "
                                   f"the whole sequence, [B, N/P, S] = {[local.batch, hq, seq]}")
    if ctx.session.backend.name == "sim":
        ctx.comm.reset_link_stats()  # this rank's links count the all-to-alls alone
    mine = counts[r]
    kv_order = [h for heads in kv_heads for h in heads]
    qb, ob, gb = (to_bnsd(x, layout, n) for x in (q, out, dout))
    kb, vb = to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)
    sends = {"q": send_layout(qb, 0, mine, p, hq), "out": send_layout(ob, 0, mine, p, hq),
             "dout": send_layout(gb, 0, mine, p, hq), "k": send_layout(kb[:, kv_order], 0, mine, p, hkv),
             "v": send_layout(vb[:, kv_order], 0, mine, p, hkv)}
    rank = _GradRank(ctx.comm, ctx.session, sends, np.asarray(lse, np.float32), rows, kv_heads,
                     make_problem_of_sizes(local, seq))
    rank.run()
    batch = qb.shape[0]
    dq = rank.grads["dq"].transpose(0, 1, 3, 2, 4).reshape(batch, n, mine, d)
    dk32, dv32 = np.zeros(kb.shape, np.float32), np.zeros(vb.shape, np.float32)
    for j in range(p):
        for slot, head in enumerate(kv_heads[j]):  # replicated copies add up
            dk32[:, head] += rank.grads["dk"][:, j, :, slot].astype(np.float32)
            dv32[:, head] += rank.grads["dv"][:, j, :, slot].astype(np.float32)
    return tuple(np.ascontiguousarray(from_bnsd(x.astype(local.dtype), layout)) for x in (dq, dk32, dv32))
