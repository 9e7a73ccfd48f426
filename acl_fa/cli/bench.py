"""`acl-fa bench`: standard attention against FlashAttention by sequence length (and decode, backward)."""
from __future__ import annotations

import json

import click

from .. import api
from ..jobs import bench as bench_module, bench_backward, decode_run
from .options import (
    backend_option, backward_option, check_plot_support, decode_options, deterministic_option, device_option,
    decode_problem_of, decode_settings_of, json_option, problem_of, problem_options, progress,
    plot_option, reported_as_usage_errors, seed_option, settings_of, write_plot)

# The rows when no list is given: query lengths (--seq), or with --decode cached lengths (--seq-kv).
DEFAULT_LENGTHS = (512, 1024, 2048, 4096)


class _SeqList(click.ParamType):
    """Comma-separated positive integers: 512,1024,2048."""

    name = "S[,S...]"

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return list(value)
        try:
            seqs = [int(part) for part in str(value).split(",") if part.strip()]
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if not seqs or min(seqs) < 1:
            self.fail(f"{value!r}: every length must be >= 1", param, ctx)
        return seqs


def _bench_problem_options(function):
    """The shared problem options, with --seq and --seq-kv taking lists (bench runs one row per
    length). The shared single-length options are dropped from the params click collected so far."""
    function = problem_options(function)
    function.__click_params__ = [p for p in function.__click_params__ if p.name not in ("seq", "seq_kv")]
    function = click.option("--seq-kv", "seq_kvs", type=_SeqList(), envvar="ACL_FA_SEQ_KV", default=None,
                            show_envvar=True, metavar="SKV[,SKV...]",
                            help="Key/value length: one value [default: each --seq]; with --decode, the cached "
                                 f"lengths, one row each [default: {','.join(map(str, DEFAULT_LENGTHS))}].")(function)
    return click.option("--seq", "seqs", type=_SeqList(), envvar="ACL_FA_SEQ", default=",".join(map(str, DEFAULT_LENGTHS)),
                        show_default=True, show_envvar=True, metavar="S[,S...]",
                        help="Query sequence lengths, one row each; with --decode: query tokens per step "
                             "(one value) [default there: 1].")(function)


@click.command()
@_bench_problem_options
@click.option("--warmup", type=click.IntRange(min=0), envvar="ACL_FA_WARMUP", default=1, show_default=True,
              show_envvar=True, metavar="N", help="Untimed calls per length before timing.")
@click.option("--iters", type=click.IntRange(min=1), envvar="ACL_FA_ITERS", default=3, show_default=True,
              show_envvar=True, metavar="N", help="Timed calls per length (medians are reported).")
@click.option("--l2/--no-l2", "l2", envvar="ACL_FA_L2", default=True, show_default=True, show_envvar=True,
              help="Simulator: replay one launch's GM trace through the L2 model (modeled HBM bytes).")
@seed_option()
@decode_options
@backend_option
@device_option
@json_option("Print the report as JSON.")
@plot_option("Draw time, memory and traffic against S (log axes; needs matplotlib).")
@backward_option("Benchmark the backward (FlashAttentionGrad: dq, dk, dv) against standard attention's backward.")
@deterministic_option
@click.option("--torch/--no-torch", "with_torch", envvar="ACL_FA_TORCH", default=True, show_default=True,
              show_envvar=True, help="--backward: also time torch's CPU autograd through SDPA (when torch is installed).")
def bench(seqs, seq_kvs, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, warmup, iters,
          l2, seed, decode, paged, block_size, steps, num_splits, prefill, backend, device, as_json, plot_path, backward,
          deterministic, with_torch):
    """Standard attention against FlashAttention by sequence length: time, device memory, GM
    traffic and ratios; on the simulator also the L2 model, a roofline bound and work efficiency
    (for the simulated SoC: ACL_FA_SIM_SOC). With --decode: one decode row per --seq-kv value
    (a comma list of cached lengths; --seq query tokens per step, default 1, as acl-fa run
    --decode) against torch's CPU SDPA when torch is installed."""
    params = click.get_current_context().params
    if decode or paged:
        _bench_decode(params)
        return
    if seq_kvs is not None and len(seq_kvs) > 1:
        raise click.BadParameter("one length (the rows are --seq), or a list with --decode", param_hint="--seq-kv")
    seq_kv = params["seq_kv"] = seq_kvs[0] if seq_kvs else None
    if backward:
        with reported_as_usage_errors(), progress(len(seqs), "acl-fa bench --backward") as bar:
            report = bench_backward.run_backward_bench(
                problem_of(params, seq=seqs[0], seq_kv=None), seqs, settings_of(params, progress=_row_done(bar)),
                deterministic=deterministic, torch=with_torch)
        click.echo(json.dumps(report, indent=2) if as_json else bench_backward.format_backward_bench(report))
        return

    if plot_path:
        check_plot_support()
    with reported_as_usage_errors(), progress(len(seqs), "acl-fa bench") as bar:
        report = bench_module.run_bench(problem_of(params, seq=seqs[0]), seqs,
                                        settings_of(params, progress=_row_done(bar)), seq_kv=seq_kv)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else bench_module.format_bench(report))
    if plot_path:
        write_plot(lambda path: bench_module.plot_bench(report, path), plot_path)


def _row_done(bar):
    """The bench jobs' progress callback (called with each row's length): one step of the bar."""
    return lambda seq: bar.update(1)


def _decode_tokens_per_step(params: dict) -> int:
    """--seq under --decode: the query tokens of each step (one value; 1 unless given)."""
    source = click.get_current_context().get_parameter_source("seqs")
    if source == click.core.ParameterSource.DEFAULT:
        return 1
    if len(params["seqs"]) != 1:
        raise click.BadParameter("with --decode: the query tokens per step, one value (the rows are --seq-kv)",
                                 param_hint="--seq")
    return params["seqs"][0]


def _bench_decode(params: dict):
    lengths = list(params["seq_kvs"] or DEFAULT_LENGTHS)
    tokens = _decode_tokens_per_step(params)
    decode, rows = decode_settings_of(params), []
    with reported_as_usage_errors(), progress(len(lengths), "acl-fa bench --decode") as bar:
        settings = settings_of(params, check=True)
        with api.Session(device=settings.device, backend=settings.backend) as session:
            for length in lengths:
                problem = decode_problem_of(params, length, tokens)
                report = decode_run.run_decode(session, problem, decode, settings)
                torch_ms = decode_run.torch_sdpa_ms(problem.batch, problem.num_heads, problem.num_kv_heads, tokens,
                                                    length + tokens * decode.steps, problem.head_dim, params["dtype"],
                                                    seed=settings.seed)
                rows.append((report, torch_ms))
                bar.update(1)
    if params["as_json"]:
        click.echo(json.dumps([dict(r.to_dict(), torch_sdpa_ms=t) for r, t in rows], indent=2))
    else:
        click.echo(decode_run.format_decode_table(rows))
