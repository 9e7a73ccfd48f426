"""`acl-fa run`: one problem on random inputs (forward, backward, V2 options, decode, parallel)."""
from __future__ import annotations

import dataclasses
import json

import click

from .. import api
from ..jobs import decode_run, int8_run, parallel_run, run as run_module, run_backward, run_options
from .options import (
    backend_option, backward_option, bar_progress, decode_options, deterministic_option, device_option, json_option,
    decode_problem_of, decode_settings_of, problem_of, problem_options, progress, reported_as_usage_errors,
    run_option_options, seed_option, settings_of)

@click.command()
@problem_options
@click.option("--scale", type=float, envvar="ACL_FA_SCALE", default=None, show_envvar=True, metavar="S",
              help="Softmax scale [default: 1/sqrt(head dim)].")
@click.option("--warmup", type=click.IntRange(min=0), envvar="ACL_FA_WARMUP", default=1, show_default=True,
              show_envvar=True, metavar="N", help="Untimed launches before timing.")
@click.option("--iters", type=click.IntRange(min=1), envvar="ACL_FA_ITERS", default=3, show_default=True,
              show_envvar=True, metavar="N", help="Timed launches (the median is reported).")
@click.option("--check/--no-check", envvar="ACL_FA_CHECK", default=True, show_default=True, show_envvar=True,
              help="Compare with the float64 reference (all heads, or a sample of heads on large problems).")
@seed_option("Seed of the random inputs (and of the dropout with --dropout).")
@decode_options
@backend_option
@device_option
@json_option("Print the report as JSON.")
@backward_option("After the forward, the backward (FlashAttentionGrad: dq, dk, dv) on its outputs: both "
                 "reported, gradients checked.")
@deterministic_option
@click.option("--parallel", "parallel_mode", type=click.Choice(["ring", "ulysses", "ulysses,ring"]),
              envvar="ACL_FA_PARALLEL", default=None, show_envvar=True,
              help="Shard the sequence over --devices devices (sequence parallelism over HCCL); ulysses,ring: "
              "Ulysses groups inside, a ring across them (any device count for heads the groups divide).")
@click.option("--devices", type=click.IntRange(min=1), envvar="ACL_FA_DEVICES", default=2, show_default=True,
              show_envvar=True, metavar="P", help="Devices (0..P-1) for --parallel (under acl-fa launch: one per rank, "
              "the launch's -n).")
@click.option("--accumulate", type=click.Choice(["int16", "float32", "output"]), default=None,
              envvar="ACL_FA_ACCUMULATE", show_envvar=True,
              help="--parallel ring: merge the partial outputs into a float32 accumulator (default: O/P more "
              "device memory), in the output's memory as int16 units of per-row bounds (Atlas A2/A3; "
              "(Q+K+V+O)/P plus a float32 per row and head, but channels far below the row's largest lose "
              "precision) or in place in the output's dtype (one rounding per merge). docs/lse_merge.md")
@click.option("--fused", is_flag=True, envvar="ACL_FA_FUSED", show_envvar=True,
              help="--parallel ring: the exchange inside the kernel (one RingAttention launch per step, the K/V "
              "chunk moved by the kernel-side HCCL client while it computes; Atlas A3, contiguous split, S a "
              "multiple of P; forward only). docs/hccl.md")
@run_option_options
@click.option("--qk-quant", "qk_quant", type=click.Choice(["none", "int8"]), envvar="ACL_FA_QK_QUANT", default="none",
              show_default=True, show_envvar=True,
              help="int8: Q and K quantized per block on the device (K smoothed), QK^T in int8 (Atlas A2/A3; "
              "docs/int8.md); prints each launch's modeled time beside the fp16 forward's.")
@click.option("--kv-cache-dtype", "kv_cache_dtype", type=click.Choice(["auto", "int8"]), envvar="ACL_FA_KV_CACHE_DTYPE",
              default="auto", show_default=True, show_envvar=True,
              help="--decode / --paged: int8 holds the KV cache as int8 with per-channel K and per-token V scales "
              "(FlashAttentionDecodeV3, Atlas A2/A3; docs/int8.md); auto: the dtype of --dtype.")
def run(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, scale, warmup,
        iters, check, seed, decode, paged, block_size, steps, num_splits, prefill, backend, device, as_json, backward,
        deterministic, parallel_mode, devices, accumulate, window, dropout, mask_density, varlen, precision,
        qk_quant, alibi, softcap, sinks, fused, kv_cache_dtype):
    """Run FlashAttention on random inputs: tiling, time, TFLOP/s, memory, traffic, error.
    With --decode (or --paged): --seq query tokens per step against a device KV cache of
    --seq-kv tokens per sequence, --steps steps appending to it. With --backward: the forward,
    then the backward on its outputs, with the gradient check. With --parallel ring|ulysses|ulysses,ring:
    the sequence sharded over --devices devices (or the ranks of acl-fa launch, mpirun, srun or a
    torchrun-style launcher), with per-device time, bytes per link and modeled time; --backward
    adds the sharded backward and its gradient check.
    With --window, --mask-density, --dropout or --varlen: the FlashAttentionV2 ops (and their
    backward with --backward), the work against the useful MACs (the pairs the band and the mask
    leave visible), the check against the float64 reference with the same options. --alibi,
    --softcap C and --sinks add the score modifiers (FlashAttentionV3 / V5), with the modeled time."""
    params = click.get_current_context().params
    _MODES[_mode(params)](params)


def _run_options_of(params: dict) -> run_options.RunOptions:
    varlen = params["varlen"]
    return run_options.RunOptions(window=params["window"], dropout=params["dropout"],
                                  mask_density=params["mask_density"], varlen=tuple(varlen) if varlen else None,
                                  precision=params.get("precision", "high_precision"),
                                  alibi=bool(params.get("alibi")), softcap=float(params.get("softcap") or 0.0),
                                  sinks=bool(params.get("sinks")))


def _mode(params: dict) -> str:
    """Which run the flags ask for (a key of _MODES), the flags that do not combine refused."""
    if params.get("qk_quant", "none") == "int8":
        if _run_options_of(params).used or params["parallel_mode"] or params["decode"] or params["paged"] or \
                params["backward"]:
            raise click.UsageError("--qk-quant int8 runs the forward alone: it does not combine with --window, "
                                   "--dropout, --mask-density, --varlen, --precision, --parallel, --decode, --paged "
                                   "or --backward")
        return "int8"
    if params.get("kv_cache_dtype", "auto") != "auto" and not (params["decode"] or params["paged"]):
        raise click.UsageError("--kv-cache-dtype is for --decode / --paged (the KV cache of decode)")
    if _run_options_of(params).used:
        if params["parallel_mode"] or params["decode"] or params["paged"]:
            raise click.UsageError("--window/--dropout/--mask-density/--varlen/--precision/--alibi/--softcap/--sinks "
                                   "do not combine with --parallel, --decode or --paged")
        return "options"
    if params["parallel_mode"] != "ring" and params["accumulate"] is not None and \
            click.get_current_context().get_parameter_source("accumulate") == click.core.ParameterSource.COMMANDLINE:
        # (ACL_FA_ACCUMULATE in the environment applies to the ring runs only.)
        raise click.UsageError("--accumulate is for --parallel ring (how the ring merges its partial outputs)")
    if params["parallel_mode"]:
        return "parallel"
    if params["decode"] or params["paged"]:
        return "decode"
    return "backward" if params["backward"] else "forward"


def _echo(report, as_json: bool, format_text) -> None:
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else format_text(report))


def _run_forward(params: dict):
    total_steps = 1 + params["warmup"] + params["iters"] + 1
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run") as bar:
        report = run_module.run_job(problem_of(params), settings_of(params, progress=bar_progress(bar)))
    _echo(report, params["as_json"], run_module.format_report)
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")


def _run_with_options(params: dict):
    total_steps = (2 if params["backward"] else 1) * (1 + params["warmup"] + params["iters"]) + 1
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run") as bar:
        report = run_options.run_options_job(
            problem_of(params), _run_options_of(params), settings_of(params, progress=bar_progress(bar)),
            backward=params["backward"], deterministic=params["deterministic"])
    _echo(report, params["as_json"], run_options.format_options_report)
    if not report.ok:
        raise click.ClickException("a result is outside the tolerance (see 'check' above)")


# --parallel's default query heads: the simulator's time grows with N S^2, and one head keeps
# `acl-fa run --parallel ring --devices 8 --seq 131072 --causal` to minutes (bench/RESULTS.md).
PARALLEL_DEFAULT_HEADS = 1


def _run_parallel(params: dict):
    heads = params["heads"]
    if click.get_current_context().get_parameter_source("heads") == click.core.ParameterSource.DEFAULT:
        heads = PARALLEL_DEFAULT_HEADS
    how = parallel_run.ParallelSettings(params["parallel_mode"], params["devices"], params["backward"],
                                        params["accumulate"], fused=params["fused"])
    if how.fused and (how.mode != "ring" or how.backward):
        raise click.UsageError("--fused is for the --parallel ring forward (the fused ring has no backward)")
    settings = settings_of(params)
    with reported_as_usage_errors():
        launched = parallel_run.under_launch()
    if launched:  # one rank of a launcher: the clique's size is the device count
        with reported_as_usage_errors():
            problem = problem_of(params, heads=heads, seq_kv=None, block_m=0, block_n=0)
            rank, report = parallel_run.run_parallel_rank_job(problem, how, settings)
        if rank == 0:  # every rank has the whole report; one prints it
            _echo(report, params["as_json"], parallel_run.format_parallel_report)
        _fail_on_tolerance(report)
        return
    with reported_as_usage_errors():
        problem = problem_of(params, heads=heads, seq_kv=None, block_m=0, block_n=0)
        report = parallel_run.run_parallel_job(problem, how, settings)
    _echo(report, params["as_json"], parallel_run.format_parallel_report)
    _fail_on_tolerance(report)


def _fail_on_tolerance(report):
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")
    if report.gradients and not all(g.ok for g in report.gradients):
        raise click.ClickException("a gradient is outside the tolerance (see 'backward' above)")


def _run_backward(params: dict):
    total_steps = 2 * (1 + params["warmup"] + params["iters"] + 1)
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run --backward") as bar:
        report = run_backward.run_backward_job(
            problem_of(params), settings_of(params, l2=False, progress=bar_progress(bar)),
            deterministic=params["deterministic"])
    _echo(report, params["as_json"], run_backward.format_backward_report)
    forward_bad = report.forward.accuracy is not None and not report.forward.accuracy.ok
    if forward_bad or not report.ok:
        raise click.ClickException("a result is outside the tolerance (see 'check' above)")


def _run_decode(params: dict):
    decode = decode_settings_of(params)
    if params["kv_cache_dtype"] == "int8":
        decode = dataclasses.replace(decode, kv_cache_dtype="int8")
    with reported_as_usage_errors(), progress(decode.steps + 3, "acl-fa run --decode") as bar:
        problem = decode_problem_of(params, params["seq_kv"] or 4096, params["seq"])
        settings = settings_of(params, progress=bar_progress(bar))
        with api.Session(device=settings.device, backend=settings.backend) as session:
            report = decode_run.run_decode(session, problem, decode, settings)
    _echo(report, params["as_json"], decode_run.format_decode_report)
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")


def _run_int8(params: dict):
    with reported_as_usage_errors():
        report = int8_run.run_int8_job(problem_of(params), settings_of(params))
    if params["as_json"]:
        m = report.models
        click.echo(json.dumps({"soc": report.soc, "block_m": m.base.block_m, "block_n": m.base.block_n,
                               "modeled_seconds": {name: getattr(m, name).seconds for name in
                                                   ("quant_q", "quant_k", "int8", "fp16") if getattr(m, name)},
                               "cosine": report.cosine, "max_error": report.max_error,
                               "quantized_reference_error": report.quantized_error, "ok": report.ok}, indent=2))
    else:
        click.echo(int8_run.format_int8_report(report))
    if not report.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")


# The runs of `acl-fa run`, by _mode.
_MODES = {"options": _run_with_options, "parallel": _run_parallel, "decode": _run_decode,
          "backward": _run_backward, "forward": _run_forward, "int8": _run_int8}
