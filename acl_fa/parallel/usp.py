"""2-D sequence parallelism (USP: Ulysses inside a group, ring across groups), one thread per device.

P = U x R devices: rank r is member u = r mod U of Ulysses group g = r // U and member g of ring
u. The sequence is split over the R ring positions as the ring splits it (zigzag_chunks: chunks g
and 2R-1-g of 2R when causal), and each ring position's rows (its chunks concatenated) over the U
members of its group (contiguous, split_bounds). Then, per rank:

1. Ulysses, inside the group (its own HCCL clique of U ranks): per tensor and batch one
   HcclAlltoAllV turns the group's sequence shards into head shards: member u gets its N/U query
   heads and its key/value heads (kv_heads_of_rank over U) for all of the group's rows.
2. Ring, across the groups (a clique of the R ranks with the same u, which hold the same heads):
   RankContext.ring_attention on those rows -- exactly a ring over R devices of the N/U heads.
3. Ulysses back: one HcclAlltoAllV per batch returns every member's output rows.

So any P works for a head count N that U divides (U = P and R = 1 is Ulysses; U = 1 is the ring).
Between the three phases the rank's head shard passes through the host (read back, re-laid out,
uploaded): this module shows the plan is correct and what it exchanges, not an overlap of its
phases. The LSE stays head-sharded ([B, N/U, rows of the ring position]); the caller's result
gathers it.
"""
from __future__ import annotations

import threading
from typing import Optional

import numpy as np

from ..runtime.errors import InvalidArgumentError
from ..runtime.loader import get_backend
from ..spec.layouts import from_bnsd, to_bnsd
from ..spec.problem import make_problem
from . import hccl
from .clique import check_devices, run_ranks, split_bounds, zigzag_chunks
from .ulysses import all_to_all_batches, kv_heads_of_rank, send_layout
from ..api import Session
from .ring import RankContext

__all__ = ["usp_attention", "usp_groups", "default_ulysses_size"]


def default_ulysses_size(devices: int, num_heads: int, num_kv_heads: int) -> int:
    """The largest U dividing both P and N for which kv_heads_of_rank(N, Nkv, U) works."""
    for u in range(min(devices, num_heads), 0, -1):
        if devices % u == 0 and num_heads % u == 0 and (num_kv_heads % u == 0 or u % num_kv_heads == 0):
            return u
    return 1


def usp_groups(devices: int, ulysses: int) -> tuple:
    """(Ulysses groups, ring groups) as lists of rank lists: group g = ranks g U .. g U + U - 1;
    ring u = ranks u, u + U, ..."""
    rings = devices // ulysses
    return ([list(range(g * ulysses, (g + 1) * ulysses)) for g in range(rings)],
            [list(range(u, devices, ulysses)) for u in range(ulysses)])


class _UspRank:
    def __init__(self, rank, session, ucomm, rcomm, q, k, v, problem, ulysses, kv_heads, rows, local):
        self.rank, self.s, self.ucomm, self.rcomm = rank, session, ucomm, rcomm
        self.q, self.k, self.v = q, k, v  # this rank's rows, BNSD, every head
        self.problem, self.u_size, self.kv_heads = problem, ulysses, kv_heads
        self.rows, self.local = rows, local  # its ring position's (start, stop) chunks; members' local row bounds
        self.error: Optional[BaseException] = None
        self.failed_at = 0.0
        self.out = self.lse = None

    def run(self):
        import time

        try:
            self._run()
        except BaseException as exc:  # reported by the caller, which owns the threads
            self.error, self.failed_at = exc, time.monotonic()

    def _exchange(self, send_host, heads_per_dest, inbound: bool):
        """Inbound: [B, H_all (destination order), n_u, D] -> [B, L, h, D] (BSND, L = the group's
        rows); outbound: [B, L, h, D] (this rank's heads) -> [B, U (source), n_u, h, D]."""
        s, pr, u_size = self.s, self.problem, self.u_size
        batch, d, dtype = pr.batch, pr.head_dim, pr.dtype
        local = self.local
        total = local[-1][1]
        mine = local[self.ucomm.rank][1] - local[self.ucomm.rank][0]
        stream = s.stream()
        held = [stream]
        try:
            if inbound:
                a, b = local[self.ucomm.rank]
                sent = s.upload(send_layout(send_host, 0, b - a, u_size, heads_per_dest))
                recv = s.alloc(batch * total * heads_per_dest * d * dtype.itemsize)
                held += [sent, recv]
                block = mine * heads_per_dest * d
                all_to_all_batches(self.ucomm, sent, recv, lambda bb, j: (block, (bb * u_size + j) * block),
                                   lambda bb, i: ((local[i][1] - local[i][0]) * heads_per_dest * d,
                                                  (bb * total + local[i][0]) * heads_per_dest * d),
                                   batch, dtype, stream)
                stream.synchronize()
                return recv.to_numpy((batch, total, heads_per_dest, d), dtype)
            sent = s.upload(np.ascontiguousarray(send_host))
            recv = s.alloc(batch * u_size * mine * heads_per_dest * d * dtype.itemsize)
            held += [sent, recv]
            block = mine * heads_per_dest * d
            all_to_all_batches(self.ucomm, sent, recv,
                               lambda bb, i: ((local[i][1] - local[i][0]) * heads_per_dest * d,
                                              (bb * total + local[i][0]) * heads_per_dest * d),
                               lambda bb, j: (block, (bb * u_size + j) * block), batch, dtype, stream)
            stream.synchronize()
            return recv.to_numpy((batch, u_size, mine, heads_per_dest, d), dtype)
        finally:
            for x in reversed(held):
                x.close()

    def _run(self):

        pr, u_size = self.problem, self.u_size
        hq, hkv = pr.num_heads // u_size, len(self.kv_heads[0])
        kv_order = [h for heads in self.kv_heads for h in heads]
        q_h = self._exchange(self.q, hq, True)                       # [B, L, hq, D]
        k_h = self._exchange(self.k[:, kv_order], hkv, True)
        v_h = self._exchange(self.v[:, kv_order], hkv, True)
        ring = RankContext(self.s, self.rcomm)
        out, lse = ring.ring_attention(*(np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q_h, k_h, v_h)),
                                       causal=pr.causal, scale=pr.scale, layout="BNSD")  # [B, hq, L, D]
        back = self._exchange(np.ascontiguousarray(out.transpose(0, 2, 1, 3)), hq, False)  # [B, U, n_u, hq, D]
        self.out = back.transpose(0, 1, 3, 2, 4).reshape(pr.batch, pr.num_heads, back.shape[2], pr.head_dim)
        self.lse = lse  # [B, hq, L]: this member's heads over the group's rows


def usp_attention(q, k, v, *, devices=None, ulysses=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                  num_kv_heads=None, backend=None):
    """FlashAttention of host arrays over P = len(devices) devices by 2-D sequence parallelism:
    Ulysses groups of `ulysses` devices (default: default_ulysses_size) and a ring across the
    P / ulysses groups. Returns (out like q, lse float32 [B, N, S])."""
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                    num_kv_heads=num_kv_heads)
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"2-D sequence parallelism shards one sequence: Sq={problem.seq_q} must equal "
                                   f"Skv={problem.seq_kv}")
    be = hccl.use_hccl(get_backend(backend))
    devices = check_devices(devices, be)
    p, n, nkv, seq = len(devices), problem.num_heads, problem.num_kv_heads, problem.seq_q
    u_size = default_ulysses_size(p, n, nkv) if ulysses is None else ulysses
    if isinstance(u_size, bool) or not isinstance(u_size, int) or u_size < 1 or p % u_size:
        raise InvalidArgumentError(f"ulysses={u_size!r} must be a group size dividing the {p} devices")
    kv_heads = kv_heads_of_rank(n, nkv, u_size)  # names N / Nkv that the group size does not divide
    r_size = p // u_size
    chunks = zigzag_chunks(seq, r_size, causal)
    lengths = [sum(b - a for a, b in c) for c in chunks]
    if min(lengths) < u_size or seq < (2 * r_size if causal else r_size):
        raise InvalidArgumentError(f"S={seq} cannot be split over {r_size} ring positions of {u_size} devices each")
    qb, kb, vb = to_bnsd(q, layout, n), to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)

    def rows_of(x, g):  # the ring position's rows, concatenated (BNSD)
        return np.concatenate([x[:, :, a:b] for a, b in chunks[g]], axis=2)

    ugroups, rgroups = usp_groups(p, u_size)

    sessions, comms_u, comms_r = [], {}, {}
    try:
        sessions = [Session(device=d, backend=be.name) for d in devices]
        for group in ugroups:
            for r, c in zip(group, hccl.Communicator.init_all([sessions[i] for i in group])):
                comms_u[r] = c
        for group in rgroups:
            for r, c in zip(group, hccl.Communicator.init_all([sessions[i] for i in group])):
                comms_r[r] = c
        ranks = []
        for r in range(p):
            g, u = divmod(r, u_size)
            local = split_bounds(lengths[g], u_size)
            a, b = local[u]
            ranks.append(_UspRank(r, sessions[r], comms_u[r], comms_r[r], rows_of(qb, g)[:, :, a:b],
                                  rows_of(kb, g)[:, :, a:b], rows_of(vb, g)[:, :, a:b], problem, u_size, kv_heads,
                                  chunks[g], local))
        threads = [threading.Thread(target=rk.run, name=f"usp-rank-{i}") for i, rk in enumerate(ranks)]
        interrupt = run_ranks(threads)
        if interrupt is not None:
            raise interrupt
        failed = [rk for rk in ranks if rk.error is not None]
        if failed:
            raise min(failed, key=lambda rk: rk.failed_at).error
        out = np.empty(qb.shape, problem.dtype)
        lse = np.empty(qb.shape[:3], np.float32)
        for g in range(r_size):
            members = ranks[g * u_size:(g + 1) * u_size]
            group_out = np.concatenate([rk.out for rk in members], axis=2)           # [B, N, L, D]
            group_lse = np.concatenate([rk.lse for rk in members], axis=1)           # [B, N, L]
            at = 0
            for a, b in chunks[g]:
                out[:, :, a:b] = group_out[:, :, at:at + b - a]
                lse[:, :, a:b] = group_lse[:, :, at:at + b - a]
                at += b - a
        return np.ascontiguousarray(from_bnsd(out, layout)), lse
    finally:
        for c in [*comms_u.values(), *comms_r.values()]:
            c.close()
        for s in sessions:
            s.close()
