"""A gate's cases as a grid (views.Grid): each cell one case, coloured by its status and linking to its
section; why cases were skipped, under it."""

from __future__ import annotations

from collections import Counter

from ..outcome import Outcomes, Status
from ..views import Cell, Grid

SYMBOL = {Status.PASSED: "✓", Status.FAILED: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}


def outcomes_grid(run: Outcomes, anchors: list[str]) -> Grid | None:
    """The grid of the run's cases (anchors: each case's section); None where the cases say nothing of
    their parameters (a single command)."""
    if not any(o.axes for o in run.outcomes):
        return None
    cases = [(dict(o.axes), Cell(o.status.value, SYMBOL[o.status], f"{o.case_id}: {o.verdict_line()}", f"#{a}"))
             for o, a in zip(run.outcomes, anchors)]
    reasons = Counter(o.error or "" for o in run.outcomes if o.status is Status.SKIPPED)
    return Grid.of("grid", cases, tuple(f"{n} skipped: {reason}" for reason, n in reasons.items()))
