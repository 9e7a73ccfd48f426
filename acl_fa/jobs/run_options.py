"""``acl-fa run`` with the V2 options (--window, --mask-density, --dropout, --varlen): the
FlashAttentionV2 forward (and with --backward FlashAttentionGradV2) on random inputs, timed,
counted and checked against the float64 reference with the same options.

Library code (the CLI parses and prints). Work is reported against the band's useful MACs
(the pairs the window, causal and a key-padding mask leave visible), so a run shows how much
of the executed cube work was useful. Semantics of the options: docs/attention_options.md.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Optional

import numpy as np

from ..ops import forward_v2 as attention_v2, opcall
from ..plan import forward as plan_module
from ..plan.forward import PlanOptions
from ..reference.accuracy import Accuracy, check_accuracy, check_gradients, naive_same_precision
from ..spec.problem import Problem, problem_from_sizes
from ..spec.band import UNBOUNDED, window_band
from ..spec.options import AttentionOptions, build_options, check_precision_dtype, dropout_keep_prob, score_mod_options
from ..plan import timing
from ..plan.roofline import chip_peaks
from ..runtime.errors import InvalidArgumentError
from ..spec.layouts import to_bnsd
from .measure import measure
from .settings import JobSettings, time_label
from ..reference.attention import attention_reference, varlen_sequences
from .run import FULL_CHECK_PAIRS, SAMPLE_HEADS, check_line, random_inputs
from ..runtime.session import DeviceSession
from ..runtime.units import format_bytes
from ..ops import backward_v2

__all__ = ["OptionsRunReport", "RunOptions", "run_options_job", "format_options_report", "band_pairs",
           "v2_plan"]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What `acl-fa run` asks of the V2 ops: --window (L, R), --dropout P, --mask-density F (a
    key-padding mask hiding that fraction of the keys), --varlen lengths (layout TND) and
    --precision (high_performance runs FlashAttentionV4)."""

    window: Optional[tuple] = None
    dropout: float = 0.0
    mask_density: Optional[float] = None
    varlen: Optional[tuple] = None
    precision: str = "high_precision"
    alibi: bool = False       # --alibi: the ALiBi paper's slopes (alibi_paper_slopes)
    softcap: float = 0.0      # --softcap C
    sinks: bool = False       # --sinks: random logits seeded by the run's seed

    @property
    def used(self) -> bool:
        """Whether a run needs the V2 ops."""
        return self.window is not None or self.dropout > 0 or self.mask_density is not None or \
            self.varlen is not None or self.precision != "high_precision" or self.score_mods

    @property
    def score_mods(self) -> bool:
        """ALiBi, soft-capping or sinks asked for."""
        return self.alibi or self.softcap > 0 or self.sinks


def alibi_paper_slopes(heads: int) -> np.ndarray:
    """The ALiBi paper's slopes (Press et al., 2022): 2^(-8 h / N) for head h = 1..N, float32 [N]."""
    return (2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)).astype(np.float32)


def sink_logits(heads: int, seed: int) -> np.ndarray:
    """--sinks' logits: standard normal float32 [N] from the run's seed (seed + 2: the inputs and the
    dropout use seed and seed + 1)."""
    return np.random.default_rng(seed + 2).standard_normal(heads).astype(np.float32)


def band_pairs(options: AttentionOptions, seq_q: int, seq_kv: int, key_visible: Optional[np.ndarray] = None) -> int:
    """(query, key) pairs the band of `options` leaves visible in one sequence (and head), further
    restricted to the keys `key_visible` (bool [Skv]) when given: for row i, the keys j with
    i + diag - pre <= j <= i + diag + next, diag = Skv - Sq."""
    rows = np.arange(seq_q, dtype=np.int64) + (seq_kv - seq_q)
    lo = np.clip(rows - options.pre_tokens, 0, seq_kv)
    hi = np.clip(rows + options.next_tokens + 1, 0, seq_kv)   # exclusive
    hi = np.maximum(hi, lo)
    if key_visible is None:
        return int((hi - lo).sum())
    prefix = np.concatenate(([0], np.cumsum(key_visible, dtype=np.int64)))
    return int((prefix[hi] - prefix[lo]).sum())


def v2_plan(problem: Problem, run_options: RunOptions) -> tuple:
    """(Problem, PlanOptions) of acl_fa.plan.forward.plan for FlashAttentionV2: `problem` with the
    band of the window and causal (causal folded in, as the op takes it), the dropout and the
    key-padding mask of --mask-density ([B, 1, 1, Skv]) and, for a varlen batch, layout TND with
    the sequence lengths (queries and keys alike). The problem may be unchecked (the plan checks it)."""
    window, varlen, mask_density = run_options.window, run_options.varlen, run_options.mask_density
    pre, nxt = window_band(window, problem.causal)
    dropout = dropout_keep_prob(run_options.dropout) < 1.0
    problem, mask_shape, lens = dataclasses.replace(problem, causal=False), None, {}
    if mask_density is not None:
        if varlen is not None:
            raise InvalidArgumentError(VARLEN_MASK_DENSITY)
        key_padding_mask(1, 1, mask_density)  # validates the fraction
        mask_shape = (problem.batch, 1, 1, problem.seq_kv)
    if varlen is not None:
        problem = dataclasses.replace(problem, layout="TND", batch=len(varlen), seq_q=max(varlen),
                                      seq_kv=max(varlen))
        lens = dict(seq_lens_q=tuple(varlen), seq_lens_kv=tuple(varlen))
    return problem, PlanOptions(pre_tokens=pre, next_tokens=nxt, mask_shape=mask_shape, dropout=dropout,
                                alibi=run_options.alibi, sinks=run_options.sinks, **lens)


def band_work_line(p) -> str:
    """A plan's work against the band's: the visible (query, key) pairs over all heads and the
    pairs its planned kv blocks cover (total work x BLOCK_M x BLOCK_N)."""
    options = AttentionOptions(pre_tokens=p.pre_tokens, next_tokens=p.next_tokens)
    if p.seq_lens_q is not None:
        useful = sum(band_pairs(options, sq, skv) for sq, skv in zip(p.seq_lens_q, p.seq_lens_kv))
        full = sum(sq * skv for sq, skv in zip(p.seq_lens_q, p.seq_lens_kv))
    else:
        useful, full = p.batch * band_pairs(options, p.seq, p.seq_kv), p.batch * p.seq * p.seq_kv
    useful, full = useful * p.heads, full * p.heads
    planned = p.total_work * p.block_m * p.block_n
    return (f"band      {useful} visible (query, key) pairs of {full} ({100 * useful / max(1, full):.2f}%); the planned "
            f"kv blocks cover {planned} ({planned / max(1, useful):.3f}x the visible)")


@dataclasses.dataclass
class OptionsRunReport:
    backend: str
    soc: str
    problem: Problem               # TND for a varlen batch
    options: AttentionOptions
    lengths: Optional[list]        # varlen sequence lengths
    mask_bytes: int                # device bytes of the mask (0 without one)
    useful_macs: int               # the forward's 2 matmuls over the visible pairs
    block_m: int
    block_n: int
    times_ms: list
    time_label: str
    device_bytes: dict
    sim: Optional[dict]
    accuracy: Optional[Accuracy]
    model: Optional[dict] = None             # timing.summary of the modeled NPU time (sim)
    backward_times_ms: Optional[list] = None
    backward_sim: Optional[dict] = None
    gradient_checks: Optional[list] = None   # [GradientAccuracy] for dq, dk, dv

    @property
    def ok(self) -> bool:
        forward = self.accuracy is None or self.accuracy.ok
        return forward and all(c.ok for c in self.gradient_checks or [])

    def to_dict(self) -> dict:
        p, o = self.problem, self.options
        data = {"backend": self.backend, "soc": self.soc,
                "problem": {"batch": p.batch, "heads": p.num_heads, "kv_heads": p.num_kv_heads, "seq": p.seq_q,
                            "seq_kv": p.seq_kv, "head_dim": p.head_dim, "dtype": p.dtype_name, "layout": p.layout,
                            "scale": p.scale, "varlen": self.lengths},
                "options": dataclasses.asdict(o) | {"mask_bytes": self.mask_bytes},
                "tiling": {"block_m": self.block_m, "block_n": self.block_n},
                "time": {"label": self.time_label, "median_ms": statistics.median(self.times_ms),
                         "all_ms": self.times_ms},
                "device_bytes": dict(self.device_bytes), "useful_macs": self.useful_macs}
        if self.sim is not None:
            data["simulator"] = self.sim
        if self.model is not None:
            data["modeled_time"] = self.model
        if self.accuracy is not None:
            data["check"] = dataclasses.asdict(self.accuracy) | {"ok": self.accuracy.ok}
        if self.backward_times_ms is not None:
            data["backward"] = {"median_ms": statistics.median(self.backward_times_ms),
                                "all_ms": self.backward_times_ms, "useful_macs": self.useful_macs * 5 // 2,
                                "simulator": self.backward_sim,
                                "check": [dataclasses.asdict(c) | {"ok": c.ok} for c in self.gradient_checks or []]}
        return data


def _inputs(problem: Problem, varlen: Optional[tuple], seed: int):
    """(Problem, q, k, v): dense in the problem's layout, or TND over the sequence `varlen` lengths
    (q and kv alike)."""
    if varlen is None:
        return (problem, *random_inputs(problem, seed))
    if problem.layout != "BNSD":
        raise InvalidArgumentError(f"--varlen runs the TND layout; --layout {problem.layout} does not apply")
    if any(n < 1 for n in varlen):
        raise InvalidArgumentError(f"--varlen lengths must be >= 1, got {list(varlen)}")
    total = sum(varlen)
    base = problem_from_sizes(seq_q=total, batch=1, num_heads=problem.num_heads, num_kv_heads=problem.num_kv_heads,
                              head_dim=problem.head_dim, dtype=problem.dtype_name, layout="BSND",
                              scale=problem.scale, block_m=problem.block_m, block_n=problem.block_n)
    q, k, v = (x[0] for x in random_inputs(base, seed))
    ends = tuple(int(x) for x in np.cumsum(varlen))
    return attention_v2.varlen_problem(base, ends, ends), q, k, v


# acl-fa run's key padding is for a fixed-length batch (the library takes varlen masks:
# flash_attention_varlen(attn_mask=), docs/attention_options.md "Masks with varlen").
VARLEN_MASK_DENSITY = ("--mask-density does not combine with --varlen (acl-fa run's key padding is for fixed-length "
                       "batches; flash_attention_varlen takes attn_mask)")


def key_padding_mask(batch: int, seq_kv: int, hidden: float) -> np.ndarray:
    """bool [B, 1, 1, Skv], True = attend: key padding hiding the last round(hidden * Skv) keys
    of every sequence (padding at the end, as a padded batch has it)."""
    if not 0.0 <= hidden < 1.0:
        raise InvalidArgumentError(f"--mask-density (the fraction of keys hidden) must be in [0, 1), got {hidden}")
    mask = np.ones((batch, 1, 1, seq_kv), dtype=bool)
    mask[..., seq_kv - int(round(hidden * seq_kv)):] = False
    return mask


def _sequences(problem: Problem, options: AttentionOptions):
    """(index, q rows, kv rows) per sequence of a varlen problem."""
    starts_q, starts_kv = (0,) + tuple(options.cu_seqlens_q), (0,) + tuple(options.cu_seqlens_kv)
    return varlen_sequences(starts_q, starts_kv)


def _features(options: AttentionOptions, attn_mask, dropout_p: float, window, mods: dict = None) -> dict:
    """The reference's keyword arguments for the options (mods: softcap, alibi_slopes, sinks)."""
    return dict(window=window, attn_mask=attn_mask, dropout_p=dropout_p, seed=options.seed, offset=options.offset,
                **(mods or {}))


def _worst(results):
    """The result with the largest error/tolerance ratio (a list of per-sequence checks passes
    only when that one does)."""
    return max(results, key=lambda r: (r.max_error / r.tolerance) if r.tolerance else float("inf"))


def _units(problem: Problem, options: AttentionOptions, q_arrays: list, kv_arrays: list):
    """(q-row arrays, kv-row arrays, layout, dropout offset) per check unit: the whole dense
    problem, or each varlen sequence that sees keys as a batch-1 BSND problem (arrays sliced to
    its rows, a leading 1 added) with the offset that draws its streams
    (docs/attention_options.md#dropout)."""
    if not options.is_varlen:
        yield q_arrays, kv_arrays, problem.layout, options.offset
        return
    for s, qr, kr in _sequences(problem, options):
        if qr.stop > qr.start and kr.stop > kr.start:
            yield ([x[None, qr] for x in q_arrays], [x[None, kr] for x in kv_arrays], "BSND",
                   (options.offset + s * problem.num_heads) % (1 << 64))


def _check_forward(problem, options, q, k, v, out, lse, attn_mask, dropout_p, window, causal, mods=None) -> Accuracy:
    """The forward against the float64 reference by the 2x-naive rule: every head of a small
    problem, else the first and last head; a varlen batch sequence by sequence (the worst)."""
    n = problem.num_heads
    heads = list(range(n)) if problem.batch * n * problem.seq_q * problem.seq_kv <= FULL_CHECK_PAIRS else \
        sorted({0, n - 1})[:SAMPLE_HEADS]
    lse_rows = np.asarray(lse).T if options.is_varlen else np.asarray(lse)   # TND lse [N, Tq] -> [Tq, N]
    results = []
    for (q_s, out_s, lse_s), (k_s, v_s), layout, offset in _units(problem, options, [q, out, lse_rows], [k, v]):
        if options.is_varlen:
            lse_s = lse_s.transpose(0, 2, 1)                                  # [1, s, N] -> [1, N, s]
        features = dict(_features(options, attn_mask, dropout_p, window, mods), offset=offset)
        kw = dict(causal=causal, scale=problem.scale, layout=layout, num_heads=n, num_kv_heads=problem.num_kv_heads,
                  heads=heads)
        ref_out, ref_lse = attention_reference(q_s, k_s, v_s, **kw, **features)
        naive = naive_same_precision(q_s, k_s, v_s, problem.dtype, **kw, **features)
        got = to_bnsd(np.asarray(out_s), layout, n)[:, heads].astype(np.float64)
        results.append(check_accuracy(got, lse_s[:, heads], to_bnsd(ref_out, layout, len(heads)), ref_lse, naive,
                                      problem.dtype_name, heads))
    return _worst(results)


def _check_backward(problem, options, grads, q, k, v, dout, attn_mask, dropout_p, window, causal) -> list:
    """dq, dk, dv against the float64 backward by the 2x-naive rule (acl_fa.reference.accuracy): all kv
    heads of a small problem, else kv head 0 and its query heads; varlen sequence by sequence
    (the worst of each gradient)."""
    n, nkv = problem.num_heads, problem.num_kv_heads
    kv_heads = None if problem.batch * n * problem.seq_q * problem.seq_kv <= FULL_CHECK_PAIRS else [0]
    dq, dk, dv = grads
    per_unit = []
    for (q_s, dout_s, dq_s), (k_s, v_s, dk_s, dv_s), layout, offset in _units(
            problem, options, [q, dout, dq], [k, v, dk, dv]):
        features = dict(_features(options, attn_mask, dropout_p, window), offset=offset)
        per_unit.append(check_gradients((dq_s, dk_s, dv_s), (q_s, k_s, v_s, dout_s), causal=causal, scale=problem.scale,
                                        layout=layout, num_heads=n, num_kv_heads=nkv, dtype_name=problem.dtype_name,
                                        kv_heads=kv_heads, **features))
    return [_worst([unit[i] for unit in per_unit]) for i in range(3)]


def _check_chip_takes(run_options: RunOptions, soc: str) -> None:
    """The coupled chips run no mask and no dropout: said with the command's own option names,
    before device work."""
    refused = [name for name, used in (("--mask-density", run_options.mask_density is not None),
                                       ("--dropout", run_options.dropout > 0), ("--alibi", run_options.alibi),
                                       ("--sinks", run_options.sinks)) if used]
    if refused and plan_module.chip(soc).coupled:
        raise InvalidArgumentError(f"{' and '.join(refused)}: supported on Atlas A2/A3 (Ascend910B*, Ascend910_93*) "
                                   f"only; {plan_module.chip(soc).name} has coupled AI Cores (docs/chips.md)")


def run_options_job(problem: Problem, run_options: RunOptions, settings: JobSettings = JobSettings(), *,
                    backward: bool = False, deterministic: bool = True) -> OptionsRunReport:
    """Runs the V2 forward (and the V2 backward on its outputs with `backward`) on random
    inputs with the options; `settings.seed` seeds the inputs and the dropout. The problem's
    causal is folded into the options' band, as the V2 op takes it."""
    tick, seed, causal, varlen = settings.tick, settings.seed, problem.causal, run_options.varlen
    window, dropout, mask_density = run_options.window, run_options.dropout, run_options.mask_density
    problem, q, k, v = _inputs(dataclasses.replace(problem, causal=False), varlen, seed)
    if varlen is not None and mask_density is not None:
        raise InvalidArgumentError(VARLEN_MASK_DENSITY)
    attn_mask = None if mask_density is None else key_padding_mask(problem.batch, problem.seq_kv, mask_density)
    ends = None if varlen is None else tuple(int(x) for x in np.cumsum(varlen))
    options, mask_u8 = build_options(scores=problem.score_grid, causal=causal, window=window, attn_mask=attn_mask,
                                     dropout_p=dropout, seed=seed, cu_seqlens_q=ends, cu_seqlens_kv=ends,
                                     precision=run_options.precision, softcap=run_options.softcap)
    check_precision_dtype(options, problem.dtype_name)
    if backward and run_options.score_mods:
        raise InvalidArgumentError("--alibi, --softcap and --sinks are forward-only here (the backward does not take "
                                   "them yet)")
    ref_mods = {}  # the reference's arguments: [N] slopes serve every sequence of a varlen batch too
    if run_options.alibi:
        ref_mods["alibi_slopes"] = alibi_paper_slopes(problem.num_heads)
    if run_options.sinks:
        ref_mods["sinks"] = sink_logits(problem.num_heads, seed)
    options, mods = score_mod_options(options, batch=problem.batch, heads=problem.num_heads, seq_q=problem.seq_q,
                                      seq_kv=problem.seq_kv, dtype=problem.dtype, **ref_mods)
    if run_options.softcap:
        ref_mods["softcap"] = run_options.softcap
    if varlen is None:
        pairs = sum(band_pairs(options, problem.seq_q, problem.seq_kv, None if attn_mask is None else attn_mask[b, 0, 0])
                    for b in range(problem.batch))
    else:
        pairs = sum(band_pairs(options, n, n) for n in varlen)
    useful_macs = 2 * problem.num_heads * problem.head_dim * pairs
    warmup, iters = settings.warmup, settings.iters
    with DeviceSession(device=settings.device, backend=settings.backend) as session:
        _check_chip_takes(run_options, session.soc_name())
        call = attention_v2.V2Call(problem, options)
        op = attention_v2.op_for(options)
        m = measure(session, call, *attention_v2.input_arrays(op, q, k, v, mask_u8, mods), warmup=warmup, iters=iters, tick=tick,
                    runner=opcall.runner_for(session, op), check=attention_v2.check_v2_plan,
                    l2=settings.l2 and session.backend.name == "sim")
        model = None
        if m.model is not None:
            model = timing.summary(m.model, 2 * useful_macs, m.l2_modeled.hbm_bytes, chip_peaks(m.soc),
                                   rates_of=session.backend)
        out, lse = m.outputs["out"], m.outputs["lse"]
        bwd = None
        if backward:
            dout = np.random.default_rng(seed + 1).standard_normal(q.shape, dtype=np.float32).astype(q.dtype)
            grad, *arrays = backward_v2.make_backward_v2_problem(problem, options, dout, q, k, v, out, lse, mask_u8,
                                                             deterministic)
            op = backward_v2.FLASH_ATTENTION_GRAD_V2_VARLEN if options.is_varlen else backward_v2.FLASH_ATTENTION_GRAD_V2
            bwd = measure(session, grad, *arrays, warmup=warmup, iters=iters, tick=tick,
                          runner=opcall.runner_for(session, op), check=lambda problem_, soc: None)
        backend_name = session.backend.name
    window_args = dict(attn_mask=attn_mask, dropout_p=dropout, window=window, causal=causal)
    accuracy = _check_forward(problem, options, q, k, v, out, lse, **window_args, mods=ref_mods) \
        if settings.check else None
    report = OptionsRunReport(
        backend=backend_name, soc=m.soc, problem=problem, options=options,
        lengths=None if varlen is None else list(varlen),
        mask_bytes=0 if mask_u8 is None else mask_u8.nbytes, useful_macs=useful_macs, block_m=m.plan.block_m,
        block_n=m.plan.block_n, times_ms=m.times_ms,
        time_label=time_label(backend_name),
        device_bytes=m.device_bytes, sim=m.stats, accuracy=accuracy, model=model)
    if bwd is not None:
        grads = (bwd.outputs["dq"], bwd.outputs["dk"], bwd.outputs["dv"])
        report.backward_times_ms, report.backward_sim = bwd.times_ms, bwd.stats
        if settings.check:
            report.gradient_checks = _check_backward(problem, options, grads, q, k, v, dout, **window_args)
    tick("check", 1)
    return report


def _options_text(r: OptionsRunReport) -> str:
    o = r.options
    band = lambda x: "inf" if x == UNBOUNDED else str(x)  # noqa: E731
    parts = [f"band pre_tokens={band(o.pre_tokens)} next_tokens={band(o.next_tokens)}"]
    if o.mask_shape is not None:
        parts.append(f"mask {list(o.mask_shape)} uint8 ({format_bytes(r.mask_bytes)} on the device)")
    if o.has_dropout:
        parts.append(f"dropout p={1 - o.keep_prob:.4g} seed={o.seed} offset={o.offset}")
    if r.lengths is not None:
        parts.append(f"varlen TND, {len(r.lengths)} sequences {r.lengths}")
    if o.precision != "high_precision":
        parts.append(f"precision {o.precision} (S in {r.problem.dtype_name} between the matmuls)")
    if o.softcap:
        parts.append(f"softcap {o.softcap:g}")
    if o.alibi:
        parts.append("ALiBi slopes 2^(-8h/N)")
    if o.sinks:
        parts.append("sinks (random logits)")
    return "; ".join(parts)


def _op_type(kernel: str) -> str:
    """The op type of a kernel name: flash_attention_v4 -> FlashAttentionV4."""
    return "".join(part.capitalize() for part in kernel.split("_"))


def format_options_report(r: OptionsRunReport) -> str:
    p = r.problem
    median = statistics.median(r.times_ms)
    lines = [
        f"backend     {r.backend}   SoC {r.soc}   op {_op_type(attention_v2.op_for(r.options).name)}",
        f"problem     B={p.batch} N={p.num_heads} Nkv={p.num_kv_heads} Sq={p.seq_q} Skv={p.seq_kv} D={p.head_dim} "
        f"{p.dtype_name} {p.layout} scale={p.scale:.6g}",
        f"options     {_options_text(r)}",
        f"tiling      BLOCK_M={r.block_m} BLOCK_N={r.block_n}",
        f"time        {median:.3f} ms per iteration (median of {len(r.times_ms)}; {r.time_label})",
        f"memory      inputs {format_bytes(r.device_bytes['inputs'])}, outputs {format_bytes(r.device_bytes['outputs'])}, "
        f"workspace {format_bytes(r.device_bytes['workspace'])}",
    ]
    if r.sim is not None:
        macs = r.sim["cube_macs"]
        lines.append(f"work        cube MACs {macs / 1e9:.3f} G executed, {r.useful_macs / 1e9:.3f} G useful "
                     f"(visible pairs x D x 2): {macs / max(1, r.useful_macs):.3f}x; GM traffic "
                     f"{format_bytes(r.sim['gm_bytes'])}")
    if r.model is not None:
        lines += ["modeled     " + line for line in timing.format_summary(r.model)]
    if r.accuracy is not None:
        lines.append(check_line(r.accuracy, p))
    if r.backward_times_ms is not None:
        lines.append(f"backward    {statistics.median(r.backward_times_ms):.3f} ms per iteration (median of "
                     f"{len(r.backward_times_ms)}; {r.time_label})")
        if r.backward_sim is not None:
            macs, useful = r.backward_sim["cube_macs"], r.useful_macs * 5 // 2
            lines.append(f"            cube MACs {macs / 1e9:.3f} G executed, {useful / 1e9:.3f} G useful (5 matmuls "
                         f"over the visible pairs): {macs / max(1, useful):.3f}x")
        for c in r.gradient_checks or []:
            lines.append(f"check       {c.name} max error {c.max_error:.3g} <= {c.tolerance:.3g} (2 x naive "
                         f"{c.naive_error:.3g} + floor): {'OK' if c.ok else 'FAILED'}")
    return "\n".join(lines)
