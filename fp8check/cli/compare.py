"""`fp8check compare` (two writers, one K, their cache bytes diffed and diagnosed) and `fp8check record`
(one writer's inputs and bytes saved as a golden file that `compare --baseline golden:FILE` replays)."""

from __future__ import annotations

from pathlib import Path

import click

from .arguments import command_options, prepared
from .common import finish, handled, output_options, outputs_of, progress


@click.command()
@command_options("compare")
@output_options
@click.option("--all-blocks", is_flag=True, help="One table row per block, however many.")
@handled
def compare(all_blocks, debug, **opts):
    """Run two writers on the same K, diff their cache bytes block by block, and say why they differ."""
    from ..run.compare import check_compare
    from ..report.terminal import render_compare

    out = outputs_of(opts)
    req, run = prepared("compare", opts)
    with progress(run.device, run.sides.values()):
        checked = check_compare(run.spec, baseline=run.sides["baseline"], candidate=run.sides["candidate"],
                                inputs=run.inputs, device=run.device, budget=req.budget(),
                                pad_slot=req.values["pad_slot"], map_blocks=tuple(req.values["map_blocks"]))
    return finish(out, req.id, checked, render_compare(checked, all_blocks=all_blocks))


@click.command()
@command_options("record")
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True, help="Golden .safetensors file.")
@output_options
@handled
def record(out_path, debug, **opts):
    """Run one writer and save its inputs and cache bytes (a golden file)."""
    from ..producers import golden
    from ..run.record import record as record_run

    out = outputs_of(opts)
    golden.check_output_path(out_path, "--out")
    _, run = prepared("record", opts)
    with progress(run.device, run.sides.values()):
        recorded = record_run(run, out_path, key=golden.trusted_key())
    return finish(out, f"record:{recorded.producer}", recorded, recorded.verdict_line(), soft_wrap=True)
