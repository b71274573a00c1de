"""The command line: parse, build a spec and inputs, call the core, render, pick the exit code.

Exit codes: 0 identical (or within budget), 1 bytes differ, 2 bad usage, input or producer error,
3 an internal error of fp8check itself.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path

import click
from rich.console import Console

from . import __version__
from .errors import ConfigError, ExitCode, UsageError, UserError


def spec_options(fn):
    """Options that describe the cache and the inputs, shared by compare, record and table (options.SPEC)."""
    from . import options

    fn = click.option("--debug", is_flag=True, help="Show tracebacks.")(fn)
    return isolation_options(options.click_options(options.SPEC)(fn))


def isolation_options(fn):
    """How code from files (file:, vllm-file:, git:) runs: in a child process, under these limits."""
    from .isolation import DEFAULT_TIMEOUT_S

    options = [
        click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT_S,
                     show_default=True, metavar="SECONDS",
                     help="Kill a writer from a file that runs longer than this (it is then exit 2)."),
        click.option("--memory-limit", "memory_limit_mib", type=click.IntRange(min=1), default=None, metavar="MIB",
                     help="Memory a writer from a file may allocate (CPU) [default: what the machine has]."),
        click.option("--in-process", is_flag=True,
                     help="Run writers from files inside fp8check's own process (debugging only: their code can"
                          " then change the verdict)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def isolation_limits(opts: dict):
    """Pop the isolation options from `opts`: the Limits for writers from files, or None (--in-process)."""
    from .isolation import Limits

    timeout_s, memory_mib, in_process = opts.pop("timeout_s"), opts.pop("memory_limit_mib"), opts.pop("in_process")
    return None if in_process else Limits(timeout_s=timeout_s, memory_bytes=memory_mib and memory_mib * 2**20)


def budget_options(fn):
    from . import options

    return options.click_options(options.BUDGET)(fn)


INPUT_OVERRIDDEN_FLAGS = {"seed": "--seed", "slots": "--slots", "distribution": "--inputs",
                          "inf_nan": "--specials-inf-nan"}  # --input replays its own inputs


def build(opts: dict):
    """(spec, inputs, device) from the shared options (prepare.build: gate cases and the API use it too)."""
    from .prepare import build as build_from_options

    if opts["input_path"] is not None:
        given = given_explicitly(opts)
        for name, flag in INPUT_OVERRIDDEN_FLAGS.items():
            if name in given:
                raise UsageError(f"{flag} cannot be combined with --input: the file's inputs are replayed")
    return build_from_options(opts)


def progress(device, producers):
    """A progress bar on stderr while Triton programs run in the interpreter, when stderr is a terminal."""
    import contextlib

    err = Console(stderr=True)
    if device.type != "cpu" or not err.is_terminal or not any(p.triton for p in producers):
        return contextlib.nullcontext()
    from .report.progress import interpreter_progress

    return interpreter_progress(err)


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


def show(renderable, **print_options) -> None:
    """Print to stdout; a reader that went away (`fp8check compare | true`) changes nothing else: the
    JSON is still written and the exit code is the verdict's."""
    console = Console()
    console.on_broken_pipe = silence_stdout  # rich's own handler exits 1: the code of "bytes differ"
    try:
        console.print(renderable, **print_options)
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit cannot fail on a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to silence
        pass
    finally:
        os.close(devnull)


def golden_key() -> bytes | None:
    """FP8CHECK_GOLDEN_KEY: when set, golden files are signed (record) and must be signed (replay)."""
    key = os.environ.get("FP8CHECK_GOLDEN_KEY")
    return key.encode() if key else None


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
    """Write the reports asked for, then print the report (or only the verdict line with --quiet).

    Files first: a reader of stdout that went away (`| true`) never costs the JSON, JUnit or Markdown.
    With `--json -` the JSON is the only thing on stdout; the report goes to stderr."""
    from .report import junit, markdown

    to_stdout = out["json_path"] == "-"
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
    if out["json_path"] not in (None, "-"):
        _write(Path(out["json_path"]), text, "--json")
    if out["junit_path"] is not None:
        _write(out["junit_path"], junit.junit_xml(gate_result, suite=title), "--junit")
    summary = markdown.gate_markdown(gate_result, title=title)
    if out["markdown_path"] is not None:
        _write(out["markdown_path"], summary, "--markdown", append=True)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        _write(Path(os.environ["GITHUB_STEP_SUMMARY"]), summary, "$GITHUB_STEP_SUMMARY", append=True)
    if out["quiet"]:
        click.echo(verdict, err=to_stdout)
    elif to_stdout:
        Console(stderr=True).print(renderable, soft_wrap=soft_wrap)
    else:
        show(renderable, soft_wrap=soft_wrap)
    if to_stdout:
        try:
            click.echo(text, nl=False)
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()


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
    from .errors import GoldenError
    from .sources import materialize

    path, origin = materialize(path_text, opts.get("repo"), error=GoldenError)
    given = given_explicitly(opts)
    for name, flag in GOLDEN_INPUT_FLAGS.items():
        if name in given:
            raise UsageError(f"{flag} cannot be combined with --baseline {baseline}: the recorded inputs are replayed")
    recorded = golden.read(path, key=golden_key())
    golden.check_options(
        path, recorded.spec, {name: (flag, opts[name]) for name, flag in GOLDEN_SPEC_FLAGS.items() if name in given}
    )
    device = resolve_device(opts["device"])
    side = golden.as_side(recorded, path, device)
    if origin:
        import dataclasses

        side = dataclasses.replace(side, provenance={**side.provenance, "golden": path_text, **origin})
    return recorded.spec, recorded.inputs, device, side


@cli.command()
@spec_options
@click.option("--baseline", default="auto", show_default=True,
              help="Producer name; auto (aiter where it can run, else its emulation reference); golden:FILE"
                   " (bytes recorded by `fp8check record`); or file:PATH:FUNC, vllm-file:PATH[:FUNC].")
@click.option("--candidate", default="triton", show_default=True,
              help="Producer name, file:PATH:FUNC or vllm-file:PATH[:FUNC]; PATH may be git:REV:PATH.")
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
    from .prepare import resolve_producers
    from .report import lines, terminal

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    start = time.perf_counter()
    limits = isolation_limits(opts)
    budget = budget_mod.Budget(max_diff_bytes=max_diff_bytes, max_diff_fraction=max_diff_fraction,
                               max_code_distance=max_code_distance)
    if baseline.startswith(GOLDEN):
        spec, data, device, base = replay_golden(baseline, opts)
        resolved = resolve_producers(device, {"candidate": candidate}, spec, opts["repo"], isolation=limits)
    else:
        spec, data, device = build(opts)
        resolved = resolve_producers(device, {"baseline": baseline, "candidate": candidate}, spec, opts["repo"],
                                     isolation=limits)
        base = resolved["baseline"]
    with progress(device, resolved.values()):
        checked = check_compare(spec, baseline=base, candidate=resolved["candidate"], inputs=data, device=device,
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
    from .prepare import resolve_producers

    golden.check_output_path(out_path, "--out")
    limits = isolation_limits(opts)
    spec, data, device = build(opts)
    resolved = resolve_producers(device, {"producer": producer}, spec, opts["repo"], isolation=limits)
    with progress(device, resolved.values()):
        side = run_side(resolved["producer"], spec, data.to(device), device)
    if side.buffer.modified_inputs:
        raise golden.GoldenError(f"producer {side.name!r} modified its {' and '.join(side.buffer.modified_inputs)}"
                                 " in place; not recorded")
    golden.write(out_path, spec=spec, producer=side.name, emulated=side.emulated, inputs=data,
                 buffer=side.buffer, versions=versions(), key=golden_key(), provenance=side.provenance)
    show(f"recorded {side.name} ({spec.summary()}, {data.source}) to {out_path}", soft_wrap=True, highlight=False)
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
    from .prepare import resolve_producers
    from .table import read_config, seed_table

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


def _apply_config(values: dict, opts: dict, path: Path, section: str) -> None:
    """Config values for the options left at their default, each checked by its option's own type."""
    ctx = click.get_current_context()
    params = {p.name: p for p in ctx.command.params}
    for dest, value in values.items():
        if ctx.get_parameter_source(dest) is not click.core.ParameterSource.DEFAULT:
            continue
        try:
            opts[dest] = params[dest].type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise ConfigError(f"{path}: [{section}] {dest.replace('_', '-')}: {exc.format_message()}") from None


def _comma_list(text: str, option: str, convert=str) -> list:
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    try:
        return [convert(item) for item in items]
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a comma-separated list of integers") from None


@cli.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [parity] section (e.g. configs/seed-parity.toml); options given here win.")
@click.option("--ctx", default="128,512,1024,2048,2049,4096,8192,16384", show_default=True,
              help="Context lengths, one table row each (comma-separated).")
@click.option("--writers", default="triton-buggy,triton", show_default=True,
              help="Writers, one column each (comma-separated producer names, file:PATH:FUNC, ...).")
@click.option("--baseline", default="auto", show_default=True, help="The writer whose bytes define the truth.")
@click.option("--reader", default="reference", show_default=True,
              help="reference (exact, float64), aiter, file:PATH:FUNC or vllm-file:PATH:FUNC.")
@click.option("--topk", type=click.IntRange(min=1), default=2048, show_default=True)
@click.option("--next-n", type=click.IntRange(min=1), default=1, show_default=True,
              help="Query rows per sequence (2: MTP; row n sees ctx - next_n + n + 1 tokens).")
@click.option("--heads", type=click.IntRange(min=1), default=None, help="Query heads [default: 64, or --input's].")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-3, show_default=True, help="bad/N: relative tolerance.")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-3, show_default=True, help="bad/N: absolute tolerance.")
@click.option("--min-recall", type=click.FloatRange(0, 1), default=1.0, show_default=True,
              help="Pass when every non-vacuous row of every writer not expected to fail has recall@K >= this.")
@click.option("--expect-fail", multiple=True, metavar="NAME", help="A writer expected to fail (repeatable).")
@click.option("--block", "block_size", type=int, default=64, show_default=True, help="Tokens per cache block.")
@click.option("--head-dim", type=int, default=128, show_default=True)
@click.option("--qbs", "quant_block_size", type=int, default=None, help="Quant group size [default: head_dim].")
@click.option("--fp8", type=click.Choice(["e4m3fn", "e4m3fnuz"]), default="e4m3fn", show_default=True)
@click.option("--scale-fmt", type=click.Choice(["ue8m0", "fp32"]), default="ue8m0", show_default=True)
@click.option("--layout", type=click.Choice(["shuffle", "linear"]), default=None,
              help="Value layout [default: shuffle when --block > 1, else linear].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--slots", type=click.Choice(["sequential", "shuffled"]), default="sequential", show_default=True,
              help="Block table in order, or shuffled.")
@click.option("--inputs", "distribution", default="normal", show_default=True, help="How K is drawn (as in compare).")
@click.option("--input", "input_path", type=click.Path(path_type=Path), default=None,
              help="safetensors with k (bf16 [T, D]), q (bf16 [H, D] or [next_n, H, D]), weights (fp32 [H] or [next_n, H]).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--repo", type=click.Path(path_type=Path), default=None,
              help="Git repository that git:REV:PATH names are read from [default: the current directory's].")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the records as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def parity(config_path, json_path, debug, **opts):
    """Top-K parity: each writer's bytes read back into indexer logits, top-K against the truth."""
    from rich.progress import Progress

    from . import parity as parity_mod
    from .device import resolve_device
    from .inputs import Distribution
    from .readers import registry as readers
    from .report import parity as report_parity
    from .prepare import resolve_producers
    from .spec import FP8Format, Layout, ScaleFormat

    check_writable(json_path, "--json")
    if config_path is not None:
        _apply_config(parity_mod.read_config(config_path), opts, config_path, "parity")
    config = parity_mod.ParityConfig(
        ctx=tuple(_comma_list(opts["ctx"], "--ctx", int)), topk=opts["topk"], next_n=opts["next_n"],
        rtol=opts["rtol"], atol=opts["atol"], min_recall=opts["min_recall"], expect_fail=frozenset(opts["expect_fail"]),
    )
    if opts["distribution"] not in {d.value for d in Distribution}:
        raise UsageError(f"--inputs {opts['distribution']!r}: expected one of {', '.join(d.value for d in Distribution)}")
    spec = parity_mod.cache_spec(
        config, block_size=opts["block_size"], head_dim=opts["head_dim"], quant_block_size=opts["quant_block_size"],
        fp8=FP8Format(opts["fp8"]), scale_fmt=ScaleFormat(opts["scale_fmt"]),
        layout=Layout(opts["layout"]) if opts["layout"] else None,
    )
    shuffled, device = opts["slots"] == "shuffled", resolve_device(opts["device"])
    if opts["input_path"] is not None:
        data = parity_mod.read(opts["input_path"], spec, config, heads=opts["heads"], seed=opts["seed"],
                               shuffled=shuffled)
    else:
        data = parity_mod.generate(spec, config, heads=opts["heads"] or parity_mod.DEFAULT_HEADS, seed=opts["seed"],
                                   shuffled=shuffled, distribution=Distribution(opts["distribution"]))
    names = _comma_list(opts["writers"], "--writers")
    if not names:
        raise UsageError("--writers: name at least one writer")
    resolved = resolve_producers(device, {"baseline": opts["baseline"], **{f"w{i}": n for i, n in enumerate(names)}},
                             spec, opts["repo"])
    baseline, writers = resolved.pop("baseline"), list(resolved.values())
    reader = readers.resolve(opts["reader"], spec=spec, repo=opts["repo"])
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("parity", total=None)
        result = parity_mod.run_parity(
            spec, config, baseline=baseline, writers=writers, reader=reader, inputs=data, device=device,
            progress=lambda label, done, total: bar.update(task, description=label, completed=done, total=total),
        )
    write_json(json_path, report_parity.to_json(result))
    show(report_parity.render(result))
    return ExitCode.OK if result.passed else ExitCode.DIFFER


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
    from .device import resolve_device
    from .report import doctor as doctor_report
    from .writers import registry as producers

    producers.prepare(resolve_device("auto"))  # what a CPU run would do, before Triton is imported

    found = doctor_mod.diagnose(required)
    write_json(json_path, doctor_report.to_json(found))
    show(doctor_report.render(found))
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
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
    return int(rv) if isinstance(rv, int) else ExitCode.OK
