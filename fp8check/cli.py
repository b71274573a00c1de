"""The command line: parse, build a spec and inputs, call the core, render, pick the exit code.

Exit codes: 0 identical (or within budget), 1 bytes differ, 2 bad usage, input or producer error,
3 an internal error of fp8check itself.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path

import click
from rich.console import Console

from . import __version__
from .errors import ExitCode, UsageError, UserError



def spec_options(fn):
    """Options that describe the cache and the inputs, shared by compare, record and table (options.SPEC)."""
    from . import options

    fn = click.option("--debug", is_flag=True, help="Show tracebacks.")(fn)
    return options.click_options(options.SPEC)(fn)


def budget_options(fn):
    from . import options

    return options.click_options(options.BUDGET)(fn)


def build(opts: dict):
    """(spec, inputs, device) from the shared options (prepare.build: gate cases and the API use it too)."""
    from .prepare import build as build_from_options

    return build_from_options(opts)


def fail(message: str, code: ExitCode) -> int:
    """The one way out with an error: one line on stderr, the exit code from the table."""
    click.echo(f"fp8check: {message}", err=True)
    return code


def handled(fn):
    """A command's errors to exit codes: UserError is exit 2, anything else a checker error, exit 3.

    `--debug` adds the traceback; it never changes the exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = kwargs.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            if debug:
                traceback.print_exc()
            return fail(f"error: {exc}", ExitCode.USAGE)
        except Exception as exc:
            if debug:
                traceback.print_exc()
            return fail(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)", ExitCode.INTERNAL)

    return wrapper


def check_writable(path: Path | None, option: str) -> None:
    """Refuse an output path whose folder is missing before any work is done."""
    if path is not None and not path.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {path.parent} does not exist")


def write_json(path: Path | None, payload: dict) -> None:
    if path is not None:
        try:
            path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
        except OSError as exc:
            raise UsageError(f"--json {path}: cannot write ({exc.strerror})") from None


def output_options(fn):
    """--json PATH|-, --junit PATH, --markdown PATH, --quiet: the reports CI systems read (gate, compare, table)."""
    options = [
        click.option("--json", "json_path", metavar="PATH|-", default=None,
                     help="Write the result as JSON; - writes it to stdout (the report then goes to stderr)."),
        click.option("--junit", "junit_path", type=click.Path(path_type=Path), default=None,
                     help="Write a JUnit XML report (one testcase per case)."),
        click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), default=None,
                     help="Append a Markdown summary to PATH (and to $GITHUB_STEP_SUMMARY whenever it is set)."),
        click.option("--quiet", is_flag=True, help="Print the verdict line only."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def check_outputs(out: dict) -> None:
    if out["json_path"] not in (None, "-"):
        check_writable(Path(out["json_path"]), "--json")
    check_writable(out["junit_path"], "--junit")
    check_writable(out["markdown_path"], "--markdown")


def _write(path: Path, text: str, option: str, *, append: bool = False) -> None:
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write ({exc.strerror})") from None


def emit(out: dict, *, renderable, verdict: str, payload: dict, gate_result, title: str,
         soft_wrap: bool = False) -> None:
    """Print the report (or only the verdict line with --quiet) and write the reports asked for.

    With `--json -` the JSON is the only thing on stdout; the report goes to stderr."""
    import os

    from .report import junit, markdown

    to_stdout = out["json_path"] == "-"
    if out["quiet"]:
        click.echo(verdict, err=to_stdout)
    else:
        Console(stderr=to_stdout).print(renderable, soft_wrap=soft_wrap)
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
    if to_stdout:
        click.echo(text, nl=False)
    elif out["json_path"] is not None:
        _write(Path(out["json_path"]), text, "--json")
    if out["junit_path"] is not None:
        _write(out["junit_path"], junit.junit_xml(gate_result, suite=title), "--junit")
    summary = markdown.gate_markdown(gate_result, title=title)
    if out["markdown_path"] is not None:
        _write(out["markdown_path"], summary, "--markdown", append=True)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        _write(Path(os.environ["GITHUB_STEP_SUMMARY"]), summary, "$GITHUB_STEP_SUMMARY", append=True)


def single_case(case_id: str, kind: str, result, passed: bool, seconds: float):
    """A single command's result as a one-case gate, for the JUnit and Markdown renderers."""
    from .gate import GateResult, Outcome

    outcome = Outcome(case_id, kind, ExitCode.OK if passed else ExitCode.DIFFER, result, None, seconds)
    return GateResult(kind, (outcome,), 1, seconds)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fp8check")
def cli():
    """Byte-exact checks of FP8 indexer K-cache writers (DeepSeek-V3.2 sparse attention)."""


GOLDEN = "golden:"
# With --baseline golden:FILE the file holds the spec and the inputs: spec options given explicitly must
# agree with it (spec field -> flag), input options cannot be given at all.
GOLDEN_SPEC_FLAGS = {
    "num_blocks": "--num-blocks", "block_size": "--block", "head_dim": "--head-dim", "quant_block_size": "--qbs",
    "fp8": "--fp8", "scale_fmt": "--scale-fmt", "layout": "--layout",
}
GOLDEN_INPUT_FLAGS = {"seed": "--seed", "slots": "--slots", "input_path": "--input", "distribution": "--inputs",
                      "inf_nan": "--specials-inf-nan"}


def given_explicitly(opts: dict) -> set[str]:
    """The options of `opts` the user typed (or set through the environment), not left at their default."""
    ctx = click.get_current_context()
    defaults = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP)
    return {name for name in opts if ctx.get_parameter_source(name) not in defaults}


def replay_golden(baseline: str, opts: dict):
    """(spec, inputs, device, baseline Side) of --baseline golden:FILE: the recorded spec, inputs and bytes."""
    from . import golden
    from .device import resolve_device

    path_text = baseline[len(GOLDEN):]
    if not path_text:
        raise UsageError("--baseline golden:FILE needs a file")
    path = Path(path_text)
    given = given_explicitly(opts)
    for name, flag in GOLDEN_INPUT_FLAGS.items():
        if name in given:
            raise UsageError(f"{flag} cannot be combined with --baseline {baseline}: the recorded inputs are replayed")
    recorded = golden.read(path)
    golden.check_options(
        path, recorded.spec, {name: (flag, opts[name]) for name, flag in GOLDEN_SPEC_FLAGS.items() if name in given}
    )
    device = resolve_device(opts["device"])
    return recorded.spec, recorded.inputs, device, golden.as_side(recorded, path, device)


@cli.command()
@spec_options
@click.option("--baseline", default="auto", show_default=True,
              help="Producer name; auto (aiter where it can run, else its emulation reference); golden:FILE"
                   " (bytes recorded by `fp8check record`); or file:PATH:FUNC.")
@click.option("--candidate", default="triton", show_default=True, help="Producer name, or file:PATH:FUNC.")
@output_options
@click.option("--all-blocks", is_flag=True, help="One table row per block, however many.")
@budget_options
@handled
def compare(baseline, candidate, all_blocks, debug, max_diff_bytes, max_diff_fraction, max_code_distance,
            json_path, junit_path, markdown_path, quiet, **opts):
    """Run two writers on the same K, diff their cache bytes block by block, and say why they differ."""
    import time

    from . import budget as budget_mod
    from . import options
    from .gate import check_compare
    from .gate_config import compare_id
    from .report import json as report_json
    from .report import lines, terminal
    from .writers import registry as producers

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    start = time.perf_counter()
    if baseline.startswith(GOLDEN):
        spec, data, device, base = replay_golden(baseline, opts)
    else:
        spec, data, device = build(opts)
        base = producers.resolve(baseline)
    budget = budget_mod.Budget(max_diff_bytes=max_diff_bytes, max_diff_fraction=max_diff_fraction,
                               max_code_distance=max_code_distance)
    checked = check_compare(spec, baseline=base, candidate=producers.resolve(candidate), inputs=data, device=device,
                            budget=budget)
    result, diagnosis, decided = checked.result, checked.diagnosis, checked.budget
    values = {**options.from_dests(opts), "baseline": baseline, "candidate": candidate,
              "max_diff_bytes": max_diff_bytes, "max_diff_fraction": max_diff_fraction,
              "max_code_distance": max_code_distance}
    verdict = lines.compare_verdict(checked)
    emit(out, renderable=terminal.render_compare(result, all_blocks=all_blocks, diagnosis=diagnosis, budget=decided),
         verdict=verdict, title="compare",
         payload=report_json.compare_json(result, diagnosis=diagnosis, budget=decided, verdict=verdict,
                                          passed=checked.passed),
         gate_result=single_case(compare_id(values), "compare", checked, checked.passed, time.perf_counter() - start))
    return ExitCode.OK if checked.passed else ExitCode.DIFFER


@cli.command()
@spec_options
@click.option("--producer", default="reference", show_default=True)
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True, help="Golden .safetensors file.")
@handled
def record(producer, out_path, debug, **opts):
    """Run one writer and save its inputs and cache bytes (a golden file)."""
    from . import golden
    from .compare import run_side
    from .device import versions
    from .writers import registry as producers

    check_writable(out_path, "--out")
    spec, data, device = build(opts)
    side = run_side(producers.resolve(producer), spec, data.to(device), device)
    golden.write(out_path, spec=spec, producer=side.name, emulated=side.emulated, inputs=data,
                 buffer=side.buffer, versions=versions())
    click.echo(f"recorded {side.name} ({spec.summary()}, {data.source}) to {out_path}")
    return ExitCode.OK


@cli.command()
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

    from . import options
    from .config import find as find_config
    from .gate_config import table_id
    from .report import json as report_json
    from .report import terminal
    from .table import read_config, seed_table
    from .writers import registry as producers

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    start = time.perf_counter()
    if config_path is not None:
        ctx = click.get_current_context()
        for dest, value in read_config(find_config(config_path)).items():
            if ctx.get_parameter_source(dest) is click.core.ParameterSource.DEFAULT:
                opts[dest] = value
    spec, data, device = build(opts)
    result = seed_table(
        spec, baseline=producers.resolve(opts["baseline"]), buggy=producers.resolve(opts["buggy"]),
        fixed=producers.resolve(opts["fixed"]), inputs=data, device=device,
    )
    case_id = table_id(options.from_dests(opts))
    emit(out, renderable=terminal.render_seed_table(result, all_blocks=all_blocks),
         verdict=terminal.seed_table_verdict(result), payload=report_json.seed_table_json(result), title="table",
         gate_result=single_case(case_id, "table", result, result.passed, time.perf_counter() - start))
    return ExitCode.OK if result.passed else ExitCode.DIFFER


@cli.command()
@click.argument("config_path", metavar="CONFIG")
@click.option("--shard", metavar="K/N", default=None, help="Run shard K of N (every case is in exactly one shard).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first case that does not pass.")
@click.option("--list", "list_only", is_flag=True, help="Print the expanded case ids and exit; runs nothing.")
@click.option("-k", "patterns", multiple=True, metavar="PATTERN",
              help="Run the cases whose id contains PATTERN (or matches it as a glob). Repeatable.")
@output_options
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def gate(config_path, shard, fail_fast, list_only, patterns, debug, json_path, junit_path, markdown_path, quiet):
    """Run every case of a gate config (a TOML file, or a built-in name such as `ci`) in one process."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import gate_config
    from .gate import run_gate
    from .report import json as report_json
    from .report import lines
    from .report.gate import render_gate

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    where = gate_config.parse_shard(shard) if shard else None
    config = gate_config.load(config_path)
    cases = gate_config.select(config.cases, patterns)
    if patterns and not cases:
        raise UsageError(f"-k {' -k '.join(patterns)}: no case of {config_path} matches")
    if where is not None:
        cases = gate_config.shard(cases, *where)
    if list_only:
        for case in cases:
            click.echo(case.id)
        return ExitCode.OK
    columns = (TextColumn("gate"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("", total=len(cases))
        result = run_gate(str(config_path), cases, fail_fast=fail_fast,
                          on_done=lambda o: progress.update(task, advance=1, description=o.case_id))
    emit(out, renderable=render_gate(result), verdict=lines.gate_verdict(result), payload=report_json.gate_json(result),
         gate_result=result, title=f"gate {config_path}", soft_wrap=True)  # case ids stay whole, for grep
    return result.exit_code


def _requirements(ctx, param, values):
    from .doctor import requirable

    known = requirable()
    unknown = [v for v in values if v not in known]
    if unknown:
        raise click.BadParameter(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(values)


@cli.command()
@click.option("--require", "required", multiple=True, metavar="NAME", callback=_requirements,
              help="Exit 1 unless NAME works here: a producer name, gpu, triton-exact or triton-exact:FMT."
                   " Repeatable.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the findings as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def doctor(required, json_path, debug):
    """What can run here: every producer and why not, versions, device, FP8 format, Triton exactness."""
    from . import doctor as doctor_mod
    from .report import doctor as doctor_report

    found = doctor_mod.diagnose(required)
    Console().print(doctor_report.render(found))
    write_json(json_path, doctor_report.to_json(found))
    return ExitCode.DIFFER if found.unmet else ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=argv, prog_name="fp8check", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        return fail(f"error: {exc.format_message()}", ExitCode.USAGE)
    except click.exceptions.Abort:
        return 130
    return int(rv) if isinstance(rv, int) else ExitCode.OK
