"""`fp8check table`: the seed's table, buggy and fixed Triton wrappers against the C++ path."""

from __future__ import annotations

from pathlib import Path

import click

from . import startup
from ..errors import ExitCode
from .arguments import build, isolation_limits, spec_options
from .common import check_outputs, emit, handled, output_options, progress, single_case


@click.command()
@spec_options
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [table] section, or the name of a built-in one (seed-table); options given here win.")
@click.option("--baseline", default="auto", show_default=True,
              help="The C++ path: auto is the real aiter where it can run, else its emulation reference.")
@click.option("--buggy", default="triton-buggy", show_default=True)
@click.option("--fixed", default="triton", show_default=True)
@output_options
@click.option("--all-blocks", is_flag=True, help="One row per block, however many.")
@handled
def table(config_path, all_blocks, debug, json_path, junit_path, markdown_path, quiet, **opts):
    """The seed's table: buggy and fixed Triton wrappers against the C++ path, block by block."""
    import time

    from .. import options
    from ..config import find as find_config
    from ..gate_config import table_id
    from ..report import json as report_json
    from ..report import terminal
    from ..prepare import resolve_producers
    from ..table import read_config, seed_table

    startup.imports_done()

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    start = time.perf_counter()
    limits = isolation_limits(opts)
    if config_path is not None:
        ctx = click.get_current_context()
        for dest, value in read_config(find_config(config_path)).items():
            if ctx.get_parameter_source(dest) is click.core.ParameterSource.DEFAULT:
                opts[dest] = value
    spec, data, device = build(opts)
    resolved = resolve_producers(device, {role: opts[role] for role in ("baseline", "buggy", "fixed")}, spec,
                                 opts["repo"], isolation=limits)
    with progress(device, resolved.values()):
        result = seed_table(spec, **resolved, inputs=data, device=device)
    case_id = table_id(options.from_dests(opts))
    emit(out, renderable=terminal.render_seed_table(result, all_blocks=all_blocks),
         verdict=terminal.seed_table_verdict(result), payload=report_json.seed_table_json(result), title="table",
         gate_result=single_case(case_id, "table", result, result.passed, time.perf_counter() - start))
    return ExitCode.OK if result.passed else ExitCode.DIFFER

