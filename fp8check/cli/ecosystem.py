"""`fp8check ecosystem`: the conformance matrix of every project's preset writers and readers."""

from __future__ import annotations

import click
from rich.console import Console

from ..core.device import DEVICE_CHOICES
from ..core.errors import ExitCode, UsageError
from .arguments import isolation_limits, isolation_options
from .common import emit, handled, output_options, outputs_of


def _checkouts(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{value!r}: expected PROJECT=PATH", param_hint="--checkout")
        out[name] = path
    return out


@click.command()
@click.option("--config", "config_path", default="ecosystem", show_default=True,
              help="TOML file with an [ecosystem] section, or the name of a built-in one.")
@click.option("--checkout", "checkouts", multiple=True, metavar="PROJECT=PATH",
              help="Run PROJECT's presets from this clone of its repository (for code no release holds). Repeatable.")
@click.option("--device", type=click.Choice(DEVICE_CHOICES), default="cpu", show_default=True,
              help="cpu: the exact interpreter; cuda: compiled.")
@isolation_options
@output_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def ecosystem(config_path, checkouts, device, debug, **opts):
    """Every preset writer against the exact reference, every preset reader against the exact reader."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..core.device import resolve_device
    from ..run.ecosystem import read_config, run_ecosystem
    from ..core.outcome import single
    from ..report import ecosystem as report

    out = outputs_of(opts)
    limits = isolation_limits(opts)
    config = read_config(config_path, _checkouts(checkouts))
    if not config.writers and not config.readers:
        raise UsageError(f"{config_path}: lists no writers and no readers")
    columns = (TextColumn("ecosystem"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    err = Console(stderr=True)
    with Progress(*columns, console=err, transient=True, auto_refresh=False, disable=not err.is_terminal) as bar:
        task = bar.add_task("", total=None)  # no timer thread while children are forked (cli/gate.py)
        result = run_ecosystem(config, resolve_device(device), lambda label, done, total: bar.update(
            task, completed=done, total=total, description=label, refresh=True), isolation=limits)
    emit(out, single("ecosystem", result, result.seconds), report.render(result))
    if result.errors:
        return ExitCode.USAGE
    return ExitCode.OK if result.passed else ExitCode.DIFFER
