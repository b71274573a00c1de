"""`fp8check doctor`: what can run here, and `--require NAME` to make a CI job say so."""

from __future__ import annotations

from pathlib import Path

import click

from . import startup
from ..errors import ExitCode
from .common import handled, show, write_json


def _requirements(ctx, param, values):
    from ..doctor import requirable

    known = requirable()
    unknown = [v for v in values if v not in known]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(values)


@click.command()
@click.option("--require", "required", multiple=True, metavar="NAME", callback=_requirements,
              help="Exit 1 unless NAME works here: a producer name, gpu, triton-exact or triton-exact:FMT."
                   " Repeatable.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the findings as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def doctor(required, json_path, debug):
    """What can run here: every producer and why not, versions, device, FP8 format, Triton exactness."""
    from .. import doctor as doctor_mod
    from ..report import doctor as doctor_report

    startup.imports_done()

    found = doctor_mod.diagnose(required)
    write_json(json_path, doctor_report.to_json(found))
    show(doctor_report.render(found))
    return ExitCode.DIFFER if found.unmet else ExitCode.OK
