"""Every error a user can cause (`UserError`: exit 2, one line), the checker's own failure (anything
else: exit 3, with or without `--debug`), and the exit codes. A verdict is never an exception."""

from __future__ import annotations

import enum
import linecache
import sysconfig
import traceback
from pathlib import Path


class ExitCode(enum.IntEnum):
    """The one table of exit codes (README: "Exit codes")."""

    OK = 0  # identical, within budget, or the check passed
    DIFFER = 1  # a byte verdict failed
    USAGE = 2  # bad usage, input, config, or a producer that cannot load or run
    INTERNAL = 3  # an error of fp8check itself
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, the shell's convention)


class UserError(Exception):
    """Something the user can fix; the message is one line naming what is wrong."""


class SpecError(UserError, ValueError):
    """An impossible or inconsistent cache description; the message names the field."""


class InputError(UserError, ValueError):
    """Inputs that cannot be read or do not fit the spec."""


class GoldenError(InputError):
    """A golden file that is damaged, foreign or inconsistent with the options."""


class ProducerError(UserError, RuntimeError):
    """A writer or reader that cannot be found, loaded or run; one line naming it. Never a mismatch."""


class NotRunnableHere(ProducerError):
    """This machine cannot run the case at all (e4m3fnuz on an NVIDIA GPU, a format this Triton's
    interpreter cannot hold): a gate reports the case skipped with this line (failed under --strict)."""


class DeviceError(UserError, RuntimeError):
    """The device asked for is not there."""


class ConfigError(UserError, ValueError):
    """A TOML config that cannot be read or holds a bad value; the message names the file and key."""


class BudgetError(UserError, ValueError):
    """An impossible budget; the message names the option."""


class UsageError(UserError):
    """Options that cannot be combined, or an output path that cannot be written."""


class CheckerError(AssertionError):
    """fp8check contradicted itself (e.g. the diagnosis lost a byte): exit 3, never a verdict."""


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message` (or just the type), for one-line reports of foreign errors."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def printable(text: object, *, newlines: bool = False) -> str:
    """`text` with every character that is not printable (terminal escapes, carriage returns, C1 controls,
    bidirectional overrides; line breaks unless `newlines`) written as its Python escape (\\x1b, \\u202e):
    what a name, a path or code under test chose can neither draw on a terminal nor break a report's syntax."""
    return "".join(c if c.isprintable() or (newlines and c == "\n") else repr(c)[1:-1] for c in str(text))


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 case`, `2 cases`; `words` for a plural that is not word + s (`batches`)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def one_line(text: object, limit: int = 400) -> str:
    """`text` as one printable line: its first line, control characters (terminal escapes, carriage
    returns) written as \\xNN, at most `limit` characters. For text that code under test chose."""
    shown = printable(next(iter(str(text).strip().splitlines()), ""))
    return shown if len(shown) <= limit else shown[:limit] + "..."


def failure(exc: BaseException, at: str | None = None) -> str:
    """`Type: first line at FILE:LINE: source line`, one line: what a writer, reader or user file raised and
    where in the user's code (`at`, default raised_at(exc); omitted when unknown)."""
    at = raised_at(exc) if at is None else at
    return one_line(first_line(exc)) + (f" at {at}" if at else "")


def raised_at(exc: BaseException) -> str:
    """`FILE:LINE: source line` of the innermost frame of `exc` in the user's own code (not fp8check's, not
    the standard library's or an installed package's); "" when there is none."""
    not_user_code = tuple(str(Path(p).resolve()) for p in {
        str(Path(__file__).parents[1]), *(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib"))})
    found = ""
    for frame, line in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        try:
            resolved = str(Path(name).resolve())
        except (OSError, ValueError):
            resolved = name
        if not resolved.startswith(not_user_code) and not name.startswith("<frozen"):
            source = linecache.getline(name, line, frame.f_globals).strip()
            found = f"{name}:{line}" + (f": {source}" if source else "")
    return one_line(found)
