"""`acl-fa profile`: one problem's modeled NPU timeline on the simulated chip."""
from __future__ import annotations

import json

import click

from ..jobs import profile as profile_module
from ..plan import forward as plan_module
from .options import (
    OutputPath, backend_option, check_plot_support, device_option, json_option, plot_option, stages, problem_of, problem_options,
    reported_as_usage_errors, seed_option, settings_of, write_plot)

@click.command()
@problem_options
@click.option("--trace", "trace_path", type=OutputPath(), envvar="ACL_FA_TRACE", show_envvar=True, default=None,
              metavar="FILE.json", help="Write the modeled schedule as a Chrome/Perfetto trace (a track per core "
                                        "and pipe, waits visible): whole AI Core groups up to "
                                        f"{profile_module.DEFAULT_TRACE_EVENTS:,} events unless --trace-full.")
@click.option("--trace-full", is_flag=True, envvar="ACL_FA_TRACE_FULL", show_envvar=True,
              help="--trace: every core's events (hundreds of MB on large problems).")
@plot_option("Draw AI Core group 0 over its first work item, or with --plot-core a group's whole launch (needs "
             "the 'plot' extra: matplotlib).")
@click.option("--plot-core", type=click.IntRange(min=0), envvar="ACL_FA_PLOT_CORE", show_envvar=True, default=None,
              metavar="GROUP", help="--plot: the whole launch of AI Core group GROUP (AIC GROUP and its AIVs).")
@click.option("--sensitivity", is_flag=True, envvar="ACL_FA_SENSITIVITY", show_envvar=True, help="Also replay with each assumed or derived cost at x0.5 and x1.5.")
@seed_option()
@backend_option
@device_option
@json_option("Print the report as JSON.")
def profile(seq, seq_kv, batch, heads, kv_heads, head_dim, dtype, layout, causal, block_m, block_n, trace_path,
            trace_full, plot_path, plot_core, sensitivity, seed, backend, device, as_json):
    """Modeled NPU time of one problem on the simulated chip: time, TFLOP/s, busy pipes, the busiest
    cube, the critical resource, a timeline (pipeline model over the simulator's instruction trace;
    not a measurement)."""
    if plot_path:
        check_plot_support()
    if plot_core is not None and not plot_path:
        raise click.UsageError("--plot-core chooses what --plot draws: give --plot FILE.png too")
    params = click.get_current_context().params
    with reported_as_usage_errors():
        chip = plan_module.chip()  # the simulated chip (ACL_FA_SIM_SOC): its AI Cores, said before the work
    if plot_core is not None and plot_core >= chip.aic_num:
        raise click.BadParameter(f"{chip.name} has AI Core groups 0..{chip.aic_num - 1}", param_hint="--plot-core")
    with reported_as_usage_errors(), stages("acl-fa profile") as stage:
        report = profile_module.profile_job(
            problem_of(params), settings_of(params, backend="sim" if backend == "auto" else backend, progress=stage),
            with_sensitivity=sensitivity)
        if trace_path:
            stage("writing the trace", 0)
            trace = profile_module.chrome_trace(report, None if trace_full else profile_module.DEFAULT_TRACE_EVENTS)
            with open(trace_path, "w") as f:
                json.dump(trace, f)
        if plot_path:
            stage("drawing the plot", 0)
            write_plot(lambda path: profile_module.plot_timeline(report, path, plot_core), plot_path)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else profile_module.format_profile(report))
    if trace_path:
        kept = trace["otherData"]
        whole = ("every core" if kept["core_groups_kept"] == kept["core_groups"] else
                 f"AI Core groups 0..{kept['core_groups_kept'] - 1} of {kept['core_groups']}, "
                 f"{kept['ops_kept']:,} of {kept['ops']:,} events (--trace-full for all)")
        click.echo(f"trace written to {trace_path}: {whole}", err=True)
