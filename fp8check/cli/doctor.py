"""`fp8check doctor`: what can run here, and `--require NAME` to make a CI job say so."""

from __future__ import annotations

import click

from .common import finish, handled, output_options, outputs_of


def _requirements(ctx, param, values):
    from ..run.doctor import requirable

    known = requirable()
    unknown = [v for v in values if v not in known]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(values)


@click.command()
@click.option("--require", "required", multiple=True, metavar="NAME", callback=_requirements,
              help="Exit 1 unless NAME works here: a producer name, gpu, triton-exact or triton-exact:FMT."
                   " Repeatable.")
@output_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def doctor(required, debug, **opts):
    """What can run here: every producer and why not, versions, device, FP8 format, Triton exactness."""
    from ..run import doctor as doctor_mod
    from ..report import doctor as doctor_report

    out = outputs_of(opts)
    found = doctor_mod.diagnose(required)
    return finish(out, "doctor", found, doctor_report.render(found))
