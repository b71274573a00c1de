"""The command line: parse, build a spec and inputs, call the core, render, pick the exit code.

Exit codes: 0 identical (or within budget), 1 bytes differ, 2 bad usage, input or producer error,
3 an internal error of fp8check itself.

One module per command (or pair of commands); what they share is in `common` (errors to exit codes,
printing, report files) and `arguments` (option decorators, spec and inputs, golden replay, configs).
Imports of the core stay inside the command bodies: `fp8check --help` does not import torch.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import ExitCode
from . import compare, doctor, ecosystem, gate, parity, startup, table
from .arguments import (  # noqa: F401  (the surface of fp8check.cli that tests and plugins import)
    build, budget_options, given_explicitly, isolation_limits, isolation_options, replay_golden, spec_options,
)
from .common import check_writable, emit, fail, handled, output_options, show, silence_stdout, write_json  # noqa: F401


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fp8check")
def cli():
    """Byte-exact checks of FP8 indexer K-cache writers (DeepSeek-V3.2 sparse attention)."""


for _command in (compare.compare, compare.record, table.table, gate.gate, parity.parity, doctor.doctor,
                 ecosystem.ecosystem):
    cli.add_command(_command)


def entry():
    """The console script (and `python -m fp8check`): main(), then the process ends at once with its exit
    code (startup.exit_process: no teardown of the imported modules)."""
    startup.exit_process(main())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    startup.arm()
    try:
        return _main(argv)
    finally:
        startup.finish()


def _main(argv: list[str]) -> int:
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
