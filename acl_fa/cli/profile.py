"""`acl-fa profile`: one problem's modeled NPU timeline on the simulated chip."""
from __future__ import annotations

import json

import click

from ..jobs import profile as profile_module
from .options import (
    backend_option, check_plot_support, device_option, json_option, problem_of, problem_options,
    reported_as_usage_errors, seed_option, settings_of, write_plot)

@click.command()
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
    if plot_path:
        check_plot_support()
    params = click.get_current_context().params
    with reported_as_usage_errors():
        report = profile_module.profile_job(problem_of(params),
                                            settings_of(params, backend="sim" if backend == "auto" else backend),
                                            with_sensitivity=sensitivity)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else profile_module.format_profile(report))
    if trace_path:
        with open(trace_path, "w") as f:
            json.dump(profile_module.chrome_trace(report), f)
        click.echo(f"trace written to {trace_path}", err=True)
    if plot_path:
        write_plot(lambda path: profile_module.plot_timeline(report, path), plot_path)
