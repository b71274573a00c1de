"""`fp8check parity`: each writer's bytes read back into indexer logits, top-K against the truth."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from . import startup
from ..errors import ExitCode, UsageError
from .arguments import apply_config, comma_list, isolation_limits, isolation_options
from .common import check_writable, handled, show, write_json


@click.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML file with a [parity] section (e.g. configs/seed-parity.toml); options given here win.")
@click.option("--ctx", default="128,512,1024,2048,2049,4096,8192,16384", show_default=True,
              help="Context lengths, one table row each (comma-separated).")
@click.option("--writers", default="triton-buggy,triton", show_default=True,
              help="Writers, one column each (comma-separated producer names, file:PATH:FUNC, ...).")
@click.option("--baseline", default="auto", show_default=True, help="The writer whose bytes define the truth.")
@click.option("--reader", default="reference", show_default=True,
              help="reference (exact, float64), aiter, file:PATH:FUNC or vllm-file:PATH:FUNC.")
@click.option("--topk", type=click.IntRange(min=1), default=2048, show_default=True)
@click.option("--next-n", type=click.IntRange(min=1), default=1, show_default=True,
              help="Query rows per sequence (2: MTP; row n sees ctx - next_n + n + 1 tokens).")
@click.option("--heads", type=click.IntRange(min=1), default=None, help="Query heads [default: 64, or --input's].")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-3, show_default=True, help="bad/N: relative tolerance.")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-3, show_default=True, help="bad/N: absolute tolerance.")
@click.option("--min-recall", type=click.FloatRange(0, 1), default=1.0, show_default=True,
              help="Pass when every non-vacuous row of every writer not expected to fail has recall@K >= this.")
@click.option("--expect-fail", multiple=True, metavar="NAME", help="A writer expected to fail (repeatable).")
@click.option("--block", "block_size", type=int, default=64, show_default=True, help="Tokens per cache block.")
@click.option("--head-dim", type=int, default=128, show_default=True)
@click.option("--qbs", "quant_block_size", type=int, default=None, help="Quant group size [default: head_dim].")
@click.option("--fp8", type=click.Choice(["e4m3fn", "e4m3fnuz"]), default="e4m3fn", show_default=True)
@click.option("--scale-fmt", type=click.Choice(["ue8m0", "fp32"]), default="ue8m0", show_default=True)
@click.option("--layout", type=click.Choice(["shuffle", "linear"]), default=None,
              help="Value layout [default: shuffle when --block > 1, else linear].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--slots", type=click.Choice(["sequential", "shuffled"]), default="sequential", show_default=True,
              help="Block table in order, or shuffled.")
@click.option("--inputs", "distribution", default="normal", show_default=True, help="How K is drawn (as in compare).")
@click.option("--input", "input_path", type=click.Path(path_type=Path), default=None,
              help="safetensors with k (bf16 [T, D]), q (bf16 [H, D] or [next_n, H, D]), weights (fp32 [H] or [next_n, H]).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--repo", type=click.Path(path_type=Path), default=None,
              help="Git repository that git:REV:PATH names are read from [default: the current directory's].")
@isolation_options
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write the records as JSON.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@handled
def parity(config_path, json_path, debug, **opts):
    """Top-K parity: each writer's bytes read back into indexer logits, top-K against the truth."""
    from rich.progress import Progress

    from .. import parity as parity_mod
    from ..readers import registry as readers
    from ..report import parity as report_parity
    from ..prepare import resolve_producers

    startup.imports_done()

    check_writable(json_path, "--json")
    limits = isolation_limits(opts)
    if config_path is not None:
        apply_config(parity_mod.read_config(config_path), opts, config_path, "parity")
    config = parity_mod.ParityConfig(
        ctx=tuple(comma_list(opts["ctx"], "--ctx", int)), topk=opts["topk"], next_n=opts["next_n"],
        rtol=opts["rtol"], atol=opts["atol"], min_recall=opts["min_recall"], expect_fail=frozenset(opts["expect_fail"]),
    )
    spec, data, device = _spec_and_inputs(config, opts)
    names = comma_list(opts["writers"], "--writers")
    if not names:
        raise UsageError("--writers: name at least one writer")
    resolved = resolve_producers(device, {"baseline": opts["baseline"], **{f"w{i}": n for i, n in enumerate(names)}},
                                 spec, opts["repo"], isolation=limits)
    baseline, writers = resolved.pop("baseline"), list(resolved.values())
    reader = readers.resolve(opts["reader"], spec=spec, repo=opts["repo"], isolation=limits)
    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:  # no bar in logs
        task = bar.add_task("parity", total=None)
        result = parity_mod.run_parity(
            spec, config, baseline=baseline, writers=writers, reader=reader, inputs=data, device=device,
            progress=lambda label, done, total: bar.update(task, description=label, completed=done, total=total),
        )
    write_json(json_path, report_parity.to_json(result))
    show(report_parity.render(result))
    return ExitCode.OK if result.passed else ExitCode.DIFFER


def _spec_and_inputs(config, opts: dict):
    """(spec, inputs, device) of a parity run: the cache the contexts need, K/Q/weights drawn or read."""
    from .. import parity as parity_mod
    from ..device import resolve_device
    from ..inputs import Distribution
    from ..spec import FP8Format, Layout, ScaleFormat

    if opts["distribution"] not in {d.value for d in Distribution}:
        raise UsageError(f"--inputs {opts['distribution']!r}: expected one of {', '.join(d.value for d in Distribution)}")
    spec = parity_mod.cache_spec(
        config, block_size=opts["block_size"], head_dim=opts["head_dim"], quant_block_size=opts["quant_block_size"],
        fp8=FP8Format(opts["fp8"]), scale_fmt=ScaleFormat(opts["scale_fmt"]),
        layout=Layout(opts["layout"]) if opts["layout"] else None,
    )
    shuffled, device = opts["slots"] == "shuffled", resolve_device(opts["device"])
    if opts["input_path"] is not None:
        data = parity_mod.read(opts["input_path"], spec, config, heads=opts["heads"], seed=opts["seed"],
                               shuffled=shuffled)
    else:
        data = parity_mod.generate(spec, config, heads=opts["heads"] or parity_mod.DEFAULT_HEADS, seed=opts["seed"],
                                   shuffled=shuffled, distribution=Distribution(opts["distribution"]))
    return spec, data, device
