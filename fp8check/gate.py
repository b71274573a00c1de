"""The gate: many cases in one process, each a compare, a seed table or a parity check, each decided.

A case's exit code is the one its command would have: 0 passed, 1 a verdict failed, 2 a usage, input or
producer error, 3 a checker error. The gate's exit code is the worst of its cases. A case that errs never
stops the others (unless fail_fast); its error is kept as its outcome.
"""

from __future__ import annotations

import time
from typing import Callable

from .errors import ExitCode, NotRunnableHere, UserError, first_line
from .gate_config import Case
from .outcome import Checked, Outcome, Outcomes
from .prepare import Request, prepare, prepare_parity

CASE_ONLY = ("expect", "golden_check")  # a case's keys that are not options of its command


def run_request(kind: str, values: dict, *, where: str, isolation="default") -> Checked:
    """One case's values through the one request path, then its command's check. isolation: the Limits
    of writers from files (prepare's)."""
    stated = set(values.get("golden_check", ())) if "golden_check" in values else set(values)
    given = {k: v for k, v in values.items() if k not in CASE_ONLY}
    request = Request.of(kind, given, where=where, stated=stated - set(CASE_ONLY))
    run = prepare_parity(request, isolation=isolation) if kind == "parity" else prepare(request, isolation=isolation)
    if kind == "compare":
        from .compare import Expect, check_compare

        return check_compare(run.spec, baseline=run.sides["baseline"], candidate=run.sides["candidate"],
                             inputs=run.inputs, device=run.device, budget=request.budget(),
                             expect=Expect(values.get("expect", "same")), pad_slot=request.values["pad_slot"])
    if kind == "table":
        from .table import seed_table

        return seed_table(run.spec, **run.sides, inputs=run.inputs, device=run.device)
    return run.run_parity()


def run_case(case: Case, *, strict: bool = False, isolation="default") -> Outcome:
    """One case, decided; an error of the case (exit 2) or of fp8check (exit 3) is its outcome, not a raise.
    A case this machine cannot run is skipped with its reason (exit 0), or an error with `strict`."""
    start = time.perf_counter()
    try:
        result = run_request(case.kind, case.values, where=case.source, isolation=isolation)
    except NotRunnableHere as exc:
        return Outcome(case.id, case.kind, ExitCode.USAGE if strict else ExitCode.OK, None, str(exc),
                       time.perf_counter() - start, skipped=not strict)
    except UserError as exc:
        return Outcome(case.id, case.kind, ExitCode.USAGE, None, str(exc), time.perf_counter() - start)
    except Exception as exc:  # a checker error: never a verdict
        return Outcome(case.id, case.kind, ExitCode.INTERNAL, None, f"internal error: {first_line(exc)}",
                       time.perf_counter() - start)
    return Outcome.decided(case.id, result, time.perf_counter() - start)


def run_gate(config: str, cases: tuple[Case, ...], *, fail_fast: bool = False, strict: bool = False,
             on_done: Callable[[Outcome], None] | None = None) -> Outcomes:
    """Every case in order; with fail_fast the first case that does not pass stops the run; with strict a
    case this machine cannot run fails the gate instead of being skipped."""
    start = time.perf_counter()
    outcomes = []
    for case in cases:
        outcome = run_case(case, strict=strict)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
        if fail_fast and outcome.exit_code != ExitCode.OK:
            break
    return Outcomes(f"gate {config}", tuple(outcomes), len(cases), time.perf_counter() - start)
