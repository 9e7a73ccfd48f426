"""`acl-fa launch`: N processes, one per device, joined as one HCCL clique."""
from __future__ import annotations

import shutil
import sys

import click

from ..parallel import launch as launch_module
from .options import reported_as_usage_errors

@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
    if not command:
        raise click.UsageError("no COMMAND after --")
    if shutil.which(command[0]) is None:  # said before any rank starts, not as N tracebacks
        raise click.UsageError(f"COMMAND {command[0]!r} is not an executable file nor a command on PATH")
    with reported_as_usage_errors():
        try:
            code = launch_module.launch(ranks, command, devices=ids, timeout=timeout)
        except OSError as exc:  # the command could not be started (permissions, a bad interpreter line)
            raise click.ClickException(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
    sys.exit(code)
