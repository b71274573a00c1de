"""`fp8check parity`: each writer's bytes read back into indexer logits, top-K against the truth."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from .arguments import command_options, prepared
from .common import finish, handled, output_options, outputs_of


@click.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [parity] section (e.g. configs/seed-parity.toml); options given here win.")
@command_options("parity")
@output_options
@handled
def parity(config_path, debug, **opts):
    """Top-K parity: each writer's bytes read back into indexer logits, top-K against the truth."""
    from rich.progress import Progress

    from ..report import parity as report_parity

    out = outputs_of(opts)
    req, run = prepared("parity", opts, config_path)
    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:  # no bar in logs
        task = bar.add_task("parity", total=None)
        result = run.run_parity(
            progress=lambda label, done, total: bar.update(task, description=label, completed=done, total=total))
    return finish(out, req.id, result, report_parity.render(result))
