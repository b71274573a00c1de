"""The benchmarks' table and timer (bench/), and the Triton writer's tiling they sweep."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from fp8check.core.cache import CacheBuffer
from fp8check.core.inputs import SlotPattern, generate
from fp8check.core.spec import CacheSpec
from fp8check.core.reference import aiter_writer
from fp8check.producers.triton import check, launch

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("tokens", [1, 4, 64, 256])
def test_every_tiling_of_the_triton_writer_writes_the_reference_bytes(tokens):
    spec = CacheSpec(num_blocks=2, block_size=64, head_dim=128)
    data = generate(spec, seed=tokens, slots=SlotPattern.PADDED)
    check(spec, torch.device("cpu"))  # the exact FP8 conversion of the interpreter, or a refusal
    expected, got = CacheBuffer.allocate(spec, "cpu"), CacheBuffer.allocate(spec, "cpu")
    aiter_writer(data.k, expected.cache, data.slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg)
    launch(data.k, got.cache, data.slot_mapping, spec.quant_block_size, spec.scale_fmt.writer_arg, tokens=tokens)
    assert torch.equal(got.buffer, expected.buffer)


def test_every_case_a_figure_depends_on_is_in_the_table_on_the_same_devices():
    cases = load("cases")
    by_name = {case.name: case for case in cases.CASES}
    assert len(by_name) == len(cases.CASES)
    for case in cases.CASES:
        needed = [t.of for t in case.targets if t.of is not None]
        if isinstance(case.what, cases.Difference):
            needed += [case.what.measured, case.what.less]
        for name in needed:
            assert name in by_name, (case.name, name)
            assert case.devices <= by_name[name].devices, (case.name, name)


def test_the_timer_stops_at_a_failing_command_and_counts_the_runs_of_a_working_one():
    timer = load("timer")
    with pytest.raises(SystemExit, match="exited 3"):
        timer.process(["-c", "raise SystemExit(3)"], repeat=1, cwd=BENCH)
    timing = timer.process(["-c", "raise SystemExit(3)"], repeat=2, cwd=BENCH, ok=frozenset({3}))
    assert timing.runs == 2 and 0 < timing.best <= timing.median and timing.cpu > 0


def test_asking_for_a_derived_figure_also_measures_the_figures_it_is_computed_from():
    run = load("run")
    overhead = [case.name for case in run.chosen(["isolation overhead"], "cpu")]
    assert overhead == ["writer from a file, default spec, in this process (1 thread)",
                        "writer from a file, default spec, isolated (child process)",
                        "isolation overhead per producer (isolated - in this process)"]
    diagnosis = [case.name for case in run.chosen(["diagnosis, 1M tokens, layout"], "cpu")]
    assert diagnosis == ["diff, 1M tokens, layout, every byte", "diagnosis, 1M tokens, layout, every byte"]
    assert run.chosen(["per program"], "cpu") == []  # the tiling sweep is a GPU case
    assert len(run.chosen(["per program"], "cuda")) == 7


def test_the_interpreter_bench_runs_a_reader_both_ways_to_the_same_logits():
    bench = load("interpreter")
    at_once, sequential, same = bench.bench_reader(bench.TEST_OPS, 64)
    assert same and at_once > 0 and sequential > 0
