"""`fp8check gate`: every case of a gate config in one process, with the reports CI reads."""

from __future__ import annotations

import click
from rich.console import Console

from ..core.device import DEVICE_CHOICES
from ..core.errors import ExitCode, UsageError
from .arguments import isolation_limits, isolation_options
from .common import emit, handled, output_options, outputs_of, show


@click.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--shard", metavar="K/N", default=None, help="Run shard K of N (every case is in exactly one shard).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first case that does not pass.")
@click.option("--list", "list_only", is_flag=True, help="Print the expanded case ids and exit; runs nothing.")
@click.option("-k", "patterns", multiple=True, metavar="EXPRESSION",
              help="Run the cases whose id matches EXPRESSION (pytest's grammar: words joined by and, or, not and"
                   " parentheses; a word is a substring or a glob of the id). Repeatable: any matches.")
@click.option("--device", type=click.Choice(DEVICE_CHOICES), default=None,
              help="Run every case on this device instead of the one its config names.")
@click.option("--strict", is_flag=True, help="A case this machine cannot run fails the gate instead of being skipped.")
@isolation_options
@click.option("--checkout", "checkouts", multiple=True, metavar="PROJECT=PATH",
              help="Run PROJECT's presets (preset:PROJECT/NAME) from this clone of its repository instead of its"
                   " released wheel. Repeatable.")
@click.option("--candidate", default=None, metavar="NAME",
              help="Run every case whose writer under test is fp8check's own (`triton`) with this writer instead"
                   " (a producer name, preset:PROJECT/NAME, file:PATH:FUNC, ...), with its preset's padding"
                   " convention; cases its preset declares unsupported are skipped.")
@output_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def gate(config_path, shard, fail_fast, list_only, patterns, device, strict, checkouts, candidate, debug, **opts):
    """Run every case of a gate config (a TOML file, or a built-in name such as `ci`) in one process."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..run import gate_config
    from ..run.gate import run_gate
    from ..report.gate import render_gate

    out = outputs_of(opts)
    limits = isolation_limits(opts)
    where = gate_config.parse_shard(shard) if shard else None
    config = gate_config.load(config_path, device=device, checkouts=checkouts, candidate=candidate)
    cases = gate_config.select(config.cases, patterns)
    if patterns and not cases:
        raise UsageError(f"-k {' -k '.join(patterns)}: no case of {config_path} matches")
    if where is not None:
        cases = gate_config.shard(cases, *where)
    if list_only:
        if out["paths"]:  # nothing runs, so there is nothing to report: never a file that looks like a run
            raise UsageError(f"--list prints the case ids and runs nothing: it writes no report"
                             f" ({', '.join('--' + name for name in out['paths'])})")
        show("\n".join(case.id for case in cases), soft_wrap=True, highlight=False, markup=False)
        return ExitCode.OK
    columns = (TextColumn("gate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"))
    err = Console(stderr=True)
    # refreshed after each case, never by rich's timer thread: a fork of this process (a child running code
    # under test) must not inherit a lock that thread held, or the child waits on it forever
    with Progress(*columns, console=err, transient=True, auto_refresh=False, disable=not err.is_terminal) as progress:
        task = progress.add_task("", total=len(cases))
        result = run_gate(str(config_path), cases, fail_fast=fail_fast, strict=strict, isolation=limits,
                          on_done=lambda o: progress.update(task, advance=1, description=o.case_id, refresh=True))
    emit(out, result, render_gate(result), soft_wrap=True)  # case ids stay whole, for grep
    return result.exit_code
