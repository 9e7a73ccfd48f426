"""The `acl-fa` command line: parses, calls acl_fa functions, prints. No logic of its own.

Options shared by several commands are defined once here (backend_option, device_option);
commands added elsewhere reuse them with ``@backend_option`` / ``@device_option`` and register
themselves with ``@main.command()``.
"""
from __future__ import annotations

import logging

import click

from . import doctor as doctor_module
from .loader import BACKENDS, ENV_BACKEND

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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log what the library does (INFO level).")
def main(verbose: bool):
    """FlashAttention forward on Ascend NPUs, or on the CPU simulator of the same ABI."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="acl-fa: %(message)s")


@main.command()
@backend_option
@device_option
def doctor(backend: str, device: int):
    """Show the backend, the libraries loaded (and every path tried), the device and the
    environment variables that matter."""
    click.echo(doctor_module.format_report(doctor_module.collect(backend=backend, device=device)))
