"""The pure core: run two producers on the same inputs and diff their caches."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import torch

from .writers import registry
from .diff import DiffResult, diff_caches
from .errors import InputError
from .inputs import Inputs
from .writers.producer import Producer, Side
from .spec import CacheSpec


@dataclass(frozen=True)
class CompareResult:
    spec: CacheSpec
    inputs: Inputs
    device: str
    baseline: Side
    candidate: Side
    diff: DiffResult
    timings: dict[str, float] = field(default_factory=dict)

    @functools.cached_property
    def faults(self) -> tuple[str, ...]:
        """Failures whatever the bytes: a side that wrote outside its cache or changed its inputs. Stray
        writes count even when both sides made the same ones (the diff of the guards is then zero)."""
        return (self.baseline.buffer.faults(f"baseline {self.baseline.name!r}")
                + self.candidate.buffer.faults(f"candidate {self.candidate.name!r}"))

    @property
    def identical(self) -> bool:
        """Equal bytes, and no fault on either side: only then is the verdict IDENTICAL."""
        return self.diff.identical and not self.faults

    @property
    def interpreter_caveat(self) -> str | None:
        """On a CPU run of Triton kernels: why a compiled kernel could write other bytes, where known."""
        if self.device != "cpu" or not (self.baseline.triton or self.candidate.triton):
            return None
        from .writers.interpreter import compiled_caveat

        return compiled_caveat(self.spec)


def run_side(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device) -> Side:
    buffer, ran = registry.run_producer(producer, spec, inputs, device)
    return Side(ran.name, ran.description, ran.emulated, buffer, ran.provenance, ran.triton)


def compare(
    spec: CacheSpec, *, baseline: Producer | Side, candidate: Producer, inputs: Inputs, device: torch.device
) -> CompareResult:
    """Both producers on the same inputs (each on a fresh poisoned cache), then the block diff.

    `baseline` may be a finished Side (a golden file's recorded bytes) instead of a producer.
    """
    timings: dict[str, float] = {}
    inputs = inputs.to(device)
    start = time.perf_counter()
    base = baseline if isinstance(baseline, Side) else run_side(baseline, spec, inputs, device)
    timings["baseline"] = time.perf_counter() - start
    if base.buffer.cache_untouched():  # an empty comparison would "pass" whatever the candidate does
        raise InputError(f"nothing to compare: the baseline {base.name!r} wrote no byte of the cache")
    start = time.perf_counter()
    cand = run_side(candidate, spec, inputs, device)
    timings["candidate"] = time.perf_counter() - start
    start = time.perf_counter()
    result = diff_caches(spec, base.buffer, cand.buffer)
    timings["diff"] = time.perf_counter() - start
    return CompareResult(spec, inputs, str(device), base, cand, result, timings)
