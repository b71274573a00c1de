"""The command line: parse, build a request, call a use case, render, pick the exit code (errors.ExitCode).
One module per command (or pair); `arguments` is the way in, `common` the way out. What imports torch is
imported inside the command bodies: `fp8check --help` does not import it."""

from __future__ import annotations

import sys

import click

from .._version import __version__
from ..core.errors import ExitCode
from . import compare, doctor, gate, parity, table
from .common import failed_parsing, to_stdout


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fp8check")
def cli():
    """Byte-exact checks of FP8 indexer K-cache writers (DeepSeek-V3.2 sparse attention)."""


for _command in (compare.compare, compare.record, table.table, gate.gate, parity.parity, doctor.doctor):
    cli.add_command(_command)


def entry() -> None:
    """The console script (and `python -m fp8check`)."""
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=argv, prog_name="fp8check", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        command = argv[0] if argv and argv[0] in cli.commands else "fp8check"
        return failed_parsing(argv, command, exc.format_message())
    except click.exceptions.Abort:
        return ExitCode.INTERRUPTED
    to_stdout(lambda: None)  # flushed here: a closed pipe silences stdout rather than failing at exit
    return int(rv) if isinstance(rv, int) else ExitCode.OK
