"""From the command line to a request: the option decorators (built from options.py), `--config` files'
values for the options left at their default, and the isolation limits."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import ConfigError
from ..core.isolation import Limits
from ..run import options


def command_options(command: str):
    """The click options of a command's keys (options.COMMAND_KEYS), --debug and the isolation options."""

    def decorate(fn):
        fn = click.option("--debug", is_flag=True, help="Show tracebacks.")(fn)
        for key in reversed(options.COMMAND_KEYS[command]):  # added last to first: --help lists them in order
            fn = options.option(key, command).click_option()(fn)
        return isolation_options(fn)

    return decorate


def isolation_options(fn):
    """How code from files (file:, vllm-file:, git:) runs: in a child process, under these limits."""
    fn = click.option("--in-process", is_flag=True,
                      help="Run writers from files inside fp8check's own process (debugging only: their code can"
                           " then change the verdict).")(fn)
    fn = click.option("--memory-limit", "memory_limit_mib", type=click.IntRange(min=1), default=None, metavar="MIB",
                      help="Memory a writer from a file may allocate (CPU) [default: what the machine has].")(fn)
    return options.ISOLATION["timeout"].click_option()(fn)


def isolation_limits(opts: dict):
    """Pop the isolation options from `opts`: the Limits for writers from files, or None (--in-process)."""
    timeout_s, memory_mib, in_process = opts.pop("timeout_s"), opts.pop("memory_limit_mib"), opts.pop("in_process")
    return None if in_process else Limits(timeout_s=timeout_s, memory_bytes=memory_mib and memory_mib * 2**20)


def request(command: str, opts: dict, config_path: Path | None = None):
    """The command's Request: its options under their config keys, a [section] of `--config` filling the
    ones left at their default; stated = typed on the command line or set in the config."""
    from ..run.prepare import Request

    ctx = click.get_current_context()
    defaults = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP)
    dests = {key: options.option(key, command).dest for key in options.COMMAND_KEYS[command]}
    values = {key: opts.pop(dest) for key, dest in dests.items()}
    stated = {key for key, dest in dests.items() if ctx.get_parameter_source(dest) not in defaults}
    if config_path is not None:
        from ..core.config import find, load_toml

        path = find(config_path)
        section = load_toml(path).get(command)
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: needs a [{command}] section")
        checked = options.validate(section, options.COMMAND_KEYS[command], f"{path} [{command}]", command)
        values.update({key: value for key, value in checked.items() if key not in stated})
        stated |= set(checked)
    return Request.of(command, values, where=options.COMMAND_LINE, stated=stated)


def prepared(command: str, opts: dict, config_path: Path | None = None):
    """(request, run): the isolation options popped, the rest made the command's request (request()), and what
    prepare() (prepare_parity() for parity) made of it."""
    from ..run.prepare import prepare, prepare_parity

    limits = isolation_limits(opts)
    req = request(command, opts, config_path)
    return req, (prepare_parity if command == "parity" else prepare)(req, isolation=limits)
