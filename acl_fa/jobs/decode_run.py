"""Serving on a device-resident KV cache, measured: ``acl-fa run --decode`` / ``--paged`` and
``acl-fa bench --decode``.

A prefill of `seq_kv` prompt tokens per sequence -- flash_attention over the prompt (causal,
BSND) with its keys and values uploaded once as DeviceArrays, which are then copied into the
cache on the device (write_kv_cache) -- then `steps` decode steps, each appending `seq_q` tokens
per sequence on the device and attending over the whole cache. With prefill=False the cache is
filled from the host instead; prefill=None (the default) runs the prefill when its attention is
at most PREFILL_AUTO_LIMIT (B x N x S^2; the simulator takes seconds to minutes for that much,
an hour for 32768 tokens of 32 heads) and otherwise fills from the host and says so.
Timed: the prefill (end to end, and its kernel) and each step; on the simulator also the
kernels' wall time (not NPU time), the per-core counters of the last step (core balance, AIC
busy), the bytes one extra step reads from the K/V cache (GM trace) against the K/V bytes the
sequences hold, and the modeled NPU time of one more step (pipeline model, docs/timing_model.md:
labeled as a model). The copy counters of the session give the bytes that crossed the
host-device link during the steps.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import NamedTuple, Optional

import numpy as np

from ..plan import l2model, timing
from ..runtime import sim_stats
from ..runtime.ffi import ffi
from ..reference.accuracy import Accuracy, check_accuracy
from ..ops.forward import flash_attention
from ..ops import routed
from ..ops.decode import (contiguous_call, decode_plan_check, flash_attention_with_kvcache,
                          runner_for as decode_runner_for, write_kv_cache)
from ..ops.kv_quant import quantize_kv_cache
from ..plan import routing
from ..plan.roofline import chip_peaks
from .measure import Measurement, measure
from ..reference.decode import dequantize_kv_reference, int8_kvcache_reference, kvcache_reference
from ..runtime.session import DeviceSession
from ..runtime.units import format_bytes
from ..spec.problem import Problem, problem_from_sizes
from .settings import JobSettings

__all__ = ["DecodeReport", "DecodeSettings", "decode_problem", "run_decode", "format_decode_report", "PREFILL_AUTO_LIMIT",
           "measure_routed", "step_hbm_bound_us"]

# prefill=None runs the prefill up to this B x N x S^2 (that of 32 heads of 4096 tokens).
PREFILL_AUTO_LIMIT = 32 * 4096 * 4096


@dataclasses.dataclass
class DecodeReport:
    backend: str
    soc: str
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int                  # cached tokens per sequence before the first step
    head_dim: int
    dtype: str
    block_size: Optional[int]    # None: contiguous cache
    num_splits: int
    steps: int
    step_ms: list                # end-to-end per step
    kernel_ms: list              # simulator kernel wall time per step (empty on an NPU)
    cores: Optional[dict]        # {"aic_busy", "aic", "max_over_mean"} of the last step (simulator)
    kv_read_bytes: Optional[int]  # K/V cache bytes read by one traced step (simulator)
    kv_cache_bytes: int          # bytes of K and V the sequences hold at that step
    copies: dict                 # session copy counters over the steps
    new_token_bytes: int         # K and V bytes appended per step
    accuracy: Optional[Accuracy]
    prefill_ms: Optional[float] = None         # prefill end to end: attention + K/V into the cache
    prefill_kernel_ms: Optional[float] = None  # its attention kernel, simulator wall time
    modeled_step_us: Optional[float] = None    # pipeline model of one step (simulator; not a measurement)
    hbm_bound_us: Optional[float] = None       # the step's compulsory bytes / the chip's HBM rate
    kv_cache_dtype: Optional[str] = None       # "int8": FlashAttentionDecodeV3's cache (None: q's dtype)
    cache_device_bytes: Optional[int] = None   # the K/V cache's device memory (int8: with its scales)
    float_cache_bytes: Optional[int] = None    # what a q-dtype cache of the same capacity takes

    @property
    def median_step_ms(self) -> float:
        return statistics.median(self.step_ms)

    @property
    def median_kernel_ms(self) -> Optional[float]:
        return statistics.median(self.kernel_ms) if self.kernel_ms else None

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.seq_q / (self.median_step_ms * 1e-3)

    @property
    def modeled_tokens_per_s(self) -> Optional[float]:
        return self.batch * self.seq_q / (self.modeled_step_us * 1e-6) if self.modeled_step_us else None

    @property
    def prefill_tokens_per_s(self) -> Optional[float]:
        return self.batch * self.seq_kv / (self.prefill_ms * 1e-3) if self.prefill_ms else None

    def to_dict(self) -> dict:
        data = {k: v for k, v in dataclasses.asdict(self).items() if k != "accuracy"}
        data.update(median_step_ms=self.median_step_ms, median_kernel_ms=self.median_kernel_ms,
                    tokens_per_s=self.tokens_per_s, modeled_tokens_per_s=self.modeled_tokens_per_s,
                    prefill_tokens_per_s=self.prefill_tokens_per_s)
        if self.kv_read_bytes is not None:
            data["kv_read_over_cache"] = self.kv_read_bytes / self.kv_cache_bytes
        if self.accuracy is not None:
            data["check"] = dataclasses.asdict(self.accuracy) | {"ok": self.accuracy.ok}
        return data


def _dtype_name(dtype: np.dtype) -> str:
    return "float16" if dtype == np.float16 else "bfloat16"


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
    """The cache and the steps of a decode run: block_size (keys per block of a paged cache; None =
    contiguous), num_splits (flash_attention_with_kvcache's), steps (each appending Sq tokens per
    sequence) and prefill (fill the cache by a timed prefill, from the host, or None: by
    PREFILL_AUTO_LIMIT). kv_cache_dtype "int8": the cache is filled from the host, quantized
    (acl_fa.quantize_kv_cache; the prefill's K/V enter a float cache), and each step's new tokens
    are quantized into it."""

    block_size: Optional[int] = None
    num_splits: int = 0
    steps: int = 8
    prefill: Optional[bool] = None
    kv_cache_dtype: Optional[str] = None  # "int8": an int8 cache (docs/int8.md); None: q's dtype


def decode_problem(seq_kv: int, *, seq_q: int = 1, batch: int = 1, num_heads: int = 32,
                   num_kv_heads: Optional[int] = None, head_dim: int = 128, dtype: str = "float16") -> Problem:
    """The Problem of a decode run: Sq query tokens per step against Skv cached tokens per
    sequence (layout BSND, as the decode op takes q)."""
    return problem_from_sizes(seq_q=seq_q, seq_kv=seq_kv, batch=batch, num_heads=num_heads, num_kv_heads=num_kv_heads,
                              head_dim=head_dim, dtype=dtype, layout="BSND")


def run_decode(session: DeviceSession, problem: Problem, decode: DecodeSettings = DecodeSettings(),
               settings: JobSettings = JobSettings()) -> DecodeReport:
    """A prefill of Skv tokens per sequence (see the module docstring), then `decode.steps` decode
    steps of Sq tokens. `settings.progress(stage, n)` is called as work completes; its warmup,
    iters, backend, device and l2 do not apply (the session is given)."""
    tick = settings.tick
    batch, heads, kv_heads, head_dim = problem.batch, problem.num_heads, problem.num_kv_heads, problem.head_dim
    seq_q, seq_kv, np_dtype = problem.seq_q, problem.seq_kv, problem.dtype
    block_size, num_splits, steps, prefill = decode.block_size, decode.num_splits, decode.steps, decode.prefill
    sizes = _DecodeSizes(batch, heads, kv_heads, head_dim, seq_q, seq_kv, steps, np_dtype)
    rng = np.random.default_rng(settings.seed)
    k_all, v_all, q_all = _random_tokens(rng, sizes)
    table, cache_shape = _cache_layout(rng, sizes, block_size)
    sim = session.backend.name == "sim"
    prefill_ms = prefill_kernel_ms = None
    int8 = decode.kv_cache_dtype == "int8"
    if prefill is None or int8:
        prefill = not int8 and batch * heads * seq_kv * seq_kv <= PREFILL_AUTO_LIMIT
    scales = {}
    if prefill:
        k_cache, v_cache = session.empty(cache_shape, np_dtype), session.empty(cache_shape, np_dtype)
    elif int8:
        k_cache, v_cache, scales = _int8_caches(session, cache_shape, k_all, v_all, seq_kv, table)
    else:
        k_cache, v_cache = _host_filled_caches(session, cache_shape, k_all, v_all, seq_kv, table)
    tick("cache", 1)
    try:
        if prefill and seq_kv:
            prefill_ms, prefill_kernel_ms = _prefill(session, rng, sizes, k_all, v_all, k_cache, v_cache, table)
        tick("prefill", 1)
        out, lse, step_ms, kernel_ms, stats, copies = _decode_steps(session, sizes, q_all, k_all, v_all, k_cache,
                                                                    v_cache, table, num_splits, tick, scales)
        total = seq_kv + steps * seq_q
        # The bytes the sequences hold: K and V (int8: 1 B each, with each token's V scale and the
        # K channel scales).
        kv_cache_bytes = 2 * batch * total * kv_heads * head_dim * (1 if int8 else np_dtype.itemsize)
        if int8:
            kv_cache_bytes += batch * total * kv_heads * 4 + kv_heads * head_dim * 4
        cache_device_bytes = k_cache.nbytes + v_cache.nbytes + sum(
            x.nbytes for x in scales.values())
        float_cache_bytes = 2 * int(np.prod(cache_shape)) * np_dtype.itemsize
        cores = kv_read = modeled_step_us = None
        if sim:
            cores = _core_balance(stats)
            kv_read, modeled_step_us = _traced_step(session, q_all[-1], k_cache, v_cache,
                                                    np.full(batch, total - seq_q, np.int32), table, num_splits, scales)
        accuracy = None
        if settings.check:
            accuracy = (_check_last_step_int8(out, lse, q_all[-1], k_cache, v_cache, scales, total, table, sizes)
                        if int8 else _check_last_step(out, lse, q_all, k_all, v_all, sizes))
        tick("check", 1)
    finally:
        k_cache.close()
        v_cache.close()
        for x in scales.values():
            if hasattr(x, "close"):
                x.close()
    return DecodeReport(session.backend.name, session.soc_name(), batch, heads, kv_heads, seq_q, seq_kv, head_dim,
                        _dtype_name(np_dtype), block_size, num_splits, steps,
                        step_ms, kernel_ms, cores, kv_read, kv_cache_bytes, copies,
                        2 * batch * seq_q * kv_heads * head_dim * np_dtype.itemsize, accuracy,
                        prefill_ms, prefill_kernel_ms, modeled_step_us,
                        step_hbm_bound_us(session.soc_name(), kv_cache_bytes, batch, heads, seq_q, head_dim,
                                          np_dtype.itemsize, 0 if table is None else table.size),
                        "int8" if int8 else None, cache_device_bytes, float_cache_bytes)


class _DecodeSizes(NamedTuple):
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    seq_q: int
    seq_kv: int
    steps: int
    np_dtype: np.dtype

    @property
    def capacity(self) -> int:
        return self.seq_kv + self.steps * self.seq_q


def _random_tokens(rng, z: _DecodeSizes) -> tuple:
    """Every token's K/V, host side (the reference reads them; the cache holds the first seq_kv),
    and every step's queries."""
    kv_shape = (z.batch, z.capacity, z.kv_heads, z.head_dim)
    k_all = rng.standard_normal(kv_shape, dtype=np.float32).astype(z.np_dtype)
    v_all = rng.standard_normal(kv_shape, dtype=np.float32).astype(z.np_dtype)
    q_all = rng.standard_normal((z.steps, z.batch, z.seq_q, z.heads, z.head_dim), dtype=np.float32).astype(z.np_dtype)
    return k_all, v_all, q_all


def _cache_layout(rng, z: _DecodeSizes, block_size: Optional[int]) -> tuple:
    """(block table or None, cache shape): contiguous, or paged with the blocks in random order."""
    if block_size is None:
        return None, (z.batch, z.capacity, z.kv_heads, z.head_dim)
    per_seq = -(-z.capacity // block_size)
    table = rng.permutation(z.batch * per_seq).reshape(z.batch, per_seq).astype(np.int32)
    return table, (z.batch * per_seq, block_size, z.kv_heads, z.head_dim)


def _prefill(session, rng, z: _DecodeSizes, k_all, v_all, k_cache, v_cache, table) -> tuple:
    """The prompt's causal forward and its K/V written into the caches on the device; returns
    (prefill ms, the forward kernel's ms on the simulator or None)."""
    q_prompt = rng.standard_normal((z.batch, z.seq_kv, z.heads, z.head_dim), dtype=np.float32).astype(z.np_dtype)
    k_prompt, v_prompt = session.to_device(k_all[:, :z.seq_kv]), session.to_device(v_all[:, :z.seq_kv])
    kernel_ms = None
    try:
        t0 = time.perf_counter()
        flash_attention(q_prompt, k_prompt, v_prompt, causal=True, layout="BSND", num_heads=z.heads,
                        num_kv_heads=z.kv_heads, session=session)
        if session.backend.name == "sim":
            kernel_ms = sim_stats.last_launch(session.backend)["wall_seconds"] * 1e3
        write_kv_cache(k_cache, v_cache, k_prompt, v_prompt, cache_seqlens=0, block_table=table)
        return (time.perf_counter() - t0) * 1e3, kernel_ms
    finally:
        k_prompt.close()
        v_prompt.close()


def _decode_steps(session, z: _DecodeSizes, q_all, k_all, v_all, k_cache, v_cache, table, num_splits, tick,
                  scales=None) -> tuple:
    """The decode steps, each appending seq_q tokens; returns (the last step's out and lse, step
    ms, kernel ms (simulator), the last step's per-core stats (simulator, else None), copies)."""
    sim = session.backend.name == "sim"
    seqlens = np.full(z.batch, z.seq_kv, np.int32)
    step_ms, kernel_ms = [], []
    before = session.copy_counters()
    out = lse = stats = None
    for step in range(z.steps):
        new = slice(z.seq_kv + step * z.seq_q, z.seq_kv + (step + 1) * z.seq_q)
        t0 = time.perf_counter()
        out, lse = flash_attention_with_kvcache(
            q_all[step], k_cache, v_cache, cache_seqlens=seqlens, block_table=table, k=k_all[:, new],
            v=v_all[:, new], num_splits=num_splits, return_lse=True, session=session, **(scales or {}))
        step_ms.append((time.perf_counter() - t0) * 1e3)
        if sim:
            stats = sim_stats.last_launch(session.backend, per_core=step == z.steps - 1)
            kernel_ms.append(stats["wall_seconds"] * 1e3)
        seqlens += z.seq_q
        tick("step", 1)
    after = session.copy_counters()
    copies = {kind: {key: after[kind][key] - before[kind][key] for key in ("calls", "bytes")} for kind in after}
    return out, lse, step_ms, kernel_ms, stats, copies


def _core_balance(stats: dict) -> dict:
    """The AI cores the last step used, and the largest core's cube MACs over the mean."""
    macs = [core["cube_macs"] for core in stats["aic"]]
    busy = sum(1 for m in macs if m)
    return {"aic": len(macs), "aic_busy": busy,
            "max_over_mean": max(macs) / (sum(macs) / len(macs)) if sum(macs) else 1.0}


def _check_last_step(out, lse, q_all, k_all, v_all, z: _DecodeSizes) -> Accuracy:
    """The last step against the float64 reference by the 2x-naive rule."""
    total = z.capacity
    lengths = np.full(z.batch, total)
    ref, ref_lse = kvcache_reference(q_all[-1], k_all[:, :total], v_all[:, :total], lengths)
    naive, _ = kvcache_reference(q_all[-1], k_all[:, :total], v_all[:, :total], lengths, precision=z.np_dtype)
    return check_accuracy(out, lse, ref, ref_lse, naive, _dtype_name(z.np_dtype), heads=range(z.heads))


def _int8_caches(session, cache_shape, k_all, v_all, seq_kv: int, table) -> tuple:
    """(k_cache, v_cache, {"k_scale": host array, "v_scale": DeviceArray}): int8 device caches of
    the first seq_kv tokens, quantized on the host (acl_fa.quantize_kv_cache; the channel scales
    with 2x headroom for the steps' new keys)."""
    host_k, host_v = _host_caches(cache_shape, k_all, v_all, seq_kv, table)
    kq, vq, k_scale, v_scale = quantize_kv_cache(host_k, host_v, k_headroom=2.0)
    return session.to_device(kq), session.to_device(vq), {"k_scale": k_scale, "v_scale": session.to_device(v_scale)}


def _check_last_step_int8(out, lse, q, k_cache, v_cache, scales, total: int, table, z: _DecodeSizes) -> Accuracy:
    """The last step of an int8 cache against the float64 attention over what the cache holds
    (dequantized), by the 2x-naive rule (docs/int8.md)."""
    quantized = (k_cache.numpy(), v_cache.numpy(), scales["k_scale"], scales["v_scale"].numpy())
    lengths = np.full(z.batch, total)
    ref, ref_lse = int8_kvcache_reference(q, *quantized, lengths, block_table=table)
    k_deq, v_deq = dequantize_kv_reference(*quantized)
    naive, _ = kvcache_reference(q, k_deq, v_deq, lengths, block_table=table, precision=z.np_dtype)
    return check_accuracy(out, lse, ref, ref_lse, naive, _dtype_name(z.np_dtype), heads=range(z.heads))


def _host_caches(cache_shape, k_all, v_all, seq_kv: int, table) -> tuple:
    """Host caches holding the first seq_kv tokens of every sequence (zeros elsewhere)."""
    batch, _, kv_heads, head_dim = k_all.shape
    host_k = np.zeros(cache_shape, k_all.dtype)
    host_v = np.zeros_like(host_k)
    if table is None:
        host_k[:, :seq_kv], host_v[:, :seq_kv] = k_all[:, :seq_kv], v_all[:, :seq_kv]
    else:
        block_size = cache_shape[1]
        rows_k = host_k.reshape(-1, kv_heads, head_dim)
        rows_v = host_v.reshape(-1, kv_heads, head_dim)
        for b in range(batch):
            rows = (table[b, np.arange(seq_kv) // block_size] * block_size + np.arange(seq_kv) % block_size)
            rows_k[rows], rows_v[rows] = k_all[b, :seq_kv], v_all[b, :seq_kv]
    return host_k, host_v


def _host_filled_caches(session, cache_shape, k_all, v_all, seq_kv: int, table):
    """Device caches holding the first seq_kv tokens of every sequence, filled from the host."""
    host_k, host_v = _host_caches(cache_shape, k_all, v_all, seq_kv, table)
    return session.to_device(host_k), session.to_device(host_v)


def _traced_step(session, q, k_cache, v_cache, seqlens, table, num_splits, scales=None) -> tuple:
    """(K/V cache bytes one launch reads (GM trace), its modeled NPU time in us (pipeline
    model)), simulator only: the last step again, twice, without appending (its tokens are in the
    cache already)."""
    seqlens = seqlens + q.shape[1]
    call = dict(cache_seqlens=seqlens, block_table=table, num_splits=num_splits, session=session, **(scales or {}))
    arrays = [("k", k_cache), ("v", v_cache)] + ([("v_scale", scales["v_scale"])] if scales else [])
    with l2model.gm_trace(session.backend):
        flash_attention_with_kvcache(q, k_cache, v_cache, **call)
        regions = {name: (int(ffi.cast("uintptr_t", array.buffer.ptr)), array.nbytes) for name, array in arrays}
        traffic = l2model.traffic_by_region(session.backend, regions)
    with timing.op_trace(session.backend):
        flash_attention_with_kvcache(q, k_cache, v_cache, **call)
        model = timing.last_model(session.backend)
    return sum(traffic[name]["read"] for name, _ in arrays), model.cycles / model.clock_mhz


def _no_plan(problem, soc: str):
    """measure()'s plan check for the decode op: the chip has its kernel; no forward plan."""
    decode_plan_check(problem, soc)


def measure_routed(session: DeviceSession, problem: Problem, q, k, v, *, warmup: int, iters: int, l2: bool,
                   tick) -> Measurement:
    """jobs.measure of the decode op on a forward problem's arrays (a call acl_fa.plan.routing sends
    to it): the keys as a contiguous cache of Skv tokens per sequence; out and lse back in the
    forward's layout; the intermediates are the decode plan's user workspace."""
    qd, kd, vd = routed.decode_arrays(problem, q, k, v)
    call, inputs = contiguous_call(qd, kd, vd, cache_seqlens=problem.seq_kv, causal=problem.causal,
                                   scale=problem.scale)
    m = measure(session, call, *inputs, warmup=warmup, iters=iters, l2=l2, tick=tick,
                runner=decode_runner_for(session), check=_no_plan)
    out, lse = routed.forward_outputs(problem, m.out, m.lse)
    plan = routing.decode_plan_of(problem, m.soc)
    return dataclasses.replace(m, out=out, lse=lse, device_bytes=dict(m.device_bytes,
                                                                      intermediate=plan.user_workspace_bytes))


def step_hbm_bound_us(soc: str, kv_cache_bytes: int, batch: int, heads: int, seq_q: int, head_dim: int, itemsize: int,
                      table_entries: int) -> float:
    """The step's compulsory bytes -- the K/V the sequences hold, q and out once, the LSE, the
    lengths and the block table -- over the chip's HBM rate (the timing model's hbmBytesPerCycle x
    clock: the catalogue's HBM GB/s), in us: no step can be shorter."""
    rows = batch * heads * seq_q
    compulsory = kv_cache_bytes + 2 * rows * head_dim * itemsize + 4 * rows + 4 * batch + 4 * table_entries
    return compulsory / chip_peaks(soc).hbm_bytes_per_s * 1e6


def _split_words(num_splits: int) -> str:
    if num_splits == 0:
        return "keys split over all cores"
    if num_splits == 1:
        return "one core per sequence and kv head"
    return f"up to {num_splits} pieces per sequence and kv head, round-robin over the vector cores"


def format_decode_report(r: DecodeReport) -> str:
    cache = "contiguous" if r.block_size is None else f"paged, block_size {r.block_size}"
    if r.kv_cache_dtype == "int8":
        cache += "; int8 K/V, per-channel K and per-token V scales"
    lines = [
        f"backend     {r.backend}   SoC {r.soc}",
        f"problem     decode B={r.batch} N={r.heads} Nkv={r.kv_heads} Sq={r.seq_q} D={r.head_dim} {r.dtype}; "
        f"{r.seq_kv} cached tokens per sequence ({cache}); {r.steps} steps appending {r.seq_q} token(s) each",
        f"split       num_splits={r.num_splits} ({_split_words(r.num_splits)})",
    ]
    if r.prefill_ms is not None:
        kernel = f", attention kernel {r.prefill_kernel_ms:.1f} ms" if r.prefill_kernel_ms is not None else ""
        lines.append(f"prefill     {r.prefill_ms:.1f} ms for {r.batch} x {r.seq_kv} prompt tokens (flash_attention causal, "
                     f"then K/V into the cache on the device{kernel}; simulator wall time): "
                     f"{r.prefill_tokens_per_s:.0f} tokens/s")
    elif r.kv_cache_dtype == "int8":
        lines.append("prefill     not run: the int8 cache was filled from the host (quantized by "
                     "acl_fa.quantize_kv_cache; a prefill's K/V enter float caches)")
    else:
        lines.append(f"prefill     not run: the cache was filled from the host (B x N x S^2 beyond "
                     f"{PREFILL_AUTO_LIMIT:.3g}, or --no-prefill; --prefill runs it)")
    step = f"time        {r.median_step_ms:.3f} ms per step end to end (median of {r.steps})"
    if r.median_kernel_ms is not None:
        step += f", kernel {r.median_kernel_ms:.3f} ms (simulator wall time, not NPU time)"
    lines.append(step)
    lines.append(f"throughput  {r.tokens_per_s:.1f} tokens/s (end to end)")
    if r.modeled_step_us is not None:
        lines.append(f"modeled     {r.modeled_step_us:.1f} us per step on {r.soc}, {r.modeled_tokens_per_s:.0f} tokens/s "
                     f"(pipeline model of one step, not a measurement)")
    if r.modeled_step_us is not None and r.hbm_bound_us:
        lines.append(f"bound       {r.hbm_bound_us:.1f} us = the step's compulsory bytes (K/V the sequences hold, q, "
                     f"out, LSE, lengths, block table) at the {r.soc} HBM rate; modeled / bound "
                     f"{r.modeled_step_us / r.hbm_bound_us:.2f}x, so the step takes at least "
                     f"{max(r.modeled_step_us, r.hbm_bound_us):.1f} us ("
                     f"{'HBM' if r.hbm_bound_us >= r.modeled_step_us else 'the pipeline'}-bound)")
    if r.cores is not None:
        lines.append(f"cores       {r.cores['aic_busy']} of {r.cores['aic']} AIC busy, cube work max/mean "
                     f"{r.cores['max_over_mean']:.3f} (last step)")
    if r.cache_device_bytes is not None:
        scales = " with its scales" if r.kv_cache_dtype == "int8" else ""
        lines.append(f"memory      K/V cache {format_bytes(r.cache_device_bytes)} on the device{scales} "
                     f"({r.cache_device_bytes / r.float_cache_bytes:.3f}x the {format_bytes(r.float_cache_bytes)} of "
                     f"a {r.dtype} cache)")
    if r.kv_read_bytes is not None:
        lines.append(f"K/V read    {format_bytes(r.kv_read_bytes)} per step = {r.kv_read_bytes / r.kv_cache_bytes:.3f}x "
                     f"the {format_bytes(r.kv_cache_bytes)} of K/V the sequences hold (GM trace)")
    h2d, d2h, d2d = (r.copies[k] for k in ("h2d", "d2h", "d2d"))
    lines.append(f"host<->dev  per step: {format_bytes(h2d['bytes'] // r.steps)} to the device (q, new k/v "
                 f"{format_bytes(r.new_token_bytes)}, lengths{'' if r.block_size is None else ', block table'}), "
                 f"{format_bytes(d2h['bytes'] // r.steps)} "
                 f"back (out, lse); {format_bytes(d2d['bytes'] // r.steps)} appended on the device")
    if r.accuracy is not None:
        a = r.accuracy
        verdict = "OK" if a.ok else "FAILED"
        lines.append(f"check       last step: max |out - ref| = {a.max_error:.3g} <= {a.tolerance:.3g} (2 x naive "
                     f"{r.dtype} error {a.naive_error:.3g}); LSE error {a.lse_max_error:.2g}: {verdict}")
    return "\n".join(lines)


def torch_sdpa_ms(batch: int, heads: int, kv_heads: int, seq_q: int, length: int, head_dim: int, dtype: str,
                  runs: int = 3, seed: int = 0) -> Optional[float]:
    """Median wall time of torch.nn.functional.scaled_dot_product_attention on the CPU for the same
    decode shape (q [B, N, Sq, D] against K/V [B, Nkv, L, D], GQA, causal bottom-right as the
    decode op; one warm-up call first); None when torch is not installed (not a dependency)."""
    try:
        import torch
    except ImportError:
        return None
    torch_dtype = torch.float16 if dtype == "float16" else torch.bfloat16
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, generator=gen).to(torch_dtype)
    k = torch.randn(batch, kv_heads, length, head_dim, generator=gen).to(torch_dtype)
    v = torch.randn(batch, kv_heads, length, head_dim, generator=gen).to(torch_dtype)
    mask = None
    if seq_q > 1:  # bottom-right causal: token s sees keys j <= s + L - Sq
        mask = torch.arange(length)[None, :] <= torch.arange(seq_q)[:, None] + (length - seq_q)
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=kv_heads != heads)
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def format_decode_table(rows: list) -> str:
    """One line per (report, torch ms or None)."""
    head = (f"{'B':>3} {'N/Nkv':>6} {'cached':>7} {'cache':>10} {'prefill ms':>10} {'kernel ms':>10} {'step ms':>9} "
            f"{'tok/s':>8} {'model us':>9} {'model tok/s':>11} {'torch ms':>9} {'sim/torch':>9} {'K/V read':>9} "
            f"{'max/mean':>8} {'AIC':>6} {'h2d/step':>10} check")
    lines = [head]
    for r, torch_ms in rows:
        cache = "contig" if r.block_size is None else f"paged{r.block_size}"
        kernel = r.median_kernel_ms
        ratio = f"{kernel / torch_ms:.2f}x" if kernel is not None and torch_ms else "-"
        kv = f"{r.kv_read_bytes / r.kv_cache_bytes:.3f}x" if r.kv_read_bytes is not None else "-"
        cores = f"{r.cores['max_over_mean']:.3f}" if r.cores else "-"
        busy = f"{r.cores['aic_busy']}/{r.cores['aic']}" if r.cores else "-"
        check = "-" if r.accuracy is None else ("OK" if r.accuracy.ok else "FAILED")
        prefill = f"{r.prefill_ms:.1f}" if r.prefill_ms is not None else "-"
        model_us = f"{r.modeled_step_us:.1f}" if r.modeled_step_us is not None else "-"
        model_tps = f"{r.modeled_tokens_per_s:.0f}" if r.modeled_tokens_per_s is not None else "-"
        lines.append(
            f"{r.batch:>3} {f'{r.heads}/{r.kv_heads}':>6} {r.seq_kv:>7} {cache:>10} {prefill:>10} "
            f"{'-' if kernel is None else f'{kernel:.2f}':>10} {r.median_step_ms:>9.2f} {r.tokens_per_s:>8.1f} "
            f"{model_us:>9} {model_tps:>11} "
            f"{f'{torch_ms:.2f}' if torch_ms else '-':>9} {ratio:>9} {kv:>9} {cores:>8} {busy:>6} "
            f"{format_bytes(r.copies['h2d']['bytes'] // r.steps):>10} {check}")
    lines.append("prefill ms: flash_attention over the prompt and its K/V into the cache (simulator; '-': filled "
                 "from the host); model: the pipeline model of one step on the SoC (not a measurement)")
    if rows and all(not torch_ms for _, torch_ms in rows):
        lines.append("torch ms '-': torch is not installed here (pip install torch to compare with its CPU SDPA)")
    lines.append("kernel ms: simulator wall time of the launch (not NPU time); step ms: the whole call; torch: "
                 "scaled_dot_product_attention on the CPU, same shape and dtype; K/V read: bytes read from the "
                 "cache per step / the K/V bytes the sequences hold (GM trace); max/mean: cube work per AIC")
    return "\n".join(lines)
