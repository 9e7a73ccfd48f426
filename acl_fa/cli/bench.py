"""`acl-fa bench`: standard attention against FlashAttention by sequence length (and decode, backward)."""
from __future__ import annotations

import json

import click

from .. import api
from ..jobs import bench as bench_module, bench_backward, decode_run
from .options import (
    backend_option, backward_option, check_plot_support, decode_options, deterministic_option, device_option,
    json_option, problem_options, progress, reported_as_usage_errors, seed_option)

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
    """The shared problem options, with --seq taking a list (bench runs one row per length).
    The shared single-length --seq is dropped from the params click collected so far."""
    function = problem_options(function)
    function.__click_params__ = [p for p in function.__click_params__ if p.name != "seq"]
    return click.option("--seq", "seqs", type=_SeqList(), envvar="ACL_FA_SEQ", default="512,1024,2048,4096",
                        show_default=True, show_envvar=True,
                        help="Query sequence lengths, one row each (Skv = the same unless --seq-kv).")(function)


@click.command()
@_bench_problem_options
@click.option("--warmup", type=click.IntRange(min=0), envvar="ACL_FA_WARMUP", default=1, show_default=True,
              show_envvar=True, metavar="N", help="Untimed calls per length before timing.")
@click.option("--iters", type=click.IntRange(min=1), envvar="ACL_FA_ITERS", default=3, show_default=True,
              show_envvar=True, metavar="N", help="Timed calls per length (medians are reported).")
@click.option("--l2/--no-l2", "l2", envvar="ACL_FA_L2", default=True, show_default=True, show_envvar=True,
              help="Simulator: replay one launch's GM trace through the L2 model (modeled HBM bytes).")
@seed_option
@decode_options
@backend_option
@device_option
@json_option("Print the report as JSON.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), envvar="ACL_FA_PLOT",
              show_envvar=True, default=None, metavar="FILE.png",
              help="Draw time, memory and traffic against S (log axes; needs matplotlib).")
@backward_option
@deterministic_option
@click.option("--torch/--no-torch", "with_torch", envvar="ACL_FA_TORCH", default=True, show_default=True,
              show_envvar=True, help="--backward: also time torch's CPU autograd through SDPA (when torch is installed).")
def bench(seqs, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, warmup, iters,
          l2, seed, decode, paged, block_size, steps, num_splits, prefill, backend, device, as_json, plot_path, backward,
          deterministic, with_torch):
    """Standard attention against FlashAttention by sequence length: time, device memory, GM
    traffic and ratios; on the simulator also the L2 model, a roofline bound and work efficiency
    (for the simulated SoC: ACL_FA_SIM_SOC). With --decode: one decode row per --seq-kv value
    (comma list; one query token per step) against torch's CPU SDPA when torch is installed."""
    if decode or paged:
        _bench_decode_command(seq_kv, seqs, batch, heads, kv_heads, head_dim, dtype, block_size if paged else None,
                              num_splits, steps, seed, backend, device, as_json, prefill)
        return
    if backward:
        with reported_as_usage_errors(), progress(len(seqs), "acl-fa bench --backward") as bar:
            report = bench_backward.run_backward_bench(
                seqs=seqs, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype,
                layout=layout, causal=causal, deterministic=deterministic, block_m=block_m, block_n=block_n,
                warmup=warmup, iters=iters, torch=with_torch, backend=None if backend == "auto" else backend,
                device=device, seed=seed, progress=lambda seq: bar.update(1))
        click.echo(json.dumps(report, indent=2) if as_json else bench_backward.format_backward_bench(report))
        return

    if plot_path:
        check_plot_support()
    with reported_as_usage_errors(), progress(len(seqs), "acl-fa bench") as bar:
        report = bench_module.run_bench(
            seqs=seqs, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
            dtype=dtype, layout=layout, causal=causal, block_m=block_m, block_n=block_n, warmup=warmup,
            iters=iters, l2=l2, backend=None if backend == "auto" else backend, device=device, seed=seed,
            progress=lambda seq: bar.update(1))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else bench_module.format_bench(report))
    if plot_path:
        try:
            bench_module.plot_bench(report, plot_path)
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"plot written to {plot_path}", err=True)


def _bench_decode_command(seq_kv, seqs, batch, heads, kv_heads, head_dim, dtype, block_size, num_splits, steps, seed,
                          backend, device, as_json, prefill=None):
    lengths = [seq_kv] if seq_kv else list(seqs)
    rows = []
    with reported_as_usage_errors(), progress(len(lengths), "acl-fa bench --decode") as bar:
        with api.Session(device=device, backend=None if backend == "auto" else backend) as session:
            for length in lengths:
                report = decode_run.run_decode(
                    session, seq_kv=length, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                    dtype=dtype, block_size=block_size, num_splits=num_splits, steps=steps, check=True, seed=seed,
                    prefill=prefill)
                torch_ms = decode_run.torch_sdpa_ms(batch, heads, kv_heads or heads, 1, length + steps, head_dim,
                                                    dtype, seed=seed)
                rows.append((report, torch_ms))
                bar.update(1)
    if as_json:
        click.echo(json.dumps([dict(r.to_dict(), torch_sdpa_ms=t) for r, t in rows], indent=2))
    else:
        click.echo(decode_run.format_decode_table(rows))
