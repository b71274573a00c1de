"""A gate's cases as a grid: one column per value of the parameter with most values, one row per setting of
the other parameters that vary; each cell one case, coloured by its status and linking to its section."""

from __future__ import annotations

import html
from collections import Counter

from ..outcome import Outcomes, Status

MISSING = "-"  # a case without the column's parameter (a seed table, a parity sweep among compares)


def _varying(axes: list[dict[str, str]]) -> list[str]:
    """Parameters with more than one value over the cases that have them, in first-seen order (one that only
    some kinds of case have, always alike, says no more than the kind)."""
    keys = list(dict.fromkeys(k for a in axes for k in a))
    return [k for k in keys if len({a[k] for a in axes if k in a}) > 1]


def grid(run: Outcomes, anchors: list[str]) -> str:
    """The grid of the run's cases (anchors: each case's section), or "" where the cases say nothing of
    their parameters (a single command)."""
    axes = [dict(o.axes) for o in run.outcomes]
    varying = _varying(axes)
    if not any(axes) or not varying:
        return ""
    column_key = max(varying, key=lambda k: len({a[k] for a in axes if k in a}))
    row_keys = [k for k in varying if k != column_key]
    columns = list(dict.fromkeys(a.get(column_key, MISSING) for a in axes))
    rows: dict[str, dict[str, list[int]]] = {}
    for i, a in enumerate(axes):
        label = " ".join(f"{k}={a[k]}" for k in row_keys if k in a)
        rows.setdefault(label, {}).setdefault(a.get(column_key, MISSING), []).append(i)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for label, cells in rows.items():
        tds = []
        for column in columns:
            links = "".join(_link(run, i, anchors[i]) for i in cells.get(column, ()))
            statuses = {run.outcomes[i].status.value for i in cells.get(column, ())}
            kind = next(iter(statuses)) if len(statuses) == 1 else ("mixed" if statuses else "empty")
            tds.append(f'<td class="cell {kind}">{links}</td>')
        body.append(f'<tr><th class="row">{html.escape(label)}</th>{"".join(tds)}</tr>')
    return (f'<table class="grid" id="grid"><caption>{len(run.outcomes)} cases: rows by'
            f" {html.escape(', '.join(row_keys) or 'case')}, columns by {html.escape(column_key)}</caption>"
            f'<thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{_skips(run)}')


SYMBOL = {Status.PASSED: "✓", Status.FAILED: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}


def _link(run: Outcomes, i: int, anchor: str) -> str:
    o = run.outcomes[i]
    title = html.escape(f"{o.case_id}: {o.verdict_line()}", quote=True)
    return f'<a class="{o.status.value}" href="#{anchor}" title="{title}">{SYMBOL[o.status]}</a>'


def _skips(run: Outcomes) -> str:
    """Why cases were skipped, each reason once with its count."""
    reasons = Counter(o.error for o in run.outcomes if o.status is Status.SKIPPED)
    if not reasons:
        return ""
    items = "".join(f"<li>{n} skipped: {html.escape(reason or '')}</li>" for reason, n in reasons.items())
    return f'<ul class="skips">{items}</ul>'
