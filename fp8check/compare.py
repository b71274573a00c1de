"""The pure core: run two producers on the same inputs and diff their caches."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .writers import registry
from .diff import DiffResult, diff_caches
from .errors import InputError
from .cache import SKIP_PADDING, forget_slot, reserve_pad_slot
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

    @property
    def identical(self) -> bool:
        return self.diff.identical

    @property
    def interpreter_caveat(self) -> str | None:
        """On a CPU run of Triton kernels: why a compiled kernel could write other bytes, where known."""
        if self.device != "cpu" or not (self.baseline.triton or self.candidate.triton):
            return None
        from .writers.interpreter import compiled_caveat

        return compiled_caveat(self.spec)


def run_side(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device,
             pad_slot: int = SKIP_PADDING) -> Side:
    """One producer on a fresh poisoned cache; pad_slot: registry.run_producer's."""
    buffer, ran = registry.run_producer(producer, spec, inputs, device, pad_slot)
    return Side(ran.name, ran.description, ran.emulated, buffer, ran.provenance, ran.triton)


def compare(
    spec: CacheSpec, *, baseline: Producer | Side, candidate: Producer, inputs: Inputs, device: torch.device,
    pad_slot: int = SKIP_PADDING,
) -> CompareResult:
    """Both producers on the same inputs (each on a fresh poisoned cache), then the block diff.

    `baseline` may be a finished Side (a golden file's recorded bytes) instead of a producer. pad_slot: the
    padding convention, -1 (padding writes nothing) or a dummy slot reserved for padding, which padding may
    write (run_side); a token that maps to it counts as padding.
    """
    if pad_slot != SKIP_PADDING:
        inputs = Inputs(inputs.k, reserve_pad_slot(spec, inputs.slot_mapping, pad_slot), inputs.source)
    timings: dict[str, float] = {}
    inputs = inputs.to(device)
    start = time.perf_counter()
    if isinstance(baseline, Side):
        base = baseline
        if pad_slot != SKIP_PADDING:
            forget_slot(base.buffer, pad_slot)
    else:
        base = run_side(baseline, spec, inputs, device, pad_slot)
    timings["baseline"] = time.perf_counter() - start
    if base.buffer.cache_untouched():  # an empty comparison would "pass" whatever the candidate does
        raise InputError(f"nothing to compare: the baseline {base.name!r} wrote no byte of the cache")
    start = time.perf_counter()
    cand = run_side(candidate, spec, inputs, device, pad_slot)
    timings["candidate"] = time.perf_counter() - start
    start = time.perf_counter()
    result = diff_caches(spec, base.buffer, cand.buffer)
    timings["diff"] = time.perf_counter() - start
    return CompareResult(spec, inputs, str(device), base, cand, result, timings)
