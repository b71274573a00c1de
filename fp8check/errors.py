"""The bottom layer: every error a user can cause, the checker's own failure, and the exit codes.

A `UserError` (bad options, inputs, specs, configs, budgets, devices, producers that cannot load or
run) is exit 2 with its one-line message. Anything else raised inside fp8check is a checker error,
exit 3, with or without `--debug`. A verdict is never an exception: it is exit 0 or 1.
"""

from __future__ import annotations

import enum


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
