"""What every command shares on its way out: the one fail(message, code) path, `handled` (errors to exit
codes), printing to stdout (`show`), the report files CI reads (`--json`, `--junit`, `--markdown`) and the
interpreter's progress bar."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from pathlib import Path

import click
from rich.console import Console

from ..errors import ExitCode, UsageError, UserError


def fail(message: str, code: ExitCode) -> int:
    """The one way out with an error: one line on stderr, the exit code from the table."""
    click.echo(f"fp8check: {message}", err=True)
    return code


def handled(fn):
    """A command's errors to exit codes: UserError is exit 2, anything else a checker error, exit 3.

    Output paths are checked first (outputs.check_output: no symlink, device, FIFO or folder, no file the
    run reads). When the command ends in an error, the JSON and JUnit reports asked for are replaced
    with that error, so that an earlier run's passing report is never left in place.
    `--debug` adds the traceback; it never changes the exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = kwargs.get("debug", False)
        targets: dict[str, Path] = {}
        try:
            targets, problem = checked_outputs(kwargs)
            if problem is not None:
                raise problem
            return fn(*args, **kwargs)
        except UserError as exc:
            if debug:
                traceback.print_exc()
                if getattr(exc, "child_traceback", ""):  # the user's code, as its child process saw it
                    click.echo(f"In the child process:\n{exc.child_traceback}", err=True, nl=False)
            return _failed(f"error: {exc}", ExitCode.USAGE, targets, kwargs, fn.__name__)
        except Exception as exc:
            if debug:
                traceback.print_exc()
            return _failed(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug)", ExitCode.INTERNAL,
                           targets, kwargs, fn.__name__)

    return wrapper


OUTPUT_OPTIONS = {"json_path": "--json", "junit_path": "--junit", "markdown_path": "--markdown", "out_path": "--out"}
READ_OPTIONS = ("input_path", "config_path", "baseline", "candidate", "producer", "buggy", "fixed", "reader", "writers")


def reading_paths(kwargs: dict) -> tuple[Path, ...]:
    """The files a command's options name for reading: --input, --config, golden:FILE, file:PATH:FUNC."""
    found = []
    for name in READ_OPTIONS:
        value = kwargs.get(name)
        for text in (str(value).split(",") if value is not None else ()):
            text = text.strip()
            for prefix in ("golden:", "file:", "vllm-file:"):
                if text.startswith(prefix):
                    body = text[len(prefix):]
                    text = body.rpartition(":")[0] if prefix != "golden:" and ":" in body else body
                    break
            if text and not text.startswith("git:"):
                found.append(Path(text))
    return tuple(found)


def checked_outputs(kwargs: dict) -> tuple[dict[str, Path], UsageError | None]:
    """(option -> path of every output file asked for that passes outputs.check_output, the first
    refusal or None): the outputs that pass still receive the run's error when another is refused."""
    from ..outputs import check_output

    reading = reading_paths(kwargs)
    targets, problem = {}, None
    for name, option in OUTPUT_OPTIONS.items():
        value = kwargs.get(name)
        if value is None or str(value) == "-":
            continue
        try:
            check_output(Path(value), option=option, reading=reading)
        except UsageError as exc:
            problem = problem or exc
            continue
        targets[option] = Path(value)
    return targets, problem


def _failed(message: str, code: ExitCode, targets: dict[str, Path], kwargs: dict, command: str) -> int:
    from ..outputs import write_failure

    for problem in write_failure(targets, message, code, suite=command, reading=reading_paths(kwargs)):
        click.echo(f"fp8check: {problem}", err=True)
    return fail(message, code)


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


def check_writable(path: Path | None, option: str) -> None:
    """Refuse an output path whose folder is missing before any work is done."""
    if path is not None and not path.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {path.parent} does not exist")


def write_json(path: Path | None, payload: dict) -> None:
    if path is not None:
        from ..outputs import write_output

        write_output(path, json.dumps(payload, indent=2, sort_keys=False) + "\n", option="--json")


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
    from ..outputs import write_output

    write_output(path, text, option=option, append=append)


def emit(out: dict, *, renderable, verdict: str, payload: dict, gate_result, title: str,
         soft_wrap: bool = False) -> None:
    """Write the reports asked for, then print the report (or only the verdict line with --quiet).

    Files first: a reader of stdout that went away (`| true`) never costs the JSON, JUnit or Markdown.
    With `--json -` the JSON is the only thing on stdout; the report goes to stderr. `payload` may be a
    function returning the JSON dict: it is then built only when --json asks for it (16,384 blocks' counts
    cost ~15 ms)."""
    to_stdout = out["json_path"] == "-"
    text = None
    if out["json_path"] is not None:
        text = json.dumps(payload() if callable(payload) else payload, indent=2, allow_nan=False) + "\n"
    if out["json_path"] not in (None, "-"):
        _write(Path(out["json_path"]), text, "--json")
    if out["junit_path"] is not None:
        from ..report import junit

        _write(out["junit_path"], junit.junit_xml(gate_result, suite=title), "--junit")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if out["markdown_path"] is not None or step_summary:
        from ..report import markdown

        summary = markdown.gate_markdown(gate_result, title=title)
        if out["markdown_path"] is not None:
            _write(out["markdown_path"], summary, "--markdown", append=True)
        if step_summary:
            _write(Path(step_summary), summary, "$GITHUB_STEP_SUMMARY", append=True)
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
    from ..gate import GateResult, Outcome

    outcome = Outcome(case_id, kind, ExitCode.OK if passed else ExitCode.DIFFER, result, None, seconds)
    return GateResult(kind, (outcome,), 1, seconds)


def progress(device, producers):
    """A progress bar on stderr while Triton programs run in the interpreter, when stderr is a terminal."""
    import contextlib

    err = Console(stderr=True)
    if device.type != "cpu" or not err.is_terminal or not any(p.triton for p in producers):
        return contextlib.nullcontext()
    from ..report.progress import interpreter_progress

    return interpreter_progress(err)
