"""`fp8check compare` (two writers, one K, their cache bytes diffed and diagnosed) and `fp8check record`
(one writer's inputs and bytes saved as a golden file that `compare --baseline golden:FILE` replays)."""

from __future__ import annotations

from pathlib import Path

import click

from . import startup
from .. import options
from ..errors import ExitCode
from .arguments import (GOLDEN, budget_options, build, golden_key, isolation_limits, replay_golden, spec_options,
                        start_build)
from .common import check_outputs, emit, handled, output_options, progress, show, single_case


@click.command()
@spec_options
@click.option("--baseline", default="auto", show_default=True,
              help="Producer name; auto (aiter where it can run, else its emulation reference); golden:FILE"
                   " (bytes recorded by `fp8check record`); or file:PATH:FUNC, vllm-file:PATH[:FUNC].")
@click.option("--candidate", default="triton", show_default=True,
              help="Producer name, file:PATH:FUNC or vllm-file:PATH[:FUNC]; PATH may be git:REV:PATH.")
@output_options
@click.option("--all-blocks", is_flag=True, help="One table row per block, however many.")
@budget_options
@options.click_options(options.CONVENTIONS)
@handled
def compare(baseline, candidate, all_blocks, debug, max_diff_bytes, max_diff_fraction, max_code_distance,
            json_path, junit_path, markdown_path, quiet, pad_slot, **opts):
    """Run two writers on the same K, diff their cache bytes block by block, and say why they differ."""
    import time

    from .. import budget as budget_mod
    from .. import warmup
    from ..prepare import resolve_producers

    out = {"json_path": json_path, "junit_path": junit_path, "markdown_path": markdown_path, "quiet": quiet}
    check_outputs(out)
    start = time.perf_counter()
    limits = isolation_limits(opts)
    budget = budget_mod.Budget(max_diff_bytes=max_diff_bytes, max_diff_fraction=max_diff_fraction,
                               max_code_distance=max_code_distance)
    # on a GPU, a thread creates the CUDA context from here on, while this thread imports the rest of the
    # command (and, with --device cuda, the modules of Triton's first launch): warmup.start_early
    warmup.start_early(opts["device"])

    from .. import options
    from ..gate import check_compare
    from ..gate_config import compare_id
    from ..report import json as report_json
    from ..report import lines, terminal

    if opts["device"] == "cuda":
        warmup.import_launch_modules()
    startup.imports_done()

    if baseline.startswith(GOLDEN):
        spec, data, device, base = replay_golden(baseline, opts)
        resolved = resolve_producers(device, {"candidate": candidate}, spec, opts["repo"], isolation=limits)
    else:
        # the inputs' device work comes after the writers are resolved: meanwhile a large K is read
        # back, or drawn, in a thread (prepare.start)
        started = start_build(opts)
        resolved = resolve_producers(started.device, {"baseline": baseline, "candidate": candidate}, started.spec,
                                     opts["repo"], isolation=limits)
        spec, data, device = started.result()
        base = resolved["baseline"]
    with progress(device, resolved.values()):
        checked = check_compare(spec, baseline=base, candidate=resolved["candidate"], inputs=data, device=device,
                                budget=budget, pad_slot=pad_slot)
    result, diagnosis, decided = checked.result, checked.diagnosis, checked.budget
    values = {**options.from_dests(opts), "baseline": baseline, "candidate": candidate,
              "max_diff_bytes": max_diff_bytes, "max_diff_fraction": max_diff_fraction,
              "max_code_distance": max_code_distance, "pad_slot": pad_slot}
    verdict = lines.compare_verdict(checked)
    emit(out, renderable=terminal.render_compare(result, all_blocks=all_blocks, diagnosis=diagnosis, budget=decided),
         verdict=verdict, title="compare",
         payload=lambda: report_json.compare_json(result, diagnosis=diagnosis, budget=decided, verdict=verdict,
                                                  passed=checked.passed),
         gate_result=single_case(compare_id(values), "compare", checked, checked.passed, time.perf_counter() - start))
    return ExitCode.OK if checked.passed else ExitCode.DIFFER


@click.command()
@spec_options
@click.option("--producer", default="reference", show_default=True)
@click.option("--out", "out_path", type=click.Path(path_type=Path), required=True, help="Golden .safetensors file.")
@handled
def record(producer, out_path, debug, **opts):
    """Run one writer and save its inputs and cache bytes (a golden file)."""
    from .. import golden
    from ..compare import run_side
    from ..device import versions
    from ..prepare import resolve_producers

    startup.imports_done()

    golden.check_output_path(out_path, "--out")
    limits = isolation_limits(opts)
    spec, data, device = build(opts)
    resolved = resolve_producers(device, {"producer": producer}, spec, opts["repo"], isolation=limits)
    with progress(device, resolved.values()):
        side = run_side(resolved["producer"], spec, data.to(device), device)
    if side.buffer.modified_inputs:
        raise golden.GoldenError(f"producer {side.name!r} modified its {' and '.join(side.buffer.modified_inputs)}"
                                 " in place; not recorded")
    golden.write(out_path, spec=spec, producer=side.name, emulated=side.emulated, inputs=data,
                 buffer=side.buffer, versions=versions(), key=golden_key(), provenance=side.provenance)
    show(f"recorded {side.name} ({spec.summary()}, {data.source}) to {out_path}", soft_wrap=True, highlight=False)
    return ExitCode.OK

