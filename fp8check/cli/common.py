"""What every command shares on its way out: `handled` (errors to exit codes, one printable line on stderr),
printing (`show`), the report formats and `--quiet`, and the interpreter's progress bar."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import traceback
from pathlib import Path

import click
from rich.console import Console

from ..code.names import Kind, is_git, parse
from ..core.errors import ExitCode, UsageError, UserError, printable
from ..core.outcome import Outcome, Outcomes, single
from ..core.outputs import check_output, write_output
from ..report.formats import BY_NAME, FORMATS


def handled(fn):
    """A command's errors to exit codes: UserError is exit 2, anything else a checker error, exit 3 (`--debug`
    adds the traceback). Output paths are checked first (outputs.check_output); a command that ends in an error
    writes it into each report asked for, so that an earlier run's passing report is never left in place."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        targets: dict[str, Path] = {}
        try:
            targets, problem = checked_outputs(kwargs)
            if problem is not None:
                raise problem
            return fn(*args, **kwargs)
        except Exception as exc:
            if kwargs.get("debug", False):
                traceback.print_exc()
                if getattr(exc, "child_traceback", ""):  # the user's code, as its child process saw it
                    click.echo(f"In the child process:\n{exc.child_traceback}", err=True, nl=False)
            user = isinstance(exc, UserError)
            message = str(exc) if user else f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)"
            return _failed(message, ExitCode.USAGE if user else ExitCode.INTERNAL, targets, kwargs, fn.__name__)

    return wrapper


# every option that names an output file: each format's (report/formats.py), and record's --out
OUTPUT_PATHS = {**{f"{f.name}_path": f"--{f.name}" for f in FORMATS}, "out_path": "--out"}
READ_OPTIONS = ("input_path", "config_path", "baseline", "candidate", "producer", "buggy", "fixed", "reader", "writers")


def reading_paths(kwargs: dict) -> tuple[Path, ...]:
    """The files a command's options name for reading: --input, --config, golden:FILE, file:PATH:FUNC."""
    found = []
    for name in READ_OPTIONS:
        value = kwargs.get(name)
        for text in (str(value).split(",") if value is not None else ()):
            text = text.strip()
            try:
                name = parse(text)
            except UserError:  # a malformed name is refused where it is used
                continue
            if name.kind is Kind.BUILTIN:  # a plain path (--input, --config) or a registry name
                if text and not is_git(text):
                    found.append(Path(text))
            elif name.local_path is not None and name.kind is not Kind.AITER_SRC:
                found.append(name.local_path)
    return tuple(found)


def checked_outputs(kwargs: dict) -> tuple[dict[str, Path], UsageError | None]:
    """(option -> path of every output file asked for that passes outputs.check_output, the first
    refusal or None): the outputs that pass still receive the run's error when another is refused."""
    reading = reading_paths(kwargs)
    targets, problem = {}, None
    for name, option in OUTPUT_PATHS.items():
        value = kwargs.get(name)
        if value is None or str(value) == "-":
            continue
        try:
            check_output(Path(value), option=option, reading=reading)
            targets[option] = Path(value)
        except UsageError as exc:
            problem = problem or exc
    return targets, problem


def failed_parsing(argv: list[str], command: str, message: str) -> int:
    """click refused the command line (a value out of range, an unknown option): the error record still
    goes to each report asked for there (`--json -` included), as for any other exit 2. Every word of the
    command line counts as a file the run reads, so a report path can never overwrite one of them."""
    kwargs: dict = {"writers": ",".join(argv)}
    for word, following in zip(argv, [*argv[1:], None]):  # --json PATH, --json=PATH
        flag, equals, value = word.partition("=")
        if flag.startswith("--") and flag[2:] in BY_NAME and (equals or following is not None):
            kwargs[f"{flag[2:]}_path"] = value if equals else following
    targets, _ = checked_outputs(kwargs)
    return _failed(message, ExitCode.USAGE, targets, kwargs, command)


def _failed(message: str, code: ExitCode, targets: dict[str, Path], kwargs: dict, command: str) -> int:
    """The one line on stderr, and the same error in each report file asked for (report/formats.py)."""
    run = Outcomes(command, (Outcome(command, command, code, None, message, 0.0),), 1, 0.0, batch=False)
    for option, path in targets.items():
        fmt = BY_NAME.get(option.removeprefix("--"))
        if fmt is None:  # record's --out: a recording is never replaced by an error
            continue
        try:
            write_output(path, fmt.render(run), reading=reading_paths(kwargs), option=option, append=fmt.append)
        except UsageError as exc:
            if str(exc) != message:  # the run's own error was this file's: said once, below
                click.echo(f"fp8check: error: {printable(exc)}", err=True)
    piped = [name for name in BY_NAME if kwargs.get(f"{name}_path") == "-"]
    if len(piped) == 1:  # `--json -`: a CI step parsing stdout gets the error record, as a file would
        to_stdout(lambda: click.echo(BY_NAME[piped[0]].render(run), nl=False))
    click.echo(f"fp8check: {printable(('error: ' if code == ExitCode.USAGE else '') + message)}", err=True)
    return code


def show(renderable, **print_options) -> None:
    """Print to stdout; a reader that went away (`fp8check compare | true`) changes nothing else: the
    JSON is still written and the exit code is the verdict's."""
    console = Console()
    console.on_broken_pipe = silence_stdout  # rich's own handler exits 1: the code of "bytes differ"
    to_stdout(lambda: print_printable(console, renderable, **print_options))


def to_stdout(write) -> None:
    """Call `write` (which prints to stdout), then flush; a reader that went away silences stdout."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def print_printable(console: Console, renderable, *, soft_wrap: bool = False, markup: bool | None = None,
                    highlight: bool | None = None) -> None:
    """Print through rich with every unprintable character of the text written as its escape
    (errors.printable): text chosen by a config or by code under test can never move the cursor, retitle
    the terminal or forge a line of the report. rich's own styles are segments of their own and stay."""
    from rich.segment import Segment, Segments

    if isinstance(renderable, str):
        renderable = console.render_str(renderable, markup=markup, highlight=highlight)
    options = console.options.update(no_wrap=True, overflow="ignore") if soft_wrap else console.options
    segments = [s if s.control else Segment(printable(s.text, newlines=True), s.style)
                for s in console.render(renderable, options)]
    console.print(Segments(segments), soft_wrap=soft_wrap)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's own flush at exit cannot fail on a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError, ValueError):  # stdout is not a real file (a test's capture)
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def output_options(fn):
    """--json, --junit, --markdown (each PATH or - for stdout; report/formats.py) and --quiet: every command."""
    fn = click.option("--quiet", is_flag=True, help="Print the verdict line only.")(fn)
    for f in reversed(FORMATS):
        fn = click.option(f"--{f.name}", f"{f.name}_path", metavar="PATH|-", default=None, help=f.help)(fn)
    return fn


def outputs_of(kwargs: dict) -> dict:
    """Pop the output options from a command's keyword arguments: {format name: path or "-"}, quiet, and the
    command's start (perf_counter, for finish). `handled` has checked the paths already."""
    paths = {f.name: path for f in FORMATS if (path := kwargs.pop(f"{f.name}_path")) is not None}
    piped = [name for name, path in paths.items() if path == "-"]
    if len(piped) > 1:
        raise UsageError(f"only one format can go to stdout: {', '.join('--' + n + ' -' for n in piped)}")
    return {"paths": paths, "quiet": kwargs.pop("quiet"), "start": time.perf_counter()}


def emit(out: dict, run, renderable, *, soft_wrap: bool = False) -> None:
    """Write the formats asked for, then print the report (or only the verdict line with --quiet). Files
    first: a reader of stdout that went away (`| true`) never costs a report file. A format written to
    stdout (`--json -`) is the only thing there; the report then goes to stderr."""
    stdout_text = None
    for name, path in out["paths"].items():
        fmt = BY_NAME[name]
        text = fmt.render(run)
        if path == "-":
            stdout_text = text
        else:
            write_output(Path(path), text, option=f"--{name}", append=fmt.append)
    if step_summary := os.environ.get("GITHUB_STEP_SUMMARY"):
        write_output(Path(step_summary), BY_NAME["markdown"].render(run), option="$GITHUB_STEP_SUMMARY", append=True)
    to_stderr = stdout_text is not None
    if out["quiet"]:
        click.echo(printable(run.verdict_line()), err=to_stderr)
    elif to_stderr:
        print_printable(Console(stderr=True), renderable, soft_wrap=soft_wrap)
    else:
        show(renderable, soft_wrap=soft_wrap)
    if stdout_text is not None:
        to_stdout(lambda: click.echo(stdout_text, nl=False))


def finish(out: dict, case_id: str, result, renderable, *, soft_wrap: bool = False) -> int:
    """One command's result, written and printed: its exit code."""
    outcomes = single(case_id, result, time.perf_counter() - out["start"])
    emit(out, outcomes, renderable, soft_wrap=soft_wrap)
    return outcomes.exit_code


def progress(device, producers):
    """A progress bar on stderr while Triton programs run in the interpreter, when stderr is a terminal."""
    err = Console(stderr=True)
    if device.type != "cpu" or not err.is_terminal or not any(p.triton for p in producers):
        return contextlib.nullcontext()
    from ..report.progress import interpreter_progress

    return interpreter_progress(err)
