"""The `acl-fa` command line: parses, calls acl_fa functions, prints. No logic of its own.

The group is here; each command is a module of this package (doctor, plan, run, bench, profile,
launch) over the jobs of acl_fa.jobs; the options several commands share are defined once in
options.py (backend_option, device_option, problem_options, ...).
"""
from __future__ import annotations

import logging

import click

from .. import __version__
from . import bench, doctor, launch, plan, profile, run
from .options import verbose_option


# The shell's exit status of a process ended by SIGINT (128 + 2), which scripts test for.
INTERRUPTED_EXIT_CODE = 130


class _Commands(click.Group):
    """The command group; Ctrl-C ends a command with "Interrupted" and exit status 130, as a shell
    reports a program stopped by SIGINT, not click's "Aborted!" with 1; the usage lines say
    `acl-fa` however it was started (`python -m acl_fa` under acl-fa launch)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("Interrupted", err=True)
            raise click.exceptions.Exit(INTERRUPTED_EXIT_CODE) from None

    def main(self, *args, **kwargs):
        kwargs.setdefault("prog_name", "acl-fa")
        return super().main(*args, **kwargs)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="acl-fa")
@verbose_option
def main():
    """The FlashAttention family on Ascend NPUs, or on the CPU simulator of the same ABI.

    Every option of run, plan, bench and profile can also be set with the environment variable
    ACL_FA_<OPTION> (--seq-kv: ACL_FA_SEQ_KV), shown in each command's --help."""
    logging.basicConfig(format="acl-fa: %(message)s")


for _command in (doctor.doctor, plan.plan, run.run, bench.bench, profile.profile, launch.launch):
    main.add_command(_command)
