"""`acl-fa plan`: the forward plan per chip, and with its flags the backward, V2, decode and sweep plans."""
from __future__ import annotations

import dataclasses
import json
import os

import click

from ..jobs import run_options, sweep as sweep_module
from ..plan import backward as backward_plan, decode as decode_plan, forward as plan_module, routing
from ..jobs.settings import JobSettings
from .options import (
    bar_progress, backward_option, check_plot_support, decode_options, deterministic_option, dropout_option, json_option,
    mask_density_option, plot_option, problem_options, progress, reported_as_usage_errors, varlen_option, window_option, write_plot)
from ..runtime.units import format_bytes
from ..spec.problem import sized_problem, with_lengths

class _ByteSize(click.ParamType):
    """A number of bytes: an integer, or a number with a binary unit (KiB, MiB, GiB)."""

    name = "size"
    _UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip()
        number = text.rstrip("BKMGIbkmgi ")
        unit = text[len(number):].strip().upper()
        try:
            nbytes = float(number) * self._UNITS[unit]
        except (ValueError, KeyError):
            self.fail(f"{value!r} is not a size (bytes, or a number with KiB, MiB or GiB)", param, ctx)
        if nbytes < 0:
            self.fail(f"{value!r} is negative", param, ctx)
        return int(nbytes)


def _memory_fit_lines(problem, options, p, auto, device_bytes: int) -> str:
    """What the memory fit changed (docs/memory.md): the auto plan's memory, the fitted one's, and
    the modeled time of each (the policy's analytic model, op_host/common/block_cost.h)."""
    if p.block_m == auto.block_m and p.block_n == auto.block_n:
        return (f"fit       {format_bytes(auto.device_bytes)} per call fits the {format_bytes(device_bytes)} of "
                f"--device-memory: the auto tiling")
    def cycles(plan):
        return plan_module.analytic_cycles(dataclasses.replace(problem, block_m=plan.block_m, block_n=plan.block_n),
                                           plan.chip, options)

    slower = cycles(p) / cycles(auto) - 1.0
    return (f"fit       the auto tiling (BLOCK_M={auto.block_m} BLOCK_N={auto.block_n}) needs "
            f"{format_bytes(auto.device_bytes)} per call, more than the {format_bytes(device_bytes)} of "
            f"--device-memory: BLOCK_M={p.block_m} BLOCK_N={p.block_n} is the fastest that fits, workspace "
            f"{format_bytes(p.workspace_bytes)} instead of {format_bytes(auto.workspace_bytes)}, modeled time "
            f"{100 * slower:+.1f}% (the policy's analytic model, not measured)")


@click.command()
@problem_options
@click.option("--soc", envvar="ACL_FA_SOC", default=None, show_envvar=True, metavar="NAME|all",
              help="Chip of the simulator's catalogue (its name, e.g. Ascend910B4, or a short name it prints, "
                   "e.g. ascend910b: the first chip of that family), or 'all' for one row each "
                   f"[default: $ACL_FA_SIM_SOC, else {plan_module.DEFAULT_SOC}].")
@json_option("Print the plans as JSON: always a list, one plan per chip ({chip, error} for a chip that "
             "refuses the problem).")
@backward_option("Plan the backward (FlashAttentionGrad) instead of the forward.")
@deterministic_option
@click.option("--sweep", is_flag=True, envvar="ACL_FA_SWEEP", show_envvar=True, help="Run every (BLOCK_M, BLOCK_N) that fits on the simulator and print its "
                                           "modeled NPU time (pipeline model; slow on large problems).")
@plot_option("With --sweep: draw modeled time against BLOCK_M per BLOCK_N.")
@window_option
@dropout_option
@mask_density_option
@varlen_option
@decode_options
@click.option("--device-memory", type=_ByteSize(), default=None, envvar="ACL_FA_DEVICE_MEMORY", show_envvar=True,
              metavar="SIZE", help="Plan the forward for a device with SIZE free (e.g. 24MiB): when the fastest "
                                   "tiling's tensors and workspace do not fit, the fastest tiling that does, as a "
                                   "call on such a device runs (docs/memory.md).")
def plan(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, soc, block_m, block_n, as_json,
         backward, deterministic, sweep, plot_path, window, dropout, mask_density, varlen, decode, paged, block_size,
         steps, num_splits, prefill, device_memory):
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
    problem = sized_problem(seq_q=seq, seq_kv=seq_kv, batch=batch, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                            dtype=dtype, layout=layout, causal=causal, block_m=block_m, block_n=block_n)
    if window is not None or varlen is not None or dropout > 0 or mask_density is not None:
        if backward or sweep:
            raise click.UsageError("--window/--dropout/--mask-density/--varlen plans are of the forward (no "
                                   "--backward or --sweep)")
        with reported_as_usage_errors():
            problem, options = run_options.v2_plan(problem, run_options.RunOptions(window, dropout, mask_density,
                                                                                   varlen))
            if device_memory is not None:
                _plan_in_memory(problem, options, soc, device_memory, as_json)
                return
            if soc is None or soc.lower() != "all":
                p = plan_module.plan(problem, soc, options)
                click.echo(json.dumps([p.to_dict()], indent=2) if as_json else
                           plan_module.format_plan(p) + "\n" + run_options.band_work_line(p))
                return
        _plan_table(lambda chip: plan_module.plan(problem, chip, options), plan_module.Plan, plan_module.Plan.to_dict,
                    plan_module.format_plan_table, as_json)
        return
    if device_memory is not None and (backward or sweep or (soc is not None and soc.lower() == "all")):
        raise click.UsageError("--device-memory plans the forward on one chip (no --backward, --sweep or --soc all)")
    if device_memory is not None:
        _plan_in_memory(problem, plan_module.PlanOptions(), soc, device_memory, as_json)
        return
    if backward:
        _plan_backward(problem, soc, deterministic, as_json)
        return
    if sweep:
        _plan_sweep(problem, soc, as_json, plot_path)
        return
    if soc is None or soc.lower() != "all":
        with reported_as_usage_errors():
            p = plan_module.plan(problem, soc)
            route = routing.route(problem, p.chip.name)
        click.echo(json.dumps([dict(p.to_dict(), route=route.to_dict())], indent=2) if as_json else
                   plan_module.format_plan(p) + "\n" + _route_line(route, p))
        return
    _plan_table(lambda chip: plan_module.plan(problem, chip), plan_module.Plan, plan_module.Plan.to_dict,
                plan_module.format_plan_table, as_json)


def _plan_in_memory(problem, options, soc, device_memory: int, as_json: bool) -> None:
    """--device-memory: the forward's plan for a device with that much free (plan_within)."""
    with reported_as_usage_errors():
        p = plan_module.plan_within(problem, device_memory, soc, options)
        auto = plan_module.plan(problem, soc, options)
    if p.device_bytes > device_memory:
        raise click.ClickException(
            f"the forward needs at least {format_bytes(p.device_bytes)} per call, more than the "
            f"{format_bytes(device_memory)} of --device-memory: q, k, v, out, lse {format_bytes(p.tensor_bytes)} + "
            f"the smallest tiling's workspace {format_bytes(p.workspace_bytes)} (BLOCK_M={p.block_m} "
            f"BLOCK_N={p.block_n}: the Ascend C library's system workspace {format_bytes(p.system_workspace_bytes)}"
            f" + {p.used_core_num} AIC groups x {format_bytes(p.ws_bytes_per_core)} of S and P.V slots)")
    click.echo(json.dumps([p.to_dict()], indent=2) if as_json else
               plan_module.format_plan(p) + "\n" + _memory_fit_lines(problem, options, p, auto, device_memory))


def _route_line(route, p) -> str:
    """Which op acl_fa.flash_attention runs this problem on (acl_fa.plan.routing) and why: both
    ops' modeled times (the closed forms of their tilings) when both can run it; and, when the
    forward's work items leave cores idle or uneven, why it does not split the keys itself."""
    line = f"route     acl_fa.flash_attention runs {route.op}: {route.reason}"
    if route.decode_us is not None and p.imbalance > 1.0:
        line += (f"\n          the general forward cuts work by (batch, head, query block) only: {p.total_items} "
                 f"item(s) on {p.used_core_num} of {p.chip.aic_num} AI Cores, work max/mean {p.imbalance:.3f}; "
                 f"splitting a few query rows' keys over the cores is the decode op's split-KV, which this rule "
                 f"runs whenever its tiling models faster")
    return line


def _plan_table(plan_on, plan_type, to_dict, format_table, as_json: bool) -> None:
    """One plan per chip of the catalogue (--soc all): `plan_on(chip)` or the chip's refusal."""
    rows = []
    for chip in plan_module.chips():
        try:
            rows.append((chip, plan_on(chip)))
        except plan_module.PlanError as exc:
            rows.append((chip, str(exc)))
    if as_json:
        click.echo(json.dumps([to_dict(p) if isinstance(p, plan_type) else {"chip": c.name, "error": p}
                               for c, p in rows], indent=2))
    else:
        click.echo(format_table(rows))


def _plan_backward(problem, soc: str, deterministic: bool, as_json: bool):
    if soc is None or soc.lower() != "all":
        with reported_as_usage_errors():
            p = backward_plan.backward_plan(problem, soc, deterministic)
        click.echo(json.dumps([backward_plan.to_dict(p)], indent=2) if as_json else backward_plan.format_backward_plan(p))
        return
    _plan_table(lambda chip: backward_plan.backward_plan(problem, chip, deterministic), backward_plan.BackwardPlan,
                backward_plan.to_dict, backward_plan.format_backward_plan_table, as_json)


def _plan_decode(problem: dict, soc: str, as_json: bool) -> None:
    if soc is not None and soc.lower() == "all":
        raise click.ClickException("--decode plans one chip (--soc NAME)")
    with reported_as_usage_errors():
        p = decode_plan.decode_plan(soc=soc, **problem)
    click.echo(json.dumps([p.to_dict()], indent=2) if as_json else decode_plan.format_decode_plan(p))


def _plan_sweep(problem, soc: str, as_json: bool, plot_path) -> None:
    if soc is not None and soc.lower() == "all":
        raise click.ClickException("--sweep needs one chip (--soc NAME)")
    if plot_path:
        check_plot_support()
    with reported_as_usage_errors():
        soc = plan_module.chip(soc).name  # default: $ACL_FA_SIM_SOC, else the catalogue's default
    os.environ["ACL_FA_SIM_SOC"] = soc  # the simulated chip of this process
    sizes = dataclasses.replace(problem, block_m=0, block_n=0)
    with reported_as_usage_errors():
        plan_module.plan(sizes, soc)  # the plan's own refusal of the sizes first
        swept = with_lengths(sizes, sizes.seq_q, sizes.seq_kv)
        with progress(len(sweep_module.candidate_pairs(swept, soc)), "acl-fa plan --sweep") as bar:
            rows = sweep_module.sweep(swept, JobSettings(backend="sim", progress=bar_progress(bar)))
    title = (f"{plan_module.chip(soc).name} B={sizes.batch} N={sizes.num_heads} S={sizes.seq_q} "
             f"D={sizes.head_dim}{' causal' if sizes.causal else ''}")
    click.echo(json.dumps([r.to_dict() for r in rows], indent=2) if as_json else sweep_module.format_sweep(rows, title))
    if plot_path:
        write_plot(lambda path: sweep_module.plot_sweep(rows, path, title), plot_path)
