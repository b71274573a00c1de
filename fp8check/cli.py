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
from .errors import ExitCode, UsageError, UserError



def _enum_choice(enum_cls):
    return click.Choice([m.value for m in enum_cls])


def spec_options(fn):
    """Options that describe the cache and the inputs, shared by compare, record and table."""
    from .inputs import Distribution, SlotPattern
    from .spec import FP8Format, Layout, ScaleFormat

    options = [
        click.option("--block", "block_size", type=int, default=64, show_default=True, help="Tokens per cache block."),
        click.option("--head-dim", type=int, default=128, show_default=True),
        click.option("--num-blocks", type=int, default=None, help="Cache blocks [default: 3, or what --input needs]."),
        click.option("--qbs", "quant_block_size", type=click.IntRange(min=1), default=None,
                     help="Quant group size [default: 128 when it divides head_dim, else head_dim]."),
        click.option("--fp8", type=_enum_choice(FP8Format), default="e4m3fn", show_default=True),
        click.option("--scale-fmt", type=_enum_choice(ScaleFormat), default="ue8m0", show_default=True),
        click.option("--layout", type=_enum_choice(Layout), default=None,
                     help="Value layout [default: shuffle when --block > 1, else linear]."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--slots", type=_enum_choice(SlotPattern), default="sequential", show_default=True),
        click.option("--inputs", "distribution", type=_enum_choice(Distribution), default="normal", show_default=True,
                     help="How K is drawn: adversarial inputs for the numerics (ue8m0-boundary, ties, tiny, ...)."),
        click.option("--specials-inf-nan", "inf_nan", is_flag=True,
                     help="Let --inputs specials (and mixed) put inf and NaN in K; the real writers disagree on them."),
        click.option("--input", "input_path", type=click.Path(path_type=Path), default=None,
                     help="Replay a safetensors file holding k (bf16) and optionally slot_mapping (int64)."),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        click.option("--debug", is_flag=True, help="Show tracebacks."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return isolation_options(fn)


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


# With --input the file holds the inputs: options that would make other inputs cannot be given.
INPUT_OVERRIDDEN_FLAGS = {"seed": "--seed", "slots": "--slots", "distribution": "--inputs",
                          "inf_nan": "--specials-inf-nan"}


def check_memory(spec, num_tokens: int, device, replay, opts: dict) -> None:
    """Refuse a run whose caches, diff and inputs cannot fit, naming the options, before allocating them."""
    from .cache import require_memory, run_bytes

    sizes = f"--num-blocks {spec.num_blocks}, --block {spec.block_size}, --head-dim {spec.head_dim}"
    if replay is not None and opts["num_blocks"] is None:
        top = int(replay.slot_mapping.max()) if replay.slot_mapping.numel() else 0
        sizes = f"--input {opts['input_path']}: its slot {top} makes {sizes}, and"
    require_memory(run_bytes(spec, num_tokens), device, f"{sizes} (two caches, the diff and K)")


def choice(enum_cls, value, flag: str):
    """An enum member from an option's value; a bad one (e.g. from a --config file) is exit 2 naming it."""
    try:
        return enum_cls(value)
    except ValueError:
        known = ", ".join(m.value for m in enum_cls)
        raise UsageError(f"{flag} {value!r} is not one of {known}") from None


def build(opts: dict):
    """(spec, inputs, device) from the shared options. Raises SpecError / InputError / DeviceError."""
    from . import inputs as inputs_mod
    from .device import resolve_device
    from .spec import CacheSpec, FP8Format, Layout, ScaleFormat

    head_dim = opts["head_dim"]
    qbs = opts["quant_block_size"] if opts["quant_block_size"] is not None else (128 if head_dim % 128 == 0 else head_dim)
    replay = None
    if opts["input_path"] is not None:
        given = given_explicitly(opts)
        for name, flag in INPUT_OVERRIDDEN_FLAGS.items():
            if name in given:
                raise UsageError(f"{flag} cannot be combined with --input: the file's inputs are replayed")
        replay = inputs_mod.read_inputs(opts["input_path"])
    num_blocks = opts["num_blocks"]
    if num_blocks is None:
        num_blocks = inputs_mod.blocks_needed(replay, opts["block_size"]) if replay and opts["block_size"] > 0 else 3
    spec = CacheSpec(
        num_blocks=num_blocks, block_size=opts["block_size"], head_dim=head_dim, quant_block_size=qbs,
        fp8=choice(FP8Format, opts["fp8"], "--fp8"), scale_fmt=choice(ScaleFormat, opts["scale_fmt"], "--scale-fmt"),
        layout=choice(Layout, opts["layout"], "--layout") if opts["layout"] else None,
    )
    device = resolve_device(opts["device"])
    # generated inputs: at most num_slots tokens plus a quarter of padding (SlotPattern.PADDED)
    check_memory(spec, replay.k.shape[0] if replay else spec.num_slots * 5 // 4 + 1, device, replay, opts)
    if replay is not None:
        inputs_mod.validate(opts["input_path"], replay.k, replay.slot_mapping, spec)
        data = replay
    else:
        if not isinstance(opts["seed"], int) or isinstance(opts["seed"], bool):
            raise UsageError(f"--seed must be an integer, got {opts['seed']!r}")
        data = inputs_mod.generate(
            spec, seed=opts["seed"], slots=choice(inputs_mod.SlotPattern, opts["slots"], "--slots"),
            distribution=choice(inputs_mod.Distribution, opts["distribution"], "--inputs"), inf_nan=opts["inf_nan"],
        )
        inputs_mod.check_slots(spec, data.slot_mapping, f"generated inputs ({data.source})")
    return spec, data, device


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


def show(renderable) -> None:
    """Print to stdout; a reader that went away (`fp8check compare | true`) changes nothing else: the
    JSON is still written and the exit code is the verdict's."""
    console = Console()
    console.on_broken_pipe = silence_stdout  # rich's own handler exits 1: the code of "bytes differ"
    try:
        console.print(renderable)
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
    path = Path(path_text)
    given = given_explicitly(opts)
    for name, flag in GOLDEN_INPUT_FLAGS.items():
        if name in given:
            raise UsageError(f"{flag} cannot be combined with --baseline {baseline}: the recorded inputs are replayed")
    recorded = golden.read(path, key=golden_key())
    golden.check_options(
        path, recorded.spec, {name: (flag, opts[name]) for name, flag in GOLDEN_SPEC_FLAGS.items() if name in given}
    )
    device = resolve_device(opts["device"])
    return recorded.spec, recorded.inputs, device, golden.as_side(recorded, path, device)


@cli.command()
@spec_options
@click.option("--baseline", default="auto", show_default=True,
              help="Producer name; auto (aiter where it can run, else its emulation reference); golden:FILE"
                   " (bytes recorded by `fp8check record`); or file:PATH:FUNC.")
@click.option("--candidate", default="triton", show_default=True, help="Producer name, or file:PATH:FUNC.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the result as JSON.")
@click.option("--all-blocks", is_flag=True, help="One table row per block, however many.")
@click.option("--max-diff-bytes", type=click.IntRange(min=0), default=0, show_default=True,
              help="Pass with up to N differing bytes (those --max-code-distance excuses not counted); 0: exact.")
@click.option("--max-diff-fraction", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Pass with up to this fraction of the cache's bytes differing; 0: exact.")
@click.option("--max-code-distance", type=click.IntRange(min=0, max=8), default=0, show_default=True,
              help="Excuse differing FP8 value bytes at most D codes apart (at most 8; a NaN against a number"
                   " is never excused); 0: excuse none.")
@handled
def compare(baseline, candidate, json_path, all_blocks, debug, max_diff_bytes, max_diff_fraction, max_code_distance,
            **opts):
    """Run two writers on the same K, diff their cache bytes block by block, and say why they differ."""
    from . import budget as budget_mod
    from .compare import compare as run_compare
    from .report import json as report_json
    from .report import terminal
    from .writers import registry as producers
    from .diagnose import diagnose

    check_writable(json_path, "--json")
    limits = isolation_limits(opts)
    budget = budget_mod.Budget(max_diff_bytes=max_diff_bytes, max_diff_fraction=max_diff_fraction,
                               max_code_distance=max_code_distance)
    if baseline.startswith(GOLDEN):
        spec, data, device, base = replay_golden(baseline, opts)
    else:
        spec, data, device = build(opts)
        base = producers.resolve(baseline, isolation=limits)
    result = run_compare(spec, baseline=base, candidate=producers.resolve(candidate, isolation=limits), inputs=data,
                         device=device)
    diagnosis = diagnose(result.spec, result.baseline.buffer, result.candidate.buffer, result.inputs,
                         diff=result.diff)
    decided = budget_mod.check(budget, result.diff, result.baseline.buffer, result.candidate.buffer)
    write_json(json_path, report_json.compare_json(result, diagnosis=diagnosis, budget=decided))
    show(terminal.render_compare(result, all_blocks=all_blocks, diagnosis=diagnosis, budget=decided))
    modified = result.baseline.buffer.modified_inputs or result.candidate.buffer.modified_inputs
    return ExitCode.OK if (result.identical or decided.within) and not modified else ExitCode.DIFFER


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
    from .writers import registry as producers

    golden.check_output_path(out_path, "--out")
    limits = isolation_limits(opts)
    spec, data, device = build(opts)
    side = run_side(producers.resolve(producer, isolation=limits), spec, data.to(device), device)
    if side.buffer.modified_inputs:
        raise golden.GoldenError(f"producer {side.name!r} modified its {' and '.join(side.buffer.modified_inputs)}"
                                 " in place; not recorded")
    golden.write(out_path, spec=spec, producer=side.name, emulated=side.emulated, inputs=data,
                 buffer=side.buffer, versions=versions(), key=golden_key())
    show(f"recorded {side.name} ({spec.summary()}, {data.source}) to {out_path}")
    return ExitCode.OK


@cli.command()
@spec_options
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [table] section (e.g. configs/seed-table.toml); options given here win.")
@click.option("--baseline", default="auto", show_default=True,
              help="The C++ path: auto is the real aiter where it can run, else its emulation reference.")
@click.option("--buggy", default="triton-buggy", show_default=True)
@click.option("--fixed", default="triton", show_default=True)
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the table as JSON.")
@click.option("--all-blocks", is_flag=True, help="One row per block, however many.")
@handled
def table(config_path, json_path, all_blocks, debug, **opts):
    """The seed's table: buggy and fixed Triton wrappers against the C++ path, block by block."""
    from .report import json as report_json
    from .report import terminal
    from .table import read_config, seed_table
    from .writers import registry as producers

    check_writable(json_path, "--json")
    if config_path is not None:
        ctx = click.get_current_context()
        for dest, value in read_config(config_path).items():
            if ctx.get_parameter_source(dest) is click.core.ParameterSource.DEFAULT:
                opts[dest] = value
    limits = isolation_limits(opts)
    spec, data, device = build(opts)
    result = seed_table(
        spec, baseline=producers.resolve(opts["baseline"], isolation=limits),
        buggy=producers.resolve(opts["buggy"], isolation=limits),
        fixed=producers.resolve(opts["fixed"], isolation=limits), inputs=data, device=device,
    )
    write_json(json_path, report_json.seed_table_json(result))
    show(terminal.render_seed_table(result, all_blocks=all_blocks))
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
    from .report import doctor as doctor_report

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
