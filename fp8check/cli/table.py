"""`fp8check table`: the seed's table, buggy and fixed Triton wrappers against the C++ path."""

from __future__ import annotations

from pathlib import Path

import click

from .arguments import command_options, prepared
from .common import finish, handled, output_options, outputs_of, progress


@click.command()
@command_options("table")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [table] section, or the name of a built-in one (seed-table); options given here win.")
@output_options
@click.option("--all-blocks", is_flag=True, help="One row per block, however many.")
@handled
def table(config_path, all_blocks, debug, **opts):
    """The seed's table: buggy and fixed Triton wrappers against the C++ path, block by block."""
    from ..report.terminal import render_seed_table
    from ..run.table import seed_table

    out = outputs_of(opts)
    req, run = prepared("table", opts, config_path)
    with progress(run.device, run.sides.values()):
        result = seed_table(run.spec, **run.sides, inputs=run.inputs, device=run.device)
    return finish(out, req.id, result, render_seed_table(result, all_blocks=all_blocks))
