"""A compare: two producers on the same inputs, their caches diffed, diagnosed and decided.

`compare()` is the run and the diff; `check_compare()` adds the diagnosis, the budget and the expectation: a
`CompareCheck`, the decided record (outcome.py's result protocol) of every command, the gate and the API."""

from __future__ import annotations

import enum
import functools
import time
from dataclasses import dataclass, field

import torch

from ..core.budget import Budget, BudgetVerdict, check as check_budget
from ..core.cache import SKIP_PADDING, forget_slot, guard_bytes, reserve_pad_slot
from ..diagnose import Category, Diagnosis, diagnose
from ..diagnose.words import causes_text, diagnosis_json, percent, top_cause
from ..core.diff import DiffResult, diff_caches
from ..core.errors import InputError
from ..core.inputs import Inputs
from ..core.outcome import json_safe
from ..core.spec import CacheSpec
from ..producers import registry
from ..core.producer import Producer, Side


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
        from ..triton_cpu.known_answers import compiled_caveat

        return compiled_caveat(self.spec)

    def bytes_line(self, budget: BudgetVerdict | None = None) -> str:
        """IDENTICAL, DIFFERENT, or with a budget PASS within / FAIL over budget: the bytes' verdict."""
        d = self.diff
        if d.identical and self.faults:  # equal bytes, but a side wrote outside its cache or changed its inputs
            return f"0 of {d.total_bytes} cache bytes differ in {d.num_blocks} blocks"
        if d.identical:
            return f"IDENTICAL: 0 of {d.total_bytes} bytes differ in {d.num_blocks} blocks"
        count = f"{d.cache_diff} of {d.total_bytes} bytes differ"
        # guard bytes are not a share of the cache: counted apart, against the guard zones' own size
        guard = (f"; plus {d.guard_diff} of the {2 * guard_bytes(self.spec)} guard bytes outside the cache"
                 f" ({d.diff_bytes} differing bytes in all)") if d.guard_diff else ""
        if budget is not None and not budget.budget.exact:
            return f"{'PASS within' if budget.within else 'FAIL over'} budget: {count}{guard} ({budget.describe()})"
        where = f"in {d.differing_blocks} of {d.num_blocks} blocks"
        return f"DIFFERENT: {count} ({percent(d.cache_diff, d.total_bytes)}) {where}{guard}"

    def to_json(self, diagnosis: Diagnosis | None = None, budget: BudgetVerdict | None = None) -> dict:
        """What a compare found, without run-dependent data."""
        d = self.diff
        return json_safe({
            "spec": self.spec.to_dict(),
            "baseline": self.baseline.name,
            "candidate": self.candidate.name,
            "baseline_emulated": self.baseline.emulated,
            "candidate_emulated": self.candidate.emulated,
            "baseline_provenance": self.baseline.provenance,
            "candidate_provenance": self.candidate.provenance,
            "inputs": self.inputs.source,
            "device": self.device,
            "value_diff": d.value_diff.cpu().tolist(),
            "scale_diff": d.scale_diff.cpu().tolist(),
            "value_total": self.spec.value_bytes,
            "scale_total": self.spec.scale_bytes,
            "guard_diff": d.guard_diff,
            "diff_bytes": d.diff_bytes,
            "total_bytes": d.total_bytes,
            "identical": self.identical,
            "faults": list(self.faults),
            "modified_inputs": {"baseline": list(self.baseline.buffer.modified_inputs),
                                "candidate": list(self.candidate.buffer.modified_inputs)},
            "first_mismatch": d.first_mismatch.to_dict() if d.first_mismatch else None,
            "interpreter_note": self.interpreter_caveat,
            **({} if diagnosis is None else {"diagnosis": diagnosis_json(diagnosis, self.spec)}),
            **({} if budget is None else {"budget": budget.to_dict()}),
        })


def run_side(producer: Producer, spec: CacheSpec, inputs: Inputs, device: torch.device,
             pad_slot: int = SKIP_PADDING) -> Side:
    """One producer on a fresh poisoned cache; pad_slot: registry.run_producer's."""
    buffer, ran = registry.run_producer(producer, spec, inputs, device, pad_slot)
    return Side(ran.name, ran.description, ran.emulated, buffer, ran.provenance, ran.triton)


def compare(
    spec: CacheSpec, *, baseline: Producer | Side, candidate: Producer, inputs: Inputs, device: torch.device,
    pad_slot: int = SKIP_PADDING,
) -> CompareResult:
    """Both producers on the same inputs (each on a fresh poisoned cache), then the block diff. `baseline` may be
    a finished Side (a golden file's bytes). pad_slot: -1 (padding writes nothing) or a dummy slot reserved for
    padding, which padding may write; a token that maps to it counts as padding."""
    if pad_slot != SKIP_PADDING:
        inputs = Inputs(inputs.k, reserve_pad_slot(spec, inputs.slot_mapping, pad_slot), inputs.source)
    inputs, start = inputs.to(device), time.perf_counter()
    base = baseline if isinstance(baseline, Side) else run_side(baseline, spec, inputs, device, pad_slot)
    if isinstance(baseline, Side) and pad_slot != SKIP_PADDING:
        forget_slot(base.buffer, pad_slot)
    timings = {"baseline": time.perf_counter() - start}
    if base.buffer.cache_untouched():  # an empty comparison would "pass" whatever the candidate does
        raise InputError(f"nothing to compare: the baseline {base.name!r} wrote no byte of the cache")
    start = time.perf_counter()
    cand = run_side(candidate, spec, inputs, device, pad_slot)
    timings["candidate"] = time.perf_counter() - start
    start = time.perf_counter()
    result = diff_caches(spec, base.buffer, cand.buffer)
    timings["diff"] = time.perf_counter() - start
    return CompareResult(spec, inputs, str(device), base, cand, result, timings)


class Expect(enum.Enum):
    SAME = "same"  # identical, or within the budget
    DIFFERENT = "different"  # a known-bad writer: it must keep differing beyond the budget
    # compiled Triton's approximate fp32 division (docs/GPU.md): every differing byte scale-ulp (a scale some
    # ulp off, its group's values following) or rounding (one code apart, equal scales: x / s approximate)
    SCALE_ULP = "scale-ulp"
    # vLLM's CUDA op x / s against aiter's x * fl(1/s), fp32 scales: every differing byte one-code rounding
    ROUNDING = "rounding"


# The causes each expectation accepts for every differing byte, and how its PASS line names them.
EXPLAINED = {Expect.SCALE_ULP: ((Category.SCALE_ULP, Category.ROUNDING), "scale-ulp and one-code rounding"),
             Expect.ROUNDING: ((Category.ROUNDING,), "one-code rounding of x / s against x * (1/s)")}


@dataclass(frozen=True)
class CompareCheck:
    """A compare decided: the diff, every differing byte's cause, the budget verdict and the expectation."""

    result: CompareResult
    diagnosis: Diagnosis
    budget: BudgetVerdict
    expect: Expect = Expect.SAME
    kind = "compare"

    @property
    def approximate_division(self) -> bool:
        """expect = "scale-ulp" (or "rounding"), and every differing byte is what an approximate fp32 division
        (or division against reciprocal) explains."""
        accepted = EXPLAINED.get(self.expect, ((), ""))[0]
        return len(self.diagnosis) > 0 and all(c.category in accepted for c in self.diagnosis)

    @property
    def passed(self) -> bool:
        """A fault fails a case either way: a known-bad writer that also writes outside its cache or
        changes its inputs is not the failure the case expects."""
        within = self.result.diff.identical or self.budget.within or self.approximate_division
        return (not within if self.expect is Expect.DIFFERENT else within) and not self.result.faults

    def verdict_line(self) -> str:
        line = self.result.bytes_line(self.budget)
        if self.result.faults:
            line = f"FAIL: {'; '.join(self.result.faults)}; {line}"
        if self.expect is Expect.DIFFERENT:
            return f"{'PASS' if self.passed else 'FAIL'} (expected to differ): {line}"
        if self.approximate_division and not self.budget.within and self.passed:
            return f"PASS ({EXPLAINED[self.expect][1]} expected): {line}"
        return line

    def top_cause(self) -> str | None:
        return self.result.faults[0] if self.result.faults else top_cause(self.diagnosis, self.result.spec)

    def detail(self) -> str:
        """The first mismatch, then every cause with its hint and first example."""
        d = self.result.diff
        lines = [f"first mismatch: {d.first_mismatch.describe()}"] if d.first_mismatch else []
        return "\n".join([*self.result.faults, *lines, *causes_text(self.diagnosis, self.result.spec)])

    def to_json(self) -> dict:
        return {**self.result.to_json(self.diagnosis, self.budget), "expect": self.expect.value}

    def run_json(self) -> dict:
        return {"timings_s": dict(self.result.timings)}

    def views(self) -> tuple:
        """Who wrote what on which inputs, then the diagnosis' maps and tables (diagnose/maps.py)."""
        from ..diagnose.maps import diagnosis_views
        from ..core.views import Table

        r = self.result
        first = r.diff.first_mismatch
        rows = [
            *((role, f"{side.name}{' (emulated)' if side.emulated else ''}",
               ", ".join(_flat(side.provenance or {})))
              for role, side in (("baseline", r.baseline), ("candidate", r.candidate))),
            ("cache", r.spec.summary(), ""), ("inputs", r.inputs.source, ""), ("device", r.device, ""),
            *(("fault", f, "") for f in self.result.faults),
            *((("first mismatch", first.describe(), ""),) if first else ()),
            *((("note", r.interpreter_caveat, ""),) if r.interpreter_caveat else ()),
        ]
        return (Table("run", ("", "", "provenance"), tuple(rows)), *diagnosis_views(r.spec, self.diagnosis))


def _flat(provenance: dict, prefix: str = ""):
    """`key: value` of a provenance, nested ones (a golden file's `recorded_by`) under their key."""
    for key, value in provenance.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key} ")
        else:
            yield f"{prefix}{key}: {value}"


def check_compare(spec: CacheSpec, *, baseline: Producer | Side, candidate: Producer, inputs: Inputs,
                  device: torch.device, budget: Budget = Budget(), expect: Expect = Expect.SAME,
                  pad_slot: int = SKIP_PADDING, map_blocks: tuple[int, ...] = ()) -> CompareCheck:
    """Run both writers, diff, diagnose and decide: the one body of `compare`, gate cases and the API.
    pad_slot: the padding convention (compare()); map_blocks: the blocks whose every byte's cause is kept
    for the report's byte maps (default: the first that differ)."""
    outside = [b for b in map_blocks if b >= spec.num_blocks]
    if outside:
        raise InputError(f"--map-blocks {outside[0]}: the cache has {spec.num_blocks} blocks (0-{spec.num_blocks - 1})")
    result = compare(spec, baseline=baseline, candidate=candidate, inputs=inputs, device=device, pad_slot=pad_slot)
    diagnosis = diagnose(result.spec, result.baseline.buffer, result.candidate.buffer, result.inputs, diff=result.diff,
                         shown=map_blocks)
    decided = check_budget(budget, result.diff, result.baseline.buffer, result.candidate.buffer)
    return CompareCheck(result, diagnosis, decided, expect)
