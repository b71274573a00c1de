"""Plain-text lines of a case's outcome (verdict, top cause, detail), shared by the JUnit, Markdown and
quiet renderers and by the API's messages. Pure: outcomes in, strings out."""

from __future__ import annotations

from ..diagnose import Diagnosis
from ..diff import DiffResult
from ..gate import CompareCheck, Expect, Outcome
from ..spec import CacheSpec
from .causes import describe_example, explain
from .terminal import block_ranges, seed_table_verdict, verdict_text


def compare_verdict(check: CompareCheck) -> str:
    line = verdict_text(check.result, check.budget)
    if check.expect is Expect.DIFFERENT:
        return f"{'PASS' if check.passed else 'FAIL'} (expected to differ): {line}"
    return line


def top_cause(diagnosis: Diagnosis, spec: CacheSpec) -> str | None:
    cause = diagnosis.top
    if cause is None:
        return None
    return f"{cause.category.value} ({cause.bytes} bytes): {explain(cause, spec)[0]}"


def causes_text(diff: DiffResult, diagnosis: Diagnosis) -> str:
    """The first mismatch, then every cause with its hint and first example."""
    lines = [f"first mismatch: {diff.first_mismatch.describe()}"] if diff.first_mismatch else []
    for cause in diagnosis:
        explanation, hint = explain(cause, diff.spec)
        lines.append(f"{cause.category.value}: {cause.bytes} bytes in blocks {block_ranges(cause.blocks)}:"
                     f" {explanation}")
        if hint:
            lines.append(f"  fix: {hint}")
        if cause.examples:
            lines.append(f"  e.g. {describe_example(cause.category, cause.examples[0])}")
    return "\n".join(lines)


def _table_column(table):
    """The column that decides a failed seed table: the fixed one when it differs."""
    return (table.fixed, table.fixed_causes) if not table.fixed.identical else (table.buggy, table.buggy_causes)


def verdict(outcome: Outcome) -> str:
    if outcome.skipped:
        return f"SKIPPED: {outcome.error}"
    if outcome.error is not None:
        return f"ERROR: {outcome.error}"
    if isinstance(outcome.result, CompareCheck):
        return compare_verdict(outcome.result)
    if outcome.kind == "table":
        return seed_table_verdict(outcome.result)
    return parity_verdict(outcome.result)


def parity_verdict(result) -> str:
    c = result.config
    writers = ", ".join(col.name for col in result.columns)
    head = "PASS" if result.passed else "FAIL"
    fault = "; READER FAULT" if result.reader_fault else ""
    return f"{head}: top-{c.topk} parity of {writers} read by {result.reader.name}, ctx {min(c.ctx)}-{max(c.ctx)}{fault}"


def _parity_notes(result) -> list[str]:
    from .parity import notes  # parity cases exist only in builds that have it

    return [text.plain for text in notes(result)]


def cause(outcome: Outcome) -> str | None:
    if outcome.error is not None or outcome.result is None:
        return None
    if isinstance(outcome.result, CompareCheck):
        return top_cause(outcome.result.diagnosis, outcome.result.result.spec)
    if outcome.kind == "table" and not outcome.result.passed:
        column, causes = _table_column(outcome.result)
        return top_cause(causes, column.spec)
    if outcome.kind == "parity" and not outcome.result.passed:  # the first note that says FAIL or FAULT
        return next((n for n in _parity_notes(outcome.result) if "FAIL" in n or "FAULT" in n), None)
    return None


def detail(outcome: Outcome) -> str:
    if outcome.error is not None:
        return outcome.error
    if isinstance(outcome.result, CompareCheck):
        return causes_text(outcome.result.result.diff, outcome.result.diagnosis)
    if outcome.kind == "table":
        column, causes = _table_column(outcome.result)
        return causes_text(column.diff, causes)
    return "\n".join(_parity_notes(outcome.result))


def gate_verdict(result) -> str:
    """`PASS: 40 passed, 0 failed, 0 errors of 40 cases in 12.3 s` (FAIL when any case did not pass)."""
    from ..gate import Status

    passed, failed, errors = (result.count(s) for s in (Status.PASSED, Status.FAILED, Status.ERROR))
    head = "PASS" if result.exit_code == 0 else "FAIL"
    stopped = f" (stopped after {len(result.outcomes)}: --fail-fast)" if len(result.outcomes) < result.selected else ""
    skipped = f", {result.count(Status.SKIPPED)} skipped" if result.count(Status.SKIPPED) else ""
    return (f"{head}: {passed} passed, {failed} failed, {errors} errors{skipped} of {result.selected} cases"
            f" in {result.seconds:.1f} s{stopped}")
