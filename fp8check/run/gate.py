"""The gate: many cases in one process, each a compare, a seed table or a parity check, each decided.

A case's exit code is its command's; the gate's is the worst of its cases, and a case that errs never stops
the others (unless fail_fast). Which case that cannot run is skipped (errors.NotRunnableHere) and which is an
error: docs/gate.md, "one rule"."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from .gate_config import Case
from .options import checkouts
from .prepare import Request, named_code, prepare, prepare_parity, spec_of
from ..code.names import Kind, parse
from ..code.projects import compose
from ..core.errors import ExitCode, NotRunnableHere, UserError, first_line
from ..core.outcome import Checked, Differs, Outcome, Outcomes

CASE_ONLY = ("expect", "golden_check")  # a case's keys that are not options of its command


def presets_of(case: Case) -> list[tuple[str, str, str | None]]:
    """(name, role, checkout) of every preset a case runs."""
    clones = checkouts(case.values.get("checkout"))
    return [(name, role, compose.checkout_of(name, role, clones)) for name, role in named_code(case.values)
            if compose.named(name, role) is not None]


def fetch(cases: tuple[Case, ...]) -> dict[tuple, str]:
    """Each preset's files fetched once, before any case runs (downloads and hash checks; a second run
    reads them from the cache folder): (name, role, checkout) -> why they could not be, for those that
    failed. A case that names one is then an error with that line, not one failed download per case."""
    named = []
    for case in cases:
        try:
            named += presets_of(case)
        except UserError:  # an unknown preset: its case says so when it runs
            continue
    failed = {}
    for key in dict.fromkeys(named):
        try:
            compose.fetch(*key)
        except UserError as exc:
            failed[key] = str(exc).splitlines()[0] if str(exc) else first_line(exc)
    return failed


def check_declared(case: Case) -> None:
    """NotRunnableHere when a preset of the case declares its spec unsupported (before any fetch counts)."""
    presets = presets_of(case)
    if not presets or parse(case.values.get("baseline", "")).kind is Kind.GOLDEN:
        return
    request = Request.of(case.kind, {k: v for k, v in case.values.items() if k not in CASE_ONLY}, where=case.source)
    spec = spec_of(request.values, 1)
    for name, role, _ in presets:
        compose.check_declared(name, role, spec)


def run_request(kind: str, values: dict, *, where: str, reason: str | None = None, isolation="default") -> Checked:
    """One case's values through the one request path, then its command's check; code under test runs under
    `isolation` (isolation.Limits; "default": the registry's; None: in this process)."""
    stated = set(values.get("golden_check", ())) if "golden_check" in values else set(values)
    given = {k: v for k, v in values.items() if k not in CASE_ONLY}
    request = Request.of(kind, given, where=where, stated=stated - set(CASE_ONLY))
    run = prepare_parity(request, isolation=isolation) if kind == "parity" else prepare(request, isolation=isolation)
    if kind == "compare":
        from .compare import Expect, check_compare

        return check_compare(run.spec, baseline=run.sides["baseline"], candidate=run.sides["candidate"],
                             inputs=run.inputs, device=run.device, budget=request.budget(),
                             expect=Expect(values.get("expect", "same")), pad_slot=request.values["pad_slot"],
                             map_blocks=tuple(request.values["map_blocks"]))
    if kind == "table":
        from .table import seed_table

        return seed_table(run.spec, **run.sides, inputs=run.inputs, device=run.device)
    result = run.run_parity()
    return Differs(result, reason) if values.get("expect") == "different" else result


def run_case(case: Case, *, strict: bool = False, unfetched: dict[tuple, str] | None = None,
             isolation="default") -> Outcome:
    """One case, decided; its error (exit 2, or 3 for fp8check's) is its outcome, not a raise. `unfetched`:
    fetch()'s failures, each an error of the cases naming its preset. The outcome carries the case's axes."""
    start = time.perf_counter()
    try:
        check_declared(case)
        failed = [unfetched[p] for p in presets_of(case) if p in (unfetched or {})]
        if failed:
            raise UserError(failed[0])
        result = run_request(case.kind, case.values, where=case.source, reason=case.reason,
                             isolation=isolation)
    except NotRunnableHere as exc:
        outcome = Outcome(case.id, case.kind, ExitCode.USAGE if strict else ExitCode.OK, None, str(exc),
                          time.perf_counter() - start, skipped=not strict)
    except UserError as exc:
        outcome = Outcome(case.id, case.kind, ExitCode.USAGE, None, str(exc), time.perf_counter() - start)
    except Exception as exc:  # a checker error: never a verdict
        outcome = Outcome(case.id, case.kind, ExitCode.INTERNAL, None, f"internal error: {first_line(exc)}",
                          time.perf_counter() - start)
    else:
        outcome = Outcome.decided(case.id, result, time.perf_counter() - start, case.reason)
    return dataclasses.replace(outcome, axes=case.axes)


def run_gate(config: str, cases: tuple[Case, ...], *, fail_fast: bool = False, strict: bool = False,
             on_done: Callable[[Outcome], None] | None = None, isolation="default") -> Outcomes:
    """Every case in order; with fail_fast the first case that does not pass stops the run; with strict a
    case this machine cannot run fails the gate instead of being skipped."""
    start = time.perf_counter()
    outcomes = []
    unfetched = fetch(cases)
    for case in cases:
        outcome = run_case(case, strict=strict, unfetched=unfetched, isolation=isolation)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
        if fail_fast and outcome.exit_code != ExitCode.OK:
            break
    return Outcomes(f"gate {config}", tuple(outcomes), len(cases), time.perf_counter() - start)
