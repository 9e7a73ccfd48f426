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
gathers it. With R = 1 (U = P) the "ring" is the single-device op on the rank's head shard.

Backward (``usp_attention_backward``): the same plan for the gradients. Ulysses in: Q, O, dO (N/U
heads) and K, V (the member's key/value heads) of the group's rows; the ring backward across the
groups (RankContext.ring_attention_backward, float32 dK/dV accumulators around the ring) with the
member's heads' rows of the forward's LSE (head-sharded already: no exchange); Ulysses out: dQ, dK,
dV home. Replicated key/value heads (U a multiple of Nkv) have their copies' dK, dV added on the
host in float32. The all-to-all bytes of group g (L_g rows) are the Ulysses backward's over U
ranks: ulysses_backward_link_bytes(L_g, U, ...) (docs/hccl.md), read from the group clique's link
counters (it carries the all-to-alls alone; the ring has its own clique).

Under a launcher (``rank_usp_attention`` / ``rank_usp_attention_backward``: one process per
rank, a RankContext over all P) the group and ring cliques are made from the rank's clique: the
first member of each group and of each ring makes root info (HcclGetRootInfo), the ranks
all-gather it over the P-rank clique, and each rank joins its two cliques with
HcclCommInitRootInfo -- first its group's, then its ring's, in the same order on every rank.
"""
from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from ..ops.backward import flash_attention_backward, make_backward_problem
from ..ops.forward import flash_attention
from ..runtime.errors import InvalidArgumentError
from ..runtime.ffi import ffi
from ..runtime.loader import get_backend
from ..spec.layouts import from_bnsd, to_bnsd
from ..ops.problem import check_like_forward
from ..spec.problem import as_array, make_problem
from . import hccl
from .clique import check_devices, run_rank_threads, settle_and_close, split_bounds, zigzag_chunks
from .rank_agree import agree, all_gather_host
from .ulysses import all_to_all_batches, kv_heads_of_rank, make_problem_of_sizes, send_layout, ulysses_link_bytes
from .ulysses_backward import ulysses_backward_link_bytes
from ..api import Session
from .ring import RankContext, shard_rows

__all__ = ["usp_attention", "usp_attention_backward", "usp_groups", "default_ulysses_size", "UspBackwardReport",
           "usp_plan", "rank_usp_attention", "rank_usp_attention_backward", "usp_cliques"]


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


@dataclasses.dataclass(frozen=True)
class UspPlan:
    """The 2-D plan of S rows over P = U x R devices: `chunks[g]` the zigzag ranges of ring position
    g, `lengths[g]` its row count L_g, `local[g]` its members' (start, stop) within those rows."""

    ulysses: int
    rings: int
    kv_heads: list   # per member u: its key/value heads (kv_heads_of_rank over U)
    chunks: list
    lengths: list
    local: list

    def ranges(self, rank: int) -> list:
        """Rank `rank`'s rows as (start, stop) ranges of the sequence, in order: its member's part
        [a, b) of its ring position's rows (the zigzag chunks concatenated)."""
        g, u = divmod(rank, self.ulysses)
        a, b = self.local[g][u]
        out, at = [], 0
        for c0, c1 in self.chunks[g]:
            lo, hi = max(a, at), min(b, at + c1 - c0)
            if lo < hi:
                out.append((c0 + lo - at, c0 + hi - at))
            at += c1 - c0
        return out

    def rows_of(self, x, rank: int):
        """Rank `rank`'s rows of x [B, H, S, ...] (ranges(rank), concatenated)."""
        return shard_rows(x, self.ranges(rank))


def usp_plan(seq: int, devices: int, num_heads: int, num_kv_heads: int, ulysses, causal: bool) -> UspPlan:
    """The plan for `ulysses` (None: default_ulysses_size), checked before any device work."""
    p = devices
    u_size = default_ulysses_size(p, num_heads, num_kv_heads) if ulysses is None else ulysses
    if isinstance(u_size, bool) or not isinstance(u_size, int) or u_size < 1 or p % u_size:
        raise InvalidArgumentError(f"ulysses={u_size!r} must be a group size dividing the {p} devices")
    kv_heads = kv_heads_of_rank(num_heads, num_kv_heads, u_size)  # names N / Nkv that the group size does not divide
    r_size = p // u_size
    chunks = zigzag_chunks(seq, r_size, causal)
    lengths = [sum(b - a for a, b in c) for c in chunks]
    if min(lengths) < u_size or seq < (2 * r_size if causal else r_size):
        raise InvalidArgumentError(f"S={seq} cannot be split over {r_size} ring positions of {u_size} devices each")
    return UspPlan(u_size, r_size, kv_heads, chunks, lengths, [split_bounds(n, u_size) for n in lengths])


class _UspRank:
    """One rank of the 2-D plan: rank r = g U + u on its session with its group clique `ucomm`
    (rank u of U) and its ring clique `rcomm` (rank g of R)."""

    def __init__(self, session, ucomm, rcomm, problem, plan: UspPlan):
        self.s, self.ucomm, self.rcomm = session, ucomm, rcomm
        self.problem, self.u_size, self.kv_heads = problem, plan.ulysses, plan.kv_heads
        self.local = plan.local[rcomm.rank]  # its group's members' row bounds within the group's rows
        self.link_bytes: list = []           # after a call: bytes this member sent each member (all-to-alls)

    def _exchange(self, send_host, heads_per_dest, inbound: bool):
        """Inbound: [B, H_all (destination order), n_u, D] -> [B, L, h, D] (BSND, L = the group's
        rows); outbound: [B, L, h, D] (this rank's heads) -> [B, U (source), n_u, h, D]."""
        s, pr, u_size = self.s, self.problem, self.u_size
        batch, d, dtype = pr.batch, pr.head_dim, pr.dtype
        local = self.local
        total = local[-1][1]
        mine = local[self.ucomm.rank][1] - local[self.ucomm.rank][0]
        stream = s.stream()
        held = []
        try:
            block = mine * heads_per_dest * d
            own = lambda bb, j: (block, (bb * u_size + j) * block)  # noqa: E731 -- [B, U, n_u, h, D]
            rows = lambda bb, i: ((local[i][1] - local[i][0]) * heads_per_dest * d,  # noqa: E731 -- [B, L, h, D]
                                  (bb * total + local[i][0]) * heads_per_dest * d)
            if inbound:
                sent = s.upload(send_layout(send_host, 0, mine, u_size, heads_per_dest))
                recv = s.alloc(batch * total * heads_per_dest * d * dtype.itemsize)
                held += [recv, sent]
                all_to_all_batches(self.ucomm, sent, recv, own, rows, batch, dtype, stream)
                stream.synchronize()
                return recv.to_numpy((batch, total, heads_per_dest, d), dtype)
            sent = s.upload(np.ascontiguousarray(send_host))
            recv = s.alloc(batch * u_size * mine * heads_per_dest * d * dtype.itemsize)
            held += [recv, sent]
            all_to_all_batches(self.ucomm, sent, recv, rows, own, batch, dtype, stream)
            stream.synchronize()
            return recv.to_numpy((batch, u_size, mine, heads_per_dest, d), dtype)
        finally:
            settle_and_close((stream,), [*held, stream])

    def _heads(self, q_like: list, kv_like: list) -> list:
        """Ulysses in: the rank's rows (BNSD, every head) -> its heads of the group's rows (BNSD)."""
        hq, hkv = self.problem.num_heads // self.u_size, len(self.kv_heads[0])
        kv_order = [h for heads in self.kv_heads for h in heads]
        got = [self._exchange(x, hq, True) for x in q_like] + [self._exchange(x[:, kv_order], hkv, True)
                                                                for x in kv_like]
        return [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in got]

    def _home(self, x, heads: int):
        """Ulysses out: this rank's heads of the group's rows (BNSD) -> [B, U (source), n_u, heads, D]."""
        return self._exchange(np.ascontiguousarray(x.transpose(0, 2, 1, 3)), heads, False)

    def _count_links(self):
        if self.s.backend.name == "sim":
            u = self.ucomm.rank
            self.link_bytes = [self.ucomm.link_stats(u, j)["bytes"] if j != u else 0 for j in range(self.u_size)]

    def forward(self, q, k, v):
        """q, k, v: this rank's rows, BNSD, every head. Returns (out rows [B, N, n_u, D], lse
        float32 [B, N/U, L]: this member's heads over the group's rows)."""
        pr = self.problem
        q_h, k_h, v_h = self._heads([q], [k, v])
        if self.rcomm.size == 1:  # U = P: the group holds every row, no ring
            out, lse = flash_attention(q_h, k_h, v_h, causal=pr.causal, scale=pr.scale, return_lse=True,
                                       session=self.s)
        else:
            out, lse = RankContext(self.s, self.rcomm).ring_attention(q_h, k_h, v_h, causal=pr.causal,
                                                                       scale=pr.scale, layout="BNSD")
        back = self._home(out, pr.num_heads // self.u_size)
        self._count_links()
        return back.transpose(0, 1, 3, 2, 4).reshape(pr.batch, pr.num_heads, back.shape[2], pr.head_dim), lse

    def backward(self, dout, q, k, v, out, lse):
        """dout, q, k, v, out: this rank's rows, BNSD, every head; lse: float32 [B, N/U, L] as
        forward returned it. Returns this rank's rows of (dq, dk, dv), BNSD, in the input dtype."""
        pr, u_size = self.problem, self.u_size
        hq, hkv = pr.num_heads // u_size, len(self.kv_heads[0])
        g_h, q_h, o_h, k_h, v_h = self._heads([dout, q, out], [k, v])
        if self.rcomm.size == 1:
            grads = flash_attention_backward(g_h, q_h, k_h, v_h, o_h, lse, causal=pr.causal, scale=pr.scale,
                                             session=self.s)
        else:
            grads = RankContext(self.s, self.rcomm).ring_attention_backward(
                g_h, q_h, k_h, v_h, o_h, lse, causal=pr.causal, scale=pr.scale, layout="BNSD")
        dq, dk, dv = (self._home(x, h) for x, h in zip(grads, (hq, hkv, hkv)))
        self._count_links()
        n_u = dq.shape[2]
        dq = dq.transpose(0, 1, 3, 2, 4).reshape(pr.batch, pr.num_heads, n_u, pr.head_dim)
        dk32, dv32 = (np.zeros((pr.batch, pr.num_kv_heads, n_u, pr.head_dim), np.float32) for _ in range(2))
        for j in range(u_size):
            for slot, head in enumerate(self.kv_heads[j]):  # replicated copies add up
                dk32[:, head] += dk[:, j, :, slot].astype(np.float32)
                dv32[:, head] += dv[:, j, :, slot].astype(np.float32)
        return dq, dk32.astype(pr.dtype), dv32.astype(pr.dtype)


@contextlib.contextmanager
def _thread_cliques(devices, backend_name: str, plan: UspPlan):
    """One Session per device and, over them, a clique per Ulysses group and per ring
    (HcclCommInitAll); yields the ranks' _UspRank makers' parts: (sessions, group comms, ring
    comms), each by rank. Everything closed on success and on failure."""
    p = len(devices)
    sessions, comms_u, comms_r = [], {}, {}
    try:
        sessions = [Session(device=d, backend=backend_name) for d in devices]
        ugroups, rgroups = usp_groups(p, plan.ulysses)
        for groups, comms in ((ugroups, comms_u), (rgroups, comms_r)):
            for group in groups:
                for r, c in zip(group, hccl.Communicator.init_all([sessions[i] for i in group])):
                    comms[r] = c
        yield sessions, [comms_u[r] for r in range(p)], [comms_r[r] for r in range(p)]
    finally:
        for c in [*comms_u.values(), *comms_r.values()]:
            c.close()
        for s in sessions:
            s.close()


def _prepare(q, k, v, *, devices, ulysses, causal, scale, layout, num_heads, num_kv_heads, backend):
    problem, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                    num_kv_heads=num_kv_heads)
    if problem.seq_q != problem.seq_kv:
        raise InvalidArgumentError(f"2-D sequence parallelism shards one sequence: Sq={problem.seq_q} must equal "
                                   f"Skv={problem.seq_kv}")
    be = hccl.use_hccl(get_backend(backend))
    devices = check_devices(devices, be)
    plan = usp_plan(problem.seq_q, len(devices), problem.num_heads, problem.num_kv_heads, ulysses, problem.causal)
    return problem, q, k, v, be, devices, plan


def _place(plan: UspPlan, parts: list, shape, dtype, axis_heads: bool = False):
    """The whole [B, H, S, ...] from each rank's rows (parts[r], as UspPlan.rows_of cut them)."""
    whole = np.empty(shape, dtype)
    for g in range(plan.rings):
        group = np.concatenate(parts[g * plan.ulysses:(g + 1) * plan.ulysses], axis=1 if axis_heads else 2)
        at = 0
        for a, b in plan.chunks[g]:
            whole[:, :, a:b] = group[:, :, at:at + b - a]
            at += b - a
    return whole


def usp_attention(q, k, v, *, devices=None, ulysses=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                  num_kv_heads=None, backend=None):
    """FlashAttention of host arrays over P = len(devices) devices by 2-D sequence parallelism:
    Ulysses groups of `ulysses` devices (default: default_ulysses_size) and a ring across the
    P / ulysses groups. Returns (out like q, lse float32 [B, N, S])."""
    problem, q, k, v, be, devices, plan = _prepare(q, k, v, devices=devices, ulysses=ulysses, causal=causal,
                                                   scale=scale, layout=layout, num_heads=num_heads,
                                                   num_kv_heads=num_kv_heads, backend=backend)
    n, nkv = problem.num_heads, problem.num_kv_heads
    qb, kb, vb = to_bnsd(q, layout, n), to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)
    with _thread_cliques(devices, be.name, plan) as (sessions, comms_u, comms_r):
        ranks = [_UspRank(sessions[r], comms_u[r], comms_r[r], problem, plan) for r in range(len(devices))]
        results = run_rank_threads([lambda rk=rk, r=r: rk.forward(*(plan.rows_of(x, r) for x in (qb, kb, vb)))
                                    for r, rk in enumerate(ranks)], "usp-rank")
    out = _place(plan, [o for o, _ in results], qb.shape, problem.dtype)
    lse = _place(plan, [lse for _, lse in results], qb.shape[:3], np.float32, axis_heads=True)
    return np.ascontiguousarray(from_bnsd(out, layout)), lse


@dataclasses.dataclass
class UspBackwardReport:
    """What one usp_attention_backward run did: per rank the bytes its all-to-alls sent each member
    of its group (link counters of the group clique) and the formula's (docs/hccl.md)."""

    devices: list
    ulysses: int
    rings: int
    link_bytes: list           # [r][u]: bytes rank r sent member u of its group (0 to itself)
    analytic_link_bytes: list  # the same by ulysses_backward_link_bytes over the group's rows


def usp_link_bytes(plan: UspPlan, problem, backward: bool) -> list:
    """[r][u]: the all-to-all bytes rank r sends member u of its group (ulysses_link_bytes or
    ulysses_backward_link_bytes over the group's L_g rows and U ranks)."""
    formula = ulysses_backward_link_bytes if backward else ulysses_link_bytes
    rows = []
    for g in range(plan.rings):
        rows += formula(plan.lengths[g], plan.ulysses, problem.batch, problem.num_heads, len(plan.kv_heads[0]),
                        problem.head_dim, problem.dtype.itemsize)
    return rows


def usp_attention_backward(dout, q, k, v, out, lse, *, devices=None, ulysses=None, causal=False, scale=None,
                           layout="BNSD", num_heads=None, num_kv_heads=None, backend=None, report=False):
    """(dq, dk, dv) of host arrays by the 2-D plan of usp_attention (same devices, ulysses and
    options), for out, lse = usp_attention(q, k, v, ...) (or flash_attention); dq like q, dk and dv
    like k and v. With `report`, a UspBackwardReport too."""
    problem, q, k, v, be, devices, plan = _prepare(q, k, v, devices=devices, ulysses=ulysses, causal=causal,
                                                   scale=scale, layout=layout, num_heads=num_heads,
                                                   num_kv_heads=num_kv_heads, backend=backend)
    _, dout, q, k, v, out, lse = make_backward_problem(problem, dout, q, k, v, out, lse)
    n, nkv, hq = problem.num_heads, problem.num_kv_heads, problem.num_heads // plan.ulysses
    qb, ob, gb = (to_bnsd(x, layout, n) for x in (q, out, dout))
    kb, vb = to_bnsd(k, layout, nkv), to_bnsd(v, layout, nkv)
    lse = np.asarray(lse, np.float32)

    def work(rk, r):
        g, u = divmod(r, plan.ulysses)
        lse_h = np.ascontiguousarray(shard_rows(lse[:, u * hq:(u + 1) * hq], plan.chunks[g]))
        return rk.backward(*(plan.rows_of(x, r) for x in (gb, qb, kb, vb, ob)), lse_h)

    with _thread_cliques(devices, be.name, plan) as (sessions, comms_u, comms_r):
        ranks = [_UspRank(sessions[r], comms_u[r], comms_r[r], problem, plan) for r in range(len(devices))]
        grads = run_rank_threads([lambda rk=rk, r=r: work(rk, r) for r, rk in enumerate(ranks)], "usp-grad-rank")
    result = tuple(np.ascontiguousarray(from_bnsd(_place(plan, [gr[i] for gr in grads], like.shape, problem.dtype),
                                                  layout)) for i, like in enumerate((qb, kb, vb)))
    if not report:
        return result
    return (*result, UspBackwardReport(devices, plan.ulysses, plan.rings, [rk.link_bytes for rk in ranks],
                                       usp_link_bytes(plan, problem, True)))


@contextlib.contextmanager
def usp_cliques(ctx, problem, plan: UspPlan):
    """This rank's group and ring cliques, made from its RankContext's clique of P ranks (module
    docstring): yields a _UspRank; destroys both communicators on success and on failure."""
    g, u = divmod(ctx.rank, plan.ulysses)
    be = ctx.session.backend
    size = ffi.sizeof("HcclRootInfo")  # HCCL_ROOT_INFO_BYTES; a blank where this rank makes none
    group_root = hccl.root_info(be) if u == 0 else bytes(size)
    ring_root = hccl.root_info(be) if g == 0 else bytes(size)
    row = np.frombuffer(group_root + ring_root, np.uint8)
    table = all_gather_host(ctx.comm, row)
    comms = []
    try:
        comms.append(hccl.Communicator.join(ctx.session, plan.ulysses, u, table[g * plan.ulysses][:size].tobytes()))
        comms.append(hccl.Communicator.join(ctx.session, plan.rings, g, table[u][size:].tobytes()))
        yield _UspRank(ctx.session, comms[0], comms[1], problem, plan)
    finally:
        for c in comms:
            c.close()


def _rank_plan(ctx, what: str, q, k, v, *, ulysses, causal, scale, layout, num_heads, num_kv_heads, lse=None):
    """(whole problem, plan, the call's layout, q, k, v as the rank's BNSD rows) after the ranks
    agreed on the sizes and options and their rows were checked against the plan's split (every
    rank raises alike). With `lse` (the backward), every rank's lse shape is checked too: [B, N/U,
    L_g], its member's heads over its group's rows."""
    local, q, k, v = make_problem(q, k, v, causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                  num_kv_heads=num_kv_heads)
    layout = local.layout
    shared = dict(B=local.batch, N=local.num_heads, Nkv=local.num_kv_heads, D=local.head_dim, dtype=local.dtype.name,
                  layout=layout, causal=local.causal, scale=float(local.scale), U=ulysses or 0)
    own = {"rows": local.seq_q}
    if lse is not None:
        dims = [*np.shape(lse)[:3], -1, -1, -1][:3]  # the same fields on every rank, whatever lse's rank
        own.update(lse_rank=np.ndim(lse), **{f"lse{i}": int(x) for i, x in enumerate(dims)})
    table = agree(ctx.comm, what, shared, own)
    counts = [row["rows"] for row in table]
    seq = sum(counts)
    plan = usp_plan(seq, ctx.size, local.num_heads, local.num_kv_heads, ulysses, local.causal)
    want = [b - a for g in range(plan.rings) for a, b in plan.local[g]]
    if counts != want:
        raise InvalidArgumentError(f"the ranks hold {counts} rows: the 2-D plan of S={seq} over {plan.rings} ring "
                                   f"positions of {plan.ulysses} devices gives them {want} (usp.UspPlan.rows_of)")
    n, nkv = local.num_heads, local.num_kv_heads
    if lse is not None:
        want = [(local.batch, n // plan.ulysses, plan.lengths[r // plan.ulysses]) for r in range(ctx.size)]
        got = [tuple(row[f"lse{i}"] for i in range(3)) if row["lse_rank"] == 3 else None for row in table]
        wrong = [f"rank {r}: {g}, not {w}" for r, (g, w) in enumerate(zip(got, want)) if g != w]
        if wrong:
            raise InvalidArgumentError(f"lse must be each rank's heads over its group's rows, [B, N/U, L_g]: "
                                       f"{'; '.join(wrong)}")
    return (make_problem_of_sizes(local, seq), plan, layout, to_bnsd(q, layout, n), to_bnsd(k, layout, nkv),
            to_bnsd(v, layout, nkv))


def rank_usp_attention(ctx, q, k, v, *, ulysses=None, causal=False, scale=None, layout="BNSD", num_heads=None,
                       num_kv_heads=None):
    """This rank's part of usp_attention over its RankContext's clique of P ranks (every rank calls
    it together): q, k, v its rows (UspPlan.rows_of: rank g U + u holds member u's part of ring
    position g's zigzag rows), every head. Returns (out rows like q, lse float32 [B, N/U, L_g]: its
    member's heads over its group's rows)."""
    problem, plan, layout, q, k, v = _rank_plan(ctx, "usp_attention", q, k, v, ulysses=ulysses, causal=causal,
                                                scale=scale, layout=layout, num_heads=num_heads,
                                                num_kv_heads=num_kv_heads)
    with usp_cliques(ctx, problem, plan) as rank:
        out, lse = rank.forward(q, k, v)
    return np.ascontiguousarray(from_bnsd(out, layout)), lse


def rank_usp_attention_backward(ctx, dout, q, k, v, out, lse, *, ulysses=None, causal=False, scale=None,
                                layout="BNSD", num_heads=None, num_kv_heads=None, report=False):
    """This rank's part of usp_attention_backward: its rows of dout, q, k, v, out (as for
    rank_usp_attention) and the lse rank_usp_attention returned it. Returns its rows of (dq, dk,
    dv), and with `report` the bytes its all-to-alls sent each member of its group (simulator)."""
    q, dout, out, lse = (as_array(name, x) for name, x in (("q", q), ("dout", dout), ("out", out), ("lse", lse)))
    check_like_forward(q, dout, out, lse)  # before the ranks meet: dtypes and shapes of this rank's arrays
    problem, plan, layout, q, k, v = _rank_plan(ctx, "usp_attention_backward", q, k, v, ulysses=ulysses,
                                                causal=causal, scale=scale, layout=layout, num_heads=num_heads,
                                                num_kv_heads=num_kv_heads, lse=lse)
    dout, out = (to_bnsd(x, layout, problem.num_heads) for x in (dout, out))
    with usp_cliques(ctx, problem, plan) as rank:
        grads = rank.backward(dout, q, k, v, out, np.ascontiguousarray(lse, np.float32))
    result = tuple(np.ascontiguousarray(from_bnsd(x, layout)) for x in grads)
    return (*result, rank.link_bytes) if report else result
