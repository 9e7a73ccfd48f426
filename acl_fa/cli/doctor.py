"""`acl-fa doctor`."""
from __future__ import annotations

import click

from ..jobs import doctor as doctor_module
from .options import backend_option, device_option, verbose_option

@click.command()
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
