"""From the command line to what the core takes: the shared option decorators (spec, budget, isolation),
`build` (spec, inputs, device), `--baseline golden:FILE` replay, and config files' values for the options
left at their default."""

from __future__ import annotations

import math
from pathlib import Path

import click

from ..errors import ConfigError, UsageError


def spec_options(fn):
    """Options that describe the cache and the inputs, shared by compare, record and table (options.SPEC)."""
    from .. import options

    fn = click.option("--debug", is_flag=True, help="Show tracebacks.")(fn)
    return isolation_options(options.click_options(options.SPEC)(fn))


def isolation_options(fn):
    """How code from files (file:, vllm-file:, git:) runs: in a child process, under these limits."""
    from ..isolation import DEFAULT_TIMEOUT_S

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
    from ..isolation import Limits

    timeout_s, memory_mib, in_process = opts.pop("timeout_s"), opts.pop("memory_limit_mib"), opts.pop("in_process")
    if not math.isfinite(timeout_s):  # click's FloatRange lets nan through
        raise UsageError(f"--timeout {timeout_s}: expected a finite number of seconds")
    return None if in_process else Limits(timeout_s=timeout_s, memory_bytes=memory_mib and memory_mib * 2**20)


def budget_options(fn):
    from .. import options

    return options.click_options(options.BUDGET)(fn)


INPUT_OVERRIDDEN_FLAGS = {"seed": "--seed", "slots": "--slots", "distribution": "--inputs",
                          "inf_nan": "--specials-inf-nan"}  # --input replays its own inputs


def build(opts: dict):
    """(spec, inputs, device) from the shared options (prepare.build: gate cases and the API use it too)."""
    return start_build(opts, background=False).result()


def start_build(opts: dict, *, background: bool = True):
    """prepare.start(opts) after the CLI's own checks: its `result()` is build()'s (spec, inputs, device)."""
    from ..prepare import start

    if opts["input_path"] is not None:
        given = given_explicitly(opts)
        for name, flag in INPUT_OVERRIDDEN_FLAGS.items():
            if name in given:
                raise UsageError(f"{flag} cannot be combined with --input: the file's inputs are replayed")
    return start(opts, background=background)


def golden_key() -> bytes | None:
    """FP8CHECK_GOLDEN_KEY: when set, golden files are signed (record) and must be signed (replay)."""
    from ..golden import trusted_key

    return trusted_key()


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
    from .. import golden
    from ..device import resolve_device

    path_text = baseline[len(GOLDEN):]
    if not path_text:
        raise UsageError("--baseline golden:FILE needs a file")
    given = given_explicitly(opts)
    for name, flag in GOLDEN_INPUT_FLAGS.items():
        if name in given:
            raise UsageError(f"{flag} cannot be combined with --baseline {baseline}: the recorded inputs are replayed")
    recorded, path, origin = golden.load_trusted(path_text, opts.get("repo"))
    golden.check_options(
        path, recorded.spec, {name: (flag, opts[name]) for name, flag in GOLDEN_SPEC_FLAGS.items() if name in given}
    )
    device = resolve_device(opts["device"])
    side = golden.as_side(recorded, path, device)
    if origin:
        import dataclasses

        side = dataclasses.replace(side, provenance={**side.provenance, "golden": path_text, **origin})
    return recorded.spec, recorded.inputs, device, side


def apply_config(values: dict, opts: dict, path: Path, section: str) -> None:
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


def comma_list(text: str, option: str, convert=str) -> list:
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    try:
        return [convert(item) for item in items]
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a comma-separated list of integers") from None
