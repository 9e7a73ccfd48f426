"""The `acl-fa` command line: parses, calls acl_fa functions, prints. No logic of its own.

Options shared by several commands are defined once here (backend_option, device_option);
commands added elsewhere reuse them with ``@backend_option`` / ``@device_option`` and register
themselves with ``@main.command()``.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import sys

import click

from ..jobs import doctor as doctor_module
from ..jobs import run as run_module
from ..plan import forward as plan_module
from .. import __version__
from ..runtime.errors import AclFaError
from ..runtime.loader import BACKENDS, ENV_BACKEND

backend_option = click.option(
    "--backend",
    type=click.Choice(BACKENDS, case_sensitive=False),
    envvar=ENV_BACKEND,
    default="auto",
    show_default=True,
    show_envvar=True,
    help="npu: the CANN libraries; sim: the CPU simulator; auto: npu when a device exists, else sim.",
)

device_option = click.option(
    "--device",
    type=click.IntRange(min=0),
    envvar="ACL_FA_DEVICE",
    default=0,
    show_default=True,
    show_envvar=True,
    metavar="ID",
    help="Device id passed to aclrtSetDevice.",
)


def _set_verbose(ctx, param, value):
    if value:
        logging.getLogger().setLevel(logging.INFO)
    return value


# -v is accepted before the command (acl-fa -v run) and after it (acl-fa run -v).
verbose_option = click.option("-v", "--verbose", is_flag=True, envvar="ACL_FA_VERBOSE", show_envvar=True,
                              expose_value=False, is_eager=True, callback=_set_verbose,
                              help="Log what the library does (INFO level).")


@contextlib.contextmanager
def progress(length: int, label: str):
    """click's progress bar on a terminal; elsewhere (a pipe, a log file) nothing at all, not
    even the label line."""
    if sys.stderr.isatty():
        with click.progressbar(length=length, label=label, file=sys.stderr, show_eta=False) as bar:
            yield bar
    else:
        yield _NoBar()


class _NoBar:
    def update(self, steps: int):
        pass


def _check_plot_support():
    """--plot needs matplotlib: said before the benchmark runs, with the install command of
    the Python that runs acl-fa."""
    if importlib.util.find_spec("matplotlib") is None:
        raise click.UsageError(f"--plot needs matplotlib, which this Python does not have; install it with: "
                               f"{sys.executable} -m pip install matplotlib")


@contextlib.contextmanager
def reported_as_usage_errors():
    """acl-fa's own exceptions (refused input, a failed ACL call, libraries not found) end the
    command with their message and exit status 1, not a traceback."""
    try:
        yield
    except AclFaError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="acl-fa")
@verbose_option
def main():
    """FlashAttention forward on Ascend NPUs, or on the CPU simulator of the same ABI.

    Every option of run, plan, bench and profile can also be set with the environment variable
    ACL_FA_<OPTION> (--seq-kv: ACL_FA_SEQ_KV), shown in each command's --help."""
    logging.basicConfig(format="acl-fa: %(message)s")


@main.command()
@backend_option
@device_option
@verbose_option
def doctor(backend: str, device: int):
    """Show the backend, the libraries loaded (and every path tried), the device and the
    environment variables that matter. Exits with 1 when no backend could be loaded."""
    report = doctor_module.collect(backend=backend, device=device)
    click.echo(doctor_module.format_report(report))
    if "error" in report["backend"]:
        raise SystemExit(1)


# The problem options, shared by `plan`, `run` and `bench` (one definition each).
_PROBLEM_OPTIONS = [
    click.option("--seq", type=click.IntRange(min=1), envvar="ACL_FA_SEQ", default=4096, show_default=True,
              show_envvar=True, metavar="SQ", help="Query sequence length."),
    click.option("--seq-kv", type=click.IntRange(min=1), envvar="ACL_FA_SEQ_KV", default=None, show_envvar=True,
              metavar="SKV", help="Key/value sequence length [default: --seq]."),
    click.option("--batch", type=click.IntRange(min=1), envvar="ACL_FA_BATCH", default=1, show_default=True,
              show_envvar=True, metavar="B", help="Batch size."),
    click.option("--heads", type=click.IntRange(min=1), envvar="ACL_FA_HEADS", default=32, show_default=True,
              show_envvar=True, metavar="N", help="Query heads."),
    click.option("--kv-heads", type=click.IntRange(min=1), envvar="ACL_FA_KV_HEADS", default=None, show_envvar=True,
              metavar="NKV", help="Key/value heads (GQA/MQA) [default: --heads]."),
    click.option("--head-dim", type=click.IntRange(min=1), envvar="ACL_FA_HEAD_DIM", default=128, show_default=True,
              show_envvar=True, metavar="D", help="Head dimension (a multiple of 16, at most 256)."),
    click.option("--dtype", type=click.Choice(plan_module.DTYPES, case_sensitive=False), envvar="ACL_FA_DTYPE", default="float16",
              show_default=True, show_envvar=True, help="Input dtype."),
    click.option("--layout", type=click.Choice(plan_module.LAYOUTS, case_sensitive=False), envvar="ACL_FA_LAYOUT",
              default="BNSD", show_default=True, show_envvar=True, help="Input layout (any case)."),
    click.option("--causal/--no-causal", envvar="ACL_FA_CAUSAL", default=False, show_default=True, show_envvar=True,
              help="Causal (bottom-right aligned) mask."),
    click.option("--block-m", type=click.IntRange(min=0), envvar="ACL_FA_BLOCK_M", default=0, show_default=True,
              show_envvar=True, metavar="ROWS", help="Query rows per block (multiple of 16); 0 = let the policy choose."),
    click.option("--block-n", type=click.IntRange(min=0), envvar="ACL_FA_BLOCK_N", default=0, show_default=True,
              show_envvar=True, metavar="ROWS", help="Key/value rows per block (multiple of 16); 0 = let the policy choose."),
]


def problem_options(function):
    for option in reversed(_PROBLEM_OPTIONS):
        function = option(function)
    return verbose_option(function)


def json_option(help_text: str):
    return click.option("--json", "as_json", is_flag=True, envvar="ACL_FA_JSON", show_envvar=True, help=help_text)


seed_option = click.option("--seed", type=click.IntRange(min=0), envvar="ACL_FA_SEED", default=0, show_default=True,
                           show_envvar=True, help="Seed of the random inputs (and of the dropout with --dropout).")


backward_option = click.option(
    "--backward", is_flag=True, envvar="ACL_FA_BACKWARD", show_envvar=True,
    help="The backward (FlashAttentionGrad: dq, dk, dv) instead of the forward.")
deterministic_option = click.option(
    "--deterministic/--atomic", envvar="ACL_FA_DETERMINISTIC", default=True, show_default=True, show_envvar=True,
    help="Backward dQ: summed in a fixed order (bit-identical runs) or with fp32 atomic adds.")


class _IntList(click.ParamType):
    """Comma-separated integers of a fixed count (or any count when count is None) and a minimum."""

    def __init__(self, name: str, count=None, minimum: int = 1):
        self.name, self.count, self.minimum = name, count, minimum

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return tuple(value)
        try:
            values = tuple(int(part) for part in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a comma-separated list of integers", param, ctx)
        if self.count is not None and len(values) != self.count:
            self.fail(f"{value!r}: expected {self.count} comma-separated integers ({self.name})", param, ctx)
        if not values or min(values) < self.minimum:
            self.fail(f"{value!r}: every value must be >= {self.minimum}", param, ctx)
        return values


# The V2 options (docs/attention_options.md), shared by `run` and `plan`.
window_option = click.option(
    "--window", type=_IntList("L,R", count=2, minimum=-1), envvar="ACL_FA_WINDOW", default=None, show_envvar=True,
    metavar="L,R", help="Sliding window: query i sees keys i+Skv-Sq-L .. i+Skv-Sq+R; -1 = unbounded. Combines with "
                        "--causal by intersection.")
varlen_option = click.option(
    "--varlen", type=_IntList("S[,S...]"), envvar="ACL_FA_VARLEN", default=None, show_envvar=True,
    metavar="S[,S...]", help="A variable-length batch (layout TND) of sequences of these lengths (queries and keys "
                             "alike); replaces --seq/--seq-kv/--batch/--layout.")
dropout_option = click.option(
    "--dropout", type=click.FloatRange(min=0.0, max=1.0, max_open=True), envvar="ACL_FA_DROPOUT", default=0.0,
    show_default=True, show_envvar=True, metavar="P",
    help="Dropout probability inside the kernel (Philox4x32-10 keyed by --seed, offset 0).")
mask_density_option = click.option(
    "--mask-density", type=click.FloatRange(min=0.0, max=1.0, max_open=True), envvar="ACL_FA_MASK_DENSITY",
    default=None, show_envvar=True, metavar="F",
    help="A key-padding attn_mask [B, 1, 1, Skv] hiding the last F of the keys (fraction in [0, 1)).")
_RUN_OPTION_OPTIONS = [window_option, dropout_option, mask_density_option, varlen_option]


def run_option_options(function):
    for option in reversed(_RUN_OPTION_OPTIONS):
        function = option(function)
    return function


def _plan_backward(problem: dict, soc: str, deterministic: bool, as_json: bool):
    from ..plan import backward as backward_plan

    if soc is None or soc.lower() != "all":
        with reported_as_usage_errors():
            p = backward_plan.grad_plan(soc=soc, deterministic=deterministic, **problem)
        click.echo(json.dumps([backward_plan.to_dict(p)], indent=2) if as_json else backward_plan.format_grad_plan(p))
        return
    rows = []
    for chip in plan_module.chips():
        try:
            rows.append((chip, backward_plan.grad_plan(soc=chip, deterministic=deterministic, **problem)))
        except plan_module.PlanError as exc:
            rows.append((chip, str(exc)))
    if as_json:
        click.echo(json.dumps([backward_plan.to_dict(p) if isinstance(p, backward_plan.GradPlan) else
                               {"chip": c.name, "error": p} for c, p in rows], indent=2))
    else:
        click.echo(backward_plan.format_grad_plan_table(rows))


_DECODE_OPTIONS = [
    click.option("--decode", is_flag=True, envvar="ACL_FA_DECODE", show_envvar=True, help="Decode against a device KV cache (flash_attention_with_kvcache)."),
    click.option("--paged", is_flag=True, envvar="ACL_FA_PAGED", show_envvar=True, help="Decode with a paged KV cache (implies --decode)."),
    click.option("--block-size", type=click.IntRange(min=16), envvar="ACL_FA_BLOCK_SIZE", default=128,
                 show_default=True, show_envvar=True, metavar="N",
                 help="Keys per cache block with --paged (a multiple of 16)."),
    click.option("--steps", type=click.IntRange(min=1), envvar="ACL_FA_STEPS", default=8, show_default=True,
                 show_envvar=True, metavar="N",
                 help="Decode steps, each appending --seq tokens per sequence to the cache."),
    click.option("--num-splits", type=click.IntRange(min=0, max=2**31 - 1), envvar="ACL_FA_NUM_SPLITS", default=0,
                 show_default=True, show_envvar=True, metavar="S",
                 help="0: each sequence's keys split over all cores; 1: one core per sequence and kv head; S >= 2: "
                      "S pieces per sequence and kv head (clamped to the vector cores and the key chunks)."),
    click.option("--prefill/--no-prefill", envvar="ACL_FA_PREFILL", default=None, show_envvar=True,
                 help="Fill the cache by a timed prefill (flash_attention over the --seq-kv prompt tokens, then "
                      "its K/V into the cache on the device), or from the host. Default: the prefill when "
                      "batch x heads x seq_kv^2 <= 32 x 4096^2 (beyond, the simulator takes long)."),
]


def _decode_options(function):
    for option in reversed(_DECODE_OPTIONS):
        function = option(function)
    return function


@main.command()
@problem_options
@click.option("--soc", envvar="ACL_FA_SOC", default=None, show_envvar=True, metavar="NAME|all",
              help="Chip of the simulator's catalogue (its name, e.g. Ascend910B4, or a short name it prints, "
                   "e.g. ascend910b: the first chip of that family), or 'all' for one row each "
                   f"[default: $ACL_FA_SIM_SOC, else {plan_module.DEFAULT_SOC}].")
@json_option("Print the plans as JSON: always a list, one plan per chip ({chip, error} for a chip that "
             "refuses the problem).")
@backward_option
@deterministic_option
@click.option("--sweep", is_flag=True, envvar="ACL_FA_SWEEP", show_envvar=True, help="Run every (BLOCK_M, BLOCK_N) that fits on the simulator and print its "
                                           "modeled NPU time (pipeline model; slow on large problems).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), envvar="ACL_FA_PLOT",
              show_envvar=True, default=None, metavar="FILE.png", help="With --sweep: draw modeled time against BLOCK_M per BLOCK_N.")
@window_option
@dropout_option
@mask_density_option
@varlen_option
@_decode_options
def plan(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, soc, block_m, block_n, as_json,
         backward, deterministic, sweep, plot_path, window, dropout, mask_density, varlen, decode, paged, block_size,
         steps, num_splits, prefill):
    """Show what the operator will do: blocks, buffer budget, core split, workspace, memory.
    With --window / --dropout / --mask-density / --varlen: FlashAttentionV2's plan (with the UB
    and workspace the mask and dropout take), its work counted over the band and the sequences. With --decode (or --paged): one decode step of --seq query tokens against
    --seq-kv cached keys per sequence (default 4096, as acl-fa run --decode): GQA-packed rows, key
    chunks, the work items (batch, kv head, split) on the vector cores, merges, core balance."""
    if decode or paged:
        _plan_decode(dict(seq_q=seq, seq_kv=seq_kv or 4096, batch=batch, heads=heads, kv_heads=kv_heads,
                          head_dim=head_dim, dtype=dtype, block_size=block_size if paged else None,
                          num_splits=num_splits), soc, as_json)
        return
    problem = dict(seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                   dtype=dtype, layout=layout, causal=causal, block_m=block_m, block_n=block_n)
    if window is not None or varlen is not None or dropout > 0 or mask_density is not None:
        if backward or sweep:
            raise click.UsageError("--window/--dropout/--mask-density/--varlen plans are of the forward (no "
                                   "--backward or --sweep)")
        from ..jobs import run_options

        with reported_as_usage_errors():
            problem = run_options.v2_plan_problem(problem, window=window, varlen=varlen, dropout=dropout,
                                                  mask_density=mask_density)
            if soc is None or soc.lower() != "all":
                p = plan_module.plan(soc=soc, **problem)
                click.echo(json.dumps([p.to_dict()], indent=2) if as_json else
                           plan_module.format_plan(p) + "\n" + run_options.band_work_line(p))
                return
    if backward:
        _plan_backward(problem, soc, deterministic, as_json)
        return
    if sweep:
        _plan_sweep(problem, soc, as_json, plot_path)
        return
    if soc is None or soc.lower() != "all":
        with reported_as_usage_errors():
            p = plan_module.plan(soc=soc, **problem)
        click.echo(json.dumps([p.to_dict()], indent=2) if as_json else plan_module.format_plan(p))
        return
    rows = []
    for chip in plan_module.chips():
        try:
            rows.append((chip, plan_module.plan(soc=chip, **problem)))
        except plan_module.PlanError as exc:
            rows.append((chip, str(exc)))
    if as_json:
        click.echo(json.dumps([p.to_dict() if isinstance(p, plan_module.Plan) else
                               {"chip": c.name, "error": p} for c, p in rows], indent=2))
    else:
        click.echo(plan_module.format_plan_table(rows))


def _plan_decode(problem: dict, soc: str, as_json: bool) -> None:
    from ..plan import decode as decode_plan

    if soc is not None and soc.lower() == "all":
        raise click.ClickException("--decode plans one chip (--soc NAME)")
    with reported_as_usage_errors():
        p = decode_plan.decode_plan(soc=soc, **problem)
    click.echo(json.dumps([p.to_dict()], indent=2) if as_json else decode_plan.format_decode_plan(p))


def _plan_sweep(problem: dict, soc: str, as_json: bool, plot_path) -> None:
    import os

    from ..jobs import sweep as sweep_module

    if soc is not None and soc.lower() == "all":
        raise click.ClickException("--sweep needs one chip (--soc NAME)")
    if plot_path:
        _check_plot_support()
    with reported_as_usage_errors():
        soc = plan_module.chip(soc).name  # default: $ACL_FA_SIM_SOC, else the catalogue's default
    os.environ["ACL_FA_SIM_SOC"] = soc  # the simulated chip of this process
    sizes = {k: v for k, v in problem.items() if k not in ("block_m", "block_n")}
    with reported_as_usage_errors():
        rows = sweep_module.sweep(**sizes)
    title = (f"{plan_module.chip(soc).name} B={sizes['batch']} N={sizes['heads']} S={sizes['seq']} "
             f"D={sizes['head_dim']}{' causal' if sizes['causal'] else ''}")
    click.echo(json.dumps([r.to_dict() for r in rows], indent=2) if as_json else sweep_module.format_sweep(rows, title))
    if plot_path:
        try:
            sweep_module.plot_sweep(rows, plot_path, title)
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"plot written to {plot_path}", err=True)


def _run_decode_command(seq_kv, batch, heads, kv_heads, head_dim, dtype, seq_q, block_size, num_splits, steps, check,
                        seed, backend, device, as_json, prefill=None):
    from .. import api
    from ..jobs import decode_run

    with reported_as_usage_errors(), progress(steps + 3, "acl-fa run --decode") as bar:
        with api.Session(device=device, backend=None if backend == "auto" else backend) as session:
            report = decode_run.run_decode(
                session, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, seq_q=seq_q,
                dtype=dtype, block_size=block_size, num_splits=num_splits, steps=steps, check=check, seed=seed,
                prefill=prefill, tick=lambda stage, n: bar.update(n))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else decode_run.format_decode_report(report))
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")


def _bench_decode_command(seq_kv, seqs, batch, heads, kv_heads, head_dim, dtype, block_size, num_splits, steps, seed,
                          backend, device, as_json, prefill=None):
    from .. import api
    from ..jobs import decode_run

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


@main.command()
@problem_options
@click.option("--scale", type=float, envvar="ACL_FA_SCALE", default=None, show_envvar=True, metavar="S",
              help="Softmax scale [default: 1/sqrt(head dim)].")
@click.option("--warmup", type=click.IntRange(min=0), envvar="ACL_FA_WARMUP", default=1, show_default=True,
              show_envvar=True, metavar="N", help="Untimed launches before timing.")
@click.option("--iters", type=click.IntRange(min=1), envvar="ACL_FA_ITERS", default=3, show_default=True,
              show_envvar=True, metavar="N", help="Timed launches (the median is reported).")
@click.option("--check/--no-check", envvar="ACL_FA_CHECK", default=True, show_default=True, show_envvar=True,
              help="Compare with the float64 reference (all heads, or a sample of heads on large problems).")
@seed_option
@_decode_options
@backend_option
@device_option
@json_option("Print the report as JSON.")
@backward_option
@deterministic_option
@click.option("--parallel", "parallel_mode", type=click.Choice(["ring", "ulysses"]), envvar="ACL_FA_PARALLEL",
              default=None, show_envvar=True, help="Shard the sequence over --devices devices (sequence parallelism over HCCL).")
@click.option("--devices", type=click.IntRange(min=1), envvar="ACL_FA_DEVICES", default=2, show_default=True,
              show_envvar=True, metavar="P", help="Devices (0..P-1) for --parallel (under acl-fa launch: one per rank, "
              "the launch's -n).")
@click.option("--accumulate", type=click.Choice(["int16", "float32", "output"]), default=None,
              envvar="ACL_FA_ACCUMULATE", show_envvar=True,
              help="--parallel ring: merge the partial outputs in the output's memory as int16 units of per-row "
              "bounds (default on Atlas A2/A3; (Q+K+V+O)/P plus a float32 per row and head), into a float32 "
              "accumulator (default on 310P/910A; O/P more device memory) or in place in the output's dtype "
              "(one rounding per merge). docs/lse_merge.md")
@run_option_options
def run(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, scale, warmup,
        iters, check, seed, decode, paged, block_size, steps, num_splits, prefill, backend, device, as_json, backward,
        deterministic, parallel_mode, devices, accumulate, window, dropout, mask_density, varlen):
    """Run FlashAttention on random inputs: tiling, time, TFLOP/s, memory, traffic, error.
    With --decode (or --paged): --seq query tokens per step against a device KV cache of
    --seq-kv tokens per sequence, --steps steps appending to it. With --backward: the forward,
    then the backward on its outputs, with the gradient check. With --parallel ring|ulysses: the
    sequence sharded over --devices devices, with per-device time, bytes per link and modeled time.
    With --window, --mask-density, --dropout or --varlen: the FlashAttentionV2 ops (and their
    backward with --backward), the work against the useful MACs (the pairs the band and the mask
    leave visible), the check against the float64 reference with the same options."""
    from ..jobs import run_options

    if run_options.uses_options(window=window, dropout=dropout, mask_density=mask_density, varlen=varlen):
        if parallel_mode or decode or paged:
            raise click.UsageError("--window/--dropout/--mask-density/--varlen do not combine with --parallel, "
                                   "--decode or --paged")
        _run_with_options(dict(seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads,
                               head_dim=head_dim, dtype=dtype, layout=layout, causal=causal, scale=scale,
                               block_m=block_m or None, block_n=block_n or None, window=window, dropout=dropout,
                               mask_density=mask_density, varlen=list(varlen) if varlen else None,
                               backward=backward, deterministic=deterministic, warmup=warmup, iters=iters,
                               check=check, backend=None if backend == "auto" else backend, device=device,
                               seed=seed), as_json)
        return
    if parallel_mode != "ring" and accumulate is not None and \
            click.get_current_context().get_parameter_source("accumulate") == click.core.ParameterSource.COMMANDLINE:
        # (ACL_FA_ACCUMULATE in the environment applies to the ring runs only.)
        raise click.UsageError("--accumulate is for --parallel ring (how the ring merges its partial outputs)")
    if parallel_mode:
        if click.get_current_context().get_parameter_source("heads") == click.core.ParameterSource.DEFAULT:
            heads = PARALLEL_DEFAULT_HEADS
        _run_parallel(parallel_mode, devices, seq, batch, heads, kv_heads, head_dim, dtype, layout, causal, scale,
                      check, seed, backend, as_json, backward, accumulate)
        return
    if decode or paged:
        _run_decode_command(seq_kv or 4096, batch, heads, kv_heads, head_dim, dtype, seq, block_size if paged else None,
                            num_splits, steps, check, seed, backend, device, as_json, prefill)
        return
    if backward:
        _run_backward(dict(seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                           dtype=dtype, layout=layout, causal=causal, scale=scale, block_m=block_m or None,
                           block_n=block_n or None, deterministic=deterministic, warmup=warmup, iters=iters,
                           check=check, backend=None if backend == "auto" else backend, device=device, seed=seed),
                      as_json)
        return
    total_steps = 1 + warmup + iters + 1
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run") as bar:
        report = run_module.run_job(
            seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype,
            layout=layout, causal=causal, scale=scale, block_m=block_m or None, block_n=block_n or None,
            warmup=warmup, iters=iters, check=check, backend=None if backend == "auto" else backend,
            device=device, seed=seed, progress=lambda stage, steps: bar.update(steps))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else run_module.format_report(report))
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")


def _run_with_options(options: dict, as_json: bool):
    from ..jobs import run_options

    total_steps = (2 if options["backward"] else 1) * (1 + options["warmup"] + options["iters"]) + 1
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run") as bar:
        report = run_options.run_options_job(**options, progress=lambda stage, steps: bar.update(steps))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else run_options.format_options_report(report))
    if not report.ok:
        raise click.ClickException("a result is outside the tolerance (see 'check' above)")


# --parallel's default query heads: the simulator's time grows with N S^2, and one head keeps
# `acl-fa run --parallel ring --devices 8 --seq 131072 --causal` to minutes (bench/RESULTS.md).
PARALLEL_DEFAULT_HEADS = 1


def _run_parallel(mode, devices, seq, batch, heads, kv_heads, head_dim, dtype, layout, causal, scale, check, seed,
                  backend, as_json, backward=False, accumulate=None):
    from ..jobs import parallel_run

    if backward and mode != "ring":
        raise click.UsageError("--backward with --parallel: ring (acl-fa run --parallel ring --devices P --backward, "
                               "or one process per device under acl-fa launch)")
    if parallel_run.under_launch():  # one rank of `acl-fa launch`: the clique's size is the device count
        with reported_as_usage_errors():
            rank, report = parallel_run.run_parallel_rank_job(
                mode=mode, seq=seq, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype,
                layout=layout, causal=causal, scale=scale, check=check, seed=seed,
                backend=None if backend == "auto" else backend, backward=backward, accumulate=accumulate)
        if rank == 0:  # every rank has the whole report; one prints it
            click.echo(json.dumps(report.to_dict(), indent=2) if as_json else
                       parallel_run.format_parallel_report(report))
        _fail_on_tolerance(report)
        return
    with reported_as_usage_errors():
        report = parallel_run.run_parallel_job(
            mode=mode, devices=devices, seq=seq, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
            dtype=dtype, layout=layout, causal=causal, scale=scale, check=check, seed=seed,
            backend=None if backend == "auto" else backend, backward=backward,
            **(dict(accumulate=accumulate) if mode == "ring" else {}))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else parallel_run.format_parallel_report(report))
    _fail_on_tolerance(report)


def _fail_on_tolerance(report):
    if report.accuracy is not None and not report.accuracy.ok:
        raise click.ClickException("the result is outside the tolerance (see 'check' above)")
    if report.gradients and not all(g.ok for g in report.gradients):
        raise click.ClickException("a gradient is outside the tolerance (see 'backward' above)")


def _run_backward(options: dict, as_json: bool):
    from ..jobs import run_backward

    total_steps = 2 * (1 + options["warmup"] + options["iters"] + 1)
    with reported_as_usage_errors(), progress(total_steps, "acl-fa run --backward") as bar:
        report = run_backward.run_backward_job(**options, progress=lambda stage, steps: bar.update(steps))
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else run_backward.format_backward_report(report))
    forward_bad = report.forward.accuracy is not None and not report.forward.accuracy.ok
    if forward_bad or not report.ok:
        raise click.ClickException("a result is outside the tolerance (see 'check' above)")


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


@main.command()
@_bench_problem_options
@click.option("--warmup", type=click.IntRange(min=0), envvar="ACL_FA_WARMUP", default=1, show_default=True,
              show_envvar=True, metavar="N", help="Untimed calls per length before timing.")
@click.option("--iters", type=click.IntRange(min=1), envvar="ACL_FA_ITERS", default=3, show_default=True,
              show_envvar=True, metavar="N", help="Timed calls per length (medians are reported).")
@click.option("--l2/--no-l2", "l2", envvar="ACL_FA_L2", default=True, show_default=True, show_envvar=True,
              help="Simulator: replay one launch's GM trace through the L2 model (modeled HBM bytes).")
@seed_option
@_decode_options
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
    from ..jobs import bench as bench_module

    if decode or paged:
        _bench_decode_command(seq_kv, seqs, batch, heads, kv_heads, head_dim, dtype, block_size if paged else None,
                              num_splits, steps, seed, backend, device, as_json, prefill)
        return
    if backward:
        from ..jobs import bench_backward

        with reported_as_usage_errors(), progress(len(seqs), "acl-fa bench --backward") as bar:
            report = bench_backward.run_backward_bench(
                seqs=seqs, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype,
                layout=layout, causal=causal, deterministic=deterministic, block_m=block_m, block_n=block_n,
                warmup=warmup, iters=iters, torch=with_torch, backend=None if backend == "auto" else backend,
                device=device, seed=seed, progress=lambda seq: bar.update(1))
        click.echo(json.dumps(report, indent=2) if as_json else bench_backward.format_backward_bench(report))
        return

    if plot_path:
        _check_plot_support()
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


@main.command()
@problem_options
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, writable=True), envvar="ACL_FA_TRACE",
              show_envvar=True, default=None,
              metavar="FILE.json", help="Write the modeled schedule as a Chrome/Perfetto trace (a track per core "
                                        "and pipe, waits visible).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), envvar="ACL_FA_PLOT",
              show_envvar=True, default=None, metavar="FILE.png", help="Draw AI Core group 0 over its first work item (needs the 'plot' extra: matplotlib).")
@click.option("--sensitivity", is_flag=True, envvar="ACL_FA_SENSITIVITY", show_envvar=True, help="Also replay with each assumed or derived cost at x0.5 and x1.5.")
@seed_option
@backend_option
@device_option
@json_option("Print the report as JSON.")
def profile(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, trace_path,
            plot_path, sensitivity, seed, backend, device, as_json):
    """Modeled NPU time of one problem on the simulated chip: time, TFLOP/s, busy pipes, the critical
    resource, a timeline (pipeline model over the simulator's instruction trace; not a measurement)."""
    from ..jobs import profile as profile_module

    if plot_path:
        _check_plot_support()
    with reported_as_usage_errors():
        report = profile_module.profile_job(
            seq=seq, seq_kv=seq_kv, batch=batch, heads=heads, kv_heads=kv_heads, head_dim=head_dim, dtype=dtype,
            layout=layout, causal=causal, block_m=block_m or None, block_n=block_n or None,
            backend="sim" if backend == "auto" else backend, device=device, seed=seed,
            with_sensitivity=sensitivity)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else profile_module.format_profile(report))
    if trace_path:
        with open(trace_path, "w") as f:
            json.dump(profile_module.chrome_trace(report), f)
        click.echo(f"trace written to {trace_path}", err=True)
    if plot_path:
        try:
            profile_module.plot_timeline(report, plot_path)
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"plot written to {plot_path}", err=True)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-n", "ranks", type=click.IntRange(min=1), required=True, metavar="N", help="Processes (ranks), one per device.")
@click.option("--devices", type=str, default=None, metavar="D0,D1,...",
              help="The device of each rank [default: rank r on device r].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), envvar="ACL_FA_LAUNCH_TIMEOUT", default=3600.0,
              show_default=True, show_envvar=True, metavar="SECONDS",
              help="Stop every rank and fail when they are still running after this long.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def launch(ranks, devices, timeout, command):
    """Run COMMAND as N processes, one per device, joined as one HCCL clique: each gets ACL_FA_RANK,
    ACL_FA_WORLD_SIZE, ACL_FA_DEVICE and ACL_FA_ROOT_INFO (acl_fa.parallel.RankContext.from_env).
    Output lines are prefixed with the rank; a failing rank stops the others; the exit code is the
    first failing rank's (124 on timeout). Example: acl-fa launch -n 4 -- acl-fa run --parallel ring
    --seq 4096 --causal"""
    from ..parallel import launch as launch_module

    ids = None
    if devices is not None:
        try:
            ids = [int(x) for x in devices.split(",")]
        except ValueError:
            raise click.UsageError(f"--devices {devices!r}: a comma-separated list of device ids") from None
    command = list(command)
    if command and command[0] == "--":
        command = command[1:]
    if command and command[0] == "acl-fa":  # the same acl-fa as this one (its interpreter and package)
        command = [sys.executable, "-m", "acl_fa", *command[1:]]
    with reported_as_usage_errors():
        code = launch_module.launch(ranks, command, devices=ids, timeout=timeout)
    sys.exit(code)
