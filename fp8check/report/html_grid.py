"""A gate's cases as a grid (views.Grid): each cell one case, coloured by its status and linking to its
section; why cases were skipped, under it."""

from __future__ import annotations

from collections import Counter

from ..core.outcome import Outcomes, Status
from ..core.views import Cell, Grid

SYMBOL = {Status.PASSED: "✓", Status.FAILED: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}


def _tone(outcome) -> tuple[str, str]:
    """(tone, symbol) of a case: a declared difference that still shows (a passing case with a reason) is
    `known`, apart from the cases that pass by being the same."""
    if outcome.status is Status.PASSED and outcome.reason:
        return "known", "≠"
    return outcome.status.value, SYMBOL[outcome.status]


def outcomes_grid(run: Outcomes, anchors: list[str]) -> Grid | None:
    """The grid of the run's cases (anchors: each case's section); None where the cases say nothing of
    their parameters (a single command)."""
    if not any(o.axes for o in run.outcomes):
        return None
    cases = [(dict(o.axes), Cell(*_tone(o), f"{o.case_id}: {o.verdict_line()}", f"#{a}"))
             for o, a in zip(run.outcomes, anchors)]
    reasons = Counter(o.error or "" for o in run.outcomes if o.status is Status.SKIPPED)
    return Grid.of("grid", cases, tuple(f"{n} skipped: {reason}" for reason, n in reasons.items()))
