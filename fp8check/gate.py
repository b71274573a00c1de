"""The gate: many cases in one process, each a compare, a seed table or a parity check, each decided.

A case's exit code is the one its command would have: 0 passed, 1 a byte verdict failed, 2 a usage,
input or producer error, 3 a checker error. The gate's exit code is the worst of its cases. A case that
errs never stops the others (unless fail_fast); its error is kept as its result.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from . import options
from .budget import Budget, BudgetVerdict, check as check_budget
from .compare import CompareResult, Side, compare
from .diagnose import Diagnosis, diagnose
from .errors import ExitCode, UserError, first_line
from .gate_config import Case
from .inputs import Inputs
from .prepare import build
from .spec import CacheSpec
from .writers.registry import Producer


class Expect(enum.Enum):
    SAME = "same"  # identical, or within the budget
    DIFFERENT = "different"  # a known-bad writer: it must keep differing beyond the budget


@dataclass(frozen=True)
class CompareCheck:
    """A compare decided: the diff, every differing byte's cause, the budget verdict and the expectation."""

    result: CompareResult
    diagnosis: Diagnosis
    budget: BudgetVerdict
    expect: Expect = Expect.SAME

    @property
    def modified_inputs(self) -> tuple[str, ...]:
        """Inputs a producer changed in place: the run fails whatever its bytes (the verdict cannot be trusted)."""
        return self.result.baseline.buffer.modified_inputs + self.result.candidate.buffer.modified_inputs

    @property
    def matched(self) -> bool:
        return (self.result.identical or self.budget.within) and not self.modified_inputs

    @property
    def passed(self) -> bool:
        return self.matched if self.expect is Expect.SAME else not self.matched


def check_compare(spec: CacheSpec, *, baseline: Producer | Side, candidate: Producer, inputs: Inputs,
                  device: torch.device, budget: Budget = Budget(), expect: Expect = Expect.SAME,
                  pad_slot: int = -1) -> CompareCheck:
    """Run both writers, diff, diagnose and decide: the one body of `compare`, gate cases and the API."""
    result = compare(spec, baseline=baseline, candidate=candidate, inputs=inputs, device=device, pad_slot=pad_slot)
    diagnosis = diagnose(result.spec, result.baseline.buffer, result.candidate.buffer, result.inputs, diff=result.diff)
    decided = check_budget(budget, result.diff, result.baseline.buffer, result.candidate.buffer)
    return CompareCheck(result, diagnosis, decided, expect)


class Status(enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # exit 1: a byte verdict failed
    ERROR = "error"  # exit 2 or 3: the case could not be decided


@dataclass(frozen=True)
class Outcome:
    """What one case came to: a decided result (CompareCheck, SeedTable, parity result) or an error line."""

    case_id: str
    kind: str
    exit_code: ExitCode
    result: Any  # None when the case erred
    error: str | None
    seconds: float

    @property
    def status(self) -> Status:
        if self.exit_code == ExitCode.OK:
            return Status.PASSED
        return Status.FAILED if self.exit_code == ExitCode.DIFFER else Status.ERROR


@dataclass(frozen=True)
class GateResult:
    config: str
    outcomes: tuple[Outcome, ...]
    selected: int  # cases selected to run (shard and -k applied); fewer ran when fail_fast stopped early
    seconds: float

    @property
    def exit_code(self) -> ExitCode:
        return max((o.exit_code for o in self.outcomes), default=ExitCode.OK)

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status is status)


def build_case(values: dict):
    """(spec, inputs, device) of a case's validated values, through the CLI's own build()."""
    opts = options.to_dests({k: values[k] for k in options.SPEC})
    if opts["input_path"] is not None:
        opts["input_path"] = Path(opts["input_path"])
    return build(opts)


def golden_baseline(values: dict):
    """(spec, inputs, device, baseline Side) of a golden baseline: the recorded spec, inputs and bytes."""
    from . import golden
    from .device import resolve_device

    path = Path(values["baseline"][len("golden:"):])
    recorded = golden.read(path)
    stated = {options.ALL[k].dest: (options.ALL[k].flag, values[k]) for k in values["golden_check"]}
    golden.check_options(path, recorded.spec, stated)
    device = resolve_device(values["device"])
    return recorded.spec, recorded.inputs, device, golden.as_side(recorded, path, device)


def _compare_case(values: dict) -> CompareCheck:
    from .prepare import resolve_producers

    if values["baseline"].startswith("golden:"):
        spec, data, device, base = golden_baseline(values)
        resolved = resolve_producers(device, {"candidate": values["candidate"]}, spec, values.get("repo"))
    else:
        spec, data, device = build_case(values)
        resolved = resolve_producers(device, {k: values[k] for k in ("baseline", "candidate")}, spec,
                                     values.get("repo"))
        base = resolved["baseline"]
    budget = Budget(**{k: values[k] for k in options.BUDGET})
    return check_compare(spec, baseline=base, candidate=resolved["candidate"], inputs=data,
                         device=device, budget=budget, expect=Expect(values["expect"]), pad_slot=values["pad_slot"])


def _table_case(values: dict):
    from .prepare import resolve_producers
    from .table import seed_table

    spec, data, device = build_case(values)
    resolved = resolve_producers(device, {k: values[k] for k in ("baseline", "buggy", "fixed")}, spec,
                                 values.get("repo"))
    return seed_table(spec, **resolved, inputs=data, device=device)


def _parity_case(values: dict):
    """A parity case (the gate's keys are `fp8check parity`'s options); defaults are ParityConfig's and the CLI's."""
    from . import parity as parity_mod
    from .readers import registry as readers
    from .device import resolve_device
    from .inputs import Distribution
    from .prepare import resolve_producers
    from .spec import FP8Format, Layout, ScaleFormat

    v = {**PARITY_DEFAULTS, **values}
    fields = {k: v[k] for k in ("topk", "next_n", "rtol", "atol", "min_recall") if k in values}
    config = parity_mod.ParityConfig(
        **({"ctx": tuple(v["ctx"])} if "ctx" in values else {}), expect_fail=frozenset(v["expect_fail"]), **fields)
    spec = parity_mod.cache_spec(
        config, block_size=v["block"], head_dim=v["head_dim"], quant_block_size=v["qbs"], fp8=FP8Format(v["fp8"]),
        scale_fmt=ScaleFormat(v["scale_fmt"]), layout=Layout(v["layout"]) if v["layout"] else None)
    shuffled = v["slots"] == "shuffled"
    if v["input"] is not None:
        data = parity_mod.read(Path(v["input"]), spec, config, heads=v["heads"], seed=v["seed"], shuffled=shuffled)
    else:
        data = parity_mod.generate(spec, config, heads=v["heads"] or parity_mod.DEFAULT_HEADS, seed=v["seed"],
                                   shuffled=shuffled, distribution=Distribution(v["inputs"]))
    device = resolve_device(v["device"])
    names = {"baseline": v["baseline"], **{f"w{i}": n for i, n in enumerate(v.get("writers", parity_mod.DEFAULT_WRITERS))}}
    resolved = resolve_producers(device, names, spec, v.get("repo"))
    baseline = resolved.pop("baseline")
    return parity_mod.run_parity(spec, config, baseline=baseline, writers=list(resolved.values()),
                                 reader=readers.resolve(v["reader"], spec=spec, repo=v.get("repo")), inputs=data,
                                 device=device)


# `fp8check parity`'s defaults for the keys ParityConfig does not hold.
PARITY_DEFAULTS = {
    "block": 64, "head_dim": 128, "qbs": None, "fp8": "e4m3fn", "scale_fmt": "ue8m0", "layout": None, "seed": 0,
    "slots": "sequential", "inputs": "normal", "input": None, "device": "auto", "baseline": "auto",
    "reader": "reference", "heads": None, "expect_fail": (),
}


RUNNERS: dict[str, Callable[[dict], Any]] = {"compare": _compare_case, "table": _table_case, "parity": _parity_case}


def run_case(case: Case) -> Outcome:
    """One case, decided; an error of the case (exit 2) or of fp8check (exit 3) is its outcome, not a raise."""
    start = time.perf_counter()
    try:
        result = RUNNERS[case.kind](case.values)
    except UserError as exc:
        return Outcome(case.id, case.kind, ExitCode.USAGE, None, str(exc), time.perf_counter() - start)
    except Exception as exc:  # a checker error: never a verdict
        return Outcome(case.id, case.kind, ExitCode.INTERNAL, None, f"internal error: {first_line(exc)}",
                       time.perf_counter() - start)
    code = ExitCode.OK if result.passed else ExitCode.DIFFER
    return Outcome(case.id, case.kind, code, result, None, time.perf_counter() - start)


def run_gate(config: str, cases: tuple[Case, ...], *, fail_fast: bool = False,
             on_done: Callable[[Outcome], None] | None = None) -> GateResult:
    """Every case in order; with fail_fast the first case that does not pass stops the run."""
    start = time.perf_counter()
    outcomes = []
    for case in cases:
        outcome = run_case(case)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
        if fail_fast and outcome.exit_code != ExitCode.OK:
            break
    return GateResult(config, tuple(outcomes), len(cases), time.perf_counter() - start)
