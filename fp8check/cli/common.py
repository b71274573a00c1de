"""What every command shares on its way out: the one fail(message, code) path, `handled` (errors to exit
codes), printing to stdout (`show`), the output formats (`--json`, `--junit`, `--markdown`, `--quiet`) and
the interpreter's progress bar."""

from __future__ import annotations

import functools
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


def output_options(fn):
    """--json, --junit, --markdown (each PATH or - for stdout; report/formats.py) and --quiet: every command."""
    from ..report.formats import FORMATS

    options = [click.option(f"--{f.name}", f"{f.name}_path", metavar="PATH|-", default=None, help=f.help)
               for f in FORMATS]
    options.append(click.option("--quiet", is_flag=True, help="Print the verdict line only."))
    for option in reversed(options):
        fn = option(fn)
    return fn


def outputs_of(kwargs: dict) -> dict:
    """Pop the output options from a command's keyword arguments: {format name: path or "-"}, and quiet."""
    from ..report.formats import FORMATS

    paths = {f.name: kwargs.pop(f"{f.name}_path") for f in FORMATS}
    paths = {name: path for name, path in paths.items() if path is not None}
    to_stdout = [name for name, path in paths.items() if path == "-"]
    if len(to_stdout) > 1:
        raise UsageError(f"only one format can go to stdout: {', '.join('--' + n + ' -' for n in to_stdout)}")
    for name, path in paths.items():
        if path != "-" and not Path(path).parent.is_dir():
            raise UsageError(f"--{name} {path}: folder {Path(path).parent} does not exist")
    return {"paths": paths, "quiet": kwargs.pop("quiet")}


def _write(path: Path, text: str, option: str, *, append: bool = False) -> None:
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write ({exc.strerror})") from None


def emit(out: dict, run, renderable, *, soft_wrap: bool = False) -> None:
    """Write the formats asked for, then print the report (or only the verdict line with --quiet).

    Files first: a reader of stdout that went away (`| true`) never costs a report file. A format written
    to stdout (`--json -`) is the only thing there; the report then goes to stderr."""
    from ..report.formats import BY_NAME

    stdout_text = None
    for name, path in out["paths"].items():
        fmt = BY_NAME[name]
        text = fmt.render(run)
        if path == "-":
            stdout_text = text
        else:
            _write(Path(path), text, f"--{name}", append=fmt.append)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        _write(Path(step_summary), BY_NAME["markdown"].render(run), "$GITHUB_STEP_SUMMARY", append=True)
    to_stderr = stdout_text is not None
    if out["quiet"]:
        click.echo(run.verdict_line(), err=to_stderr)
    elif to_stderr:
        Console(stderr=True).print(renderable, soft_wrap=soft_wrap)
    else:
        show(renderable, soft_wrap=soft_wrap)
    if stdout_text is not None:
        try:
            click.echo(stdout_text, nl=False)
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()


def progress(device, producers):
    """A progress bar on stderr while Triton programs run in the interpreter, when stderr is a terminal."""
    import contextlib

    err = Console(stderr=True)
    if device.type != "cpu" or not err.is_terminal or not any(p.triton for p in producers):
        return contextlib.nullcontext()
    from ..report.progress import interpreter_progress

    return interpreter_progress(err)
